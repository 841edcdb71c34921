"""Options and error handling shared by the CLI commands."""

from __future__ import annotations

import functools
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import click

from sessionstore._display import escape
from sessionstore.errors import InvalidInput, SessionStoreError
from sessionstore.format.names import MAX_RECORD

F = TypeVar("F", bound=Callable[..., Any])

# On every command, not only the group: click caches a command's help option the first
# time it is built, so a command once run on its own (as tests do) would otherwise lose
# `-h` for good in that process.
CONTEXT_SETTINGS: dict[str, Any] = {"help_option_names": ["-h", "--help"]}


def command() -> Callable[[Callable[..., Any]], click.Command]:
    """`click.command()` with the settings every sessionstore command shares (`-h`)."""
    return click.command(context_settings=CONTEXT_SETTINGS)


store_option = click.option(
    "--store",
    "store_dir",
    type=click.Path(file_okay=False, path_type=Path),
    default=None,
    help="Store directory (default: $SESSIONSTORE_HOME, else ~/.sessionstore).",
)
json_option = click.option("--json", "as_json", is_flag=True, help="Print JSON for scripts.")


def target_options(required: bool = True, *, many: bool = False) -> Callable[[F], F]:
    """The TARGET argument and the `--store` option, as every command that takes a session has.

    The command receives `target` (a session id, a unique prefix of one, or
    a session directory path; None when optional and not given; with `many`,
    a tuple of one or more) and `store_dir` (None: the default store);
    `sessionstore.store.target.resolve_target(target, store_dir)` opens the
    session. Put it right under `@command()`: TARGET is the first argument
    and `--store` the first option.
    """

    def decorate(func: F) -> F:
        with_store: F = store_option(func)
        if many:
            return click.argument("targets", metavar="TARGET...", nargs=-1, required=True)(
                with_store
            )
        return click.argument("target", required=required)(with_store)

    return decorate


record_number_type = click.IntRange(min=1, max=MAX_RECORD)


def read_json_value(value: str, option: str) -> object:
    """The JSON document an option gives: a literal, `@FILE` for a file holding one,
    or `@-` for standard input. `InvalidInput` names the file (or the option) and why."""
    import orjson  # only when a JSON option is given: start-up

    source = option
    data: str | bytes = value
    if value == "@-":
        source = f"{option} @- (standard input)"
        data = sys.stdin.buffer.read()
    elif value.startswith("@"):
        source = value[1:]
        try:
            data = Path(source).read_bytes()
        except OSError as exc:
            raise InvalidInput(source, f"cannot read: {exc.strerror or exc}") from None
    try:
        return orjson.loads(data)
    except orjson.JSONDecodeError as exc:
        raise InvalidInput(source, f"invalid JSON: {exc}") from None


def read_json_object(value: str, option: str) -> dict[str, Any]:
    """`read_json_value`, which must be a JSON object (`InvalidInput` otherwise)."""
    parsed = read_json_value(value, option)
    if not isinstance(parsed, dict):
        source = option
        if value == "@-":
            source = f"{option} @- (standard input)"
        elif value.startswith("@"):
            source = value[1:]
        raise InvalidInput(source, f"must be a JSON object, not {_json_kind(parsed)}")
    return parsed


def _json_kind(value: object) -> str:
    if isinstance(value, list):
        return "an array"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int | float):
        return "a number"
    return "null"


def library_errors(func: F) -> F:
    """Turn library and OS errors into a one-line message and exit 1.

    Messages name paths and fields an agent wrote, so they are escaped
    (`display.escape`): one error is one line, and never terminal control.
    """
    return errors_exit(click.ClickException)(func)


def errors_exit(exception: type[click.ClickException]) -> Callable[[F], F]:
    """`library_errors`, raising `exception` (a ClickException subclass: its exit code)."""

    def decorate(func: F) -> F:
        @functools.wraps(func)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            try:
                return func(*args, **kwargs)
            except SessionStoreError as exc:
                raise exception(escape(str(exc))) from None
            except OSError as exc:
                raise exception(os_error_message(exc)) from None

        return wrapper  # type: ignore[return-value]

    return decorate


def os_error_message(exc: OSError) -> str:
    """`<file>: <reason>`, escaped, for an OSError that reached the CLI."""
    where = f"{exc.filename}: " if exc.filename else ""
    return escape(f"{where}{exc.strerror or exc}")


def emit_json(value: Any) -> None:
    """Write one JSON document (orjson, indented) to stdout.

    Exact, except that a name that is not UTF-8 (a file name's raw bytes,
    which JSON cannot carry) has its undecodable bytes written `\\xNN`.
    """
    # Only when JSON is printed: `sessionstore mirror` without --json never loads orjson.
    import orjson

    from sessionstore._json import utf8_safe

    try:
        data = orjson.dumps(value, option=orjson.OPT_INDENT_2)
    except TypeError:
        data = orjson.dumps(utf8_safe(value), option=orjson.OPT_INDENT_2)
    sys.stdout.buffer.write(data + b"\n")
    sys.stdout.flush()

"""Options and error handling shared by the CLI commands."""

from __future__ import annotations

import errno
import functools
import math
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import click

from sessionstore._display import escape
from sessionstore._fs import read as fsread
from sessionstore.cli.plain import Usage, failure_message
from sessionstore.errors import InvalidInput, SessionStoreError
from sessionstore.format.names import MAX_RECORD

if TYPE_CHECKING:
    from click.shell_completion import CompletionItem

    from sessionstore.inspect.best import Objective

F = TypeVar("F", bound=Callable[..., Any])

# On every command, not only the group: click caches a command's help option the first
# time it is built, so a command once run on its own (as tests do) would otherwise lose
# `-h` for good in that process.
CONTEXT_SETTINGS: dict[str, Any] = {"help_option_names": ["-h", "--help"]}


def command() -> Callable[[Callable[..., Any]], click.Command]:
    """`click.command()` with the settings every sessionstore command shares (`-h`)."""
    return click.command(context_settings=CONTEXT_SETTINGS)


# An empty path is refused where it is given: pathlib reads it as the current directory
# (`Path("")` is `.`), so `--store "$UNSET"` made a store of it and `mirror SRC ""` wrote
# into it, silently, where `ls ""` says there is no such file.
EMPTY_PATH = "is empty; write . for the current directory"


class PathParam(click.Path):
    """`click.Path(path_type=Path, ...)` that refuses an empty value."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(path_type=Path, **kwargs)

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        if value == "":
            self.fail(EMPTY_PATH if self.dir_okay else "is empty; name a file", param, ctx)
        if isinstance(value, str) and value[:5].lower() == "s3://":
            self.fail(NOT_LOCAL, param, ctx)
        return super().convert(value, param, ctx)


# An `s3://` URL where only a local path is taken (export's DEST, mirror's SRC): read as a
# path it was `./s3:/BUCKET/...`, an error naming a mangled path, or a local copy made there.
NOT_LOCAL = "is an s3:// URL, but this takes a local path (./s3:... for a directory so named)"


def not_empty(ctx: click.Context, param: click.Parameter, value: str) -> str:
    """A callback refusing an empty path given as text, as `PathParam` does."""
    if value == "":
        raise click.BadParameter(EMPTY_PATH, ctx, param)
    return value


def local_file(ctx: click.Context, param: click.Parameter, value: str) -> str:
    """A callback refusing an empty path (pathlib reads `Path("")` as the current
    directory) or an `s3://` URL where a local file (or `-`) is written."""
    if value == "":
        raise click.BadParameter("is empty; name a file, or - for standard output", ctx, param)
    if value[:5].lower() == "s3://":
        raise click.BadParameter(NOT_LOCAL, ctx, param)
    return value


def a_number(ctx: click.Context, param: click.Parameter, value: float | None) -> float | None:
    """A callback refusing NaN seconds, which `click.FloatRange` lets through (no
    comparison with NaN is true): a NaN deadline is never reached, a NaN interval
    never elapses, and a loop timed by one waits forever or spins."""
    if value is not None and math.isnan(value):
        raise click.BadParameter("nan is not a number of seconds", ctx, param)
    return value


class StoreParam(click.ParamType[Path, Any]):
    """A store: a directory path, or `s3://BUCKET/PREFIX` (an `S3Path`, checked here:
    a malformed URL is a usage error)."""

    name = "store"

    def get_metavar(self, param: click.Parameter, ctx: click.Context) -> str:
        return "DIR|s3://BUCKET/PREFIX"

    def shell_complete(
        self, ctx: click.Context, param: click.Parameter, incomplete: str
    ) -> list[CompletionItem]:
        """A local store completes as a directory (an s3:// URL is typed out)."""
        from click.shell_completion import CompletionItem

        return [CompletionItem(incomplete, type="dir")]

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Path:
        if isinstance(value, Path):
            return value
        if value == "":
            self.fail(
                "is empty; name a directory (. for this one) or s3://BUCKET/PREFIX", param, ctx
            )
        from sessionstore.storage.s3_path import s3_root

        try:
            remote = s3_root(value)
        except InvalidInput as exc:
            self.fail(escape(str(exc)), param, ctx)
        return Path(value) if remote is None else remote.path()


def _single_writer(ctx: click.Context, param: click.Parameter, value: bool) -> None:
    # Read where the store is opened (storage.s3_open.open_store), whichever command it is.
    if value:
        os.environ["SESSIONSTORE_S3_SINGLE_WRITER"] = "1"


# What the group's own options (`sessionstore --store X --color never CMD`) set, in the
# context's `meta` (shared by every context of one invocation): a command's own option wins.
GROUP_STORE = "sessionstore.store"
GROUP_COLOR = "sessionstore.color"
COLORS = ("auto", "always", "never")


def _group_store(ctx: click.Context, param: click.Parameter, value: Path | None) -> Path | None:
    return value if value is not None else ctx.meta.get(GROUP_STORE)


def store_option(func: F) -> F:
    """`--store` and `--single-writer`, as every command that opens a store has."""
    func = click.option(
        "--single-writer",
        is_flag=True,
        expose_value=False,
        callback=_single_writer,
        help="Accept an s3:// store on a server that ignores conditional creates "
        "(If-None-Match: *): safe only with one writer at a time "
        "(also SESSIONSTORE_S3_SINGLE_WRITER=1).",
    )(func)
    return click.option(
        "--store",
        "store_dir",
        type=StoreParam(),
        default=None,
        callback=_group_store,
        help="Store directory or s3://BUCKET/PREFIX (default: sessionstore --store, else "
        "$SESSIONSTORE_HOME, else ~/.sessionstore).",
    )(func)


def color_option(func: F) -> F:
    """`--color WHEN` (and `--no-color`, its `never`); the command receives `color`:
    `auto`, `always` or `never`, the group's `--color` when the command has none."""

    @functools.wraps(func)
    def wrapper(*args: Any, no_color: bool, color: str | None, **kwargs: Any) -> Any:
        if no_color and color not in (None, "never"):
            raise click.UsageError("give one of --color and --no-color")
        if no_color:
            color = "never"
        chosen = color or click.get_current_context().meta.get(GROUP_COLOR) or "auto"
        return func(*args, color=chosen, **kwargs)

    with_color: Any = click.option(
        "--color",
        "color",
        type=click.Choice(COLORS),
        is_flag=False,
        flag_value="always",
        default=None,
        help="Styling: auto (a terminal without NO_COLOR), always, never. Default: "
        "sessionstore --color, else auto; a bare --color is always.",
    )(wrapper)
    decorated: F = click.option("--no-color", is_flag=True, help="Same as --color never.")(
        with_color
    )
    return decorated


QUIET_HELP = "Print only errors, warnings and what a script needs: no confirmation or summary."


def verbosity_options(
    verbose: str, quiet: str = QUIET_HELP
) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """`-q/--quiet` and `-v/--verbose` (their help: `quiet`, `verbose`), never both at once
    (a usage error); the command receives `quiet` and `verbose`.

    One meaning everywhere: quiet prints errors, warnings and the line a
    script needs only; verbose adds a line for each thing done.
    """

    def decorate(func: Callable[..., Any]) -> Callable[..., Any]:
        @functools.wraps(func)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            if kwargs["quiet"] and kwargs["verbose"]:
                raise click.UsageError("-q/--quiet and -v/--verbose cannot be combined")
            return func(*args, **kwargs)

        with_verbose = click.option("--verbose", "-v", is_flag=True, help=verbose)(wrapper)
        return click.option("--quiet", "-q", is_flag=True, help=quiet)(with_verbose)

    return decorate


json_option = click.option("--json", "as_json", is_flag=True, help="Print JSON for scripts.")


def complete_target(
    ctx: click.Context, param: click.Parameter, incomplete: str
) -> list[CompletionItem]:
    """Shell completion of TARGET: the session ids of the store (the command's --store,
    else the group's, else $SESSIONSTORE_HOME) that start with what is typed; a path when
    none does, so `./work<TAB>` still completes a session directory."""
    from click.shell_completion import CompletionItem

    from sessionstore.store.target import prefix_matches, store_root

    store = ctx.params.get("store_dir") or ctx.meta.get(GROUP_STORE)
    root = store_root(store)
    if incomplete:
        ids = prefix_matches(incomplete, root)
    else:
        from sessionstore.store.session import Store

        ids = sorted(s.path.name for s in Store(root).sessions()) if root.is_dir() else []
    if ids:
        return [CompletionItem(i) for i in ids]
    kind = "file" if param.metavar == "PATH|TARGET" else "dir"
    return [CompletionItem(incomplete, type=kind)]


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
            return click.argument(
                "targets",
                metavar="TARGET...",
                nargs=-1,
                required=True,
                shell_complete=complete_target,
            )(with_store)
        return click.argument("target", required=required, shell_complete=complete_target)(
            with_store
        )

    return decorate


record_number_type = click.IntRange(min=1, max=MAX_RECORD)


def objective_options(func: F) -> F:
    """`--objective PATH` and `--higher/--lower`: what "best" means, as `inspect` takes them.

    The command receives `objective` (a dotted key path, None for the
    default) and `higher`; `sessionstore.inspect.best.Objective` is built
    from them by `objective_of`.
    """
    with_direction: F = click.option(
        "--higher/--lower",
        "higher",
        default=True,
        help="Whether a higher objective value is better (default: --higher).",
    )(func)
    return click.option(
        "--objective",
        default=None,
        callback=_an_objective,
        metavar="PATH",
        help="Dotted key path ranking trials (default: benchmark.metrics.output_tok_per_s).",
    )(with_direction)


def _an_objective(ctx: click.Context, param: click.Parameter, value: str | None) -> str | None:
    # `--objective "$UNSET"` ranked by the default objective, silently: another metric.
    if value == "":
        raise click.BadParameter(
            "is empty; name a dotted key path, or leave it out for the default"
        )
    return value


def objective_of(objective: str | None, higher: bool) -> Objective:
    """The `Objective` that `objective_options` asked for."""
    from sessionstore.inspect.best import DEFAULT_OBJECTIVE, Objective

    return Objective(objective or DEFAULT_OBJECTIVE, "higher" if higher else "lower")


def no_store(root: Path) -> InvalidInput:
    """The error for a local store path that is no directory: missing, or something else
    (a file, a FIFO), which "no such store directory" would send the user looking for."""
    problem = "is not a directory" if os.path.lexists(root) else "no such store directory"
    try:
        os.stat(root)
    except OSError as exc:
        if os.path.islink(root):  # followed to the store it names, as `new` does: none
            dangling = exc.errno == errno.ENOENT
            problem = "is a dangling symlink" if dangling else fsread.problem(exc, followed=True)
    return InvalidInput(str(root), problem)


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
            except (SessionStoreError, OSError) as exc:
                message = failure_message(exc)
                if message is None:  # a broken pipe (`| head`): click exits 1, saying nothing
                    raise
                raise exception(message) from None
            except Usage as exc:
                raise usage_error(exc) from None

        return wrapper  # type: ignore[return-value]

    return decorate


def print_made(print_it: Callable[[], None], made: str) -> None:
    """Print what the command has just made or done (`print_it`: an id, a record's
    number, a confirmation).

    A stdout that cannot take it (closed, full, a reader gone: a closed pipe
    too, of which nothing is said elsewhere) must not leave a session or a
    record made, a marker or a report written, with nobody told: the error
    line (exit 1) says what was `made`, so a harness knows not to do it again.
    """
    try:
        print_it()
        sys.stdout.flush()
    except OSError as exc:
        raise click.ClickException(escape(f"stdout: {exc.strerror or exc}; {made}")) from None


def usage_error(exc: Usage) -> click.UsageError:
    """Click's usage error (exit 2) for a `Usage` found by click-free code (`cli.plain`)."""
    if exc.param_hint is None:
        return click.UsageError(exc.message)
    return click.BadParameter(exc.message, param_hint=exc.param_hint)


def counted(count: int, noun: str) -> str:
    """`1 session`, `3 sessions`: a count and its noun, for summary lines."""
    return f"{count} {noun}" if count == 1 else f"{count} {noun}s"


def summary(done: str, ids: list[str], *, named: bool = True) -> str:
    """`removed 2 sessions: abc, def` (without the ids unless `named`): a removal's summary."""
    line = f"{done} {counted(len(ids), 'session')}"
    return f"{line}: {', '.join(ids)}" if named and ids else line

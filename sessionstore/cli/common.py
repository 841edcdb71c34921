"""Options and error handling shared by the CLI commands."""

from __future__ import annotations

import functools
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import click

from sessionstore._display import escape
from sessionstore.errors import SessionStoreError
from sessionstore.format.names import MAX_RECORD

F = TypeVar("F", bound=Callable[..., Any])


def default_store() -> Path:
    """`$SESSIONSTORE_HOME`, else `~/.sessionstore`."""
    home = os.environ.get("SESSIONSTORE_HOME")
    return Path(home) if home else Path.home() / ".sessionstore"


store_option = click.option(
    "--store",
    "store_dir",
    type=click.Path(file_okay=False, path_type=Path),
    default=None,
    help="Store directory (default: $SESSIONSTORE_HOME, else ~/.sessionstore).",
)
json_option = click.option("--json", "as_json", is_flag=True, help="Print JSON for scripts.")


record_number_type = click.IntRange(min=1, max=MAX_RECORD)


def library_errors(func: F) -> F:
    """Turn library and OS errors into a one-line message and exit 1.

    Messages name paths and fields an agent wrote, so they are escaped
    (`display.escape`): one error is one line, and never terminal control.
    """

    @functools.wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return func(*args, **kwargs)
        except SessionStoreError as exc:
            raise click.ClickException(escape(str(exc))) from None
        except OSError as exc:
            raise click.ClickException(os_error_message(exc)) from None

    return wrapper  # type: ignore[return-value]


def os_error_message(exc: OSError) -> str:
    """`<file>: <reason>`, escaped, for an OSError that reached the CLI."""
    where = f"{exc.filename}: " if exc.filename else ""
    return escape(f"{where}{exc.strerror or exc}")


def emit_json(value: Any) -> None:
    """Write one JSON document (orjson, indented) to stdout.

    Exact, except that a name that is not UTF-8 (a file name's raw bytes,
    which JSON cannot carry) has its undecodable bytes written `\\xNN`.
    """
    import orjson

    from sessionstore._json import utf8_safe

    try:
        data = orjson.dumps(value, option=orjson.OPT_INDENT_2)
    except TypeError:
        data = orjson.dumps(utf8_safe(value), option=orjson.OPT_INDENT_2)
    sys.stdout.buffer.write(data + b"\n")
    sys.stdout.flush()

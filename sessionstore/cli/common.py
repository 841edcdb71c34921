"""Options and error handling shared by the CLI commands."""

from __future__ import annotations

import functools
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import click

from sessionstore.errors import SessionStoreError

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


def library_errors(func: F) -> F:
    """Turn library and OS errors into a one-line message and exit 1."""

    @functools.wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return func(*args, **kwargs)
        except SessionStoreError as exc:
            raise click.ClickException(str(exc)) from None
        except OSError as exc:
            where = f"{exc.filename}: " if exc.filename else ""
            raise click.ClickException(f"{where}{exc.strerror or exc}") from None

    return wrapper  # type: ignore[return-value]


def emit_json(value: Any) -> None:
    """Write one JSON document (orjson, indented) to stdout."""
    import orjson

    sys.stdout.buffer.write(orjson.dumps(value, option=orjson.OPT_INDENT_2) + b"\n")
    sys.stdout.flush()

"""What the CLI says and reads without click: error lines, JSON on stdout, secrets on stdin.

One home for each, imported from here by the click commands (`cli.common`'s
`errors_exit` among them) and by `mirror --once` answered before click is
imported (`cli.early_mirror`: start-up is paid by every pass a harness runs,
issue 16).
A usage problem found here is a `Usage`, which the click layer turns into
click's own usage error (exit 2) and the early path hands back to click.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

from sessionstore._display import escape
from sessionstore.errors import InvalidInput, SessionStoreError, StorageError

TYPE_CHECKING = False  # typing's, without importing typing (mypy reads it as such)
if TYPE_CHECKING:
    from typing import Any

EXIT_INTERRUPTED = 130  # 128 + SIGINT


class Usage(Exception):
    """A usage problem: `message` (escaped), about `param_hint` (`'--exclude'`, `DST`) or
    the command line as a whole (None). Raised before anything is written."""

    def __init__(self, message: str, param_hint: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.param_hint = param_hint


def failure_message(exc: BaseException) -> str | None:
    """The one line a library or OS error `exc` is reported as (escaped), else None
    (not an error the CLI reports: a bug, or a broken pipe, which exits 1 silently)."""
    if isinstance(exc, SessionStoreError):
        if isinstance(exc, StorageError) and not exc.key:
            return escape(exc.problem)  # the root itself, which its problem names
        return escape(str(exc))
    if isinstance(exc, OSError) and not isinstance(exc, BrokenPipeError):
        return os_error_message(exc)
    return None


def os_error_message(exc: OSError) -> str:
    """`<file>: <reason>`, escaped, for an OSError that reached the CLI."""
    where = f"{exc.filename}: " if exc.filename else ""
    return escape(f"{where}{exc.strerror or exc}")


def pacify() -> None:
    """Drop what is left to write, as click does on a closed pipe: /dev/null takes stdout's
    and stderr's descriptors, so that flushing them (at exit too) fails no more (the
    recipe of Python's `signal` docs, for both streams)."""
    import contextlib

    devnull = os.open(os.devnull, os.O_WRONLY)
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(OSError, ValueError):  # no descriptor behind it
            os.dup2(devnull, stream.fileno())
    os.close(devnull)


def emit_json(value: Any) -> None:
    """Write one JSON document (orjson, indented) to stdout.

    Exact, except that a name that is not UTF-8 (a file name's raw bytes,
    which JSON cannot carry) has its undecodable bytes written `\\xNN`.
    """
    from sessionstore._json import dumps_exact  # on use: a pass without --json imports no orjson

    sys.stdout.buffer.write(dumps_exact(value))
    sys.stdout.flush()


# A secrets file on standard input is read whole before anything else runs; the bound is
# `redact.secrets_file.SECRETS_FILE_MAX`, which this module does not import (dotenv).
_STDIN_SECRETS_MAX = 1 << 20


def secrets_file_input(paths: tuple[Path, ...]) -> list[tuple[str, bytes | None]]:
    """`--secrets-file` values as (name, contents): `-` is standard input, read here
    (at most once, so a second `-` is bad usage), a path is read by the library."""
    if sum(os.fspath(p) == "-" for p in paths) > 1:
        raise Usage("--secrets-file -: standard input can be read only once")
    named: list[tuple[str, bytes | None]] = []
    for path in paths:
        if os.fspath(path) != "-":
            named.append((str(path), None))
            continue
        data = sys.stdin.buffer.read(_STDIN_SECRETS_MAX + 1)
        if len(data) > _STDIN_SECRETS_MAX:
            raise InvalidInput(
                "--secrets-file - (standard input)",
                f"is larger than {_STDIN_SECRETS_MAX} bytes; not a secrets file",
            )
        named.append(("stdin", data))
    return named

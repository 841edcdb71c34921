"""The `sessionstore` command: a thin click layer over the library.

`main` is the entry point; the click group (`cli`, in `cli.group`) and the
table of subcommands (`COMMANDS`) are imported on first use, so that
`sessionstore --version` answers without importing click at all (issue 16:
start-up is paid by every call a harness makes), and so do `inspect` of an
empty local store (`cli.early`) and `mirror --once` (`cli.early_mirror`).
"""

from __future__ import annotations

import errno
import io
import os
import sys

from sessionstore import TYPE_CHECKING, __version__

if TYPE_CHECKING:
    from typing import Any

    from sessionstore.cli.group import COMMANDS, LazyGroup, cli
    from sessionstore.cli.plain import EXIT_INTERRUPTED

__all__ = ["COMMANDS", "EXIT_INTERRUPTED", "LazyGroup", "cli", "main"]

# What click's version option prints (a test checks that the two agree).
VERSION_LINE = f"sessionstore, version {__version__}\n"


def main(argv: list[str] | None = None) -> Any:
    """Console-script entry point."""
    args = sys.argv[1:] if argv is None else argv
    if sys.stdin is None or sys.stdout is None or sys.stderr is None:
        _closed_streams()
    _open_streams()
    try:
        code = _main(args)
    except SystemExit as exc:  # click's way out of every command
        raise SystemExit(_settled(exc.code)) from None
    except OSError as exc:  # output where no command reports it: help, --version, early paths
        code = _output_failed(exc)
    except KeyboardInterrupt:  # before a command took over (importing click, say): as after
        from sessionstore.cli.plain import EXIT_INTERRUPTED

        code = EXIT_INTERRUPTED
    return _settled(code)


def _settled(code: Any) -> Any:
    """`code`, once stdout is flushed: here a failure can still be said and exit 1, where
    the interpreter's own flush at exit printed a traceback and exited 120."""
    try:
        sys.stdout.flush()
    except OSError as exc:
        if code in (0, None):
            return _output_failed(exc)
        from sessionstore.cli.plain import pacify

        pacify()  # the command failed and said why: stdout's failure, most often
    return code


def _output_failed(exc: OSError) -> int:
    """Say that writing stdout failed (`stdout: No space left on device`), as click says a
    command's errors; a closed pipe (`| head`) is no error to say, as click has it. Then
    drop what stdout still holds, so that nothing fails again at exit: exit 1."""
    from sessionstore.cli.plain import failure_message, pacify

    message = failure_message(exc)
    if message is not None:
        sys.stderr.write(f"Error: {message}\n")
    pacify()
    return 1


def _main(args: list[str]) -> Any:
    if args == ["--version"]:
        sys.stdout.write(VERSION_LINE)
        return 0
    if "inspect" in args:
        from sessionstore.cli.early import empty_listing

        line = empty_listing(args)
        if line is not None:
            sys.stdout.write(line)
            sys.stdout.flush()
            return 0
    if "mirror" in args:
        from sessionstore.cli.early_mirror import run_early

        code = run_early(args)
        if code is not None:
            return code
    from sessionstore.cli.group import cli

    return cli.main(args=args, prog_name="sessionstore")


def _open_streams() -> None:
    """Stand in for stdout and stderr (when open) with the same streams, except that:

    - a write that fails on stdout names it (`stdout: No space left on device`,
      not a bare `No space left on device`), and what stdout cannot encode (an
      ASCII locale, PYTHONIOENCODING=ascii) is written as backslash escapes, as
      Python writes stderr, not a traceback after half the output;
    - a diagnostic that cannot be written to stderr (a full disk, a reader gone)
      is dropped, as with stderr closed (`_closed_streams`), so the exit status
      stays the command's: a pass that worked exited 1, a usage error 120, and
      the daemon died on its first summary line.
    """
    for name, raw_type in (("stdout", _Named), ("stderr", _Dropped)):
        stream = getattr(sys, name)
        if stream is not getattr(sys, f"__{name}__") or not isinstance(stream, io.TextIOWrapper):
            continue  # a stand-in already (_closed_streams, a test's capture): keep it
        raw: Any = raw_type(stream.fileno(), "w", closefd=False)
        if isinstance(stream.buffer, io.BufferedWriter):  # not when unbuffered (python -u)
            raw = io.BufferedWriter(raw)
        errors = stream.errors
        if name == "stdout" and not (errors == "surrogateescape" and _utf8(stream.encoding)):
            errors = "backslashreplace"  # (UTF-8's surrogateescape loses nothing: kept)
        stream.flush()
        wrapped = io.TextIOWrapper(
            raw,
            encoding=stream.encoding,
            errors=errors,
            newline="\n",
            line_buffering=stream.line_buffering,
            write_through=stream.write_through,
        )
        setattr(sys, name, wrapped)


def _utf8(encoding: str) -> bool:
    return encoding.lower().replace("_", "-") in ("utf-8", "utf8")


class _Named(io.FileIO):
    """Standard output's descriptor: a write that fails names it, as a file's error does."""

    def write(self, data: Any, /) -> int:
        try:
            return super().write(data)
        except OSError as exc:
            exc.filename = "stdout"
            raise


class _Dropped(io.FileIO):
    """Standard error's descriptor: a write that fails is dropped (see `_open_streams`)."""

    def write(self, data: Any, /) -> int:
        try:
            return super().write(data)
        except OSError:
            return len(data)


def _closed_streams() -> None:
    """Stand in for the standard streams whose descriptors were closed when we started.

    Python makes such a stream None, and every command then failed with a traceback
    (`sys.stdout.buffer`). Each closed slot gets /dev/null, so that no file opened
    later (a copy's temp, a marker) takes descriptor 0, 1 or 2, where a child's or a
    library's stray write would land in it. Output and input then fail as they would
    on the closed descriptor (EBADF, one error line naming the stream, exit 1), as
    `ls >&-` does; diagnostics are dropped, as GNU tools drop what they cannot say,
    so a pass that worked still exits 0.
    """
    for fd, name in enumerate(("stdin", "stdout", "stderr")):
        if getattr(sys, name) is not None:
            continue
        try:
            os.fstat(fd)
        except OSError:
            os.open(os.devnull, os.O_RDWR)  # POSIX: the lowest free descriptor, `fd` itself
        else:
            continue  # taken since start-up (never by us): not ours to replace
        if name == "stderr":
            stream = open(fd, "w", errors="backslashreplace", closefd=False)  # noqa: SIM115
        else:
            stream = io.TextIOWrapper(_Closed(name), write_through=True)
        setattr(sys, name, stream)


class _ClosedStream(OSError):
    """A read or write of a standard stream that was closed when we started (EBADF)."""


class _Closed(io.RawIOBase):
    """A standard stream closed at start: every read or write fails with EBADF, naming it."""

    def __init__(self, name: str) -> None:
        super().__init__()
        self.name = name

    def readable(self) -> bool:
        return self.name == "stdin"

    def writable(self) -> bool:
        return self.name != "stdin"

    def readinto(self, buffer: Any) -> int:
        raise _ClosedStream(errno.EBADF, os.strerror(errno.EBADF), self.name)

    def write(self, data: Any) -> int:
        raise _ClosedStream(errno.EBADF, os.strerror(errno.EBADF), self.name)


def __getattr__(name: str) -> Any:
    if name in ("COMMANDS", "EXIT_INTERRUPTED", "LazyGroup", "cli"):
        from sessionstore.cli import group

        return getattr(group, name)
    raise AttributeError(f"module 'sessionstore.cli' has no attribute {name!r}")

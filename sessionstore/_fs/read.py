"""The one way readers open what an agent wrote: never follow, never block, check first.

Every file a reader opens (a marker, a manifest, a log, a file of a record)
was written by someone we do not control, so it may be a FIFO (reading would
block forever), a socket or device, or a symlink to a file outside the tree
(reading would leak it). The recipe, used by every reader:

- open with `O_NOFOLLOW` (a symlink is refused, never followed),
  `O_NONBLOCK` (a FIFO opens at once instead of waiting for a writer),
  `O_NOCTTY` (a planted tty never becomes our controlling terminal) and
  `O_CLOEXEC`;
- `fstat` the descriptor and refuse anything but a regular file before the
  first read, so a FIFO or device is never read at all;
- open a path inside a record one component at a time, each directory with
  `O_NOFOLLOW|O_DIRECTORY` relative to the previous one: a symlink swapped in
  anywhere on the way is refused at that step, with no window between a
  check and the open.

Failures are `OSError`s (`WrongKind` for an entry of the wrong kind);
`problem()` turns any of them into the one-line reason readers report.
"""

from __future__ import annotations

import errno
import os
import stat
from collections.abc import Iterable
from pathlib import Path

from sessionstore.errors import InvalidInput

__all__ = [
    "WrongKind",
    "open_dir",
    "open_file",
    "open_record_dir",
    "open_under",
    "problem",
    "read_capped",
    "read_named",
    "read_pid",
]

# A marker is a small document; anything bigger is almost certainly not one and
# reading it whole would let a stray file stall a listing. (Here, not in `_json`, so
# that the mirror's walk can refuse one without importing a JSON library.)
MAX_MARKER_BYTES = 64 * 1024 * 1024
FILE_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC
DIR_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_DIRECTORY | os.O_CLOEXEC
_CHUNK = 1 << 16

_KINDS = (
    (stat.S_ISREG, "a regular file"),
    (stat.S_ISDIR, "a directory"),
    (stat.S_ISFIFO, "a FIFO"),
    (stat.S_ISSOCK, "a socket"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
    (stat.S_ISLNK, "a symlink (never followed)"),
)


def _kind(mode: int) -> str:
    return next((name for test, name in _KINDS if test(mode)), "of an unknown kind")


class WrongKind(OSError):
    """An entry readers must not read as `wanted`: `kind` says what it is (a FIFO, a symlink...)."""

    def __init__(self, name: str, kind: str, wanted: str) -> None:
        super().__init__(errno.EINVAL, f"is {kind}, not {wanted}", name)
        self.kind = kind


def _refuse(name: str | os.PathLike[str], dir_fd: int | None, exc: OSError, wanted: str) -> None:
    """Raise `WrongKind` naming what `name` is when that explains `exc` (lstat reads nothing)."""
    try:
        st = os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
    except OSError:
        return
    is_wanted = stat.S_ISDIR(st.st_mode) if wanted == "a directory" else stat.S_ISREG(st.st_mode)
    if not is_wanted:
        raise WrongKind(os.fspath(name), _kind(st.st_mode), wanted) from exc


def open_dir(
    name: str | os.PathLike[str], dir_fd: int | None = None, *, follow: bool = False
) -> int:
    """A directory fd for `name`; a symlink is refused unless `follow` (the user's own path).

    Raises `FileNotFoundError` when absent, `WrongKind` for a symlink or a
    non-directory, another `OSError` when unreadable.
    """
    flags = DIR_FLAGS & ~os.O_NOFOLLOW if follow else DIR_FLAGS
    try:
        return os.open(name, flags, dir_fd=dir_fd)
    except OSError as exc:
        # O_NOFOLLOW|O_DIRECTORY on a symlink fails with ENOTDIR on Linux, ELOOP elsewhere.
        if exc.errno not in (errno.ELOOP, errno.ENOTDIR):
            raise
        _refuse(name, dir_fd, exc, "a directory")
    # The lstat found a directory, or nothing: the entry was swapped between the
    # open and the lstat. Once more, so that the answer describes one state.
    try:
        return os.open(name, flags, dir_fd=dir_fd)
    except OSError as exc:
        if exc.errno in (errno.ELOOP, errno.ENOTDIR):
            _refuse(name, dir_fd, exc, "a directory")
        raise


def open_file(
    name: str | os.PathLike[str], dir_fd: int | None = None
) -> tuple[int, os.stat_result]:
    """A read fd and its `fstat` for the regular file `name`; never follows, never blocks.

    Raises `FileNotFoundError` when absent, `WrongKind` for a symlink, FIFO,
    socket, device or directory, another `OSError` when unreadable.
    """
    try:
        fd = os.open(name, FILE_FLAGS, dir_fd=dir_fd)
    except OSError as exc:
        # ELOOP: a symlink refused by O_NOFOLLOW; ENXIO/EOPNOTSUPP: a socket, or
        # a device without a driver.
        if exc.errno in (errno.ELOOP, errno.ENXIO, errno.EOPNOTSUPP):
            _refuse(name, dir_fd, exc, "a regular file")
        raise
    try:
        st = os.fstat(fd)
    except BaseException:
        os.close(fd)
        raise
    if not stat.S_ISREG(st.st_mode):
        os.close(fd)
        raise WrongKind(os.fspath(name), _kind(st.st_mode), "a regular file")
    return fd, st


def open_under(dir_fd: int, parts: Iterable[str]) -> tuple[int, os.stat_result]:
    """`open_file` of a relative path below `dir_fd`, every directory on the way opened
    with `O_NOFOLLOW` relative to the one before (so nothing outside is ever reached)."""
    *dirs, leaf = parts
    current = dir_fd
    try:
        for part in dirs:
            step = open_dir(part, current)
            if current != dir_fd:
                os.close(current)
            current = step
        return open_file(leaf, current)
    finally:
        if current != dir_fd:
            os.close(current)


def open_record_dir(path: Path, collection_fd: int | None = None) -> int:
    """A directory fd for the record at `<session>/<collection>/<n>`.

    The session directory, the collection and the record are each opened
    with `O_NOFOLLOW` (the session relative to its parent, which is followed:
    the store root or the user's own directories), so a session, a `trials/`
    or a record replaced by a symlink is refused. A user-named session that
    is a symlink was resolved once, when its `Session` was opened.
    `collection_fd`: the collection, already opened by `open_collection_dir`
    (a listing opens it once, not once per record).
    """
    upper, name = os.path.split(os.fspath(path))
    if collection_fd is not None:
        return open_dir(name, collection_fd)
    collection_fd = open_collection_dir(upper)
    try:
        return open_dir(name, collection_fd)
    finally:
        os.close(collection_fd)


def open_collection_dir(path: str | os.PathLike[str]) -> int:
    """A directory fd for `<session>/<collection>`, each opened as `open_record_dir` says."""
    # String splits, not Path.parent: a listing opens one record directory per trial.
    session, collection = os.path.split(os.fspath(path))
    session_fd = open_dir(session or ".")  # a session named "." (its records: "trials/3")
    try:
        return open_dir(collection, session_fd)
    finally:
        os.close(session_fd)


def read_capped(fd: int, limit: int) -> bytes | None:
    """All bytes of `fd`, or None once more than `limit` arrive (a file that grew past it).

    Never reads more than `limit + 1` bytes, in chunks of at most 64 KiB: one
    buffered `read(limit + 1)` would allocate the whole limit for every small file.
    """
    chunks: list[bytes] = []
    total = 0
    while chunk := os.read(fd, _CHUNK if limit - total >= _CHUNK else limit + 1 - total):
        chunks.append(chunk)
        total += len(chunk)
        if total > limit:
            return None
    return chunks[0] if len(chunks) == 1 else b"".join(chunks)


def user_path(path: str | os.PathLike[str], what: str, *, file: bool = False) -> str:
    """`path`, a path the caller named, as a str; `InvalidInput` naming `what` if it holds a
    NUL, which no path can (every os call would raise a bare ValueError, far from here).

    An empty directory path is refused too, as the command line refuses it: pathlib reads
    it as `.`, so an unset variable (`Mirror(os.environ.get("WS", ""), ...)`) named the
    working directory. A `file` path that is empty fails as any missing file does.
    """
    where = os.fspath(path)
    if "\0" in where:
        raise InvalidInput(what, f"{where!r} contains a NUL byte, which no path can hold")
    if not where and not file:
        raise InvalidInput(what, "is empty; write . for the current directory")
    return where


def read_named(path: str, limit: int) -> bytes | None:
    """The bytes of a file the user named (a symlink followed: their own path), or None
    past `limit`; `InvalidInput` naming `path` and why it was not read.

    A regular file only: a FIFO is refused at once (opened without blocking,
    checked by fstat), never waited on, and a device (`/dev/zero`) never read
    without end. `--exclude-from`, `--secrets-file` and `@FILE` values read so.
    """
    user_path(path, "file", file=True)
    try:
        fd = os.open(path, FILE_FLAGS & ~os.O_NOFOLLOW)
    except OSError as exc:
        raise InvalidInput(path, f"cannot read: {exc.strerror or exc}") from None
    try:
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            kind = "a directory" if stat.S_ISDIR(mode) else "not a regular file"
            raise InvalidInput(path, f"is {kind}; not read")
        return read_capped(fd, limit)
    except OSError as exc:
        raise InvalidInput(path, f"cannot read: {exc.strerror or exc}") from None
    finally:
        os.close(fd)


def read_pid(name: str, dir_fd: int) -> int | None:
    """The pid a small file in `dir_fd` holds (a lock holder's), or None if it holds none.

    `open_file`'s rules (never a symlink, never blocking), and the first 32 bytes.
    """
    try:
        fd, _ = open_file(name, dir_fd)
    except OSError:
        return None
    try:
        return int(os.read(fd, 32).strip())
    except (OSError, ValueError):
        return None
    finally:
        os.close(fd)


def problem(exc: OSError, *, followed: bool = False) -> str:
    """The one-line reason a reader reports for a failed open or read.

    `followed`: the open followed symlinks (a store root, the user's own path), so
    ELOOP is a loop of them, not a symlink refused.
    """
    if isinstance(exc, WrongKind):
        return exc.strerror or "of the wrong kind"
    if exc.errno == errno.ELOOP:
        return f"unreadable: {exc.strerror}" if followed else "is a symlink (never followed)"
    if exc.errno == errno.ENOTDIR:
        return "is not a directory"
    return f"unreadable: {exc.strerror or exc}"


def read_exactly(fd: int, n: int) -> bytes:
    """Read `n` bytes unless EOF comes first (regular files may return short reads)."""
    parts = []
    while n > 0:
        part = os.read(fd, n)
        if not part:
            break
        parts.append(part)
        n -= len(part)
    return b"".join(parts)

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

Failures are `OSError`s (`NotRegularFile` for a file of the wrong kind);
`problem()` turns any of them into the one-line reason readers report.
"""

from __future__ import annotations

import errno
import os
import stat
from collections.abc import Iterable
from pathlib import Path

__all__ = [
    "NotRegularFile",
    "open_dir",
    "open_file",
    "open_record_dir",
    "open_under",
    "problem",
    "read_capped",
]

_CLOEXEC = getattr(os, "O_CLOEXEC", 0)
FILE_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_NOCTTY | _CLOEXEC
DIR_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_DIRECTORY | _CLOEXEC
_CHUNK = 1 << 16

_KINDS = (
    (stat.S_ISDIR, "a directory"),
    (stat.S_ISFIFO, "a FIFO"),
    (stat.S_ISSOCK, "a socket"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
    (stat.S_ISLNK, "a symlink (never followed)"),
)


def _kind(mode: int) -> str:
    return next((name for test, name in _KINDS if test(mode)), "not a regular file")


class NotRegularFile(OSError):
    """A file that readers must not read: its `kind` says what it is (a FIFO, a symlink...)."""

    def __init__(self, name: str, kind: str) -> None:
        super().__init__(errno.EINVAL, f"is {kind}, not a regular file", name)
        self.kind = kind


def open_dir(
    name: str | os.PathLike[str], dir_fd: int | None = None, *, follow: bool = False
) -> int:
    """A directory fd for `name`; a symlink is refused unless `follow` (the user's own path)."""
    flags = DIR_FLAGS & ~os.O_NOFOLLOW if follow else DIR_FLAGS
    return os.open(name, flags, dir_fd=dir_fd)


def open_file(
    name: str | os.PathLike[str], dir_fd: int | None = None
) -> tuple[int, os.stat_result]:
    """A read fd and its `fstat` for the regular file `name`; never follows, never blocks.

    Raises `FileNotFoundError` when absent, `NotRegularFile` for a symlink,
    FIFO, socket, device or directory, another `OSError` when unreadable.
    """
    try:
        fd = os.open(name, FILE_FLAGS, dir_fd=dir_fd)
    except OSError as exc:
        # ELOOP: a symlink refused by O_NOFOLLOW; ENXIO: a socket, or a device
        # without a driver. Name the kind from lstat: that reads no content.
        if exc.errno in (errno.ELOOP, errno.ENXIO, errno.EOPNOTSUPP):
            try:
                st = os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
            except OSError:
                raise exc from None
            if not stat.S_ISREG(st.st_mode):
                raise NotRegularFile(os.fspath(name), _kind(st.st_mode)) from None
        raise
    try:
        st = os.fstat(fd)
    except BaseException:
        os.close(fd)
        raise
    if not stat.S_ISREG(st.st_mode):
        os.close(fd)
        raise NotRegularFile(os.fspath(name), _kind(st.st_mode))
    return fd, st


def open_under(dir_fd: int, parts: Iterable[str]) -> tuple[int, os.stat_result]:
    """`open_file` of a relative path below `dir_fd`, every directory on the way opened
    with `O_NOFOLLOW` relative to the one before (so nothing outside is ever reached)."""
    *dirs, leaf = parts
    current = dir_fd
    try:
        for part in dirs:
            try:
                step = open_dir(part, current)
            except OSError as exc:
                if exc.errno in (errno.ELOOP, errno.ENOTDIR):
                    st = os.stat(part, dir_fd=current, follow_symlinks=False)
                    raise NotRegularFile(part, _kind(st.st_mode)) from None
                raise
            if current != dir_fd:
                os.close(current)
            current = step
        return open_file(leaf, current)
    finally:
        if current != dir_fd:
            os.close(current)


def open_record_dir(path: Path) -> int:
    """A directory fd for the record at `<session>/<collection>/<n>`.

    The session directory is where the caller pointed (followed like any
    path it gives); the collection and the record are opened with
    `O_NOFOLLOW`, so a record or a `trials/` replaced by a symlink is refused.
    """
    session_fd = open_dir(path.parent.parent, follow=True)
    try:
        collection_fd = open_dir(path.parent.name, session_fd)
    finally:
        os.close(session_fd)
    try:
        return open_dir(path.name, collection_fd)
    finally:
        os.close(collection_fd)


def read_capped(fd: int, limit: int) -> bytes | None:
    """All bytes of `fd`, or None once more than `limit` arrive (a file that grew past it).

    Reads in 64 KiB chunks: one buffered `read(limit + 1)` would allocate the
    whole limit for every small file.
    """
    chunks: list[bytes] = []
    total = 0
    while chunk := os.read(fd, _CHUNK):
        chunks.append(chunk)
        total += len(chunk)
        if total > limit:
            return None
    return chunks[0] if len(chunks) == 1 else b"".join(chunks)


def problem(exc: OSError) -> str:
    """The one-line reason a reader reports for a failed open or read."""
    if isinstance(exc, NotRegularFile):
        return exc.strerror or "not a regular file"
    if exc.errno == errno.ELOOP:
        return "is a symlink (never followed), not a regular file"
    if exc.errno == errno.ENOTDIR:
        return "a component of the path is not a directory"
    return f"unreadable: {exc.strerror or exc}"

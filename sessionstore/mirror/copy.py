"""Reading one source file so that what we commit is a version it really had.

The torn-read guard. A file is opened with `O_NOFOLLOW|O_NONBLOCK|O_NOCTTY` relative to
its directory's fd, and `fstat` must show the regular file the listing saw
(same inode and device), so a swap to a symlink, a fifo or another file
between listing and open is caught without ever reading the impostor. Then:

1. *Settled?* Linux stamps mtime/ctime from the coarse realtime clock (one
   tick, 1-4 ms; multigrain filesystems may hand out a finer stamp, which is
   only ever later). A write that lands after our first `fstat` gets a ctime
   of at least the coarse time we sampled before that `fstat`, so if the
   file's ctime is older than that sample by more than the racy window, any
   later write is bound to change ctime (git's racy-git rule). ctime, not
   mtime: every content change sets ctime, and only ctime cannot be set by
   the writer (`os.utime` may put mtime anywhere, even in the future).
2. *Read exactly `size` bytes* in chunks (no size cap), through the redactor.
3. *Same signature after?* `(size, mtime_ns, ctime_ns, ino, dev)` from the
   `fstat` before and after must be equal and the byte count must equal the
   size; otherwise the read may mix two versions and nothing is committed.

A settled file whose signature did not move while we read it is one complete
version: that is the only thing a caller may commit, or record in the cache.
"""

from __future__ import annotations

import errno
import os
import stat
import time
from collections.abc import Callable

from sessionstore._fs.read import FILE_FLAGS

TYPE_CHECKING = False  # typing's, without importing typing (mypy reads it as such)
if TYPE_CHECKING:
    from typing import Protocol

    from sessionstore.redact.redactor import Redactor

    class Sink(Protocol):
        """Where the redacted bytes go; `feed` returns False to stop reading early.

        `data` may be a view of a chunk the redactor holds: keep it, never change it.
        """

        def feed(self, data: bytes | memoryview) -> bool: ...


# CLOCK_REALTIME_COARSE is in `time` only from Python 3.13; the Linux value is 5.
CLOCK_COARSE: int = getattr(time, "CLOCK_REALTIME_COARSE", 5)

Signature = tuple[int, int, int, int, int]


def coarse_tick_ns() -> int:
    """One tick of the clock file timestamps come from (1 ns if the clock is unknown)."""
    try:
        return max(1, round(time.clock_getres(CLOCK_COARSE) * 1e9))
    except OSError:
        return 1


def coarse_now_ns() -> int:
    """The clock file timestamps come from; falls back to the ordinary realtime clock."""
    try:
        return time.clock_gettime_ns(CLOCK_COARSE)
    except OSError:
        return time.time_ns()


def signature(st: os.stat_result) -> Signature:
    """What must not move while a file is read: size, mtime, ctime, inode, device."""
    return (st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino, st.st_dev)


class Unstable(Exception):
    """The file changed under us (or is too fresh to trust); retry on a later pass."""


class Vanished(Exception):
    """The file disappeared between listing and open; skipped quietly."""


def open_source(
    dir_fd: int, name: str, listed: os.stat_result, window_ns: int
) -> tuple[int, os.stat_result]:
    """Open a listed, settled regular file: (fd, its fstat), or raise Vanished / Unstable / OSError.

    `listed` is the listing's lstat; the open file must be that inode. The caller
    closes the fd.
    """
    now = coarse_now_ns()  # sampled before the fstat that the settled rule relies on
    try:
        fd = os.open(name, FILE_FLAGS, dir_fd=dir_fd)
    except FileNotFoundError:
        raise Vanished from None
    except OSError as exc:
        if exc.errno in (errno.ELOOP, errno.ENXIO, errno.ENOTDIR):
            # Swapped to a symlink, a socket or a non-directory parent since listing.
            raise Unstable("replaced during the pass") from None
        raise
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode) or (st.st_ino, st.st_dev) != (
            listed.st_ino,
            listed.st_dev,
        ):
            raise Unstable("replaced during the pass")
        if st.st_ctime_ns + window_ns >= now:
            raise Unstable("modified too recently")
    except BaseException:
        os.close(fd)
        raise
    return fd, st


def read_stable(
    fd: int,
    before: os.stat_result,
    sink: Sink,
    redactor: Redactor | None,
    chunk_size: int,
    on_chunk: Callable[[], None] | None = None,
    *,
    rewind: bool = False,
) -> bool:
    """Stream the whole file at `fd` (at offset 0, or rewound) into `sink`, redacted.

    `before` is the settled fstat `open_source` returned; the file must still
    match it after the read, so several reads of one fd (compare, then write,
    with `rewind`) all see the version that was checked for being settled. Returns whether
    the sink took everything (False: it stopped early, e.g. a comparison found
    a difference). Raises Unstable if the file changed while it was read.
    """
    if rewind:
        os.lseek(fd, 0, os.SEEK_SET)
    stream = redactor.stream() if redactor else None
    total = 0
    complete = True
    size = before.st_size
    # Read exactly the settled size, never "until EOF": a file growing as fast as we
    # read would otherwise keep one pass busy forever. Growth shows in the fstat after.
    while total < size:
        chunk = os.read(fd, min(chunk_size, size - total))
        if on_chunk is not None:
            on_chunk()
        if not chunk:
            break
        total += len(chunk)
        # The redacted chunk as views around the markers: written part by part, never joined.
        parts = stream.feed_parts(chunk) if stream is not None else (chunk,)
        if not all(sink.feed(part) for part in parts):
            complete = False
            break
    if complete and stream is not None:
        complete = all(sink.feed(part) for part in stream.finish_parts())
    after = os.fstat(fd)
    if signature(after) != signature(before) or (complete and total != size):
        raise Unstable("changed while reading")
    return complete


class Collect:
    """Sink that keeps everything (markers, which must be parsed before commit)."""

    def __init__(self) -> None:
        self.parts: list[bytes | memoryview] = []

    def feed(self, data: bytes | memoryview) -> bool:
        self.parts.append(data)
        return True

    def data(self) -> bytes:
        return b"".join(self.parts)


class Compare:
    """Sink that checks the bytes against an existing destination file."""

    def __init__(self, read: Callable[[int], bytes]) -> None:
        self.read = read  # up to n bytes of the destination file (the tree's `read`)

    def feed(self, data: bytes | memoryview) -> bool:
        return self.read(len(data)) == data

    def at_eof(self) -> bool:
        return self.read(1) == b""


class Write:
    """Sink that appends to an AtomicFile (anything with `.write(bytes)`)."""

    def __init__(self, target: Callable[[bytes | memoryview], None]) -> None:
        self.target = target

    def feed(self, data: bytes | memoryview) -> bool:
        self.target(data)
        return True


def json_object_problem(data: bytes) -> str | None:
    """Why `data` is not a JSON object, in words that never quote the content."""
    from sessionstore import _json as jsonio  # on use (a marker): a no-op pass needs no JSON
    from sessionstore._orjson import orjson

    try:
        value = orjson.loads(data)
    except orjson.JSONDecodeError as exc:
        return f"{exc.msg} at line {exc.lineno} column {exc.colno}"
    if not isinstance(value, dict):
        return f"a JSON {type(value).__name__}"
    return jsonio.too_deep(value)

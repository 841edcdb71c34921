"""Atomic file and directory writes: the one way sessionstore puts bytes on disk.

Recipe: create a temp file in the target's own directory (so the rename never
crosses a filesystem) with the fixed prefix `TEMP_PREFIX`, write, fsync,
`os.replace` onto the real name, then fsync the directory so the rename itself
survives a power cut. The mode is set explicitly with `fchmod`, because
`O_CREAT` honours the umask. On any failure the temp is unlinked and the error
propagates: a reader sees the old file or the new one, never a prefix.

Temp names are `TEMP_PREFIX<pid>-<random>`: readers ignore them, and
`sweep_temps` removes those whose writer is dead (or that are old), so a
killed writer's debris is cleaned by the next run without a lock.

A new directory is built the same way (`build_dir`): under a temp name
beside its final name, fsynced, renamed into place, removed on any failure.

Callers that hold a directory fd (the mirror's destination) pass `dir_fd=`
and a bare name: every open, rename and unlink is then relative to that fd,
so a directory swapped for a symlink after it was checked is never followed.
"""

from __future__ import annotations

import contextlib
import errno
import os
import stat
import time
from collections.abc import Callable
from pathlib import Path
from types import TracebackType

from sessionstore._fs import read as fsread
from sessionstore._fs.tree import remove_tree_at
from sessionstore._proc import process_alive

TYPE_CHECKING = False  # typing's, without importing typing (mypy reads it as such)
if TYPE_CHECKING:
    from typing import TypeVar

    T = TypeVar("T")

TEMP_PREFIX = ".sstmp-"
# The format's modes (docs/format.md), re-exported by `sessionstore.format.names`: they
# live at the bottom so the storage backends (beside `format`, not above it) share them.
DIR_MODE = 0o700
FILE_MODE = 0o644
_OPEN_FLAGS = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC


def write_all(fd: int, data: bytes | memoryview) -> None:
    """Write all of `data` to `fd`, looping over short writes so nothing is silently dropped."""
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


def temp_name() -> str:
    """A fresh temp entry name: the fixed prefix, our pid, and randomness."""
    # os.urandom, not the secrets module: same source, and no import on the CLI's hot path.
    return f"{TEMP_PREFIX}{os.getpid()}-{os.urandom(8).hex()}"


def is_temp_name(name: str) -> bool:
    """Whether a directory entry is one of our temp files (never a record or a file of one)."""
    return name.startswith(TEMP_PREFIX)


def fsync_dir(path: str | os.PathLike[str], *, dir_fd: int | None = None) -> None:
    """Flush a directory's entries (a rename or mkdir in it) to stable storage.

    `fsync_dir(".", dir_fd=fd)` flushes the directory open at `fd`, which may be
    an `O_PATH` descriptor (those cannot be fsynced themselves).
    """
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC, dir_fd=dir_fd)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


class AtomicFile:
    """A file being written under a temp name, published by `commit()`.

    Use as a context manager: leaving the block normally commits, leaving it by
    an exception (or after `discard()`) removes the temp. Not thread-safe.
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        mode: int = FILE_MODE,
        *,
        durable: bool = True,
        sync_dir: bool = True,
        dir_fd: int | None = None,
    ) -> None:
        # Plain strings, not Path: the mirror creates one per copied file, and
        # pathlib parsing was a tenth of an initial copy's time.
        self.path = os.fspath(path)
        if dir_fd is not None and os.sep in self.path:
            raise ValueError("with dir_fd, the path must be a name in that directory")
        self.mode = mode
        self.durable = durable
        self.sync_dir = sync_dir
        self.dir_fd = dir_fd
        self.temp = os.path.join(os.path.dirname(self.path), temp_name())
        try:
            self._fd: int | None = os.open(self.temp, _OPEN_FLAGS, 0o600, dir_fd=dir_fd)
        except OSError as exc:
            # The target is what the caller named: the temp's name would mislead.
            raise OSError(exc.errno, exc.strerror, self.path) from None
        except BaseException:
            # A Ctrl-C is raised as a system call returns: here the temp is made and its
            # fd lost. The name is this call's alone (random, O_EXCL): removed by name.
            with contextlib.suppress(OSError):
                os.unlink(self.temp, dir_fd=dir_fd)
            raise
        self._done = False
        self._synced = False
        try:
            os.fchmod(self._fd, mode)
        except BaseException:
            self.discard()
            raise

    def stat(self) -> os.stat_result:
        """fstat of the file being written (its mtime and inode survive the rename)."""
        assert self._fd is not None, "stat after commit or discard"
        return os.fstat(self._fd)

    def write(self, data: bytes | memoryview) -> None:
        """Append bytes; loops over short writes so nothing is silently dropped."""
        assert self._fd is not None, "write after commit or discard"
        self._synced = False
        write_all(self._fd, data)

    def sync(self) -> None:
        """fsync the temp now, so `commit()` only renames (lets a caller order other fsyncs)."""
        assert self._fd is not None, "sync after commit or discard"
        if self.durable:
            os.fsync(self._fd)
        self._synced = True

    def commit(self) -> None:
        """fsync, rename over the target, fsync the directory. Removes the temp on failure."""
        assert self._fd is not None, "commit after commit or discard"
        try:
            if self.durable and not self._synced:
                os.fsync(self._fd)
            fd, self._fd = self._fd, None
            os.close(fd)
            os.replace(self.temp, self.path, src_dir_fd=self.dir_fd, dst_dir_fd=self.dir_fd)
            self._done = True
        except BaseException:
            self.discard()
            raise
        if self.durable and self.sync_dir:
            fsync_dir(os.path.dirname(self.path) or ".", dir_fd=self.dir_fd)

    def discard(self) -> None:
        """Close and unlink the temp; safe to call more than once."""
        if self._fd is not None:
            fd, self._fd = self._fd, None
            os.close(fd)
        if not self._done:
            self._done = True
            with contextlib.suppress(FileNotFoundError):
                os.unlink(self.temp, dir_fd=self.dir_fd)

    def __enter__(self) -> AtomicFile:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if exc_type is None and not self._done:
            self.commit()
        else:
            self.discard()


def write_atomic(
    path: str | os.PathLike[str],
    data: bytes,
    mode: int = FILE_MODE,
    *,
    durable: bool = True,
    sync_dir: bool = True,
) -> None:
    """Replace `path` with `data` atomically (see the module docstring for the recipe).

    `sync_dir=False` leaves the directory fsync to the caller, who may batch it.
    """
    with AtomicFile(path, mode, durable=durable, sync_dir=sync_dir) as f:
        f.write(data)


def build_dir(
    parent_fd: int,
    build: Callable[[int, str], T],
    publish: Callable[[str], None],
    *,
    mode: int = DIR_MODE,
) -> T:
    """Build a directory under a temp name in `parent_fd`, then let `publish` rename it.

    `build(fd, temp)` fills the new directory (open at `fd`, named `temp` in
    `parent_fd`; it must fsync what it makes below, as `AtomicFile` does);
    then the directory itself is fsynced and `publish(temp)` renames the
    temp entry into place (relative to `parent_fd`), after which `parent_fd`
    is fsynced. The directory's mode is
    set explicitly (mkdir honours the umask; the mode is part of the format).
    On any failure, `publish`'s included, the temp tree is removed and the
    error propagates. Returns what `build` returned.
    """
    staging = temp_name()
    os.mkdir(staging, mode, dir_fd=parent_fd)
    try:
        fd = fsread.open_dir(staging, parent_fd)
        try:
            os.fchmod(fd, mode)
            result = build(fd, staging)
            os.fsync(fd)
        finally:
            os.close(fd)
        publish(staging)
    except BaseException:
        # The original error is what the caller needs; a failed clean-up is debris
        # that `sweep_temps` removes once this process is gone.
        with contextlib.suppress(OSError):
            remove_tree_at(parent_fd, staging)
        raise
    os.fsync(parent_fd)
    return result


def temp_pid(name: str) -> int | None:
    """The pid a temp entry's name records (`temp_name`), or None if it records none.

    ASCII digits only: `str.isdigit` also takes `²`, which `int` refuses, and a
    stray `.sstmp-²-x` made every sweep and `doctor` of its directory raise.
    """
    pid_text = name[len(TEMP_PREFIX) :].partition("-")[0]
    return int(pid_text) if pid_text.isascii() and pid_text.isdigit() else None


def temp_writer_alive(name: str) -> bool:
    """Whether the process that named this temp may still be writing it."""
    pid = temp_pid(name)
    if pid is None:
        return False
    # No start time is recorded in a temp name: only the pid's existence can be checked
    # (the age cut-off of `sweep_temps` covers a recycled pid).
    return pid == os.getpid() or process_alive(pid, None)


def sweep_temps(directory: Path, older_than: float = 3600.0) -> list[Path]:
    """Remove our temps in `directory` whose writer is dead or older than `older_than` s.

    A temp of a live writer (another thread of ours included) is left alone,
    unless it is so old that its pid was surely recycled. Returns what was removed.
    """
    try:
        fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    except FileNotFoundError:
        return []
    try:
        return [directory / name for name in sweep_temps_at(fd, older_than)]
    finally:
        os.close(fd)


def sweep_temps_at(dir_fd: int, older_than: float = 3600.0) -> list[str]:
    """`sweep_temps` in the directory open at `dir_fd`; returns the names removed.

    Everything is relative to the fd and nothing is followed, so a temp entry
    that is a symlink is removed as a link, never through it.
    """
    removed: list[str] = []
    cutoff = time.time() - older_than
    # Listed through a fresh fd: `dir_fd` may be an O_PATH descriptor (not listable).
    listing = os.open(".", os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC, dir_fd=dir_fd)
    try:
        with os.scandir(listing) as it:
            names = [e.name for e in it if is_temp_name(e.name)]
    finally:
        os.close(listing)
    for name in names:
        try:
            st = os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
            if _remove_dead_temp(dir_fd, name, st, cutoff):
                removed.append(name)
        except OSError as exc:
            if exc.errno != errno.ENOENT:
                raise
    return removed


def sweep_tree_at(
    root_fd: int, *, durable: bool, older_than: float = 3600.0
) -> list[tuple[str, str]]:
    """`sweep_temps_at` in the directory open at `root_fd` and every one below it.

    Returns the problems met, as (path below the root, one-line problem): a
    directory that could not be listed may still hold a dead temp. By `_fs.walk`
    (one directory fd at a time, nothing followed, any depth); a temp is never
    entered. With `durable`, a directory a temp left is fsynced at once, so a
    caller that then records "swept" cannot see the temp come back.
    """
    from sessionstore._fs.walk import walk  # on use: a pass that sweeps nothing needs no walk

    problems: list[tuple[str, str]] = []
    cutoff = time.time() - older_than
    for entry in walk(root_fd, descend=lambda e: not is_temp_name(e.name)):
        if entry.kind == "error":
            problems.append(("/".join(entry.parts()) or ".", entry.error or "unreadable"))
        elif is_temp_name(entry.name) and entry.st is not None:
            try:
                if _remove_dead_temp(entry.dir_fd, entry.name, entry.st, cutoff) and durable:
                    os.fsync(entry.dir_fd)
            except OSError as exc:
                if exc.errno != errno.ENOENT:
                    problems.append(("/".join(entry.parts()), fsread.problem(exc)))
    return problems


def _remove_dead_temp(dir_fd: int, name: str, st: os.stat_result, cutoff: float) -> bool:
    """Remove the temp `name` (lstat `st`) if its writer is dead or it is older than `cutoff`."""
    if temp_writer_alive(name) and st.st_mtime >= cutoff:
        return False
    if stat.S_ISDIR(st.st_mode):  # a temp directory is a session being created (Store.create)
        remove_tree_at(dir_fd, name)
    else:
        os.unlink(name, dir_fd=dir_fd)
    return True


# link(2) refused by the filesystem itself (vfat, exFAT, some FUSE mounts), not by the name.
_NO_LINKS = {errno.EPERM, errno.EOPNOTSUPP, errno.ENOTSUP, errno.ENOSYS, errno.EMLINK}


def publish_once(temp: str, name: str, parent: int) -> bool:
    """Give the temp file `temp` in `parent` the name `name` unless taken; False if it was.

    link(2) makes this exclusive: of two writers exactly one wins. Where the
    filesystem has no hard links, a lexists check then rename(2) keeps the
    object whole for readers, but two writers racing within that window may
    both succeed, the later one replacing the first (docs/format.md). `temp` is left
    for the caller to unlink.
    """
    try:
        os.link(temp, name, src_dir_fd=parent, dst_dir_fd=parent)
    except FileExistsError:
        return False
    except OSError as exc:
        if exc.errno not in _NO_LINKS:
            raise
        try:
            os.stat(name, dir_fd=parent, follow_symlinks=False)
        except FileNotFoundError:
            os.rename(temp, name, src_dir_fd=parent, dst_dir_fd=parent)
        else:
            return False
    return True

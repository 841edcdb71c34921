"""`LocalStorage`: the storage seam over a local directory, through directory fds.

Every operation starts from the root directory (the user's path: followed)
and opens each component of a key below it with `O_NOFOLLOW|O_DIRECTORY`,
relative to the one before; every mkdir, open, link, rename and unlink is
then relative to the last directory's fd. A path string is never resolved
again after it was checked, so a component swapped for a symlink is refused
at that step and nothing outside the root is ever reached. A symlink, FIFO
or file where a directory of the key belongs, or anything but a regular
file where an object is read, is a `StorageError` naming the key at fault,
at once (a FIFO is never opened for a blocking read).

An I/O error of a write (`ENOSPC`, `EIO`) propagates as the `OSError` it
is; what a reader meets is a `StorageError` with the reason.

Writes follow the format's atomic recipe (`sessionstore._fs.atomic`): a temp
file beside the key (`.sstmp-<pid>-<random>`), written, fsynced, then
published: `put` renames it over the key, `create` hard-links it to the key
(`link(2)` fails on an existing name, so of two writers exactly one wins,
across processes and NFS clients) and unlinks the temp in all cases.

Directory fsyncs are deferred to where they decide something: `put` leaves
its directory unsynced (remembered), and `create` first fsyncs every
directory below its own prefix that a `put` left unsynced, then its own
directory, then links, then fsyncs again, then the directories above that a
`claim` left unsynced (the record's own entry). A marker therefore never
reaches the disk before the files of its record, at one directory fsync per
record instead of one per file and per claim (a record commit's cost,
docs/benchmarks.md). Directories a write needs are made with the format's
mode, and their parent fsynced. Temp entries are never listed.
"""

from __future__ import annotations

import builtins
import contextlib
import os
import threading
from collections.abc import Callable, Iterator
from pathlib import Path

from sessionstore._fs import read as fsread
from sessionstore._fs.atomic import (
    DIR_MODE,
    FILE_MODE,
    AtomicFile,
    build_dir,
    is_temp_name,
    publish_once,
    temp_name,
)
from sessionstore._fs.tree import remove_tree_at
from sessionstore.errors import StorageError, TooLarge
from sessionstore.storage.base import Listed, check_key, check_prefix, join

__all__ = ["LocalStorage"]

_CREATE_FLAGS = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC


class LocalStorage:
    """The objects below the directory `root`, keyed by their relative paths.

    `root` is followed if it is a symlink (the user named it) and made, with
    its missing parents, by the first write. Thread-safe: each operation
    opens and closes its own fds; the one state kept between operations, the
    directories whose fsync a `put` deferred, is guarded by a lock.
    """

    def __init__(
        self, root: str | os.PathLike[str], *, dir_mode: int = DIR_MODE, file_mode: int = FILE_MODE
    ) -> None:
        self.root = Path(root)
        self.dir_mode = dir_mode
        self.file_mode = file_mode
        # Directories (as key parts) holding a `put` whose directory fsync is deferred.
        self._unsynced: set[tuple[str, ...]] = set()
        self._lock = threading.Lock()

    def __repr__(self) -> str:
        return f"LocalStorage({str(self.root)!r})"

    # -- the five operations of `Storage`, and `claim` ---------------------------

    def create(self, key: str, data: bytes) -> bool:
        parts = check_key(key).split("/")
        with self._parent(parts, make=True) as parent:
            assert parent is not None
            temp = temp_name()
            try:
                out = os.open(temp, _CREATE_FLAGS, 0o600, dir_fd=parent)
                try:
                    os.fchmod(out, self.file_mode)
                    _write_all(out, data)
                    os.fsync(out)
                finally:
                    os.close(out)
                # What was put below this prefix is durable before this appears.
                self._sync_put(parts[:-1])
                os.fsync(parent)
                if not publish_once(temp, parts[-1], parent):
                    return False
                # The temp name goes before the fsync, so one journal commit covers both.
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(temp, dir_fd=parent)
                os.fsync(parent)
            finally:
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(temp, dir_fd=parent)
        # The directories above that a `claim` made (the record's own entry) last: losing
        # them in a crash loses the whole record, marker included, never a part of it.
        self._sync_above(parts[:-1])
        return True

    def put(self, key: str, data: bytes, *, mode: int | None = None) -> None:
        parts = check_key(key).split("/")
        with self._parent(parts, make=True) as parent:
            assert parent is not None
            mode = self.file_mode if mode is None else mode
            with AtomicFile(parts[-1], mode, sync_dir=False, dir_fd=parent) as f:
                f.write(data)
        with self._lock:
            self._unsynced.add(tuple(parts[:-1]))

    def get(self, key: str, limit: int) -> bytes | None:
        parts = check_key(key).split("/")
        with self._parent(parts, make=False) as parent:
            if parent is None:
                return None
            try:
                fd, st = fsread.open_file(parts[-1], parent)
            except FileNotFoundError:
                return None
            except OSError as exc:
                raise _error(key, exc) from exc
            try:
                data = None if st.st_size > limit else fsread.read_capped(fd, limit)
            except OSError as exc:
                raise _error(key, exc) from exc
            finally:
                os.close(fd)
        if data is None:
            raise TooLarge(key, limit)
        return data

    def list(self, prefix: str) -> Iterator[Listed]:
        parts = check_prefix(prefix).split("/") if prefix else []
        with self._dir(parts) as fd:
            if fd is None:
                return iter(())
            try:
                with os.scandir(fd) as it:
                    found = [
                        Listed(e.name, e.is_dir(follow_symlinks=False))
                        for e in it
                        if not is_temp_name(e.name)
                    ]
            except OSError as exc:
                raise _error(prefix, exc) from exc
        return iter(found)

    def remove_tree(self, prefix: str) -> None:
        parts = check_key(prefix, "storage prefix").split("/")
        with self._parent(parts, make=False) as parent:
            if parent is None:
                return
            try:
                remove_tree_at(parent, parts[-1])
            except OSError as exc:
                raise _error(prefix, exc) from exc

    def claim(self, prefix: str) -> bool:
        """Make the prefix `prefix` if nothing is there: True for the one caller that made it.

        `mkdir(2)`, atomic across processes and NFS clients: this is how the
        format allocates a record number. Its parent's fsync is deferred to the
        `create` of the record's marker (the new prefix holds nothing durable
        before then), which saves a journal commit per record.
        """
        parts = check_key(prefix, "storage prefix").split("/")
        with self._parent(parts, make=True) as parent:
            assert parent is not None
            try:
                self._mkdir(parent, parts[-1], sync=False)
            except FileExistsError:
                return False
            except OSError as exc:
                raise _error(prefix, exc) from exc
        with self._lock:
            self._unsynced.add(tuple(parts[:-1]))
        return True

    # -- local only ---------------------------------------------------------------

    def publish_dir(self, key: str, build: Callable[[str], None]) -> bool:
        """Build a new prefix under a temp name, then rename it to `key` unless taken.

        `build(temp)` writes the tree through this storage, below the key
        `temp` (a sibling of `key`). Then `rename(2)` publishes it whole
        (`_fs.atomic.build_dir`): a reader sees all of it or nothing. False,
        with the temp tree removed, when something is at `key` already.
        Local only: an object store has no rename, and would write the objects
        under `key` directly with the one that makes them visible `create`d
        last (for a session, its manifest).
        """
        parts = check_key(key).split("/")
        prefix = "/".join(parts[:-1])
        with self._parent(parts, make=True) as parent:
            assert parent is not None

            def publish(temp: str) -> None:
                if _lexists(parts[-1], parent):
                    raise _Taken
                try:
                    # rename(2) onto an existing non-empty directory fails: no clobbering.
                    os.rename(temp, parts[-1], src_dir_fd=parent, dst_dir_fd=parent)
                except OSError:
                    if _lexists(parts[-1], parent):
                        raise _Taken from None
                    raise

            staged: list[str] = []

            def fill(_: int, temp: str) -> None:
                staged.append(temp)
                build(join(prefix, temp))
                # Whole before it is renamed into place: build_dir then fsyncs its top.
                self._sync_put([*parts[:-1], temp])

            try:
                build_dir(parent, fill, publish, mode=self.dir_mode)
            except _Taken:
                return False
            finally:
                for temp in staged:
                    self._forget((*parts[:-1], temp))
        return True

    # -- deferred directory fsyncs ---------------------------------------------------

    def _sync_put(self, parts: builtins.list[str]) -> None:
        """fsync the directories below `parts` that a `put` left unsynced.

        `parts` itself is the caller's to fsync (it does so anyway, next).
        """
        top = tuple(parts)
        with self._lock:
            self._unsynced.discard(top)
            due = sorted(d for d in self._unsynced if d[: len(top)] == top)
        for d in due:
            with self._dir(builtins.list(d)) as fd:
                if fd is not None:  # gone: nothing of it can be published any more
                    os.fsync(fd)
            with self._lock:
                self._unsynced.discard(d)

    def _sync_above(self, parts: builtins.list[str]) -> None:
        """fsync the directories above `parts` that a `claim` left unsynced."""
        top = tuple(parts)
        with self._lock:
            due = sorted(d for d in self._unsynced if d != top and top[: len(d)] == d)
        for d in due:
            with self._dir(builtins.list(d)) as fd:
                if fd is not None:
                    os.fsync(fd)
            with self._lock:
                self._unsynced.discard(d)

    def _forget(self, parts: tuple[str, ...]) -> None:
        """Drop the deferred fsyncs at or below `parts` (a staged tree, synced and renamed)."""
        with self._lock:
            self._unsynced = {d for d in self._unsynced if d[: len(parts)] != parts}

    # -- directory fds -----------------------------------------------------------

    def _open_root(self, make: bool) -> int | None:
        try:
            return os.open(self.root, fsread.DIR_FLAGS & ~os.O_NOFOLLOW)
        except FileNotFoundError:
            if not make:
                return None
        except OSError as exc:
            raise StorageError("", f"root {self.root}: {fsread.problem(exc)}") from exc
        try:
            os.makedirs(self.root, self.dir_mode, exist_ok=True)
            return os.open(self.root, fsread.DIR_FLAGS & ~os.O_NOFOLLOW)
        except OSError as exc:
            raise StorageError("", f"root {self.root}: {fsread.problem(exc)}") from exc

    @contextlib.contextmanager
    def _dir(self, parts: builtins.list[str], make: bool = False) -> Iterator[int | None]:
        """The fd of the directory `parts` below the root (None: absent and not `make`).

        Each component is opened `O_NOFOLLOW|O_DIRECTORY` relative to the one
        before; with `make`, a missing one is made (and its parent fsynced).
        """
        fd = self._open_root(make)
        if fd is None:
            yield None
            return
        try:
            for i, part in enumerate(parts):
                try:
                    step = _open_or_make(fd, part, self._mkdir if make else None)
                except OSError as exc:
                    raise _error("/".join(parts[: i + 1]), exc) from exc
                os.close(fd)
                fd = step
                if fd is None:
                    break
            yield fd
        finally:
            if fd is not None:
                os.close(fd)

    def _parent(
        self, parts: builtins.list[str], make: bool
    ) -> contextlib.AbstractContextManager[int | None]:
        return self._dir(parts[:-1], make)

    def _mkdir(self, parent: int, name: str, *, sync: bool = True) -> None:
        os.mkdir(name, self.dir_mode, dir_fd=parent)
        try:
            fd = fsread.open_dir(name, parent)
            try:
                os.fchmod(fd, self.dir_mode)  # mkdir honours the umask; the mode is the format's
            finally:
                os.close(fd)
            if sync:
                os.fsync(parent)
        except BaseException:
            with contextlib.suppress(OSError):
                os.rmdir(name, dir_fd=parent)
            raise


class _Taken(Exception):
    """`publish_dir`: something is at the key already."""


def _lexists(name: str, dir_fd: int) -> bool:
    try:
        os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
    except FileNotFoundError:
        return False
    return True


def _open_or_make(parent: int, name: str, mkdir: Callable[[int, str], None] | None) -> int | None:
    """`fsread.open_dir(name, parent)`; a missing `name` is made by `mkdir` if given, else None."""
    try:
        return fsread.open_dir(name, parent)
    except FileNotFoundError:
        if mkdir is None:
            return None
    with contextlib.suppress(FileExistsError):  # made by another writer meanwhile
        mkdir(parent, name)
    return fsread.open_dir(name, parent)


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


def _error(key: str, exc: OSError) -> StorageError:
    """A `StorageError` naming `key` (the key at fault) with the readers' one-line reason."""
    if isinstance(exc, StorageError):
        return exc
    return StorageError(key, fsread.problem(exc))

"""How `LocalStorage` reaches directories: component by component, by fd, never following.

`_read_fd` (and `_dir`, its form for a block) opens each component of a key
below the root with `O_NOFOLLOW|O_DIRECTORY`, relative to the one before
(the root itself is followed: the user named it), starting from the deepest
cached ancestor still at its path, or from a held (pinned) prefix. Deferred
directory fsyncs (`put`, `claim`) are remembered here and done by `create`
(see `storage.local`).

A prefix this thread `claim`ed is held (pinned) until the `create` that seals
it: the fd of the directory `claim` made, and of the one it made it in. Every
operation on a key below a held prefix starts from the held fd with no lstat of
the path, and the marker's deferred fsync of the parent uses the held parent fd.
Why that never follows a symlink: the held directory was made by `mkdirat` in a
parent reached as every other (each component `O_NOFOLLOW`, a cached one
re-checked), then opened `O_NOFOLLOW|O_DIRECTORY` relative to that same parent
fd; an fd names an inode, not a path, so a component on the way (the session,
the collection, the record itself) swapped for a symlink afterwards changes
what the path names, never what the fd names. Below the held fd each component
is opened `O_NOFOLLOW` again and the leaf is opened `O_NOFOLLOW` (`O_EXCL` for
a temp), so every write lands in the directory `claim` made or below it, and
nothing a swap points at is ever reached. What a swap can do is move the held
directory itself: the writer's files then follow it (they are written into the
directory it made, wherever that now is), and its path names the swapped-in
entry, which readers refuse as they would anyway. A held directory removed
meanwhile (`rmdir`, `remove_tree`) refuses every new entry (`ENOENT`): a writer
whose record was removed fails, it never re-creates the record. Pins are per
thread (no lock, and no other thread can close one in use), at most
`_PINS_MAX`, the oldest closed first (its prefix is then reached by the path
again, re-checked as any other); a thread's pins close when it ends.

A reader may hold a prefix too, for a block (`_holding`: `inspect` holds each
session while it reads it): the directory is reached once, as any other, and
every read below it in this thread starts from that fd, with no lstat of the
path. The argument is the pins': the fd names the directory the block began
with, so a swap on the way during the block changes nothing it reaches, and
what the block reads through this storage is that one directory's, wherever a
rename has since put it. Writes never start from a hold: they reach their
directory by its path, re-checked, as without one (so a cache written during
the block into a session `rm` has renamed away is skipped, not written there).
"""

from __future__ import annotations

import builtins
import contextlib
import errno
import os
import stat
import threading
from collections import OrderedDict
from collections.abc import Callable, Iterator
from pathlib import Path

from sessionstore._fs import read as fsread
from sessionstore.errors import StorageError


class LocalDirs:
    """The root, the directory walks and the per-storage state between operations.

    Thread-safe: the deferred fsyncs are behind a lock, the read cache is per thread.
    """

    def __init__(self, root: Path, dir_mode: int, *, store: bool = False) -> None:
        self.root = root
        self.dir_mode = dir_mode
        self.store = store  # `LocalStorage`: the root's entries are never made by a write
        # Directories (as key parts) holding a `put` whose directory fsync is deferred.
        self._unsynced: set[tuple[str, ...]] = set()
        self._lock = threading.Lock()
        self._root_key = os.fspath(root)

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

    def _sync_above(self, parts: builtins.list[str], parent: int | None = None) -> None:
        """fsync the directories above `parts` that a `claim` left unsynced.

        `parent`: the fd of the directory `parts` was made in, when held (its pin):
        the one whose entry for `parts` must be durable, whatever its path names now.
        """
        top = tuple(parts)
        with self._lock:
            due = sorted(d for d in self._unsynced if d != top and top[: len(d)] == d)
        for d in due:
            if parent is not None and len(d) == len(top) - 1:
                os.fsync(parent)
            else:
                with self._dir(builtins.list(d)) as fd:
                    if fd is not None:
                        os.fsync(fd)
            with self._lock:
                self._unsynced.discard(d)

    def _forget(self, parts: tuple[str, ...]) -> None:
        """Drop the deferred fsyncs and this thread's pins at or below `parts` (a staged
        tree, synced and renamed: its keys no longer name it)."""
        with self._lock:
            self._unsynced = {d for d in self._unsynced if d[: len(parts)] != parts}
        pins = _read_cache().pins
        key = (self._root_key, *parts)
        for gone in [k for k in pins if k[: len(key)] == key]:
            _close_pin(pins.pop(gone))

    # -- held (pinned) prefixes ------------------------------------------------------

    def _pin(self, parts: builtins.list[str], fd: int, parent: int, owned: bool) -> None:
        """Hold `fd`, the directory `parts` this thread just made in `parent`, until sealed.

        Takes `fd` over, and `parent` if `owned` (else it is the cache's: duplicated).
        """
        pins = _read_cache().pins
        key = (self._root_key, *parts)
        old = pins.pop(key, None)
        if old is not None:
            _close_pin(old)
        try:
            pins[key] = (fd, parent if owned else os.dup(parent))
        except BaseException:
            os.close(fd)
            raise
        if len(pins) > _PINS_MAX:
            _close_pin(pins.popitem(last=False)[1])

    def _pinned(self, parts: builtins.list[str]) -> tuple[int, int] | None:
        """The held (fd, parent fd) of the prefix `parts`, or None (not held by this thread)."""
        return _read_cache().pins.get((self._root_key, *parts))

    def _unpin(self, parts: builtins.list[str]) -> None:
        """Close the pin of `parts`, if held: it was sealed (its marker is there)."""
        pin = _read_cache().pins.pop((self._root_key, *parts), None)
        if pin is not None:
            _close_pin(pin)

    # -- a prefix held for reading ---------------------------------------------------

    @contextlib.contextmanager
    def _holding(self, parts: builtins.list[str]) -> Iterator[None]:
        """For the block, this thread reaches `parts` and below from one fd opened now.

        Nothing is held where `parts` cannot be reached (absent, a symlink on the way):
        each operation then meets that itself, as without a hold.
        """
        holds = _read_cache().holds
        key = (self._root_key, *parts)
        mine = False
        try:
            if key not in holds:  # else an outer block of this thread holds it already
                try:
                    fd, owned = self._read_fd(parts)
                except StorageError:
                    fd = None
                if fd is not None:
                    mine = True
                    holds[key] = fd if owned else os.dup(fd)
            yield
        finally:
            # Popped, not assumed: a thread that ends while a generator is suspended in
            # the block closes its holds (`_ReadCache.__del__`) and empties them.
            held = holds.pop(key, None) if mine else None
            if held is not None:
                os.close(held)

    # -- directory fds -----------------------------------------------------------

    def _read_fd(
        self, parts: builtins.list[str], make: bool = False, *, read: bool = True
    ) -> tuple[int | None, bool]:
        """The fd of the directory `parts` (None: absent and not `make`), and whether it
        is the caller's to close (else it is the cache's: use it, call nothing that
        reads or writes through this storage meanwhile, never keep it).

        Starts from the deepest cached ancestor. `inspect` reads thousands of
        markers below a few directories; opening every component from the
        root for each of them made it 1.6x slower. A cached directory fd is
        used only while its path still names that same directory: one lstat of
        the path (the `O_NOFOLLOW` opens happened when it was cached; a
        component swapped for a symlink since resolves elsewhere, the inode
        differs, and the components are opened again, which refuses it).
        Below it each component is opened `O_NOFOLLOW|O_DIRECTORY` relative
        to the one before; with `make`, a missing one is made (and its parent
        fsynced). Writes use the cache too (`_dir`): an fd held across a check
        and its use can see its directory moved either way, whether it was
        opened just now or validated just now. The cache is per thread (so no
        lock, and no other thread can close a cached fd in use) and holds at
        most 16 fds, closed on eviction and when the thread ends. A prefix this
        thread holds for reading (`_holding`) starts a `read` with no lstat; a
        write (`make`, or `read=False`: `_dir`) never starts from one.
        """
        cache = _read_cache()
        depth, fd = self._cached_ancestor(cache, parts, read and not make)
        owned = False
        if fd is None:  # nothing cached: from the root
            fd = self._open_root(make)
            if fd is None:
                return None, False
            owned = True
            self._remember(cache, [], fd)
        mkdir = self._mkdir if make else None
        for i in range(depth, len(parts)):
            try:
                step = _open_or_make(fd, parts[i], None if i == 0 and self.store else mkdir)
            except OSError as exc:
                if owned:
                    os.close(fd)
                raise error("/".join(parts[: i + 1]), exc) from exc
            if owned:
                os.close(fd)
            if step is None:
                if mkdir is not None:  # an entry of a store, not made again: `LocalStorage`
                    raise self._gone(parts[: i + 1])
                return None, False
            fd, owned = step, True
            if i + 1 < len(parts):  # ancestors only: a listing passes each leaf once
                self._remember(cache, parts[: i + 1], fd)
        return fd, owned

    def _cached_ancestor(
        self, cache: _ReadCache, parts: builtins.list[str], read: bool
    ) -> tuple[int, int | None]:
        """(depth, fd) of the deepest held (pinned, or for a `read` held for reading), or
        cached and still in place, directory at or above `parts` (a held one needs no
        check: see the module docstring)."""
        pins, holds = cache.pins, cache.holds if read else None
        for depth in range(len(parts), -1, -1):
            key = (self._root_key, *parts[:depth])
            if pins:
                pin = pins.get(key)
                if pin is not None:
                    return depth, pin[0]
            if holds:
                held = holds.get(key)
                if held is not None:
                    return depth, held
            cached = cache.get(key)
            if cached is None:
                continue
            fd, dev, ino = cached
            try:
                st = os.stat("/".join(key), follow_symlinks=False)  # posixpath.join: 4x slower
                same = (st.st_dev, st.st_ino) == (dev, ino) and stat.S_ISDIR(st.st_mode)
            except OSError:
                same = False
            if same:
                cache.move_to_end(key)
                return depth, fd
            del cache[key]
            os.close(fd)
        return 0, None

    def _remember(self, cache: _ReadCache, parts: builtins.list[str], fd: int) -> None:
        key = (self._root_key, *parts)
        if key in cache:
            return
        st = os.fstat(fd)
        cache[key] = (os.dup(fd), st.st_dev, st.st_ino)
        if len(cache) > _READ_FDS_MAX:
            os.close(cache.popitem(last=False)[1][0])

    def _gone(self, parts: builtins.list[str]) -> FileNotFoundError:
        """The error of a write whose directory `parts` is not there and is not made."""
        path = self.root.joinpath(*parts)
        return FileNotFoundError(errno.ENOENT, os.strerror(errno.ENOENT), str(path))

    def _open_root(self, make: bool) -> int | None:
        try:
            return os.open(self.root, fsread.DIR_FLAGS & ~os.O_NOFOLLOW)
        except FileNotFoundError:
            if not make:
                return None
        except OSError as exc:
            problem = fsread.problem(exc, followed=True)  # the root's own links are followed
            raise StorageError("", f"root {self.root}: {problem}") from exc
        try:
            os.makedirs(self.root, self.dir_mode, exist_ok=True)
        except FileExistsError as exc:  # missing to open, there to mkdir: a symlink to nothing
            dangling = os.path.islink(self.root)
            problem = "is a dangling symlink" if dangling else "is not a directory"
            raise StorageError("", f"root {self.root}: {problem}") from exc
        except OSError as exc:  # creating it failed, not reading it: no "unreadable"
            raise StorageError("", f"root {self.root}: cannot create: {exc.strerror}") from exc
        try:
            return os.open(self.root, fsread.DIR_FLAGS & ~os.O_NOFOLLOW)
        except OSError as exc:
            problem = fsread.problem(exc, followed=True)  # the root's own links are followed
            raise StorageError("", f"root {self.root}: {problem}") from exc

    @contextlib.contextmanager
    def _dir(self, parts: builtins.list[str], make: bool = False) -> Iterator[int | None]:
        """The fd of the directory `parts` below the root (None: absent and not `make`),
        the block's own (`_read_fd`'s, duplicated when it is the cache's: a write may
        call this storage again, as `publish_dir`'s build does, and evict it)."""
        fd, owned = self._read_fd(parts, make, read=False)
        if fd is not None and not owned:
            fd = os.dup(fd)
        try:
            yield fd
        finally:
            if fd is not None:
                os.close(fd)

    def _parent(
        self, parts: builtins.list[str], make: bool
    ) -> contextlib.AbstractContextManager[int | None]:
        return self._dir(parts[:-1], make)

    def _mkdir(self, parent: int, name: str, *, sync: bool = True) -> None:
        os.close(self._made(parent, name, sync=sync))

    def _made(self, parent: int, name: str, *, sync: bool) -> int:
        """`mkdir` of `name` in `parent` with the format's mode, and its fd (the caller's)."""
        os.mkdir(name, self.dir_mode, dir_fd=parent)
        try:
            fd = fsread.open_dir(name, parent)
            try:
                os.fchmod(fd, self.dir_mode)  # mkdir honours the umask; the mode is the format's
                if sync:
                    os.fsync(parent)
            except BaseException:
                os.close(fd)
                raise
        except BaseException:
            with contextlib.suppress(OSError):
                os.rmdir(name, dir_fd=parent)
            raise
        return fd


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


class _ReadCache(OrderedDict[tuple[str, ...], tuple[int, int, int]]):
    """One thread's cached directory fds: key (root, *parts) -> (fd, dev, ino), most
    recent last. Per thread, so that many storages (one per `Session.open(path)`)
    share at most `_READ_FDS_MAX` of them; closed when the thread ends. `pins`: the
    thread's held prefixes, key -> (fd, parent fd), oldest first (`LocalDirs._pin`);
    `holds`: the prefixes its readers hold for a block (`LocalDirs._holding`)."""

    def __init__(self) -> None:
        super().__init__()
        self.pins: OrderedDict[tuple[str, ...], tuple[int, int]] = OrderedDict()
        self.holds: dict[tuple[str, ...], int] = {}  # key -> fd, for a block (`_holding`)

    def __del__(self) -> None:
        held = [fd for pin in self.pins.values() for fd in pin] + [*self.holds.values()]
        self.holds.clear()  # a block still open elsewhere must not close them again
        for fd in [fd for fd, _, _ in self.values()] + held:
            with contextlib.suppress(OSError):
                os.close(fd)


def _close_pin(pin: tuple[int, int]) -> None:
    for fd in pin:
        with contextlib.suppress(OSError):
            os.close(fd)


_READ_FDS_MAX = 16
# Records a thread may have in flight at once at full speed; more are reached by path.
_PINS_MAX = 8
_THREAD = threading.local()


def _read_cache() -> _ReadCache:
    cache: _ReadCache | None = getattr(_THREAD, "fds", None)
    if cache is None:
        cache = _THREAD.fds = _ReadCache()
    return cache


def error(key: str, exc: OSError) -> StorageError:
    """A `StorageError` naming `key` (the key at fault) with the readers' one-line reason."""
    if isinstance(exc, StorageError):
        return exc
    return StorageError(key, fsread.problem(exc))

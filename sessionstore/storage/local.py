"""`LocalStorage`: the storage seam over a local directory, through directory fds.

Every operation starts from the root directory (the user's path: followed)
and opens each component of a key below it with `O_NOFOLLOW|O_DIRECTORY`,
relative to the one before; every mkdir, open, link, rename and unlink is
then relative to the last directory's fd. The fds of ancestors are cached
(`local_dirs`) and used again only while their path still names the same
directory (one lstat), so a component swapped for a symlink is refused at
its step and nothing outside the root is ever reached. A prefix `claim`
made is held by fd until the `create` below it that seals it (a record: its
files, then its marker), so a record's writes reach its directory with no
lstat at all, and a swap on the way afterwards cannot redirect them
(`local_dirs` argues why). A symlink, FIFO
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

import contextlib
import functools
import os
import stat
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path

from sessionstore._fs import read as fsread
from sessionstore._fs.atomic import (
    DIR_MODE,
    FILE_MODE,
    AtomicFile,
    build_dir,
    is_temp_name,
)
from sessionstore._fs.tree import remove_tree_at
from sessionstore.errors import StorageError
from sessionstore.storage.base import Listed, check_key, check_names, check_prefix, join
from sessionstore.storage.local_dirs import LocalDirs
from sessionstore.storage.local_dirs import error as _error
from sessionstore.storage.local_files import create_in, lexists, read_in, read_with_stat

__all__ = ["LocalStorage"]


class LocalStorage(LocalDirs):
    """The objects below the directory `root`, keyed by their relative paths.

    `root` is followed if it is a symlink (the user named it) and made, with
    its missing parents, by the first write. Thread-safe; the state kept
    between operations (deferred fsyncs, cached directory fds for reads) is
    in `LocalDirs`, behind locks.

    `store`: the root holds sessions, which appear whole or not at all
    (`publish_dir`). A write below a missing entry of the root (a session
    `rm` removed meanwhile) then raises `FileNotFoundError` naming it rather
    than making a directory with no manifest, which no `rm` would remove, and
    a `create` (a marker, the report) makes no directory: what it seals must be there.
    """

    def __init__(
        self,
        root: str | os.PathLike[str],
        *,
        dir_mode: int = DIR_MODE,
        file_mode: int = FILE_MODE,
        store: bool = False,
    ) -> None:
        super().__init__(Path(root), dir_mode, store=store)
        self.file_mode = file_mode

    def __repr__(self) -> str:
        return f"LocalStorage({str(self.root)!r})"

    # -- the five operations of `Storage`, and `claim` ---------------------------

    def _named(self, key: str, exc: OSError) -> OSError:
        """`exc`, or if it names one of our temps or no file at all, the same error naming
        the key's path: the user never made `.sstmp-...`, and would look for it in vain
        (`Permission denied` on an unwritable store directory, `No such file` when it
        vanished meanwhile); and a write or fsync failing on its fd (`No space left on
        device`, an I/O error) names no file, so the one line said nothing of where."""
        name = exc.filename
        if name is None and exc.errno is not None:
            exc.filename = str(self.root / key)  # the same error (its type, its identity)
        elif isinstance(name, str) and any(map(is_temp_name, name.split(os.sep))):
            return OSError(exc.errno, exc.strerror, str(self.root / key))
        return exc

    @contextlib.contextmanager
    def _naming(self, key: str) -> Iterator[None]:
        """`_named` for a block (the operations that run once per session, not per file)."""
        try:
            yield
        except OSError as exc:
            raise self._named(key, exc) from None

    def create(self, key: str, data: bytes) -> bool:
        """`Storage.create`: the temp linked to the key; the deferred fsyncs around it.

        Below a prefix this thread holds (`claim`), the held fds are used and the
        pin is closed once the key is taken, by us or by a racing writer: the
        prefix is sealed. On an I/O error it stays held, for a retry.
        """
        parts = check_key(key).split("/")
        where = parts[:-1]
        # What was put below this prefix is durable before this appears. First, before
        # an fd of the cache is in use: it walks, and a walk may evict one.
        self._sync_put(where)
        pin = self._pinned(where)
        try:
            if pin is None:
                with self._dir(where, make=not self.store) as parent:
                    if parent is None:
                        raise self._gone(where)
                    made = create_in(parent, parts[-1], data, self.file_mode)
            else:
                made = create_in(pin[0], parts[-1], data, self.file_mode)
        except OSError as exc:
            raise self._named(key, exc) from None
        if made:
            # The directories above that a `claim` made (the record's own entry) last:
            # losing them in a crash loses the whole record, marker included, never a part.
            self._sync_above(where, None if pin is None else pin[1])
        if pin is not None:
            self._unpin(where)
        return made

    def put(self, key: str, data: bytes, *, mode: int | None = None) -> None:
        parts = check_key(key).split("/")
        where = parts[:-1]
        # The cache's fd, not a duplicate: nothing below reads or writes through this storage.
        parent, owned = self._read_fd(where, make=True)
        assert parent is not None
        try:
            mode = self.file_mode if mode is None else mode
            with AtomicFile(parts[-1], mode, sync_dir=False, dir_fd=parent) as f:
                f.write(data)
        except OSError as exc:
            raise self._named(key, exc) from None
        finally:
            if owned:
                os.close(parent)
        with self._lock:
            self._unsynced.add(tuple(where))

    def holding(self, prefix: str) -> contextlib.AbstractContextManager[None]:
        """While the block runs, this thread reads `prefix` and below through one directory
        fd opened now, with no lstat per read; writes still go by the path (`local_dirs`
        argues why that is safe)."""
        return self._holding(check_prefix(prefix).split("/") if prefix else [])

    def get(self, key: str, limit: int) -> bytes | None:
        parts = check_key(key).split("/")
        parent, owned = self._read_fd(parts[:-1])
        if parent is None:
            return None
        try:
            return read_in(parent, parts[-1], limit, tuple(parts[:-1]))
        finally:
            if owned:
                os.close(parent)

    def get_each(
        self, prefix: str, names: Sequence[str], leaf: str, limit: int
    ) -> list[bytes | StorageError | None]:
        """`get` of `prefix/<name>/leaf` for each name; `prefix` is reached once.

        A collection's markers: the collection is opened once (`_read_fd`),
        then per name only the record directory, `O_NOFOLLOW`, relative to it,
        and the marker. A `get` per marker cost a cache check and key handling
        each, which made `inspect` 1.3x slower than the code before the seam.
        """
        return [answer for answer, _ in self.read_each(prefix, names, leaf, limit)]

    def read_each(
        self, prefix: str, names: Sequence[str], leaf: str, limit: int
    ) -> list[tuple[bytes | StorageError | None, list[int] | None]]:
        """`get_each`, each answer with the identity (as `stat_each` gives it) of the file
        it was read from, by `fstat` of the fd read: a name swapped meanwhile for another
        file, or renamed away and back, cannot lend the bytes read another's identity.
        Local only: what the summary index caches a marker under."""
        parts = check_key(prefix, "storage prefix").split("/")
        check_names([*names, leaf])
        try:
            top, owned = self._read_fd(parts)
        except StorageError as exc:  # a directory of `prefix` is unusable: so is every answer
            return [(exc, None)] * len(names)
        if top is None:
            return [(None, None)] * len(names)
        answers: list[tuple[bytes | StorageError | None, list[int] | None]] = []
        try:
            # `read_in` below each name, inline: this loop runs once per marker listed.
            for name in names:
                try:
                    below = fsread.open_dir(name, top)
                except FileNotFoundError:
                    answers.append((None, None))
                    continue
                except OSError as exc:
                    answers.append((_error(f"{prefix}/{name}", exc), None))
                    continue
                try:
                    found = read_with_stat(below, leaf, limit, (prefix, name))
                except StorageError as exc:
                    answers.append((exc, None))
                else:
                    answers.append((None, None) if found is None else (found[0], _ident(found[1])))
                finally:
                    os.close(below)
        finally:
            if owned:
                os.close(top)
        return answers

    def stat_each(self, prefix: str, names: Sequence[str], leaf: str) -> list[list[int] | None]:
        """The identity of `prefix/<name>/leaf` for each name: `[st_dev, st_ino, st_size,
        st_mtime_ns, st_ctime_ns]` of a regular file, None for anything else or nothing.

        Local only: what the summary index (`store.index`) checks a cached marker by,
        one `fstatat` per name below `prefix` reached once. Nothing is opened or read;
        the leaf is never followed (a symlink is no regular file). A record directory
        swapped for a symlink between the listing and this stat is followed by it, but
        a stat reveals no content: only an identity the index already holds can match.
        """
        parts = check_key(prefix, "storage prefix").split("/")
        check_names([*names, leaf])
        if not names:  # an empty collection: its directory is not reached again
            return []
        try:
            top, owned = self._read_fd(parts)
        except StorageError:
            return [None] * len(names)
        if top is None:
            return [None] * len(names)
        found: list[list[int] | None] = []
        try:
            for name in names:
                try:
                    st = os.stat(f"{name}/{leaf}", dir_fd=top, follow_symlinks=False)
                except OSError:
                    found.append(None)
                    continue
                found.append(_ident(st) if stat.S_ISREG(st.st_mode) else None)
        finally:
            if owned:
                os.close(top)
        return found

    def put_cache(self, key: str, data: bytes) -> None:
        """Replace `key` with `data` atomically (a reader sees the old or the new whole) but
        not durably, and only below existing directories (a cache never re-creates a session
        removed meanwhile). Local only: the summary index, which is safe to lose. Raises
        `OSError` (`EACCES`, `EROFS`, `ENOSPC`, a directory at `key`) or `StorageError`,
        with the temp removed.

        Readable by its writer only (0600, as the mirror's cache): it holds what the
        writer could read, and a marker cached there may be one another user cannot.
        """
        parts = check_key(key).split("/")
        with self._naming(key), self._parent(parts, make=False) as parent:
            if parent is None:
                return
            with AtomicFile(parts[-1], 0o600, durable=False, sync_dir=False, dir_fd=parent) as f:
                f.write(data)

    def list(self, prefix: str) -> Iterator[Listed]:
        parts = check_prefix(prefix).split("/") if prefix else []
        fd, owned = self._read_fd(parts)
        if fd is None:
            return iter(())
        try:
            with os.scandir(fd) as it:
                found = [
                    _listed((e.name, e.is_dir(follow_symlinks=False)))
                    for e in it
                    if not is_temp_name(e.name)
                ]
        except OSError as exc:
            raise _error(prefix, exc) from exc
        finally:
            if owned:
                os.close(fd)
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
        before then), which saves a journal commit per record. The new
        directory and its parent stay held by this thread until that `create`.
        """
        parts = check_key(prefix, "storage prefix").split("/")
        parent, owned = self._read_fd(parts[:-1], make=True)
        assert parent is not None
        try:
            made = self._made(parent, parts[-1], sync=False)
        except OSError as exc:
            if owned:
                os.close(parent)
            if isinstance(exc, FileExistsError):
                return False
            raise _error(prefix, exc) from exc
        # Held until sealed, `parent` with it: the record's writes need no lstat of its
        # path (`local_dirs`, where the safety of this is argued).
        self._pin(parts, made, parent, owned)
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
        with self._naming(key), self._parent(parts, make=True) as parent:
            assert parent is not None

            def publish(temp: str) -> None:
                if lexists(parts[-1], parent):
                    raise _Taken
                try:
                    # rename(2) onto an existing non-empty directory fails: no clobbering.
                    os.rename(temp, parts[-1], src_dir_fd=parent, dst_dir_fd=parent)
                except OSError:
                    if lexists(parts[-1], parent):
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


# `Listed(name, is_prefix)` without the named tuple's Python-level `__new__`: a listing
# builds one per record of every session `inspect` shows.
_listed = functools.partial(tuple.__new__, Listed)


def _ident(st: os.stat_result) -> list[int]:
    """A file's identity for the summary index: what changes whenever its bytes may have."""
    return [st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns]


class _Taken(Exception):
    """`publish_dir`: something is at the key already."""

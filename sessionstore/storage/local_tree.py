"""A local directory as a `Tree` (storage/tree.py): reached only through directory fds.

The mirror's destination backend. Nothing outside this module and
`local_tree_dirs` (opening directories and re-validating their chain, where
the design is described) calls `os.*` on a destination path or fd. Here:
the reads, every change (each after `check`), the per-directory fsyncs and
closing.
"""

from __future__ import annotations

import os
from collections.abc import Callable

from sessionstore._fs import read as fsread
from sessionstore._fs.atomic import AtomicFile, publish_once, sweep_tree_at, write_all
from sessionstore._fs.tree import remove_tree_at
from sessionstore.storage import journal
from sessionstore.storage.local_tree_dirs import (
    _OPEN,
    _OPEN_PATH,
    OPEN_DIR,
    UNKNOWN,
    LocalDir,
    describe,
)
from sessionstore.storage.local_tree_jobs import sealed_by
from sessionstore.storage.local_tree_root import LocalRoot
from sessionstore.storage.tree import RecordSealed, Sealed

TYPE_CHECKING = False  # typing's, without importing typing (mypy reads it as such)
if TYPE_CHECKING:
    from sessionstore.storage.local_tree_jobs import Guards
    from sessionstore.storage.tree import Tree, Writer

__all__ = ["OPEN_DIR", "UNKNOWN", "LocalDir", "LocalTree", "describe"]


class LocalTree(LocalRoot):
    """The destination of one pass: `LocalDirs`' directories, `LocalSync`'s fsyncs,
    `LocalRoot`'s own files at the root, and every other read and change."""

    def lstat(self, d: LocalDir, name: str) -> os.stat_result | None:
        """lstat of an entry (None if it, or its directory, is missing or unusable).

        Through `d`'s fd when it is open, else by its path from the root (`verify`).
        """
        fd = d.fd
        if fd is None:
            if not (d.verified or self.verify(d)):
                return None
            fd, name = self.root.fd, f"{d.rel}/{name}" if d.rel else name
            assert fd is not None
        try:
            return os.stat(name, dir_fd=fd, follow_symlinks=False)
        except OSError:
            return None

    def entry(self, d: LocalDir, name: str, key: str) -> os.stat_result | None:
        """The no-op fast path's lstat of `name` in `d`; `key` is its path from the root.

        One call per file of a pass: by name through `d`'s fd when it is open (the
        walk's case: `open_below`), else by `key` from the root's fd once `d` is
        verified.
        """
        try:
            fd = d.fd
            if fd is not None:
                return os.lstat(name, dir_fd=fd)  # lstat: one keyword less to parse
            if d.verified or self.verify(d):
                return os.stat(key, dir_fd=self.root.fd, follow_symlinks=False)
        except OSError:
            pass
        return None

    def open_below(self, parent: LocalDir, d: LocalDir) -> None:
        """Open a directory the walk just entered, by name under its open `parent`.

        Once per directory of a pass, so inline and before any of its files: its
        files are then stat'ed by name through its fd (one path component for the
        kernel, no path string per file), and its subdirectories are opened through
        it in turn. An `O_PATH` open and close cost fewer instructions than the
        `lstat` `verify` makes (no `stat_result`), and each file's stat resolves one
        component instead of its whole path. A directory that cannot be opened
        (missing, a symlink...) is left unknown, for `fd_of` or `verify` to sort out
        (and report) if something below it is asked for.
        """
        if parent.state == _OPEN:  # not one that failed its `check`
            try:
                d.fd = os.open(d.name, _OPEN_PATH, dir_fd=parent.fd)
            except OSError:
                return
            d.state = _OPEN

    def identity(self) -> tuple[int, int]:
        """The (dev, ino) of the open root, so the walk can skip the destination in the source."""
        assert self.root.fd is not None
        own = os.fstat(self.root.fd)
        return own.st_dev, own.st_ino

    # -- changing -------------------------------------------------------------------

    def commit_file(
        self,
        d: LocalDir,
        name: str,
        mode: int,
        fill: Callable[[Writer], None],
        guards: Guards = (),
    ) -> os.stat_result | None:
        """Write `name` in `d` atomically (`fill` writes the bytes); the new file's fstat.

        None, with nothing left behind, when `d` cannot be created or fails its
        check: the chain is checked before the temp is created and again just
        before the rename. Errors of `fill` propagate (the temp is removed).
        Durable: the fsync and the rename happen later (`LocalSync.defer`); a
        failure then is reported for this file and its path put in `failed`.
        A marker of `guards` found just before the rename: `RecordSealed` (durable:
        the path goes in `withheld`, with the record's).
        """
        started = self._start(d, name, mode, fill)
        if started is None:
            return None
        out, written = started
        if self.durable:
            self.defer(d, name, out, marker=False, guards=guards)
            return written
        with out:  # leaving by an exception removes the temp
            if not self.check(d):
                out.discard()
                return None
            sealed = sealed_by(guards)  # the last thing before the rename
            if sealed is not None:
                raise RecordSealed(sealed)
        self._touch(d)
        return written

    def commit_marker(
        self, d: LocalDir, name: str, mode: int, fill: Callable[[Writer], None]
    ) -> os.stat_result | None:
        """`commit_file`, but only if `name` is absent: a record's marker (sealing it).

        The temp is linked to `name` (link(2) fails where a name exists) instead of
        renamed over it, so a record sealed by another writer meanwhile is never
        overwritten: `Sealed` is raised and nothing is left behind. Durable: the
        link waits for the next `flush` (after everything committed before it is
        durable); a record sealed by then, or with a commit below it that failed,
        is left without it, its path in `declined`.
        """
        if self.durable and self.lstat(d, name) is not None:
            raise Sealed(name)
        started = self._start(d, name, mode, fill)
        if started is None:
            return None
        out, written = started
        if self.durable:
            self.defer(d, name, out, marker=True)
            return written
        fd = d.fd
        assert fd is not None
        with out:
            if not self.check(d):
                out.discard()
                return None
            # A temp linked to `name` (or, without hard links, renamed): `discard` then
            # only closes it and removes a temp name that is left.
            published = publish_once(os.path.basename(out.temp), name, fd)
            out.discard()
            if not published:
                raise Sealed(name)
        self._touch(d)
        return written

    def _start(
        self, d: LocalDir, name: str, mode: int, fill: Callable[[Writer], None]
    ) -> tuple[AtomicFile, os.stat_result] | None:
        """A temp for `name` in `d`, filled and claimed, and its fstat; None (nothing
        created) if `d` is unusable.

        The claim (storage/journal.py) is appended to the in-progress flag before the
        temp can take its name, so a pass killed after the rename leaves proof that the
        file is the mirror's. A claim that cannot be written fails the commit.
        """
        fd = self.ensure(d)
        if fd is None or not self.check(d):
            return None
        self.before_change()
        out = AtomicFile(name, mode, durable=self.durable, sync_dir=False, dir_fd=fd)
        try:
            fill(out)
            written = out.stat()
            if self._journal is not None:
                key = f"{d.rel}/{name}" if d.rel else name
                claim = (written.st_size, written.st_mtime_ns, written.st_ino)
                write_all(self._journal, journal.record(key, claim))
        except BaseException:
            out.discard()
            raise
        return out, written

    def reach(self, d: LocalDir, *, quiet: bool = False) -> bool:
        """Whether `d` can be used (opened); a bad one is reported once unless `quiet`."""
        return self.fd_of(d, quiet=quiet) is not None

    def read(self, fd: int, n: int) -> bytes:
        """Up to `n` bytes from a file `open_file` opened (fewer only at its end)."""
        return fsread.read_exactly(fd, n)

    def fstat(self, fd: int) -> os.stat_result:
        """The fstat of a file `open_file` opened."""
        return os.fstat(fd)

    def close_file(self, fd: int) -> None:
        """Close a file `open_file` opened."""
        os.close(fd)

    def unconfirmed(self, d: LocalDir) -> bool:
        """Whether a failure so far keeps a marker in `d` back (`blockers`); never waits.

        Commits still pending are checked again when the marker is linked.
        """
        return self.blockers(d) > 0

    def fchmod(self, d: LocalDir, fd: int, mode: int) -> None:
        if self.check(d):
            self.before_change()
            os.fchmod(fd, mode)

    def unlink(self, d: LocalDir, name: str) -> bool:
        """Remove a file entry; False if `d` failed its check (reported) or it was gone."""
        return self._remove(d, name, os.unlink, FileNotFoundError)

    def rmdir(self, d: LocalDir, name: str) -> bool:
        """Remove a directory entry that holds no file (empty directories below it go
        first: a pass killed before its first commit in them left them); False when it
        holds a file (or anything else)."""
        return self._remove(d, name, _remove_dirs, OSError)

    def _remove(
        self,
        d: LocalDir,
        name: str,
        remove: Callable[..., None],
        expected: type[OSError],
    ) -> bool:
        """`remove(name, dir_fd=...)` in `d` after its check; False on an `expected` error."""
        fd = self.fd_of(d)
        if fd is None or not self.check(d):
            return False
        self.before_change()
        try:
            remove(name, dir_fd=fd)
        except expected:
            return False
        self._touch(d)
        return True

    def sweep(self) -> bool:
        """After an interrupted pass: remove dead temps anywhere in the destination.

        The whole tree, not only what this pass will walk: a killed pass's temp may
        sit in a directory the source has since lost or now excludes, which no walk
        reaches again. False (each problem reported) when some directory could not be
        swept, so the in-progress flag stays for the next pass.
        """
        root = self.root
        if not self.check(root):
            return False
        assert root.fd is not None
        try:
            top = os.open(".", fsread.DIR_FLAGS, dir_fd=root.fd)  # root.fd is O_PATH
            try:
                problems = sweep_tree_at(top, durable=self.durable)
            finally:
                os.close(top)
        except OSError as exc:
            problems = [(".", describe(exc))]
        for where, problem in problems:
            self.error(where, f"cannot sweep temp files: {problem}")
        return not problems


if TYPE_CHECKING:  # LocalTree is a Tree: checked by mypy, costs nothing at run time
    _check: type[Tree[LocalDir]] = LocalTree


def _remove_dirs(name: str, *, dir_fd: int) -> None:
    remove_tree_at(dir_fd, name, dirs_only=True)

"""What the fsync pool of a durable local pass runs (`local_tree_sync`): one `Job` each.

A file's job fsyncs its temp and, if the file's directory is still where the
walk found it (`in_place`) and no record the file is in has its marker now
(`sealed_by`), renames it into place; a marker's job only
fsyncs (the caller links it later); a directory's job fsyncs the directory.
A job runs in a pool thread and touches nothing of the pass but its own
temp: the bookkeeping is the caller's, when the job comes back.
"""

from __future__ import annotations

import errno
import os
import stat

from sessionstore._fs.atomic import fsync_dir
from sessionstore.storage.local_tree_dirs import _OPEN, LocalDir

TYPE_CHECKING = False  # typing's, without importing typing (mypy reads it as such)
if TYPE_CHECKING:
    from collections.abc import Sequence

    from sessionstore._fs.atomic import AtomicFile

    Guards = Sequence[tuple[LocalDir, str]]  # (directory, marker name) of each record

FILE, MARKER, DIR = range(3)


class Job:
    """One thing for the pool: a temp file's fsync (and a file's rename), or a directory's."""

    __slots__ = (
        "close", "d", "error", "fd", "guards", "kind", "moved", "name", "out", "root", "sealed",
    )  # fmt: skip

    def __init__(
        self, kind: int, d: LocalDir, name: str, out: AtomicFile | None, fd: int = -1
    ) -> None:
        self.kind = kind
        self.d = d
        self.name = name
        self.out = out
        self.fd = fd  # a directory job's fd (an `O_PATH` one is reopened to be fsynced)
        self.close = False  # ... which the job closes once fsynced
        self.root: LocalDir | None = None  # a file job's: its chain is checked up to there
        self.moved = False  # the file's directory was not in place: not renamed
        # A file job's records (their directory and marker name) and, if one of those
        # markers was found just before the rename, that record's path: not renamed.
        self.guards: Guards = ()
        self.sealed: str | None = None
        self.error: Exception | None = None

    @property
    def rel(self) -> str:
        return f"{self.d.rel}/{self.name}" if self.d.rel else self.name

    def work(self) -> None:
        """In a pool thread: the fsync; for a file, then its rename if its directory is in place."""
        out = self.out
        if out is None:
            try:
                fsync_dir(".", dir_fd=self.fd)
            finally:
                if self.close:
                    os.close(self.fd)
            return
        out.sync()
        if self.root is not None:
            if not in_place(self.d, self.root):
                self.moved = True
                return
            self.rename()

    def rename(self) -> None:
        """A file's rename (fsynced already), unless a record of `guards` has its marker
        now: then `sealed` names it and the temp is left to the caller (to discard).

        The look is the last thing before the rename: a record sealed by another
        writer until then keeps its file. A failed rename removes the temp; a failed
        look (`OSError`) leaves it to the caller too.
        """
        assert self.out is not None
        self.sealed = sealed_by(self.guards)
        if self.sealed is None:
            self.out.commit()


def sealed_by(guards: Guards) -> str | None:
    """The first record of `guards` whose marker is in its directory now, else None.

    Reads only, through each record directory's fd (held open while a commit below
    it is pending), the marker's name not followed: safe in a pool thread. Any
    error but the marker's absence propagates (the commit is not made).
    """
    for record, marker in guards:
        fd = record.fd
        if fd is None:  # closed: the pass unwinds; nothing is committed below it
            raise OSError(errno.EBADF, "the record's directory was closed")
        try:
            found = os.stat(marker, dir_fd=fd, follow_symlinks=False)
        except FileNotFoundError:
            continue
        if seals(found):
            return record.rel
    return None


def seals(st: os.stat_result | None) -> bool:
    """Whether the entry at a record's marker name (its lstat) seals the record.

    Anything there does, but a directory: a record whose source holds a directory of
    that name gets one from the mirror itself, and a marker can never be linked where
    it is, so it would otherwise seal its own record, unsealable and half copied
    (readers call the record torn either way: format.md).
    """
    return st is not None and not stat.S_ISDIR(st.st_mode)


def in_place(d: LocalDir, root: LocalDir) -> bool:
    """`LocalDirs.check` without its side effects, for a pool thread: `d`'s chain in place?

    Reads only (the fds on the chain are held open by the pending commit, and
    each directory's identity was taken by the `check` before its temp was
    created); a directory found moved is left to `check`, in the caller's
    thread, to report and mark.
    """
    node = d
    while node.parent is not None:
        if node.state != _OPEN or node.ident is None:
            return False
        parent_fd = node.parent.fd
        if parent_fd is None:
            return False
        try:
            here = os.stat(node.name, dir_fd=parent_fd, follow_symlinks=False)
        except OSError:
            return False
        if (here.st_dev, here.st_ino) != node.ident:
            return False
        if node is root:
            break
        node = node.parent
    return True

"""What the fsync pool of a durable local pass runs (`local_tree_sync`): one `Job` each.

A file's job fsyncs its temp and, if the file's directory is still where the
walk found it (`in_place`), renames it into place; a marker's job only
fsyncs (the caller links it later); a directory's job fsyncs the directory.
A job runs in a pool thread and touches nothing of the pass but its own
temp: the bookkeeping is the caller's, when the job comes back.
"""

from __future__ import annotations

import os

from sessionstore._fs.atomic import fsync_dir
from sessionstore.storage.local_tree_dirs import _OPEN, LocalDir

TYPE_CHECKING = False  # typing's, without importing typing (mypy reads it as such)
if TYPE_CHECKING:
    from sessionstore._fs.atomic import AtomicFile

FILE, MARKER, DIR = range(3)


class Job:
    """One thing for the pool: a temp file's fsync (and a file's rename), or a directory's."""

    __slots__ = ("close", "d", "error", "fd", "kind", "moved", "name", "out", "root")

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
            if in_place(self.d, self.root):
                out.commit()  # fsynced already: only the rename (the temp is removed on failure)
            else:
                self.moved = True


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

"""A new directory tree written through directory fds: what `build_dir`'s callback builds
when the tree is a copy (a lineage session, an export).

Nothing below the staging root is made or opened by path, so a staging
directory swapped for a symlink by another process mid-copy redirects no write.
"""

from __future__ import annotations

import contextlib
import os

from sessionstore._fs import read as fsread
from sessionstore._fs.atomic import DIR_MODE
from sessionstore.errors import InvalidInput


class StagingTree:
    """A new directory tree written by directory fd (a `build_dir` being built: a lineage
    copy, an export), its files in a walk's depth-first order; nothing is made by path.

    Only the chain of directories the last file went into is held open (one
    fd a level, never one per record): a directory the walk has left is
    fsynced (its entries are all made) and closed, as `finish` does for the
    rest, so every entry is durable before the tree is published.
    """

    def __init__(self, root_fd: int) -> None:
        self.root_fd = root_fd
        self.chain: dict[str, int] = {}

    def dir_fd(self, rel_dir: str) -> int:
        """The fd of `rel_dir` below the root, made on first use."""
        if not rel_dir:
            self._leave("")
            return self.root_fd
        if rel_dir in self.chain:
            self._leave(rel_dir)
            return self.chain[rel_dir]
        parent, _, name = rel_dir.rpartition("/")
        if name in ("", ".", ".."):  # `..` is a directory outside the tree (a bucket's key)
            raise InvalidInput(rel_dir, "has an empty, '.' or '..' component")
        parent_fd = self.dir_fd(parent)
        with contextlib.suppress(FileExistsError):  # made earlier in this copy (the walk came back)
            os.mkdir(name, DIR_MODE, dir_fd=parent_fd)
        fd = fsread.open_dir(name, parent_fd)
        self.chain[rel_dir] = fd
        try:
            os.fchmod(fd, DIR_MODE)  # mkdir honours the umask; the mode is part of the format
        except BaseException:
            self.close()
            raise
        return fd

    def _leave(self, keep: str) -> None:
        """fsync and close every open directory that is not `keep` or one of its ancestors."""
        for rel in sorted(self.chain, key=len, reverse=True):
            if keep != rel and not keep.startswith(rel + "/"):
                fd = self.chain.pop(rel)
                try:
                    os.fsync(fd)
                finally:
                    os.close(fd)

    def finish(self) -> None:
        """fsync every directory still open, deepest first (`build_dir` syncs the root)."""
        self._leave("")

    def close(self) -> None:
        """Close what is open without syncing (on failure)."""
        for fd in self.chain.values():
            os.close(fd)
        self.chain = {}

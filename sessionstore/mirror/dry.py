"""A dry run's destination: `DryTree`, a `LocalTree` that reads and never writes.

`Mirror.run_once(dry_run=True)` walks with this tree instead of `LocalTree`.
Every read is the real one (so a pass decides exactly as it would), and
every change is answered as if it had succeeded without touching anything:
no directory is created (not even a missing destination root), no temp,
file, marker, mode, cache, in-progress flag or sweep. A directory the pass
would create is *virtual*: marked `created` and missing, so everything below
it reads as absent, as it would be in a new directory.

What a dry run cannot know: whether an emptied directory would be removed by
`--delete` (it answers no), and what a concurrent writer does meanwhile.
"""

from __future__ import annotations

import errno
import os
import stat
from collections.abc import Callable, Sequence
from typing import cast

from sessionstore._fs.atomic import AtomicFile
from sessionstore.storage.dry import Count, DryChanges
from sessionstore.storage.local_tree import LocalDir, LocalTree
from sessionstore.storage.local_tree_dirs import _MISSING, _OPEN


class DryTree(DryChanges, LocalTree):
    """`LocalTree` with every change replaced by its answer; see the module docstring."""

    root_missing = False  # the destination root (or a directory above it) does not exist

    def _make(self, d: LocalDir, *, flag: bool = True) -> int | None:
        # The one place `LocalDirs` creates a directory (the root's missing components
        # and `ensure`): in a dry run it only becomes virtual.
        d.created = True
        d.state = _MISSING
        if d is self.root or d.rel == ".":  # "." : the root's ancestors
            self.root_missing = True
        return None

    def open_root(self, path: str, *, create: bool = True) -> bool:
        """Open the destination root if it exists; a missing one is virtual (would be created)."""
        if super().open_root(path, create=create):
            return True
        if not self.root_missing:
            return False  # unusable (a symlink, a non-directory): reported
        root = self.root
        root.fd, root.state, root.created = None, _MISSING, True
        return True

    def identity(self) -> tuple[int, int]:
        return (-1, -1) if self.root.fd is None else super().identity()

    def present(self, d: LocalDir) -> bool:
        """Whether `d` is, or would be created as, a directory (its missing parents too)."""
        if d.fd is not None or d.verified or self.verify(d) or self.fd_of(d) is not None:
            return True
        missing: list[LocalDir] = []
        node: LocalDir | None = d
        while node is not None and node.state == _MISSING:
            missing.append(node)
            node = node.parent
        if node is not None and node.state != _OPEN and not node.verified:
            return False  # below a symlink or a non-directory: nothing would be written there
        for each in missing:
            each.created = True
        return True

    def commit_file(
        self,
        d: LocalDir,
        name: str,
        mode: int,
        fill: Callable[[AtomicFile], None],
        guards: Sequence[tuple[LocalDir, str]] = (),
    ) -> os.stat_result | None:
        """Run `fill` (it reads the source through the torn-read guard) into nothing.

        `guards` are not looked at: the pass found those records unsealed, and a
        record sealed since is what a concurrent writer does (not predicted).
        """
        if not self.present(d):
            return None
        sink = Count()
        fill(cast(AtomicFile, sink))  # `fill` only ever calls `write`
        found = self.lstat(d, name)
        if found is not None and stat.S_ISDIR(found.st_mode):  # the real rename fails so
            raise IsADirectoryError(errno.EISDIR, os.strerror(errno.EISDIR))
        return os.stat_result((stat.S_IFREG | mode, 0, 0, 1, 0, 0, sink.size, 0, 0, 0))

"""Destination directories opened along sorted paths, for the end of a pass (`finish`).

The leftovers of the change cache and the claims of an interrupted pass are
settled in sorted order: `Walker` keeps one fd per level of the current path
(never a path string), knows which sealed record each level is in, and
removes directories that `--delete` emptied when it leaves them.
"""

from __future__ import annotations

from collections.abc import Container

from sessionstore.format.names import MARKERS, record_number
from sessionstore.storage.local_tree import LocalDir
from sessionstore.storage.local_tree_jobs import seals

TYPE_CHECKING = False  # typing's, without importing typing (mypy reads it as such)
if TYPE_CHECKING:
    from sessionstore.mirror.walk import Pass
    from sessionstore.storage.trees import DestTree

# Directories at the top of a session that the store creates; never removed when emptied.
_STORE_DIRS = frozenset(MARKERS)


def is_gone(rel: str, listed: dict[str, Container[str]], not_dirs: Container[str] = ()) -> bool:
    """Whether this pass's listings prove `rel` is no longer in the source.

    A directory on the path that was not listed proves nothing either way; a
    deeper one may have been (a subset pass lists only its subtrees). A name on
    the path that the source holds as a file (`not_dirs`, the pass found a
    directory in its place in the destination) has nothing below it.
    """
    where = ""
    for part in rel.split("/"):
        names = listed.get(where)
        if (names is not None and part not in names) or where in not_dirs:
            return True
        where = f"{where}/{part}" if where else part
    return False


class Level:
    """One open destination directory on the current path, and what it knows."""

    __slots__ = ("dir", "emptied", "sealed")

    def __init__(self, d: LocalDir, sealed: str | None) -> None:
        self.dir = d
        self.sealed = sealed  # the sealed record this directory is in, if any
        self.emptied = False  # something below it was deleted


class Walker:
    """Opens destination directories along sorted paths, closing (and maybe removing) on the way."""

    def __init__(self, run: Pass, delete: bool, listed: dict[str, Container[str]]) -> None:
        self.run = run
        self.tree: DestTree = run.tree
        self.delete = delete
        self.listed = listed
        self.stack = [Level(self.tree.root, None)]

    def to(self, rel: str) -> Level | None:
        """The open level for destination directory `rel` ("" the root); None if not there."""
        parts = rel.split("/") if rel else []
        while len(self.stack) > len(parts) + 1 or not self._on_path(parts):
            self.pop()
        for part in parts[len(self.stack) - 1 :]:
            top = self.stack[-1]
            here = f"{top.dir.rel}/{part}" if top.dir.rel else part
            d = LocalDir(top.dir, part, here)
            if not self.tree.reach(d, quiet=True):
                return None
            self.stack.append(Level(d, top.sealed or self._sealed_record(d)))
        return self.stack[-1]

    def sealed_now(self) -> str | None:
        """`to`'s question asked again just before a deletion: a record on the path sealed
        since it was opened, whose levels from there down are then known sealed."""
        for i, level in enumerate(self.stack):
            sealed = level.sealed or self._sealed_record(level.dir)
            if sealed is not None:
                for below in self.stack[i:]:
                    below.sealed = sealed
                return sealed
        return None

    def _on_path(self, parts: list[str]) -> bool:
        depth = len(self.stack) - 1
        rel = "/".join(parts[:depth])
        return self.stack[-1].dir.rel == rel

    def _sealed_record(self, d: LocalDir) -> str | None:
        parent = d.parent
        if parent is None or parent.name not in MARKERS or record_number(d.name) is None:
            return None
        marker = self.run.name(MARKERS[parent.name])
        return d.rel if seals(self.tree.lstat(d, marker)) else None

    def pop(self) -> None:
        level = self.stack.pop()
        d = level.dir
        self.tree.close(d)
        parent = self.stack[-1]
        if level.emptied and self._removable(level) and self.tree.rmdir(parent.dir, d.name):
            parent.emptied = True

    def _removable(self, level: Level) -> bool:
        rel = level.dir.rel
        if level.sealed or (self.run.is_session and rel in _STORE_DIRS):
            return False
        not_dirs = self.run.not_dirs
        return rel in not_dirs or is_gone(rel, self.listed, not_dirs)

    def close(self) -> None:
        while len(self.stack) > 1:
            self.pop()

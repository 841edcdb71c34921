"""One directory being walked by a mirror pass (`walk.Pass`): the `Frame`, and the depth bound."""

from __future__ import annotations

import os
from collections.abc import Collection, Iterator

from sessionstore.format.names import MARKERS, record_number
from sessionstore.mirror.cache_group import Group
from sessionstore.storage.local_tree import UNKNOWN, LocalDir

# Directory levels below the root a pass walks. Two fds per level (source and
# destination): 256 levels stay well inside the usual 1024-fd limit, and no real
# workspace nests that deep (a runaway `mkdir -p` does).
MAX_DEPTH = 256

Child = tuple[os.DirEntry[str], str, str]  # (source entry, destination name, destination rel)


class Frame(LocalDir):
    """One directory being walked: a destination node that also holds the source side.

    One object per level (not a frame plus a node), with slots all set in
    `__init__`: the no-op pass creates one per directory, and reading a
    class-level default (as it did) takes the interpreter's slow path.
    """

    __slots__ = (
        "cached",
        "entered",
        "entries",
        "files",
        "held",
        "listing",
        "parent_name",
        "pending",
        "record",
        "same",
        "sealed",
        "src_fd",
        "src_name",
        "subdirs",
        "up",
    )

    def __init__(
        self,
        dest_parent: LocalDir | None,
        dname: str,
        rel: str,
        src_fd: int,
        src_name: str | None,
        parent_name: str | None,
        up: Frame | None,
    ) -> None:
        # LocalDir.__init__, inline: once per directory of a pass.
        self.parent, self.name, self.rel = dest_parent, dname, rel
        self.fd: int | None = None
        self.state = UNKNOWN
        self.ident: tuple[int, int] | None = None
        self.created = self.touched = self.verified = False
        self.held: Child | None = None  # the marker, kept for last
        self.files = self.pending = self.same = self.entered = 0
        # The destination names its source listing accounts for, until `leave` keeps or
        # drops them (`Pass.listings`); `entered` counts the subdirectories entered.
        self.listing: Collection[str] = ()
        # The change cache's group for this directory (parsed by `open_group`, only read)
        # and the one this pass makes; `same` counts the files `unchanged` vouched for.
        self.cached: Group = _NO_GROUP
        self.entries: Group = {}
        self.sealed: bool | None = None  # record frames: is the marker in the destination?
        self.subdirs: Iterator[Child] = _NO_CHILDREN
        self.src_fd = src_fd
        self.src_name = src_name  # None only for the source root, whose fd is the pass's
        self.parent_name = parent_name
        self.up = up  # the frame of the parent directory (None at the top of a walk)
        # The nearest record at or above (for sealing).
        if parent_name in MARKERS and record_number(src_name or "") is not None:
            self.record: Frame | None = self
        else:
            self.record = up.record if up else None


_NO_GROUP: Group = {}  # never written: `cached` is only read
_NO_CHILDREN: Iterator[Child] = iter(())  # exhausted: shared by every frame until `enter`

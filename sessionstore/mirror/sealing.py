"""Whether a file of a mirror pass is in a sealed record, asked when the walk enters the
record and again just before each change in it.

`Sealing` is a base of `sync.FileOps` (so of `walk.Pass`). The walk asks once
per record (`sealed`, cached on the record's frame); another writer may seal it
later in the pass, so each change in a record asks again at the last moment: a
commit hands the tree the record's marker names (`guards`: looked for just
before the rename), a chmod in place asks `sealed_now`. A file the tree did
not commit for that is a difference from a sealed record: diverged
(`sealed_meanwhile`), as `check_sealed` reports one.
"""

from __future__ import annotations

from sessionstore.format.names import MARKERS
from sessionstore.storage.local_tree_jobs import seals

TYPE_CHECKING = False  # typing's, without importing typing (mypy reads it as such)
if TYPE_CHECKING:
    from collections.abc import Callable

    from sessionstore.mirror.frame import Frame
    from sessionstore.storage.trees import DestTree


class Sealing:
    """The pass's questions about sealed records (see the module docstring)."""

    # Provided by the pass.
    tree: DestTree
    diverged: dict[str, list[str]]  # sealed record -> files that differ
    name: Callable[[str], str]  # source name -> destination name

    def sealed(self, frame: Frame) -> Frame | None:
        """The sealed record `frame` is in (its marker is in the destination), if any."""
        record = frame.record
        while record is not None:
            if record.sealed is None:
                assert record.parent_name is not None
                marker = self.name(MARKERS[record.parent_name])
                record.sealed = seals(self.tree.lstat(record, marker))
            if record.sealed:
                return record
            record = record.up.record if record.up else None
        return None

    def guards(self, frame: Frame) -> tuple[tuple[Frame, str], ...]:
        """(directory, marker name) of each record `frame` is in, innermost first."""
        found = []
        record = frame.record
        while record is not None:
            assert record.parent_name is not None
            found.append((record, self.name(MARKERS[record.parent_name])))
            record = record.up.record if record.up else None
        return tuple(found)

    def sealed_now(self, frame: Frame) -> str | None:
        """The record `frame` is in whose marker is in the destination now, else None.

        Asked again just before a change in place (`compare`'s chmod): `sealed` asked
        once, when the walk entered the record.
        """
        for record, marker in self.guards(frame):
            if seals(self.tree.lstat(record, marker)):
                record.sealed = True
                return record.rel
        return None

    def sealed_meanwhile(self, frame: Frame, record: str, drel: str) -> None:
        """A file not committed because `record` was sealed after the walk entered it:
        a difference from a sealed record, reported as diverged (`check_sealed`)."""
        for each, _marker in self.guards(frame):
            if each.rel == record:
                each.sealed = True  # its other files are only compared from now on
        self.diverged.setdefault(record, []).append(drel)

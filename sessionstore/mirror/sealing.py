"""Whether a file of a mirror pass is in a sealed record.

`Sealing` is a base of `sync.FileOps` (so of `walk.Pass`). The walk asks once
per record (`sealed`, cached on the record's frame).
"""

from __future__ import annotations

from sessionstore.format.names import MARKERS

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
                record.sealed = self.tree.lstat(record, marker) is not None
            if record.sealed:
                return record
            record = record.up.record if record.up else None
        return None

"""A dry run's bucket destination: `S3DryTree`, an `S3Tree` that reads and never writes.

`mirror --dry-run` into `s3://...` walks with this tree, as a local dry run
walks with `mirror.dry.DryTree`. Every read is the real one (the LIST of
the prefix, the GET of the index, the GETs that compare a file whose index
entry does not vouch for it), so the pass decides exactly as it would; every
change is answered as if it had succeeded and sends nothing: no PUT, no
multipart upload, no conditional create of a marker, no DELETE, no index, no
in-progress flag, no sweep of incomplete uploads. Its `S3Dest` is opened
without the probe (`probe=False`), which writes, so a dry run cannot tell a
server that ignores `If-None-Match: *`: the real pass refuses it.

What a dry run cannot know: what a concurrent writer does meanwhile (a
marker another mirror seals before the real pass is held back then).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence

from sessionstore.storage.dry import Count, DryChanges
from sessionstore.storage.local_tree_dirs import LocalDir
from sessionstore.storage.s3_tree import S3Tree
from sessionstore.storage.s3_tree_io import object_key, object_stat

TYPE_CHECKING = False  # typing's, without importing typing (mypy reads it as such)
if TYPE_CHECKING:
    from sessionstore.storage.tree import Writer

__all__ = ["S3DryTree"]


class S3DryTree(DryChanges, S3Tree):
    """`S3Tree` with every change replaced by its answer; see the module docstring."""

    def commit_file(
        self,
        d: LocalDir,
        name: str,
        mode: int,
        fill: Callable[[Writer], None],
        guards: Sequence[tuple[LocalDir, str]] = (),
    ) -> os.stat_result | None:
        """Run `fill` (it reads the source through the torn-read guard) into nothing."""
        object_key(self.dest, f"{d.rel}/{name}" if d.rel else name)  # refused as for real
        sink = Count()
        fill(sink)
        return object_stat(sink.size, None)

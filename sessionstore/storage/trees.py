"""The one place a mirror's destination `Tree` is made: a local directory or a bucket prefix.

The mirror's walk and its lock ask here; only an `s3://` destination imports
the S3 tree (and obstore).
"""

from __future__ import annotations

from collections.abc import Callable

from sessionstore.storage.local_tree import LocalDir, LocalTree
from sessionstore.storage.tree import ErrorSink

TYPE_CHECKING = False  # typing's, without importing typing (mypy reads it as such)
if TYPE_CHECKING:
    from typing import TypeAlias

    from sessionstore.storage.s3_tree import S3Tree
    from sessionstore.storage.s3_tree_io import S3Dest

DestTree: TypeAlias = "LocalTree | S3Tree"


def make_tree(
    remote: S3Dest | None,
    root: LocalDir,
    error: ErrorSink,
    before_change: Callable[[], None],
    durable: bool,
    dry_run: bool = False,
) -> DestTree:
    """The tree of one pass: `remote`'s prefix when given, else the local directory.

    `dry_run`: a bucket's tree that reads and never writes (`s3_dry`); a local
    dry run's tree is the mirror's own (`mirror.dry.DryTree`).
    """
    if remote is None:
        return LocalTree(root, error, before_change, durable)
    if dry_run:
        from sessionstore.storage.s3_dry import S3DryTree

        return S3DryTree(remote, root, error, before_change, durable)
    from sessionstore.storage.s3_tree import S3Tree

    return S3Tree(remote, root, error, before_change, durable)

"""An `s3://` mirror destination named on the command line: a URL, or an id in an s3 store.

`mirror SRC s3://BUCKET/PREFIX/ID` mirrors into that prefix (a session of
the store `s3://BUCKET/PREFIX` when it holds `session.json`);
`mirror SRC ID --store s3://BUCKET/PREFIX` (or `SESSIONSTORE_HOME`) into the
session ID of that store, which must exist. Imported only for those.
"""

from __future__ import annotations

from sessionstore.errors import InvalidId
from sessionstore.format.names import MANIFEST, validate_id
from sessionstore.storage.s3_config import is_s3_url, parse_s3_url
from sessionstore.storage.s3_tree_io import S3Dest

__all__ = ["remote_store", "resolve_remote"]

_MANIFEST_LIMIT = 1 << 20


def remote_store(store: str) -> str | None:
    """The `s3://` store a --store value (or `$SESSIONSTORE_HOME`) names, else None."""
    return store if is_s3_url(store) else None


def resolve_remote(dst: str, store: str | None, *, probe: bool = True) -> S3Dest | None:
    """The bucket destination DST names: an `s3://` URL, or a session of the s3 `store`.

    None when DST is neither (a local path, then). Raises `StorageError` when
    the bucket cannot be used, `InvalidInput` for a malformed URL. `probe`
    False (a dry run) opens it without the probe, which writes.
    """
    if is_s3_url(dst):
        return S3Dest(parse_s3_url(dst), probe=probe)
    if store is None:
        return None
    try:
        validate_id(dst)
    except InvalidId:
        return None
    dest = S3Dest(parse_s3_url(f"{parse_s3_url(store)}/{dst}"), probe=probe)
    return dest if dest.get(MANIFEST, _MANIFEST_LIMIT) is not None else None

"""An `s3://` mirror destination named on the command line: a URL, or an id in an s3 store.

`mirror SRC s3://BUCKET/PREFIX/ID` mirrors into that prefix (a session of
the store `s3://BUCKET/PREFIX` when it holds `session.json`);
`mirror SRC ID --store s3://BUCKET/PREFIX` (or `SESSIONSTORE_HOME`) into the
session ID of that store, which must exist (or DST is the start of exactly one
id of it, as a TARGET). Imported only for those.
"""

from __future__ import annotations

from sessionstore.errors import AmbiguousTarget, InvalidId
from sessionstore.format.names import MANIFEST, is_id, validate_id
from sessionstore.storage.s3 import S3Storage
from sessionstore.storage.s3_config import is_s3_url, parse_s3_url
from sessionstore.storage.s3_tree_io import S3Dest

__all__ = ["remote_store", "resolve_remote"]

_MANIFEST_LIMIT = 1 << 20


def remote_store(store: str) -> str | None:
    """The `s3://` store a --store value (or `$SESSIONSTORE_HOME`) names, else None."""
    return store if is_s3_url(store) else None


def resolve_remote(dst: str, store: str | None, *, probe: bool = True) -> S3Dest | None:
    """The bucket destination DST names: an `s3://` URL, or a session of the s3 `store`
    (its id, else the start of exactly one id of the store, as a TARGET).

    None when DST is neither (a local path, then). Raises `AmbiguousTarget`
    when DST starts several ids, `StorageError` when the bucket cannot be
    used, `InvalidInput` for a malformed URL. `probe` False (a dry run) opens
    it without the probe, which writes.
    """
    if is_s3_url(dst):
        return S3Dest(parse_s3_url(dst), probe=probe)
    if store is None:
        return None
    try:
        validate_id(dst)
    except InvalidId:
        return None
    store_url = parse_s3_url(store)
    dest = S3Dest(parse_s3_url(f"{store_url}/{dst}"), probe=False)
    if dest.get(MANIFEST, _MANIFEST_LIMIT) is None:
        found = S3Storage(store_url, dest.settings).prefixes_holding(dst, MANIFEST)
        found = [name for name in found if is_id(name)]
        if len(found) > 1:
            raise AmbiguousTarget(dst, store_url.path(), found)
        if not found:
            return None
        dest = S3Dest(parse_s3_url(f"{store_url}/{found[0]}"), dest.settings, probe=False)
    if probe:
        dest.check_server()
    return dest

"""One attempt of a conditional create (`PutObject` with `If-None-Match: *`), and what its
failure means: taken, a concurrent create (409), or an answer lost (retry, then resolve);
and the conditional replace (`If-Match`) that takes over a crashed create's debris.

`S3Storage._create_once` retries these; kept apart so the storage module stays one read.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

import obstore
from obstore import exceptions as oe

from sessionstore.storage.s3_config import STATUS

if TYPE_CHECKING:
    from sessionstore.storage.s3 import S3Storage

__all__ = ["Conflict", "Lost", "put_if_absent", "refuses_stale_match", "replace_if"]


class Lost(Exception):
    """A conditional write whose answer was lost: it may or may not have landed. `cause`:
    the client's exception (`put_if_absent`) or the storage's one-line error."""

    def __init__(self, cause: Any) -> None:
        self.cause = cause


class Conflict(Exception):
    """409 ConditionalRequestConflict: a concurrent create of the key; try it again."""


def put_if_absent(client: Any, key: str, data: bytes) -> None:
    """PUT `data` at the bucket key `key` only if absent: `oe.AlreadyExistsError` if taken,
    `Conflict` (409), `Lost` (no answer or a 5xx), else the client's own exception."""
    try:
        obstore.put(client, key, data, mode="create", use_multipart=False)
    except oe.AlreadyExistsError as exc:
        # obstore reports 409 ConditionalRequestConflict as "exists" too; it is not.
        if _kind(exc) == "conflict":
            raise Conflict from None
        raise
    except Exception as exc:
        kind = _kind(exc)
        if kind == "conflict":
            raise Conflict from None
        if kind == "lost":
            raise Lost(exc) from None
        raise


def replace_if(
    storage: S3Storage, key: str, data: bytes, *, older: float = 0.0, holding: bytes | None = None
) -> bool:
    """PUT `data` at the store's `key` if the object there was last written more than
    `older` seconds ago and (with `holding`) holds exactly those bytes, and is still that
    object when the PUT arrives (`If-Match` on the ETag read with it): of two writers
    replacing one stale object at once, only one does. False if it is absent, younger,
    another, or replaced meanwhile; `StorageError` (one line) on a failure."""
    bucket_key = storage.url.key(key)
    try:
        if holding is None:
            meta = obstore.head(storage._store, bucket_key)
        else:
            got = obstore.get(storage._store, bucket_key)
            start, end = got.range
            if end - start != len(holding) or bytes(got.bytes()) != holding:
                return False
            meta = got.meta
        if time.time() - meta["last_modified"].timestamp() < older:
            return False
        obstore.put(storage._once, bucket_key, data, mode={"e_tag": meta["e_tag"]})
    except (oe.PreconditionError, oe.NotFoundError, FileNotFoundError):
        return False
    except Exception as exc:
        raise storage._error(exc, key) from None
    return True


def refuses_stale_match(storage: S3Storage, key: str) -> bool:
    """Whether the server refuses (412) a PUT of the store's existing `key` with `If-Match`
    on an ETag it does not have: the probe's question (`S3Storage.probe_conditional`)."""
    try:
        obstore.put(storage._once, storage.url.key(key), b"3", mode={"e_tag": '"0"'})
    except oe.PreconditionError:
        return True
    except Exception as exc:
        raise storage._error(exc, key) from None
    return False


def _kind(exc: Any) -> str:
    """ "conflict" (409), "lost" (no answer, or a 5xx: the request may have landed: a
    dropped connection, a timeout, a refused connection) or "error" (an answer that says
    no: retrying would not help)."""
    status = STATUS.search(str(exc))
    code = int(status.group(1)) if status else None
    if code == 409:
        return "conflict"
    if isinstance(exc, oe.PermissionDeniedError | oe.UnauthenticatedError | FileNotFoundError):
        return "error"
    # A refused connection never sent the request: still safe to call lost (a retry
    # resolves it), and it is how an unreachable endpoint is retried a few times.
    return "lost" if code is None or code >= 500 else "error"

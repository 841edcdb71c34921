"""What the engine does differently on an `s3://` store: it has no directories or renames.

A session there is its prefix with a `session.json`; a prefix without one is
no session (an object store cannot tell an empty directory). It is created
without a rename by two conditional creates: `constraints.json` first, which
decides which of two writers racing for one id goes on (the other gets
`SessionExists`, nothing of its own written), then the manifest, which makes
the session visible, last. A `constraints.json` without a manifest is a
create in progress, or one that crashed; older than the format's debris age
(an hour, as for temp entries) it is removed and the id taken again. The
lineage copies of `previous` sessions (`store.lineage_remote`) are made in
between, so a session is never seen with a partial `previous/`.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator, Sequence
from typing import TYPE_CHECKING, Any, TypeVar

from sessionstore import _json as jsonio
from sessionstore.format.names import CONSTRAINTS, MANIFEST, REPORT, SERVICE, TRIALS
from sessionstore.storage.local import LocalStorage

if TYPE_CHECKING:
    from sessionstore.storage.base import Storage
    from sessionstore.storage.s3 import S3Storage
    from sessionstore.store.session import Session

__all__ = ["DEBRIS_AGE", "create_session", "each", "read_ahead"]

DEBRIS_AGE = 3600.0
# Sessions read at once from an object store: each is a few round trips, not CPU, and its
# markers are fetched on the storage's own pool besides.
_SESSION_THREADS = 8

T = TypeVar("T")
R = TypeVar("R")


def each(
    storage: Storage, func: Callable[[T], R], items: Sequence[T], *, json: bool = False
) -> Iterator[R]:
    """`func` of each item, in order, as it is asked for (a listing streams): for a local
    store in this process, or with `json` (`func` makes JSON values) in two where that
    pays (`store.halves`); on a few threads for an object store (`func` must be
    thread-safe: a read of one session is)."""
    if isinstance(storage, LocalStorage) or len(items) < 2:
        if json:
            from sessionstore.store.halves import halves

            return halves(func, items)
        return map(func, items)
    return _pooled(func, items)


def read_ahead(session: Session) -> contextlib.AbstractContextManager[None]:
    """While the block runs, a read of `session`'s report, constraints and collections (in
    this thread) is answered by requests sent at once: in a bucket, one LIST of its top
    says which exist, then those are fetched together (`storage.s3_ahead`); locally, each
    is one system call below the session's directory, held open for the block."""
    if isinstance(session.storage, LocalStorage):
        return session.storage.holding(session.key)  # and obstore is never imported
    from sessionstore.storage.s3 import S3Storage

    assert isinstance(session.storage, S3Storage)
    return session.storage.ahead.holding(session.key, (REPORT, CONSTRAINTS), (TRIALS, SERVICE))


def _pooled(func: Callable[[T], R], items: Sequence[T]) -> Iterator[R]:
    # Imported here: concurrent.futures loads logging, a sixth of a local `inspect`'s start.
    from concurrent.futures import ThreadPoolExecutor

    pool = ThreadPoolExecutor(min(_SESSION_THREADS, len(items)))
    try:
        yield from pool.map(func, items)
    finally:  # a reader that stops early (--limit) leaves nothing queued
        pool.shutdown(cancel_futures=True)


def create_session(
    storage: Storage,
    session_id: str,
    manifest: dict[str, Any],
    constraints: dict[str, Any],
    previous: list[str],
) -> bool:
    """Create the session `session_id` (module docstring); False if the id is taken."""
    from sessionstore.storage.s3 import S3Storage

    assert isinstance(storage, S3Storage)
    # A HEAD, not `files.exists`: a refusal (bad credentials) must be an error, not "taken".
    if storage.modified(f"{session_id}/{MANIFEST}") is not None:
        return False
    constraints_key = f"{session_id}/{CONSTRAINTS}"
    data = jsonio.dumps(constraints)
    if not storage.create(constraints_key, data) and not _take_debris(storage, session_id, data):
        return False
    if previous:
        from sessionstore.store.lineage_remote import copy_previous  # on use, as locally

        try:
            copy_previous(storage, session_id, previous)
        except BaseException:
            # Nothing of a create that failed stays behind to hold the id for an hour.
            with contextlib.suppress(Exception):
                storage.remove_tree(session_id)
            raise
    return storage.create(f"{session_id}/{MANIFEST}", jsonio.dumps(manifest))


def _take_debris(storage: S3Storage, session_id: str, constraints: bytes) -> bool:
    """Whether this writer took `session_id` from a crashed create's debris (module
    docstring): a `constraints.json` older than `DEBRIS_AGE` with no manifest.

    Its constraints are replaced by ours only if they are still the debris's
    (`If-Match`), so of two writers taking it at once one goes on and the other
    removes nothing; then the rest of the debris (a partial `previous/`) goes.
    Removing the debris first, as before, let the slower one delete the faster
    one's new constraints, or its whole session once visible.
    """
    from sessionstore.storage import s3_keys
    from sessionstore.storage.s3_create import replace_if

    key = f"{session_id}/{CONSTRAINTS}"
    if storage.modified(f"{session_id}/{MANIFEST}") is not None:
        return False
    if not replace_if(storage, key, constraints, older=DEBRIS_AGE):
        return False  # absent, another writer's create in progress, or taken meanwhile
    s3_keys.remove_prefix(storage, session_id, keep=key)
    return True

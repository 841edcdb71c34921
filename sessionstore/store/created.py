"""When a session was made, as the store's listing orders sessions and `prune` ages them."""

from __future__ import annotations

import os
from datetime import UTC, datetime
from typing import TYPE_CHECKING

from sessionstore.format.names import MANIFEST
from sessionstore.storage.s3_path import S3Path

if TYPE_CHECKING:
    from sessionstore.store.session import Session

__all__ = ["created_key"]


def created_key(session: Session) -> float:
    """`created_at` as a timestamp, else the manifest's mtime, else (a raw workspace) the
    directory's: local-only fallbacks; raises `FileNotFoundError` once the directory is gone.

    Not the directory's mtime where there is a manifest: `inspect` writing the summary
    index beside it moves that, so the session would jump to the top of the next listing
    and never be old enough for `prune --older-than`. A raw workspace gets no index.
    """
    created = (session.manifest or {}).get("created_at")
    if isinstance(created, str):
        try:
            moment = datetime.fromisoformat(created)
            if moment.tzinfo is None:
                moment = moment.replace(tzinfo=UTC)
            return moment.timestamp()
        except (ValueError, OverflowError):  # not ISO 8601, or a date beyond the epoch's range
            pass
    if isinstance(session.path, S3Path):
        return 0.0  # no directory to date; every session made by the library has created_at
    try:
        return os.stat(session.path / MANIFEST, follow_symlinks=False).st_mtime
    except OSError:  # none (a raw workspace), or the directory replaced or gone: asked next
        return os.stat(session.path, follow_symlinks=False).st_mtime

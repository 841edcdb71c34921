"""The store's JSON files through the storage seam: one reader, one constraints rule.

Every manifest, constraints file, report and marker the engine reads is a
`Storage.get` bounded by `MAX_MARKER_BYTES`, parsed by `_json.parse_object`.
What stops a read becomes the reason a reader reports (the record is torn,
the manifest unread), never an exception: one bad file never breaks a
listing.

Local sessions and records named by a path (`Session.open(path)`, a
`RecordWriter` built by hand) are located as a `LocalStorage` over the
directory that holds the session, and the key of the session below it, so
the session directory itself is opened with `O_NOFOLLOW` like every
component below the storage's root.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from sessionstore import _json as jsonio
from sessionstore.errors import StorageError, TooLarge
from sessionstore.format.names import CONSTRAINTS
from sessionstore.storage.base import Storage
from sessionstore.storage.local import LocalStorage
from sessionstore.storage.s3_path import S3Path

__all__ = ["constraints_of", "exists", "locate", "object_of", "read_object"]


def locate(path: Path, depth: int) -> tuple[Storage, str]:
    """A `LocalStorage` and the key of `path` in it, the key being its last `depth` components.

    `depth` is 1 for a session directory, 3 for a record (`<session>/trials/<n>`).
    The directory holding the session is a store (`LocalStorage(store=True)`):
    no write below it makes the session directory again once it is removed.
    An `S3Path` is located in the `s3://` store of this process that holds it.
    """
    if isinstance(path, S3Path):
        from sessionstore.storage.s3_open import storage_at  # imports obstore: on use

        return storage_at(path, depth)
    parts = Path(os.path.abspath(path)).parts
    if len(parts) <= depth:
        raise StorageError(os.fspath(path), "is not below a directory that can hold it")
    return LocalStorage(Path(*parts[:-depth]), store=True), "/".join(parts[-depth:])


def read_object(
    storage: Storage, key: str, session_key: str | None = None
) -> tuple[bool, dict[str, Any] | None, str | None]:
    """(exists, object or None, why it is not usable or None) for the JSON object at `key`.

    The reason for a file that is there but not read or not a usable object
    is the file's own (`is a FIFO, not a regular file`, `invalid JSON: ...`);
    for a directory on the way that stops the read it is `not read: ...`,
    naming the `session directory` when that is `session_key`, else the
    directory's name. Absent (the file or a directory on the way) is
    (False, None, None).
    """
    try:
        got: bytes | StorageError | None = storage.get(key, jsonio.MAX_MARKER_BYTES)
    except StorageError as exc:
        got = exc
    return object_of(key, got, session_key)


def object_of(
    key: str | tuple[str, ...], got: bytes | StorageError | None, session_key: str | None = None
) -> tuple[bool, dict[str, Any] | None, str | None]:
    """`read_object`'s answer for what a get of `key` returned or raised.

    `key` may be given as its parts, joined only for a reason (`read_records`
    calls this once per marker).
    """
    if isinstance(got, TooLarge):
        return True, None, f"larger than {jsonio.MAX_MARKER_BYTES} bytes"
    if isinstance(got, StorageError):
        return True, None, _reason(key if isinstance(key, str) else "/".join(key), got, session_key)
    if got is None:
        return False, None, None
    return (True, *jsonio.parse_object(got))


def _reason(key: str, exc: StorageError, session_key: str | None) -> str:
    if exc.key == key:
        return exc.problem
    if session_key is not None and exc.key == session_key:
        return f"not read: session directory {exc.problem}"
    return f"not read: '{exc.key.rpartition('/')[2]}' {exc.problem}"  # escaped when shown


def exists(storage: Storage, key: str) -> bool:
    """Whether anything is at `key` (an object, or an entry that is no object); nothing read.

    A `get` with a limit of 0 bytes: `TooLarge` or a `StorageError` both say
    something is there, unless the error is the store's root itself (a file, or
    unreadable): that says nothing of `key`, and is raised, or `new` on a store
    that is a file would say the session exists.
    """
    try:
        return storage.get(key, 0) is not None
    except StorageError as exc:
        if not exc.key:
            raise
        return True


def constraints_of(storage: Storage, session_key: str) -> tuple[dict[str, Any], str | None]:
    """The one reading of `constraints.json`: (the constraints, why they could not be read).

    Absent reads as `{}` (a raw workspace has none); a torn or unreadable
    file reads as `{}` plus its reason (as `read_object` gives it). Callers
    decide what a reason means: `Session.constraints()` raises it
    (`CorruptFile`), `inspect` shows it, the contract and an export leave the
    constraints out.
    """
    _, data, error = read_object(storage, f"{session_key}/{CONSTRAINTS}", session_key)
    return data or {}, error

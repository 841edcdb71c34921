"""Lineage in an `s3://` store: `previous/<id>/` copies made from keys, on the server.

The same selection as locally (`store.lineage`): `constraints.json`,
`report.json`, per record the top-level config files (`*.json`, `*.yml`,
`*.yaml`, `*.toml`) and a trial's `patches/` tree (at most
`MAX_PATCH_DEPTH` levels); nothing else. A bucket holds no symlinks, FIFOs
or devices, so what the local walk skips for being one cannot occur; a
name that is a prefix where the selection wants an object (`trials/1/x.yml/`)
is skipped and warned about as locally.

The selected keys are listed once (one recursive LIST of the previous
session) and copied by `CopyObject`, server-side, concurrently: no byte
passes through this process. A new session's copies are made after its
`constraints.json` has claimed the id and before its manifest makes it
visible (`store.remote.create_session`): a create killed half-way leaves no
session, only debris swept as any crashed create's, never a partial
`previous/` in a session.
"""

from __future__ import annotations

import warnings
from typing import TYPE_CHECKING, Any

from sessionstore._fs.atomic import is_temp_name
from sessionstore.errors import LineageWarning, SessionNotFound
from sessionstore.format.names import (
    CONSTRAINTS,
    MARKERS,
    PREVIOUS_DIR,
    REPORT,
    SERVICE,
    TRIALS,
    record_number,
)
from sessionstore.store.lineage_info import pinned, valid_id
from sessionstore.store.lineage_walk import (
    CONFIG_SUFFIXES,
    MAX_PATCH_DEPTH,
    PATCHES_DIR,
    Selection,
)

if TYPE_CHECKING:
    from pathlib import Path

    from sessionstore.storage.s3 import S3Storage
    from sessionstore.store.session import Session, Store

__all__ = ["copy_previous", "include_previous", "lineage_info", "select_keys"]


def select_keys(storage: S3Storage, session_id: str) -> Selection:
    """What lineage copies of the session `session_id`: its relative keys, sorted, and
    what it skips. `SessionNotFound` when nothing is below the session's prefix."""
    keys = storage.files_below(session_id)
    if not keys:
        raise SessionNotFound(session_id, storage.url.path())
    found = Selection()
    skipped: dict[str, str] = {}
    for rel in keys:
        parts = rel.split("/")
        if any(is_temp_name(part) for part in parts):
            continue
        if len(parts) == 1:
            if rel in (CONSTRAINTS, REPORT):
                found.files.append(rel)
            continue
        if parts[0] not in MARKERS or len(parts) < 3 or record_number(parts[1]) is None:
            continue  # foreign entries are not records and never copied
        name = parts[2]
        if len(parts) == 3 and name.endswith(CONFIG_SUFFIXES):
            found.files.append(rel)
        elif parts[0] == TRIALS and name == PATCHES_DIR and len(parts) > 3:
            if len(parts) - 4 > MAX_PATCH_DEPTH:
                deep = "/".join(parts[: 4 + MAX_PATCH_DEPTH])
                skipped.setdefault(deep, f"is deeper than {MAX_PATCH_DEPTH} levels")
            else:
                found.files.append(rel)
        elif name.endswith(CONFIG_SUFFIXES) or (name == PATCHES_DIR and parts[0] == TRIALS):
            # A prefix where an object is selected, or an object where the patches tree is.
            what = "is a prefix (a directory), not an object" if len(parts) > 3 else "is an object"
            skipped.setdefault("/".join(parts[:3]), what)
    # A key S3 took but obstore cannot name (`storage.s3_keys`) cannot be copied by it:
    # skipped and warned about, as an entry the local walk cannot copy is.
    from sessionstore.storage.s3_keys import addressable  # imports obstore: here, as `storage`

    for rel in [rel for rel in found.files if not addressable(rel)]:
        found.files.remove(rel)
        skipped[rel] = (
            "has a name obstore cannot address (a control character, or an empty, '.' or "
            "'..' component)"
        )
    found.skipped = sorted(skipped.items())
    return found


def copy_previous(storage: S3Storage, session_key: str, ids: list[str]) -> list[str]:
    """Copy each previous session with records into `<session_key>/previous/<id>/`.

    Warns (`LineageWarning`) for each skipped entry and each session with no
    records, which is not copied. Returns the ids copied; raises
    `SessionNotFound` for a session that is gone, `StorageError` when a copy
    fails (the caller removes what was made).
    """
    copied = []
    for session_id in ids:
        found = select_keys(storage, session_id)
        if found.has_records:
            target = f"{session_key}/{PREVIOUS_DIR}/{session_id}"
            storage.copy_each([(f"{session_id}/{rel}", f"{target}/{rel}") for rel in found.files])
            copied.append(session_id)
        _warn(found, session_id)
    return copied


def _warn(found: Selection, session_id: str) -> None:
    messages = found.messages(session_id)
    if not found.has_records:
        messages.append(f"previous session {session_id} has no records; nothing copied from it")
    for message in messages:
        # Attributed to the caller of Store.create (store.session -> store.remote -> here).
        warnings.warn(LineageWarning(message), stacklevel=5)


def include_previous(store: Store, session: Session) -> list[Path]:
    """`store.lineage.include_previous` in a bucket: re-copy every pinned previous session.

    Each object of a copy is replaced whole (a PUT is atomic), so a copy a
    crash interrupted is completed by the next call; a copy's objects that
    the previous session no longer has are removed.
    """
    from sessionstore.storage.s3 import S3Storage
    from sessionstore.store.lineage_checks import check_usable

    storage = session.storage
    assert isinstance(storage, S3Storage)
    copies: list[Path] = []
    for session_id in pinned(session):
        target = f"{session.key}/{PREVIOUS_DIR}/{session_id}"
        if not valid_id(session_id):
            message = f"previous session id {session_id!r} is not a valid id; skipped"
            warnings.warn(LineageWarning(message), stacklevel=3)
            continue
        had_copy = bool(storage.keys_below(target))
        try:
            check_usable(store.open(session_id), session_id)
            found = select_keys(storage, session_id)
        except SessionNotFound:
            if had_copy:
                copies.append(session.path / PREVIOUS_DIR / session_id)
                continue
            raise
        _warn(found, session_id)
        if found.has_records:
            storage.copy_each([(f"{session_id}/{rel}", f"{target}/{rel}") for rel in found.files])
            stale = set(storage.files_below(target)) - set(found.files)
            for rel in sorted(stale):
                storage.remove(f"{target}/{rel}")
        if found.has_records or had_copy:
            copies.append(session.path / PREVIOUS_DIR / session_id)
    return copies


def lineage_info(session: Session) -> list[dict[str, Any]]:
    """`store.lineage_info.lineage_info` in a bucket: a copy is its prefix's objects."""
    info: list[dict[str, Any]] = []
    for session_id in pinned(session):
        row: dict[str, Any] = {
            "id": session_id,
            "path": str(session.path / PREVIOUS_DIR / session_id),
            "copied": False,
            "trials": None,
            "service": None,
            "problem": None,
        }
        if not valid_id(session_id):
            row["problem"] = "not a valid session id"
        else:
            copy = f"{session.key}/{PREVIOUS_DIR}/{session_id}"
            row["copied"] = bool(list(session.storage.list(copy)))
            if row["copied"]:
                for collection in (TRIALS, SERVICE):
                    row[collection] = sum(
                        1
                        for item in session.storage.list(f"{copy}/{collection}")
                        if item.is_prefix and record_number(item.name) is not None
                    )
        info.append(row)
    return info

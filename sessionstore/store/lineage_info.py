"""Lineage for `inspect`: what each pinned previous session's copy holds, read without following."""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any

from sessionstore._fs import read as fsread
from sessionstore.errors import InvalidId
from sessionstore.format.names import (
    MARKERS,
    PREVIOUS_DIR,
    SERVICE,
    TRIALS,
    record_number,
    validate_id,
)
from sessionstore.storage.s3_path import S3Path
from sessionstore.store.lineage_walk import walk_session

if TYPE_CHECKING:
    from pathlib import Path

    from sessionstore.store.session import Session

__all__ = ["copy_expected", "has_copy", "lineage_info", "pinned", "valid_id"]


def pinned(session: Session) -> list[str]:
    """The manifest's previous ids, each once in first-seen order (older manifests repeat some)."""
    value = (session.manifest or {}).get("previous")
    return (
        list(dict.fromkeys(v for v in value if isinstance(v, str)))
        if isinstance(value, list)
        else []
    )


def valid_id(value: str) -> bool:
    try:
        validate_id(value)
    except InvalidId:
        return False
    return True


def has_copy(session_path: Path, session_id: str) -> bool:
    copied, _, fd = _copy_state(session_path, session_id)
    if fd is not None:
        os.close(fd)
    return copied


def copy_expected(session_path: Path, session_id: str) -> bool:
    """Whether the pinned session `session_id`, still beside the session at `session_path`
    in their store, has records a copy would hold (so a missing `previous/<id>` is a copy
    cut short, or removed, not one never made). Read by fd, nothing followed."""
    if not valid_id(session_id):
        return False
    try:
        root = fsread.open_dir(session_path.parent, follow=True)
    except OSError:
        return False
    try:
        source = fsread.open_dir(session_id, root)
    except OSError:
        return False
    finally:
        os.close(root)
    try:
        return walk_session(source).has_records
    finally:
        os.close(source)


def _copy_state(session_path: Path, session_id: str) -> tuple[bool, str | None, int | None]:
    """(copied, problem, an open fd of the copy or None) for `previous/<id>` of a session.

    Nothing is followed: a session directory, `previous` or `previous/<id>`
    that is a symlink (or not a directory) is not a copy, and the problem
    says what it is. An id that is not a valid session id (`../x` in a
    planted manifest) is never opened at all.
    """
    if not valid_id(session_id):
        return False, "not a valid session id", None
    try:
        session_fd = fsread.open_dir(session_path)
    except OSError as exc:
        return False, f"session directory {fsread.problem(exc)}", None
    try:
        try:
            previous_fd = fsread.open_dir(PREVIOUS_DIR, session_fd)
        except FileNotFoundError:
            return False, None, None
        except OSError as exc:
            return False, f"{PREVIOUS_DIR} {fsread.problem(exc)}", None
    finally:
        os.close(session_fd)
    try:
        copy_fd = fsread.open_dir(session_id, previous_fd)
    except FileNotFoundError:
        return False, None, None
    except OSError as exc:
        return False, f"{PREVIOUS_DIR}/{session_id} {fsread.problem(exc)}", None
    finally:
        os.close(previous_fd)
    return True, None, copy_fd


def _count_records(copy_fd: int, collection: str) -> tuple[int, str | None]:
    """Record directories in `collection` of the copy (symlinks not counted), and a problem."""
    try:
        fd = fsread.open_dir(collection, copy_fd)
    except FileNotFoundError:
        return 0, None
    except OSError as exc:
        return 0, f"{collection} {fsread.problem(exc)}"
    try:
        with os.scandir(fd) as it:
            n = sum(
                1
                for e in it
                if record_number(e.name) is not None and e.is_dir(follow_symlinks=False)
            )
        return n, None
    finally:
        os.close(fd)


def lineage_info(session: Session) -> list[dict[str, Any]]:
    """For `inspect`: each pinned id, whether its copy exists, what it holds, what is wrong.

    Read by directory fd without following anything: a `previous` or
    `previous/<id>` planted as a symlink shows `copied: false` with the
    `problem` naming it, and what it points to is never read.
    """
    if isinstance(session.path, S3Path):
        from sessionstore.store.lineage_remote import lineage_info as remote_info  # s3 only

        return remote_info(session)
    info: list[dict[str, Any]] = []
    for session_id in pinned(session):
        copied, problem, copy_fd = _copy_state(session.path, session_id)
        counts: dict[str, int] = {}
        if copy_fd is not None:
            try:
                problems = []
                for collection in MARKERS:
                    counts[collection], trouble = _count_records(copy_fd, collection)
                    if trouble:
                        problems.append(trouble)
                problem = "; ".join(problems) or None
            finally:
                os.close(copy_fd)
        info.append(
            {
                "id": session_id,
                "path": str(session.path / PREVIOUS_DIR / session_id),
                "copied": copied,
                "trials": counts.get(TRIALS),
                "service": counts.get(SERVICE),
                "problem": problem,
            }
        )
    return info

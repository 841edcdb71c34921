"""Which sessions may serve as previous ones, and the chain gaps a caller is warned about."""

from __future__ import annotations

import warnings
from collections.abc import Iterable
from typing import TYPE_CHECKING

from sessionstore._display import escape
from sessionstore.errors import (
    InvalidId,
    LineageWarning,
    PreviousRunning,
    PreviousUnknown,
    SessionNotFound,
)
from sessionstore.format.names import MANIFEST
from sessionstore.storage.s3_path import S3Path
from sessionstore.store.lifecycle import mirror_daemon
from sessionstore.store.lineage_info import pinned
from sessionstore.store.status import manifest_problem, session_status

if TYPE_CHECKING:
    from sessionstore.store.session import Session, Store

__all__ = ["chain_gaps", "check_previous", "check_usable", "is_running"]


def is_running(session: Session) -> bool:
    """Whether a session may still be writing records.

    Running means: no completed `report.json`, a manifest status of neither
    done nor failed, and either its recorded writer is alive or no writer is
    recorded (then nothing but the report can tell it ended). An
    `interrupted` session (writer dead) is not running. An `unknown` session
    is not counted as running here, but cannot serve as previous either
    (`check_usable` decides that).
    """
    return session_status(session) == "running"


def check_usable(session: Session, session_id: str) -> None:
    """Refuse a session that cannot serve as previous: `running` or `unknown`, or one a
    mirror daemon still writes into.

    Raises `PreviousRunning` for a running session and `PreviousUnknown` (a
    `PreviousRunning`) for one whose status is unknown, or that reads as running only
    because it has no manifest to read (torn or missing); `done`, `failed` and
    `interrupted` sessions pass, unless a mirror daemon holds the session's
    lock (`PreviousRunning`): its records may still be changing whatever the
    status says (a harness that died leaves its daemon mirroring).
    """
    status = session_status(session)
    if status == "running" and session.manifest is None:
        # No manifest to read (torn, or gone) reads as running (inspect.md), but says
        # nothing: whether its writer still runs, or it ended, cannot be told.
        raise PreviousUnknown(session_id, session.manifest_error or f"{MANIFEST}: missing")
    if status == "running":
        raise PreviousRunning(session_id)
    if status == "unknown":
        reason = session.manifest_error or manifest_problem(session.manifest or {})
        raise PreviousUnknown(session_id, reason or "its manifest does not read right")
    if not isinstance(session.path, S3Path) and (daemon := mirror_daemon(session)) is not None:
        pid = f" (pid {daemon.pid})" if daemon.pid is not None else ""
        raise PreviousRunning(session_id, f"is still written into by a mirror daemon{pid}; stop it")


def chain_gaps(store: Store, ids: Iterable[str]) -> list[str]:
    """One message per previous-of-a-previous session that `ids` leaves out.

    Adding it is advised only where `--previous` would take it: a pinned id that
    is no id (a hand-edited manifest) or whose session has left the store is
    named as such, not as a fix that then fails."""
    included = list(ids)
    messages: list[str] = []
    for session_id in included:
        for parent in pinned(store.open(session_id)):
            if parent in included:
                continue
            gap = f"previous session {session_id!r} builds on {parent!r}, which "
            try:
                store.open(parent)
            except InvalidId:
                messages.append(f"{gap}is not a valid session id; its records cannot be included")
            except SessionNotFound:
                messages.append(f"{gap}is not in the store; its records cannot be included")
            else:
                messages.append(
                    f"{gap}is not included; add --previous {escape(parent)} to give its records too"
                )
    return messages


def check_previous(store: Store, ids: Iterable[str]) -> list[str]:
    """Validate sessions named as previous; warn (`LineageWarning`) about chain gaps.

    Raises `SessionNotFound` for a missing session, `PreviousRunning` for one
    that is running and `PreviousUnknown` for one whose status is unknown
    (see `check_usable`). Returns the warning texts, one per chain gap. The
    warnings about what the copy skips, and about sessions with no records,
    come from the copy itself (`copy_previous`), which is what reads them.
    """
    ids = list(ids)
    for session_id in ids:
        check_usable(store.open(session_id), session_id)
    messages = chain_gaps(store, ids)
    for message in messages:
        warnings.warn(LineageWarning(message), stacklevel=3)
    return messages

"""The plan for a harness restarting after a crash: what to keep, what to redo, what next.

Derived from the files alone, like every state of the format: a record
with a usable marker is completed (kept: it is immutable), one without a
marker is in flight and one with a torn marker is torn (both to redo:
their files are listed so the harness can tell how far each got), and a
completed record that says it failed (`"failed": true` in a trial,
`"status": "failed"` in a verification attempt) is listed again as failed.
The next number is the one `begin` would allocate now.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from sessionstore.format.names import MAX_RECORD, SERVICE, TRIALS, record_number
from sessionstore.store.lifecycle import Writer, mirror_daemon, recorded_writer
from sessionstore.store.records import Record, RecordState
from sessionstore.store.status import session_status

if TYPE_CHECKING:
    from sessionstore.store.collection import Collection
    from sessionstore.store.session import Session

__all__ = ["CollectionPlan", "Redo", "ResumePlan", "resume_plan"]


@dataclass(frozen=True)
class Redo:
    """A record to redo: in flight (no marker) or torn (its marker unusable, `error` why)."""

    n: int
    state: str
    path: Path
    files: list[str]
    error: str | None

    def to_dict(self) -> dict[str, Any]:
        return {
            "n": self.n,
            "state": self.state,
            "path": str(self.path),
            "files": self.files,
            "error": self.error,
        }


@dataclass(frozen=True)
class CollectionPlan:
    """One collection's plan: completed numbers (keep), the failed ones among them,
    the records to redo, foreign entries, and the next number `begin` allocates (None:
    none is left, past `MAX_RECORD`, and `begin` refuses)."""

    name: str
    path: Path
    completed: list[int]
    failed: list[int]
    redo: list[Redo]
    foreign: list[str]
    next: int | None

    def to_dict(self) -> dict[str, Any]:
        return {
            "path": str(self.path),
            "completed": self.completed,
            "failed": self.failed,
            "redo": [r.to_dict() for r in self.redo],
            "foreign": self.foreign,
            "next": self.next,
        }


@dataclass(frozen=True)
class ResumePlan:
    """Where a session is, for a harness restarting it (see the module docstring).

    `writer` is the one `session.json` records (None: none is), `mirror` a
    mirror daemon that holds the session's lock (None: none does).
    """

    id: str | None
    path: Path
    status: str
    finished: bool
    writer: Writer | None
    mirror: Writer | None
    trials: CollectionPlan
    service: CollectionPlan

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "path": str(self.path),
            "status": self.status,
            "finished": self.finished,
            "writer": self.writer.to_dict() if self.writer else None,
            "mirror": self.mirror.to_dict() if self.mirror else None,
            TRIALS: self.trials.to_dict(),
            SERVICE: self.service.to_dict(),
        }


def _failed(collection: str, record: Record) -> bool:
    data = record.data or {}
    if collection == TRIALS:
        return data.get("failed") is True
    return data.get("status") == "failed"


def _plan(collection: Collection) -> CollectionPlan:
    records, foreign = collection.scan()
    completed = [r.n for r in records if r.state is RecordState.COMPLETED]
    failed = [
        r.n for r in records if r.state is RecordState.COMPLETED and _failed(collection.name, r)
    ]
    redo = [
        Redo(r.n, str(r.state), r.path, r.files(), r.error)
        for r in records
        if r.state is not RecordState.COMPLETED
    ]
    # `begin` skips a number whose name a foreign entry holds (a file, a FIFO, a symlink:
    # its mkdir fails EEXIST), so the next number it allocates is past those too.
    taken = {record_number(name) for name in foreign}
    following = (records[-1].n if records else 0) + 1
    while following in taken:  # at most once per foreign entry
        following += 1
    return CollectionPlan(
        collection.name,
        collection.path,
        completed,
        failed,
        redo,
        foreign,
        following if following <= MAX_RECORD else None,
    )


def resume_plan(session: Session) -> ResumePlan:
    """The restart plan of `session`: its status, writers, and each collection's plan."""
    report = session.report()
    return ResumePlan(
        id=session.id or session.path.name,
        path=session.path,
        status=session_status(session, report),
        # As the status reads it: a torn report does not end a session (docs/inspect.md).
        finished=report.state is RecordState.COMPLETED,
        writer=recorded_writer(session),
        mirror=mirror_daemon(session),
        trials=_plan(session.trials),
        service=_plan(session.service),
    )

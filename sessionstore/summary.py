"""What a session is doing, derived from its files alone: status and progress.

The rules (docs/format.md, "Derived state"):
- status: a completed `report.json` ends the session (its `status`, done or
  failed); otherwise the manifest's status, except that a running session
  whose recorded writer process is gone (pid and start time) is `interrupted`.
- progress while trialing counts the trial being worked on (the highest in-flight
  one, else completed + 1, capped at the planned count), so `trialing (2/3)`
  never reads as two finished; once any verification attempt exists it counts
  completed trials: `verifying (3/3)`, and the highest-numbered attempt's
  result decides `verified`/`verification failed` (missing or torn: verifying).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from sessionstore.procinfo import process_alive
from sessionstore.store import Record, RecordState, Session


@dataclass(frozen=True)
class Progress:
    """Where the session is: phase plus the counted trial and the planned total."""

    phase: str  # trialing | verifying | verified | verification failed
    current: int
    planned: int | None

    def __str__(self) -> str:
        count = f"{self.current}/{self.planned}" if self.planned else f"{self.current}"
        return f"{self.phase} ({count})"


def _planned(session: Session) -> int | None:
    value = (session.manifest or {}).get("trials")
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else None


def session_status(session: Session, report: Record | None = None) -> str:
    """running | interrupted | done | failed (see the module docstring)."""
    report = report if report is not None else session.report()
    if report.state is RecordState.COMPLETED and report.data is not None:
        return "failed" if report.data.get("status") == "failed" else "done"
    manifest = session.manifest or {}
    status = manifest.get("status", "running")
    if status in ("done", "failed"):
        return str(status)
    pid = manifest.get("pid")
    started = manifest.get("pid_started_at")
    if isinstance(pid, int) and not process_alive(
        pid, float(started) if isinstance(started, int | float) else None
    ):
        return "interrupted"
    return "running"


def session_progress(session: Session, trials: list[Record], attempts: list[Record]) -> Progress:
    """Progress from the records alone, whatever the status."""
    planned = _planned(session)
    completed = sum(1 for r in trials if r.state is RecordState.COMPLETED)
    if attempts:
        latest = attempts[-1]
        phase = "verifying"
        if latest.state is RecordState.COMPLETED and latest.data is not None:
            result = latest.data.get("status")
            if result == "verified":
                phase = "verified"
            elif result == "failed":
                phase = "verification failed"
        return Progress(phase, completed, planned)
    in_flight = [r.n for r in trials if r.state is RecordState.IN_FLIGHT]
    current = max(in_flight) if in_flight else completed + 1
    if planned is not None:
        current = min(current, planned)
    return Progress("trialing", current, planned)


@dataclass
class SessionView:
    """Everything `inspect` shows about one session, computed once."""

    session: Session
    status: str
    progress: Progress
    trials: list[Record]
    service: list[Record]
    report: Record
    foreign: dict[str, list[str]] = field(default_factory=dict)

    @classmethod
    def load(cls, session: Session) -> SessionView:
        trials = session.trials.records()
        service = session.service.records()
        report = session.report()
        return cls(
            session=session,
            status=session_status(session, report),
            progress=session_progress(session, trials, service),
            trials=trials,
            service=service,
            report=report,
            foreign={c.name: f for c in (session.trials, session.service) if (f := c.foreign())},
        )

    def summary(self) -> dict[str, Any]:
        """The list view's JSON: one object per session."""
        manifest = self.session.manifest or {}
        return {
            "id": self.session.id,
            "path": str(self.session.path),
            "name": manifest.get("name"),
            "status": self.status,
            "progress": str(self.progress),
            "created_at": manifest.get("created_at"),
            "trial_counts": {
                state.value: sum(1 for r in self.trials if r.state is state)
                for state in RecordState
            },
            "service": len(self.service),
            "manifest_error": self.session.manifest_error,
        }

    def detail(self) -> dict[str, Any]:
        """The detail view's JSON: the summary plus every record in numeric order."""
        return {
            **self.summary(),
            "manifest": self.session.manifest,
            "trials": [r.to_dict() for r in self.trials],
            "service": [r.to_dict() for r in self.service],
            "report": self.report.to_dict() | {"n": None},
            "foreign": self.foreign,
        }

"""What a session is doing, derived from its files alone: status, progress, best trial.

The rules (docs/inspect.md):
- status: a completed `report.json` ends the session (its `status`, done or
  failed); else a manifest status of done or failed; else the session is
  running, except that a running session whose recorded writer process is
  gone (pid and start time, so a recycled pid does not count) is
  `interrupted`. A session with no recorded writer is never interrupted.
- progress, from the records alone whatever the status: while trialing, the
  trial being worked on (the highest in-flight one, else completed + 1,
  capped at the planned count), so `trialing (2/3)` never reads as two
  finished; once any verification attempt exists, the completed count:
  `verifying (3/3)`, and the highest-numbered attempt's result decides
  `verified` / `verification failed` (a missing or torn result: verifying).

Reading is plain dicts and one directory scan per collection: `inspect`
over thousands of records must stay close to the cost of reading the files.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from sessionstore import jsonio
from sessionstore.best import Best, Objective, Score, best_trial, score_trials
from sessionstore.layout import CONSTRAINTS
from sessionstore.procinfo import process_alive
from sessionstore.store import Record, RecordState, Session

if TYPE_CHECKING:
    from sessionstore.verdict import Verdict

STATUSES = ("running", "interrupted", "done", "failed")


@dataclass(frozen=True)
class Progress:
    """Where the session is: phase plus the counted trial and the planned total."""

    phase: str  # trialing | verifying | verified | verification failed
    current: int
    planned: int | None

    def __str__(self) -> str:
        count = f"{self.current}/{self.planned}" if self.planned else f"{self.current}"
        return f"{self.phase} ({count})"

    def to_dict(self) -> dict[str, Any]:
        return {"phase": self.phase, "current": self.current, "planned": self.planned}


def planned_trials(session: Session) -> int | None:
    """The manifest's planned trial count, if it is a positive integer."""
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
    if (
        isinstance(pid, int)
        and not isinstance(pid, bool)
        and not process_alive(pid, float(started) if isinstance(started, int | float) else None)
    ):
        return "interrupted"
    return "running"


def session_progress(session: Session, trials: list[Record], attempts: list[Record]) -> Progress:
    """Progress from the records alone, whatever the status (records in numeric order)."""
    planned = planned_trials(session)
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


def read_constraints(session: Session) -> tuple[dict[str, Any], str | None]:
    """The requested constraints and a parse error; a torn file reads as `{}` plus its error."""
    _, data, error = jsonio.read_object(session.path / CONSTRAINTS)
    return data or {}, f"{CONSTRAINTS}: {error}" if error else None


@dataclass
class SessionView:
    """Everything `inspect` shows about one session, computed once from its files."""

    session: Session
    status: str
    progress: Progress
    trials: list[Record]
    service: list[Record]
    report: Record
    constraints: dict[str, Any]
    objective: Objective
    scores: list[Score]
    best: Best | None
    constraints_error: str | None = None
    foreign: dict[str, list[str]] = field(default_factory=dict)

    @classmethod
    def load(cls, session: Session, objective: Objective | None = None) -> SessionView:
        """Read a session's records once and derive status, progress and the best trial."""
        objective = objective or Objective()
        trials, trials_foreign = session.trials.scan()
        service, service_foreign = session.service.scan()
        report = session.report()
        constraints, constraints_error = read_constraints(session)
        scores = score_trials(trials, constraints, objective)
        foreign = {
            name: found
            for name, found in (
                (session.trials.name, trials_foreign),
                (session.service.name, service_foreign),
            )
            if found
        }
        return cls(
            session=session,
            status=session_status(session, report),
            progress=session_progress(session, trials, service),
            trials=trials,
            service=service,
            report=report,
            constraints=constraints,
            objective=objective,
            scores=scores,
            best=best_trial(trials, constraints, objective, scores),
            constraints_error=constraints_error,
            foreign=foreign,
        )

    @property
    def name(self) -> str | None:
        value = (self.session.manifest or {}).get("name")
        return value if isinstance(value, str) else None

    @property
    def created_at(self) -> str | None:
        value = (self.session.manifest or {}).get("created_at")
        return value if isinstance(value, str) else None

    @property
    def previous(self) -> list[str]:
        """The pinned previous session ids (strings only)."""
        value = (self.session.manifest or {}).get("previous")
        return [v for v in value if isinstance(v, str)] if isinstance(value, list) else []

    def summary(self) -> dict[str, Any]:
        """The list view's JSON: one object per session."""
        return {
            "id": self.session.id,
            "path": str(self.session.path),
            "name": self.name,
            "status": self.status,
            "progress": str(self.progress),
            "phase": self.progress.phase,
            "progress_counts": self.progress.to_dict(),
            "created_at": self.created_at,
            "trial_counts": {
                state.value: sum(1 for r in self.trials if r.state is state)
                for state in RecordState
            },
            "service": len(self.service),
            "best": self.best.to_dict() if self.best else None,
            "constraints": self.constraints,
            "constraints_error": self.constraints_error,
            "previous": self.previous,
            "manifest_error": self.session.manifest_error,
        }

    def verdicts(self, records: list[Record]) -> dict[int, Verdict]:
        """Output-contract verdicts of the records that declare one (reads their logs' tails).

        Only the detail view asks: the list stays one read per marker.
        """
        from sessionstore.verdict import output_verdict

        found = {r.n: output_verdict(r) for r in records}
        return {n: v for n, v in found.items() if v is not None}

    def detail(self) -> dict[str, Any]:
        """The detail view's JSON: the summary plus every record in numeric order."""
        from sessionstore.lineage import lineage_info

        return {
            **self.summary(),
            "manifest": self.session.manifest,
            "objective": self.objective.to_dict(),
            "trials": [r.to_dict() for r in self.trials],
            # Per trial, what the tables and the spark show: the objective value and verdict.
            "scores": [
                {"n": s.n, "value": s.value, "meets_constraints": s.meets_constraints}
                for s in self.scores
            ],
            "service": [r.to_dict() for r in self.service],
            # Records that declare an output contract, judged by their logs.
            "verdicts": {
                name: [{"n": n, **v.to_dict()} for n, v in self.verdicts(records).items()]
                for name, records in (("trials", self.trials), ("service", self.service))
            },
            "report": self.report.to_dict() | {"n": None},
            "foreign": self.foreign,
            "lineage": lineage_info(self.session),
        }

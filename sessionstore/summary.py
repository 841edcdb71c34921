"""What a session is doing, derived from its files alone: status, progress, best trial.

The rules (docs/inspect.md):
- status: a completed `report.json` ends the session (its `status`, done or
  failed); else `unknown` when a well-known manifest field has the wrong type
  or range (`manifest_problem`: a pid of 2**31, a string for an integer), so
  one odd manifest never breaks a listing; else a manifest status of done or
  failed; else the session is
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

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, TypeGuard

import orjson

from sessionstore.best import Best, Objective, Score, best_trial, score_trials
from sessionstore.layout import CONSTRAINTS, MANIFEST
from sessionstore.procinfo import PID_MAX, process_alive
from sessionstore.store import Record, RecordState, Session, read_session_object
from sessionstore.verdict import Verdict, output_verdict

STATUSES = ("running", "interrupted", "done", "failed", "unknown")
_MANIFEST_STATUSES = ("running", "done", "failed")


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
    return value if _is_int(value) and value > 0 else None


def _is_int(value: Any) -> TypeGuard[int]:
    return isinstance(value, int) and not isinstance(value, bool)


def _is_number(value: Any) -> bool:
    return (isinstance(value, float) and math.isfinite(value)) or _is_int(value)


def _is_strings(value: Any) -> bool:
    return isinstance(value, list) and all(isinstance(v, str) for v in value)


def _is_labels(value: Any) -> bool:
    return isinstance(value, dict) and all(isinstance(v, str) for v in value.values())


# Manifest field -> (is the value valid?, what the format requires); docs/format.md.
_MANIFEST_FIELDS: dict[str, tuple[Callable[[Any], bool], str]] = {
    "format": (_is_int, "an integer"),
    "id": (lambda v: isinstance(v, str), "a string"),
    "name": (lambda v: v is None or isinstance(v, str), "a string or null"),
    "created_at": (lambda v: isinstance(v, str), "a string"),
    "trials": (lambda v: v is None or (_is_int(v) and v >= 1), "an integer >= 1 or null"),
    "status": (lambda v: v in _MANIFEST_STATUSES, "running, done or failed"),
    "pid": (
        lambda v: v is None or (_is_int(v) and 1 <= v <= PID_MAX),
        f"an integer from 1 to {PID_MAX} or null",
    ),
    "pid_started_at": (lambda v: v is None or _is_number(v), "a finite number or null"),
    "previous": (_is_strings, "an array of strings"),
    "labels": (_is_labels, "an object of strings"),
}


def manifest_problem(manifest: dict[str, Any]) -> str | None:
    """What is wrong with the manifest's well-known fields (all of it, one line), or None.

    Missing fields are fine (readers tolerate them); a present field of the
    wrong type or out of range means the status cannot be derived from it.
    """
    problems = [
        f"{key} must be {wanted}, not {_shown(manifest[key])}"
        for key, (valid, wanted) in _MANIFEST_FIELDS.items()
        if key in manifest and not valid(manifest[key])
    ]
    return f"{MANIFEST}: {'; '.join(problems)}" if problems else None


def _shown(value: Any) -> str:
    text = orjson.dumps(value).decode()
    return text if len(text) <= 40 else text[:40] + "..."


def session_status(session: Session, report: Record | None = None) -> str:
    """running | interrupted | done | failed | unknown (see the module docstring)."""
    report = report if report is not None else session.report()
    if report.state is RecordState.COMPLETED and report.data is not None:
        return "failed" if report.data.get("status") == "failed" else "done"
    manifest = session.manifest or {}
    if manifest_problem(manifest) is not None:
        return "unknown"
    status = manifest.get("status", "running")
    if status in ("done", "failed"):
        return str(status)
    pid = manifest.get("pid")
    started = manifest.get("pid_started_at")
    if pid is not None and not process_alive(pid, None if started is None else float(started)):
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
    _, data, error = read_session_object(session.path, CONSTRAINTS)
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
    # A torn manifest's error, else what is wrong with its fields (status `unknown`).
    manifest_error: str | None = None
    # Output-contract verdicts of the trials that declare one: they rank trials too.
    trial_verdicts: dict[int, Verdict] = field(default_factory=dict)

    @classmethod
    def load(cls, session: Session, objective: Objective | None = None) -> SessionView:
        """Read a session's records once and derive status, progress and the best trial."""
        objective = objective or Objective()
        trials, trials_foreign = session.trials.scan()
        service, service_foreign = session.service.scan()
        report = session.report()
        constraints, constraints_error = read_constraints(session)
        trial_verdicts = _verdicts(trials)
        scores = score_trials(trials, constraints, objective, trial_verdicts)
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
            best=best_trial(trials, constraints, objective, scores, trial_verdicts),
            constraints_error=constraints_error,
            foreign=foreign,
            manifest_error=session.manifest_error or manifest_problem(session.manifest or {}),
            trial_verdicts=trial_verdicts,
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
            "manifest_error": self.manifest_error,
        }

    def verdicts(self, records: list[Record]) -> dict[int, Verdict]:
        """Output-contract verdicts of the records that declare one (reads their logs' tails).

        The trials' were read once by `load` (they decide the best trial too).
        """
        return self.trial_verdicts if records is self.trials else _verdicts(records)

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


def _verdicts(records: list[Record]) -> dict[int, Verdict]:
    """The output-contract verdict of each record that declares one (a log-tail read each)."""
    found = {r.n: output_verdict(r) for r in records}
    return {n: v for n, v in found.items() if v is not None}

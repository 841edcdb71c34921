"""A session's status and progress, derived from its files alone (the rules of docs/inspect.md).

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
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeGuard

from sessionstore._orjson import orjson
from sessionstore._proc import PID_MAX, process_alive
from sessionstore.format.names import CONSTRAINTS, MANIFEST
from sessionstore.store.files import constraints_of
from sessionstore.store.records import Record, RecordState

if TYPE_CHECKING:
    from sessionstore.store.session import Session

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
    """The manifest's planned trial count: an integer >= 1 (never a boolean), else None.

    The one reading of the manifest's `trials` (progress, the contract).
    """
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


def report_status(report: dict[str, Any]) -> str:
    """The status a completed report ends its session with: failed if it says so, else done."""
    return "failed" if report.get("status") == "failed" else "done"


def session_status(session: Session, report: Record | None = None) -> str:
    """running | interrupted | done | failed | unknown (see the module docstring)."""
    report = report if report is not None else session.report()
    if report.state is RecordState.COMPLETED and report.data is not None:
        return report_status(report.data)
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
    """The requested constraints and why they could not be read, as `inspect` shows them.

    `store.files.constraints_of` (a torn file reads as `{}`), its reason
    prefixed `constraints.json: `.
    """
    data, error = constraints_of(session.storage, session.key)
    return data, f"{CONSTRAINTS}: {error}" if error else None

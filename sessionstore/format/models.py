"""Pydantic models of the JSON files in a session (format v1, docs/format.md).

Records are harness-defined: every model accepts extra fields and keeps them,
and describes only the well-known ones. The store reads markers as plain
dicts (fast, never fails on a surprising field); these models are for writers
that want validation and for `sessionstore schema`.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from sessionstore._proc import PID_MAX
from sessionstore.format.names import FORMAT_VERSION, ID_PATTERN, MAX_RECORD, validate_id

Status = Literal["running", "done", "failed"]
# The id pattern as a schema states it. `$` of Python's `re`, which the `jsonschema`
# package (and so check-jsonschema) runs patterns with, also matches before a final
# newline, so `^...$` let "ab12cd34\n" through; the lookahead refuses it there and
# changes nothing in ECMA 262, the regex dialect JSON Schema names.
_ID_SCHEMA_PATTERN = ID_PATTERN + r"(?!\n)"


def utc_now() -> datetime:
    """The current time, timezone-aware UTC (stored as ISO 8601 with offset)."""
    return datetime.now(UTC)


class _Open(BaseModel):
    """A JSON object whose unknown fields are kept, not rejected."""

    model_config = ConfigDict(extra="allow")


class Manifest(_Open):
    """`session.json`: who the session is and whether it is still being written."""

    format: int = Field(FORMAT_VERSION, description="On-disk format version.")
    # The validators below check ids; a JSON Schema cannot see them, so the pattern is
    # written into it too: a harness validating with `sessionstore schema session` must
    # refuse the ids the library refuses (`../x`, `UPPER`).
    id: str = Field(
        description="Session id, the name of the session directory.",
        json_schema_extra={"pattern": _ID_SCHEMA_PATTERN},
    )
    name: str | None = Field(None, description="Human-readable name.")
    created_at: datetime = Field(default_factory=utc_now, description="Creation time, UTC.")
    trials: int | None = Field(
        None, ge=1, le=MAX_RECORD, description="Planned number of trials, if known."
    )
    status: Status = Field("running", description="running until report.json ends the session.")
    pid: int | None = Field(
        None, ge=1, le=PID_MAX, description="Writing process (a pid_t), if one is tracked."
    )
    pid_started_at: float | None = Field(
        None, description="Start time of `pid` in epoch seconds, to detect a recycled pid."
    )
    previous: list[str] = Field(
        default_factory=list,
        description="Pinned earlier session ids.",
        json_schema_extra={"items": {"type": "string", "pattern": _ID_SCHEMA_PATTERN}},
    )
    labels: dict[str, str] = Field(default_factory=dict, description="Free-form labels.")

    @field_validator("id")
    @classmethod
    def _valid_id(cls, value: str) -> str:
        return validate_id(value)

    @field_validator("previous")
    @classmethod
    def _valid_previous(cls, value: list[str]) -> list[str]:
        return [validate_id(v, "previous session id") for v in value]


class Constraints(_Open):
    """`constraints.json`: what the session was asked to achieve (`{}` when nothing)."""


class Benchmark(_Open):
    """A trial's measured results; `metrics` holds the numbers objectives refer to."""

    metrics: dict[str, Any] = Field(default_factory=dict)


class OutputContract(_Open):
    """Declares that a record is judged by its recorded output, not by a status field."""

    log: str = Field(description="The log file, relative to the record directory.")


class TrialRecord(_Open):
    """`trials/<n>/trial.json`: one completed trial."""

    failed: bool = Field(False, description="True when the trial did not meet the constraints.")
    benchmark: Benchmark | None = Field(None, description="Measured results, if any.")
    resources: dict[str, Any] | None = Field(None, description="Hardware the trial ran on.")
    context_length: int | None = None
    learned: str | None = Field(None, description="What the agent learned from this trial.")
    output_contract: OutputContract | None = Field(
        None, description="Judge this trial by the last line of this log (PASS / FAIL:detail)."
    )


class VerificationRecord(_Open):
    """`service/<k>/verification.json`: the outcome of one verification attempt."""

    trial: int | None = Field(None, ge=1, le=MAX_RECORD, description="The trial being verified.")
    run_name: str | None = None
    status: Literal["verified", "failed"] | None = None
    reason: str | None = None
    output_contract: OutputContract | None = Field(
        None, description="Judge this attempt by the last line of this log (PASS / FAIL:detail)."
    )


class Report(_Open):
    """`report.json`: the final report; its presence ends the session."""

    status: Literal["done", "failed"] = Field("done", description="How the session ended.")
    best_trial: int | None = Field(
        None, ge=1, le=MAX_RECORD, description="The best trial: a completed one of the session."
    )
    constraints: dict[str, Any] | None = Field(None, description="The requested constraints.")
    verified: dict[str, Any] | None = Field(None, description="The values actually verified.")


SCHEMAS: dict[str, type[BaseModel]] = {
    "session": Manifest,
    "constraints": Constraints,
    "trial": TrialRecord,
    "verification": VerificationRecord,
    "report": Report,
}

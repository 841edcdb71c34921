"""Which trial is best: an objective, the session's constraints, and the ranking rules.

Rules (docs/inspect.md, "Best trial"):
- The objective is a dotted key path into the trial record plus a direction;
  by default `benchmark.metrics.output_tok_per_s`, higher is better.
- Only completed trials whose objective value is a finite number compete: a
  torn or in-flight trial, or one without the value ("no benchmark"), never wins.
- A trial meets the constraints unless it says `failed: true`, its output
  contract's verdict is FAIL (its log says so: evidence beats any status
  field), or one of the simple `min_<path>` / `max_<path>` constraints it can
  be checked against is violated (see `check_constraints`).
- The best trial meeting the constraints wins; if none meets them, the best
  trial with a value is still returned, with `meets_constraints=False` (shown `*`).
  Ties go to the lower trial number (it got there first).

Everything here works on plain dicts: pydantic is kept off the read path.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Literal

from sessionstore.errors import InvalidInput
from sessionstore.harness.verdict import Outcome, Verdict
from sessionstore.store.session import Record, RecordState

DEFAULT_OBJECTIVE = "benchmark.metrics.output_tok_per_s"
# Where a constraint's path is looked up when it does not resolve from the record root.
METRICS_PREFIX = ("benchmark", "metrics")

Direction = Literal["higher", "lower"]


def lookup(record: Mapping[str, Any], path: str | tuple[str, ...]) -> Any:
    """The value at a dotted key path in a JSON object, or None if any step is missing."""
    value: Any = record
    for key in path.split(".") if isinstance(path, str) else path:
        # JSON objects are dicts: the exact check and one `get` are much cheaper than an
        # ABC check and two lookups (this runs per trial and per path of every listing).
        if type(value) is dict:
            value = value.get(key, _MISSING)
            if value is _MISSING:
                return None
        elif isinstance(value, Mapping) and key in value:
            value = value[key]
        else:
            return None
    return value


_MISSING = object()


def as_number(value: Any) -> float | None:
    """`value` as a float if it is a finite JSON number (booleans are not numbers)."""
    if type(value) is float:  # what JSON numbers mostly are: no conversion, no ABC check
        return value if math.isfinite(value) else None
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    number = float(value)
    return number if math.isfinite(number) else None


@dataclass(frozen=True)
class Objective:
    """What "best" means: a dotted key path into the trial record and a direction."""

    path: str = DEFAULT_OBJECTIVE
    direction: Direction = "higher"

    def __post_init__(self) -> None:
        # `better` reads anything but "higher" as lower: "max" (from a config read as
        # JSON, which mypy cannot check) ranked the worst trial best, silently.
        if self.direction not in ("higher", "lower"):
            raise InvalidInput(
                "objective", f"direction must be higher or lower, not {self.direction!r}"
            )
        if not isinstance(self.path, str) or not self.path:
            raise InvalidInput("objective", f"path must be a dotted key path, not {self.path!r}")

    @property
    def name(self) -> str:
        """The last key of the path, for column headers (`output_tok_per_s`)."""
        return self.path.rsplit(".", 1)[-1]

    def value(self, record: Record) -> float | None:
        """The objective value of a completed trial, or None if it cannot compete."""
        if record.state is not RecordState.COMPLETED or record.data is None:
            return None
        return as_number(lookup(record.data, self.path))

    def better(self, a: float, b: float) -> bool:
        """Whether `a` is strictly better than `b`."""
        return a > b if self.direction == "higher" else a < b

    def to_dict(self) -> dict[str, str]:
        return {"path": self.path, "direction": self.direction}


@dataclass(frozen=True)
class Check:
    """One simple constraint checked against one trial."""

    key: str  # the constraint's key, e.g. "min_context_length"
    path: str  # where the value was found in the record, e.g. "context_length"
    limit: float
    value: float
    ok: bool

    def to_dict(self) -> dict[str, Any]:
        return {
            "key": self.key,
            "path": self.path,
            "limit": self.limit,
            "value": self.value,
            "ok": self.ok,
        }


def check_constraints(record: Mapping[str, Any], constraints: Mapping[str, Any]) -> list[Check]:
    """Check the simple constraints that apply to this trial record.

    A constraint `min_<path>` or `max_<path>` whose limit is a number is
    checked when `<path>` (dotted) resolves to a number in the record, from its
    root or else under `benchmark.metrics`; the limit is inclusive. Constraints
    that do not resolve are not checked here: the harness's `failed` flag is
    the verdict for them.
    """
    return _check(record, _limits(constraints))


# (key, is_min, path, the same path under benchmark.metrics, each also split into its
# keys, limit) of each simple constraint: split once, not once per trial.
_Limit = tuple[str, bool, str, str, tuple[str, ...], tuple[str, ...], float]


def _limits(constraints: Mapping[str, Any]) -> list[_Limit]:
    """The simple constraints, parsed once for every trial they are checked against."""
    limits: list[_Limit] = []
    for key, raw_limit in constraints.items():
        kind, sep, path = key.partition("_")
        limit = as_number(raw_limit)
        if not sep or kind not in ("min", "max") or not path or limit is None:
            continue
        metrics_path = ".".join((*METRICS_PREFIX, path))
        keys, metrics_keys = tuple(path.split(".")), tuple(metrics_path.split("."))
        limits.append((key, kind == "min", path, metrics_path, keys, metrics_keys, limit))
    return limits


def _number_at(record: Mapping[str, Any], keys: tuple[str, ...]) -> float | None:
    """`as_number(lookup(record, keys))`, the common case inlined: it runs per trial and
    per path of every listing (at 10,000 trials scoring was a fifth of `inspect ID`)."""
    value: Any = record
    for key in keys:
        if type(value) is dict:  # JSON objects are dicts; another Mapping: `lookup`
            value = value.get(key)
        elif value is None:
            return None
        else:
            value = lookup(value, (key,))
    if type(value) is float:
        return value if math.isfinite(value) else None
    return None if value is None else as_number(value)


def _check(record: Mapping[str, Any], limits: list[_Limit]) -> list[Check]:
    checks: list[Check] = []
    for key, is_min, path, metrics_path, keys, metrics_keys, limit in limits:
        found_path, value = path, _number_at(record, keys)
        if value is None:
            found_path, value = metrics_path, _number_at(record, metrics_keys)
        if value is None:
            continue
        ok = value >= limit if is_min else value <= limit
        checks.append(Check(key, found_path, limit, value, ok))
    return checks


def meets_constraints(record: Mapping[str, Any], constraints: Mapping[str, Any]) -> bool:
    """False when the trial says `failed: true` or violates a checkable constraint.

    `score_trials` applies the same rule (plus the log's verdict) to each trial.
    """
    if record.get("failed") is True:
        return False
    return all(check.ok for check in check_constraints(record, constraints))


@dataclass(frozen=True)
class Score:
    """One trial as ranked: its objective value, whether it meets the constraints, and why.

    `checks` are the simple constraints checked against it (`check_constraints`),
    so views show what a trial violates without checking again.
    """

    n: int
    value: float | None
    meets_constraints: bool | None  # None when the trial is not completed
    checks: tuple[Check, ...] = ()


def score_trials(
    trials: Iterable[Record],
    constraints: Mapping[str, Any],
    objective: Objective,
    verdicts: Mapping[int, Verdict] | None = None,
) -> list[Score]:
    """Every trial's objective value and constraint verdict, in the trials' order.

    `verdicts` (trial number -> output-contract verdict, from
    `verdict.output_verdict`) disqualifies each trial whose log says FAIL.
    """
    verdicts = verdicts or {}
    limits = _limits(constraints)
    keys = tuple(objective.path.split("."))  # `Objective.value`, its path split once
    completed = RecordState.COMPLETED
    scores: list[Score] = []
    for record in trials:
        data = record.data
        if record.state is not completed or data is None:
            scores.append(_score(record.n, None, None, ()))
            continue
        checks = tuple(_check(data, limits)) if limits else ()
        meets = (
            data.get("failed") is not True
            and (not checks or all(check.ok for check in checks))
            and (not verdicts or not _log_failed(verdicts.get(record.n)))
        )
        value = _number_at(data, keys)
        scores.append(_score(record.n, value, meets, checks))
    return scores


def _score(n: int, value: float | None, meets: bool | None, checks: tuple[Check, ...]) -> Score:
    """`Score(n, value, meets, checks)`, made without the frozen dataclass's `__init__`
    (four `object.__setattr__` calls): one per trial of every listing."""
    score = object.__new__(Score)
    score.__dict__.update(n=n, value=value, meets_constraints=meets, checks=checks)
    return score


def _log_failed(verdict: Verdict | None) -> bool:
    return verdict is not None and verdict.outcome is Outcome.FAIL


@dataclass(frozen=True)
class Best:
    """The winning trial. `meets_constraints=False` means no trial met them (shown `*`)."""

    n: int
    value: float
    objective: Objective
    meets_constraints: bool
    failed: bool
    checks: tuple[Check, ...]
    verdict: Verdict | None = None  # its output-contract verdict, when it declares one

    @property
    def mark(self) -> str:
        """`*` when the best trial does not meet the constraints, else empty."""
        return "" if self.meets_constraints else "*"

    def to_dict(self) -> dict[str, Any]:
        return {
            "n": self.n,
            "value": self.value,
            "objective": self.objective.path,
            "direction": self.objective.direction,
            "meets_constraints": self.meets_constraints,
            "failed": self.failed,
            "checks": [c.to_dict() for c in self.checks],
            "verdict": str(self.verdict) if self.verdict is not None else None,
        }


def best_first(
    value: float | None, meets_constraints: bool | None, objective: Objective
) -> tuple[int, float]:
    """A sort key, best first: by `value` in the objective's direction, those meeting the
    constraints before those that fell short, then whatever has no value."""
    if value is None:
        return (2, 0.0)
    return (0 if meets_constraints else 1, -value if objective.direction == "higher" else value)


def pick_best(scores: Iterable[Score], objective: Objective) -> Score | None:
    """The best score by the rules in the module docstring, or None if nothing competes."""
    best: Score | None = None
    best_value = 0.0
    for score in scores:
        if score.value is None:
            continue
        if best is None:
            best, best_value = score, score.value
            continue
        # Meeting the constraints beats any value; then the value; ties keep the earlier trial.
        meets, best_meets = bool(score.meets_constraints), bool(best.meets_constraints)
        better = meets if meets != best_meets else objective.better(score.value, best_value)
        if better:
            best, best_value = score, score.value
    return best


def best_trial(
    trials: list[Record],
    constraints: Mapping[str, Any],
    objective: Objective | None = None,
    scores: list[Score] | None = None,
    verdicts: Mapping[int, Verdict] | None = None,
) -> Best | None:
    """The best trial of `trials` (see the module docstring), or None if none competes.

    Pass `scores` from `score_trials` to avoid scoring twice, and the same
    `verdicts` it was given.
    """
    objective = objective or Objective()
    verdicts = verdicts or {}
    if scores is None:
        scores = score_trials(trials, constraints, objective, verdicts)
    winner = pick_best(scores, objective)
    if winner is None or winner.value is None:
        return None
    record = next(r for r in trials if r.n == winner.n)
    data = record.data or {}
    return Best(
        n=winner.n,
        value=winner.value,
        objective=objective,
        meets_constraints=bool(winner.meets_constraints),
        failed=data.get("failed") is True,
        checks=tuple(check_constraints(data, constraints)),
        verdict=verdicts.get(winner.n),
    )


def report_fields(best: Best | None, constraints: Mapping[str, Any]) -> dict[str, Any]:
    """Fields for `session.finish(report)`: the requested constraints beside the verified values.

    `verified` holds the objective value and every checked constraint's value
    of the best trial, so a report built from a trial that fell short says
    both what was asked and what was achieved.
    """
    if best is None:
        return {"best_trial": None, "constraints": dict(constraints), "verified": None}
    verified: dict[str, Any] = {best.objective.path: best.value}
    verified.update({check.path: check.value for check in best.checks})
    return {
        "best_trial": best.n,
        "meets_constraints": best.meets_constraints,
        "constraints": dict(constraints),
        "verified": verified,
    }

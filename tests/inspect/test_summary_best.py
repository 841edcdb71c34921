"""Best trial: one named test per rule of docs/inspect.md, "Best trial"."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from inspect_helpers import metrics, torn_trial, trial

from sessionstore.errors import InvalidInput
from sessionstore.inspect.best import (
    Objective,
    Score,
    best_trial,
    check_constraints,
    meets_constraints,
    pick_best,
    report_fields,
)
from sessionstore.inspect.summary import SessionView
from sessionstore.store.session import Session, Store


def session_with(tmp_path: Path, constraints: dict[str, Any] | None = None) -> Session:
    return Store(tmp_path).create(id="s", constraints=constraints, pid=None)


def best_of(session: Session, objective: Objective | None = None) -> tuple[int, bool] | None:
    best = SessionView.load(session, objective).best
    return None if best is None else (best.n, best.meets_constraints)


def test_best_fail_verdict_disqualifies_like_failed_true(tmp_path: Path) -> None:
    session = session_with(tmp_path)
    contract = {"output_contract": {"log": "run.log"}}
    trial(session, metrics(100.0) | contract, {"run.log": "PASS\n"})
    trial(session, metrics(300.0) | contract, {"run.log": "FAIL: oom\n"})
    assert best_of(session) == (1, True)


def test_best_fallback_may_be_a_trial_whose_log_says_fail(tmp_path: Path) -> None:
    session = session_with(tmp_path)
    contract = {"output_contract": {"log": "run.log"}}
    trial(session, metrics(100.0) | contract, {"run.log": "FAIL: slow\n"})
    trial(session, metrics(300.0) | contract, {"run.log": "FAIL: oom\n"})
    best = SessionView.load(session).best
    assert best is not None and (best.n, best.mark, str(best.verdict)) == (2, "*", "fail: oom")


def test_best_default_objective_higher_output_tokens(tmp_path: Path) -> None:
    session = session_with(tmp_path)
    trial(session, metrics(100.0))
    trial(session, metrics(300.0))
    trial(session, metrics(200.0))
    assert best_of(session) == (2, True)


def test_best_custom_objective_lower_is_better(tmp_path: Path) -> None:
    session = session_with(tmp_path)
    trial(session, metrics(100.0, ttft=90.0))
    trial(session, metrics(300.0, ttft=40.0))
    trial(session, metrics(200.0, ttft=60.0))
    objective = Objective("benchmark.metrics.ttft_ms.p99", "lower")
    assert best_of(session, objective) == (2, True)


def test_best_torn_and_in_flight_never_win(tmp_path: Path) -> None:
    session = session_with(tmp_path)
    trial(session, metrics(10.0))
    torn_trial(session, b'{"benchmark": {"metrics": {"output_tok_per_s": 99999}}')
    trial(session, None)
    assert best_of(session) == (1, True)


def test_best_trial_without_benchmark_never_wins(tmp_path: Path) -> None:
    session = session_with(tmp_path)
    trial(session, {"failed": False})
    trial(session, {"failed": False, "benchmark": {"metrics": {"output_tok_per_s": "fast"}}})
    assert best_of(session) is None
    trial(session, metrics(1.0))
    assert best_of(session) == (3, True)


def test_best_failed_trial_does_not_meet_constraints(tmp_path: Path) -> None:
    session = session_with(tmp_path)
    trial(session, metrics(100.0))
    trial(session, metrics(500.0) | {"failed": True})
    assert best_of(session) == (1, True)


def test_best_falls_back_to_best_failed_trial_flagged(tmp_path: Path) -> None:
    session = session_with(tmp_path)
    trial(session, metrics(100.0) | {"failed": True})
    trial(session, metrics(500.0) | {"failed": True})
    trial(session, {"failed": True})  # no benchmark: never returned, even as a fallback
    view = SessionView.load(session)
    assert view.best is not None
    assert (view.best.n, view.best.meets_constraints, view.best.mark) == (2, False, "*")


def test_best_none_without_trials(tmp_path: Path) -> None:
    assert best_of(session_with(tmp_path)) is None


def test_best_tie_goes_to_earlier_trial(tmp_path: Path) -> None:
    session = session_with(tmp_path)
    trial(session, metrics(100.0))
    trial(session, metrics(100.0))
    assert best_of(session) == (1, True)


def test_best_min_constraint_checked_against_record(tmp_path: Path) -> None:
    session = session_with(tmp_path, {"min_context_length": 8192})
    trial(session, metrics(900.0, context_length=4096))
    trial(session, metrics(500.0, context_length=8192))
    assert best_of(session) == (2, True)


def test_best_max_constraint_checked_under_benchmark_metrics(tmp_path: Path) -> None:
    session = session_with(tmp_path, {"max_ttft_ms.p99": 100})
    trial(session, metrics(900.0, ttft=80.0))  # p99 160: violates
    trial(session, metrics(500.0, ttft=50.0))  # p99 100: the limit is inclusive
    assert best_of(session) == (2, True)


def test_constraints_that_do_not_resolve_are_left_to_the_failed_flag() -> None:
    record = metrics(1.0, ttft=500.0)  # ttft_ms is an object, not a number
    assert check_constraints(record, {"max_ttft_ms": 200, "gpu": "A100", "max_": 1}) == []
    assert meets_constraints(record, {"max_ttft_ms": 200})
    assert not meets_constraints(record | {"failed": True}, {})


def test_report_fields_keep_requested_constraints_beside_verified_values(tmp_path: Path) -> None:
    constraints = {"min_context_length": 32768, "max_ttft": 100}
    session = session_with(tmp_path, constraints)
    trial(session, metrics(900.0, context_length=8192) | {"failed": True})
    view = SessionView.load(session)
    fields = report_fields(view.best, view.constraints)
    assert fields == {
        "best_trial": 1,
        "meets_constraints": False,
        "constraints": constraints,
        "verified": {"benchmark.metrics.output_tok_per_s": 900.0, "context_length": 8192.0},
    }
    session.finish(fields)
    assert session.report().data == {**fields, "status": "done"}


scores = st.lists(
    st.tuples(st.none() | st.floats(-1e6, 1e6), st.none() | st.booleans()), max_size=20
).map(
    lambda items: [Score(i + 1, v, m if v is not None else None) for i, (v, m) in enumerate(items)]
)


@given(scores)
def test_best_law_a_meeting_trial_always_beats_a_failing_one(items: list[Score]) -> None:
    winner = pick_best(items, Objective())
    meeting = [s for s in items if s.value is not None and s.meets_constraints]
    if meeting:
        assert winner is not None and winner.meets_constraints
        assert winner.value == max(s.value for s in meeting if s.value is not None)
    elif any(s.value is not None for s in items):
        assert winner is not None and not winner.meets_constraints
    else:
        assert winner is None


@given(scores)
def test_best_law_direction_lower_mirrors_higher_on_negated_values(items: list[Score]) -> None:
    negated = [
        Score(s.n, None if s.value is None else -s.value, s.meets_constraints) for s in items
    ]
    high = pick_best(items, Objective(direction="higher"))
    low = pick_best(negated, Objective(direction="lower"))
    assert (high.n if high else None) == (low.n if low else None)


def test_best_trial_accepts_records_directly(tmp_path: Path) -> None:
    session = session_with(tmp_path)
    trial(session, metrics(5.0))
    best = best_trial(session.trials.records(), {})
    assert best is not None and best.to_dict()["value"] == 5.0


@pytest.mark.parametrize(
    ("args", "problem"),
    [
        (
            ("benchmark.metrics.output_tok_per_s", "max"),
            "direction must be higher or lower, not 'max'",
        ),
        (("", "higher"), "path must be a dotted key path, not ''"),
    ],
)
def test_an_objective_that_would_rank_silently_wrong_is_refused(
    args: tuple[Any, Any], problem: str
) -> None:
    # `better` read anything but "higher" as lower: "max" made the worst trial best.
    with pytest.raises(InvalidInput, match=f"objective: {problem}"):
        Objective(*args)

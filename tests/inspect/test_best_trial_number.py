"""What `export --best` exports (the best trial as `inspect` ranks it), and what the view shows."""

from __future__ import annotations

from pathlib import Path

import pytest
from inspect_helpers import metrics, trial

from sessionstore.errors import NoBestTrial
from sessionstore.inspect.best import Objective
from sessionstore.inspect.summary import SessionView, best_trial_number
from sessionstore.store.session import Store


def test_the_number_is_the_views_best(tmp_path: Path) -> None:
    session = Store(tmp_path).create(id="s", pid=None, constraints={"max_ttft_ms.mean": 200})
    trial(session, metrics(900.0, ttft=250.0))  # fastest, but breaks the ttft budget
    trial(session, metrics(800.0, ttft=150.0))
    trial(session, None)  # in flight
    assert best_trial_number(session) == 2
    assert best_trial_number(session, Objective("benchmark.metrics.ttft_ms.mean", "lower")) == 2
    view = SessionView.load(session)
    assert view.best is not None and view.best.n == 2
    # The scores carry the checks the views show: no check is made twice.
    first, second, in_flight = view.scores
    assert [(c.key, c.ok) for c in first.checks] == [("max_ttft_ms.mean", False)]
    assert [(c.key, c.ok) for c in second.checks] == [("max_ttft_ms.mean", True)]
    assert in_flight.checks == () and in_flight.meets_constraints is None


def test_no_ranked_trial_raises_no_best_trial(tmp_path: Path) -> None:
    session = Store(tmp_path).create(id="s", pid=None)
    trial(session, {"failed": False})  # completed, no benchmark
    with pytest.raises(NoBestTrial) as raised:
        best_trial_number(session)
    assert isinstance(raised.value, LookupError)
    assert raised.value.objective == "benchmark.metrics.output_tok_per_s"
    assert str(raised.value) == f"{session.path}: no completed trial has a benchmark to rank"


def test_the_view_names_the_other_numeric_metrics_first_seen_first(tmp_path: Path) -> None:
    session = Store(tmp_path).create(id="s", pid=None)
    trial(session, metrics(900.0, ttft=250.0, ignored="x"))
    trial(session, {"benchmark": {"metrics": {"output_tok_per_s": 1.0, "tpot": 3, "name": "a"}}})
    view = SessionView.load(session)
    assert view.metric_paths(5) == ["benchmark.metrics.ttft_ms.mean", "benchmark.metrics.tpot"]
    assert view.metric_paths(1) == ["benchmark.metrics.ttft_ms.mean"]

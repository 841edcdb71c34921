"""`store.lifecycle_resume`: the restart plan, derived from the files alone."""

from __future__ import annotations

from pathlib import Path

from inspect_helpers import attempt, torn_trial, trial

from sessionstore.store.lifecycle_resume import resume_plan
from sessionstore.store.session import Store


def test_the_plan_of_each_collection(tmp_path: Path) -> None:
    session = Store(tmp_path).create(id="abc", pid=None)
    trial(session, {"failed": False})
    trial(session, {"failed": True})
    trial(session, None, {"task.yml": "x"})
    torn_trial(session, b"[]")
    attempt(session, {"status": "failed"})
    attempt(session, {"status": "verified"})
    (session.path / "trials" / "notes").write_text("foreign")
    plan = resume_plan(session)
    assert (plan.id, plan.status, plan.finished, plan.writer, plan.mirror) == (
        "abc",
        "running",
        False,
        None,
        None,
    )
    assert (plan.trials.completed, plan.trials.failed, plan.trials.next) == ([1, 2], [2], 5)
    assert [(r.n, r.state, r.files) for r in plan.trials.redo] == [
        (3, "in_flight", ["task.yml"]),
        (4, "torn", ["trial.json"]),
    ]
    assert plan.trials.foreign == ["notes"]
    assert (plan.service.completed, plan.service.failed, plan.service.redo) == ([1, 2], [1], [])
    data = plan.to_dict()
    assert data["trials"]["redo"][0]["path"] == str(session.path / "trials" / "3")
    assert data["service"]["next"] == 3


def test_an_empty_session_and_a_torn_report(tmp_path: Path) -> None:
    session = Store(tmp_path).create(id="abc", pid=None)
    plan = resume_plan(session)
    assert (plan.trials.next, plan.service.next, plan.trials.redo) == (1, 1, [])
    (session.path / "report.json").write_text("torn")
    torn = resume_plan(session)  # a torn report does not end a session (docs/inspect.md)
    assert (torn.status, torn.finished) == ("running", False)

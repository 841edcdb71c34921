"""`judge_session`: the library call behind `sessionstore check`."""

from __future__ import annotations

from pathlib import Path

import pytest

from sessionstore.errors import InvalidInput
from sessionstore.harness.verdict import Judgement, Outcome, judge_session
from sessionstore.store.session import Session, Store


@pytest.fixture
def session(tmp_path: Path) -> Session:
    session = Store(tmp_path / "store").create(id="s1", pid=None)
    writer = session.trials.begin()
    writer.write_bytes("run.log", b"PASS\n")
    writer.complete({"output_contract": {"log": "run.log"}})
    attempt = session.service.begin()
    attempt.write_bytes("out.log", b"FAIL: no GPU\n")
    attempt.complete({"trial": 1})
    return session


def test_judges_a_trial_or_an_attempt(session: Session) -> None:
    judged = judge_session(session, trial=1)
    assert isinstance(judged, Judgement) and judged.verdict.outcome is Outcome.PASS
    assert judged.to_dict() == {
        "collection": "trials",
        "n": 1,
        "outcome": "pass",
        "detail": "",
        "log": str(session.trials.path / "1" / "run.log"),
    }
    failed = judge_session(session, attempt=1, log="out.log")
    assert (failed.collection, failed.n, str(failed.verdict)) == ("service", 1, "fail: no GPU")


def test_what_is_on_disk_is_a_verdict_never_an_error(session: Session) -> None:
    missing = judge_session(session, trial=7, log="run.log")
    assert missing.verdict.outcome is Outcome.INDETERMINATE
    assert missing.verdict.detail == f"no record 7 in {session.trials.path}"
    assert judge_session(session, attempt=1).verdict.outcome is Outcome.INDETERMINATE


@pytest.mark.parametrize(
    ("kwargs", "source"),
    [
        ({}, "trial/attempt"),
        ({"trial": 1, "attempt": 1}, "trial/attempt"),
        ({"trial": 1, "log": "../x"}, "--log '../x'"),
        ({"trial": 9, "log": "/abs"}, "--log '/abs'"),
    ],
)
def test_raises_invalid_input_for_a_malformed_request(
    session: Session, kwargs: dict[str, object], source: str
) -> None:
    with pytest.raises(InvalidInput) as raised:
        judge_session(session, **kwargs)  # type: ignore[arg-type]
    assert raised.value.source == source

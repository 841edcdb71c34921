"""`judge_session`: the library call behind `sessionstore check`."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest
from cli_runner import SESSIONSTORE, TIMEOUT, environ

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


def test_a_collection_it_may_not_search_is_an_indeterminate_verdict(session: Session) -> None:
    # `judge` asked `Path.is_dir()` whether the record exists, which raises for EACCES:
    # `check --json` printed an error instead of its verdict, and `judge_session` raised.
    # Root searches any directory, so as root the check runs without that capability.
    drop: list[str] = []
    if os.geteuid() == 0:
        setpriv = shutil.which("setpriv")
        if setpriv is None:
            pytest.skip("root searches any directory, and setpriv is not here to stop it")
        drop = [setpriv, "--bounding-set", "-dac_override,-dac_read_search", "--"]
    args = ["check", "s1", "--trial", "1", "--json", "--store", str(session.path.parent)]
    session.trials.path.chmod(0)
    try:
        result = subprocess.run(
            [*drop, *SESSIONSTORE, *args],
            capture_output=True,
            text=True,
            timeout=TIMEOUT,
            env=environ(),
            check=False,
        )
    finally:
        session.trials.path.chmod(0o700)
    assert (result.returncode, result.stderr) == (4, "")
    judged = json.loads(result.stdout)
    assert (judged["outcome"], judged["log"]) == ("indeterminate", None)
    unreadable = "trial.json: not read: 'trials' unreadable: Permission denied"
    assert judged["detail"] == f"record is torn: {unreadable}"

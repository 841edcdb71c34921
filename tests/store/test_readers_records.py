"""One rule for record numbers, the best trial chosen by evidence, names that never control."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import orjson
import pytest
from inspect_helpers import metrics, planted, run_cli, trial

from sessionstore.errors import CollectionFull, SessionStoreError
from sessionstore.format.names import MAX_RECORD, record_number
from sessionstore.store.session import Collection, RecordState, Session, Store

# --- record numbers -------------------------------------------------------------------


def test_the_highest_record_number_has_18_digits() -> None:
    assert MAX_RECORD == 999_999_999_999_999_999
    assert record_number(str(MAX_RECORD)) == MAX_RECORD
    assert record_number(str(MAX_RECORD + 1)) is None
    assert record_number("010") is None and record_number("0") is None


def test_begin_refuses_past_the_maximum_instead_of_making_an_invisible_record(
    tmp_path: Path,
) -> None:
    session = Store(tmp_path).create(id="full", pid=None)
    session.trials.begin().complete({})
    last = session.trials.path / str(MAX_RECORD)
    last.mkdir()
    with pytest.raises(CollectionFull) as caught:
        Collection(session.path, "trials").begin()  # a fresh instance: no allocation hint
    assert isinstance(caught.value, SessionStoreError) and isinstance(caught.value, OverflowError)
    assert str(caught.value) == (
        f"{session.trials.path}: no record number left (the highest allowed is {MAX_RECORD}); "
        "start a new session"
    )
    assert sorted(os.listdir(session.trials.path)) == ["1", str(MAX_RECORD)]
    assert [r.n for r in session.trials.records()] == [1, MAX_RECORD]


def test_a_19_digit_entry_is_foreign_and_the_cli_refuses_such_a_number(tmp_path: Path) -> None:
    store = Store(tmp_path / "store")
    session = store.create(id="s", pid=None)
    (session.trials.path / str(MAX_RECORD + 1)).mkdir()
    result = run_cli("inspect", "s", "--json", "--store", str(store.root))
    assert orjson.loads(result.stdout)["foreign"] == {"trials": [str(MAX_RECORD + 1)]}
    for command in ("wait", "check"):
        refused = run_cli(command, "s", "--trial", str(MAX_RECORD + 1), "--store", str(store.root))
        assert refused.returncode == 2 and "--trial" in refused.stderr
    assert session.trials.records() == []


# --- best trial by evidence ------------------------------------------------------------


def judged(session: Session, value: float, log: str | None, **extra: Any) -> int:
    """A completed trial with `value` whose marker declares run.log, containing `log`."""
    marker = metrics(value) | extra
    if log is None:
        return trial(session, marker)
    marker["output_contract"] = {"log": "run.log"}
    return trial(session, marker, {"run.log": log})


def inspected(store: Store, target: str) -> dict[str, Any]:
    result = run_cli("inspect", target, "--json", "--store", str(store.root))
    assert result.returncode == 0, result.stderr
    value: dict[str, Any] = orjson.loads(result.stdout)
    return value


def test_a_fail_verdict_disqualifies_a_trial_as_failed_true_does(tmp_path: Path) -> None:
    store = Store(tmp_path / "store")
    s = store.create(id="s", pid=None)
    judged(s, 100.0, "PASS\n")
    judged(s, 300.0, "training\nFAIL: oom\n")  # says failed: false; its log says FAIL
    judged(s, 400.0, None, failed=True)
    judged(s, 250.0, "exit code 0\n")  # indeterminate: not evidence of failure, competes
    one = inspected(store, "s")
    assert one["best"]["n"] == 4 and one["best"]["meets_constraints"] is True
    assert one["best"]["verdict"].startswith("indeterminate: last line")
    assert [s["meets_constraints"] for s in one["scores"]] == [True, False, False, True]
    shown = run_cli("inspect", "s", "--store", str(store.root)).stdout
    assert "best: #4 output_tok_per_s=250 (meets the constraints)" in shown
    assert "fail: oom" in shown
    exported = run_cli(
        "export", "s", str(tmp_path / "e"), "--best", "--json", "--store", str(store.root)
    )
    assert orjson.loads(exported.stdout)["trial"] == 4


def test_when_every_trial_fails_by_its_log_the_best_is_the_starred_fallback(
    tmp_path: Path,
) -> None:
    store = Store(tmp_path / "store")
    s = store.create(id="s", pid=None)
    judged(s, 100.0, "FAIL: slow\n")
    judged(s, 200.0, "FAIL: oom\n")
    best = inspected(store, "s")["best"]
    assert (best["n"], best["meets_constraints"], best["failed"]) == (2, False, False)
    assert best["verdict"] == "fail: oom"
    listed = run_cli("inspect", "--store", str(store.root)).stdout
    assert "#2 200*" in listed
    exported = run_cli(
        "export", "s", str(tmp_path / "e"), "--best", "--json", "--store", str(store.root)
    )
    assert orjson.loads(exported.stdout)["trial"] == 2


def test_a_record_without_a_contract_has_no_verdict_in_best(tmp_path: Path) -> None:
    store = Store(tmp_path / "store")
    s = store.create(id="s", pid=None)
    judged(s, 100.0, None)
    assert inspected(store, "s")["best"]["verdict"] is None


# --- names are data ----------------------------------------------------------------------

EVIL = "evil\x1b]0;pwned\x07"
SHOWN = "evil\\x1b]0;pwned\\x07"


def no_control(text: str) -> None:
    assert not any((ord(c) < 0x20 and c != "\n") or 0x7F <= ord(c) <= 0x9F for c in text), text


def test_control_characters_in_names_and_fields_are_escaped_in_every_table(
    tmp_path: Path,
) -> None:
    store = Store(tmp_path / "store")
    created = run_cli("new", "--id", "s", "--name", EVIL, "--store", str(store.root))
    assert created.returncode == 0, created.stderr
    session = store.open("s")
    constraints = {f"max_{EVIL}": 1, "[/x] :smile:": f"v\n{EVIL}"}
    (session.path / "constraints.json").write_bytes(orjson.dumps(constraints))
    judged(session, 100.0, f"FAIL: {EVIL}\n", note=EVIL, benchmark={"metrics": {EVIL: 1.0}})
    (session.trials.path / "2").mkdir()
    (session.trials.path / "2" / "trial.json").write_bytes(b"{" + EVIL.encode())
    (session.trials.path / f"x\ny{EVIL}").mkdir()
    # A status the schema rejects (the API refuses it): written raw, as any harness could.
    planted(session.service, {"status": EVIL, "reason": f"r\r\n{EVIL}"})

    listed = run_cli("inspect", "--store", str(store.root))
    shown = run_cli("inspect", "s", "--store", str(store.root))
    checked = run_cli("check", "s", "--trial", "1", "--store", str(store.root))
    for result in (listed, shown, checked):
        assert result.returncode in (0, 1), result.stderr
        no_control(result.stdout + result.stderr)
    assert SHOWN in listed.stdout and SHOWN in shown.stdout
    assert f"foreign entries in trials/: x\\ny{SHOWN}" in shown.stdout
    assert "[/x] :smile:=v\\n" in shown.stdout
    assert checked.stdout == f"fail: {SHOWN}\n"
    # JSON stays exact.
    exact = inspected(store, "s")
    assert exact["name"] == EVIL and exact["constraints"] == constraints
    as_json = run_cli("check", "s", "--trial", "1", "--json", "--store", str(store.root))
    assert orjson.loads(as_json.stdout)["detail"] == EVIL


def test_errors_and_messages_name_things_escaped_on_one_line(tmp_path: Path) -> None:
    store = Store(tmp_path / "store")
    workspace = tmp_path / f"ws{EVIL}"
    raw = Session.open(Store(tmp_path / "w").create(id="w", pid=None).path)
    raw.path.rename(workspace)
    ws = Session.open(workspace)
    ws.trials.begin().complete({})
    (ws.trials.path / "2").mkdir()
    (ws.trials.path / "2" / "trial.json").write_bytes(b"[]")
    results = [
        run_cli("inspect", f"no{EVIL}", "--store", str(store.root)),
        run_cli("wait", str(workspace), "--trial", "1", "--store", str(store.root)),
        run_cli("wait", str(workspace), "--trial", "2", "--store", str(store.root)),
        run_cli(
            "wait", str(workspace), "--trial", "3", "--timeout", "0", "--store", str(store.root)
        ),
        run_cli("check", f"no{EVIL}", "--trial", "1", "--store", str(store.root)),
    ]
    assert [r.returncode for r in results] == [1, 0, 1, 3, 4]
    for result in results:
        no_control(result.stdout + result.stderr)
        assert len((result.stdout + result.stderr).strip().splitlines()) == 1
        assert SHOWN in result.stdout + result.stderr
    assert ws.trials.records()[1].state is RecordState.TORN


def test_writers_refuse_a_pid_readers_would_call_unknown(tmp_path: Path) -> None:
    from sessionstore.errors import InvalidInput

    with pytest.raises(InvalidInput, match="pid"):
        Store(tmp_path).create(id="s", pid=2**31)
    refused = run_cli("new", "--pid", str(2**31), "--store", str(tmp_path / "store"))
    assert refused.returncode == 2 and "--pid" in refused.stderr
    assert not (tmp_path / "s").exists()

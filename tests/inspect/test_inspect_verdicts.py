"""inspect shows output-contract verdicts, judged by the record's log, not its status field."""

from __future__ import annotations

from pathlib import Path

import orjson
from cli_runner import invoke

from sessionstore.store.session import Store


def _session(tmp_path: Path) -> Store:
    store = Store(tmp_path)
    session = store.create(id="judged", pid=None)
    contract = {"output_contract": {"log": "run.log"}}
    passing = session.trials.begin()
    passing.write_text("run.log", "warming up\nPASS\n\n")
    passing.complete({"failed": False, **contract})
    lying = session.trials.begin()
    lying.write_text("run.log", "FAIL:oom at batch 64\n")
    lying.complete({"failed": False, "status": "verified", **contract})
    silent = session.trials.begin()
    silent.complete({"failed": False, **contract})  # declares a log it never wrote
    session.trials.begin().complete({"failed": False})  # declares no contract
    attempt = session.service.begin()
    attempt.write_text("svc.log", "PASS\n")
    attempt.complete({"trial": 1, "status": "failed", **{"output_contract": {"log": "svc.log"}}})
    return store


def test_json_carries_a_verdict_per_declaring_record(tmp_path: Path) -> None:
    _session(tmp_path)
    result = invoke("inspect", "judged", "--store", tmp_path, "--json")
    assert result.exit_code == 0, result.output
    verdicts = orjson.loads(result.output)["verdicts"]
    assert [(v["n"], v["outcome"], v["detail"]) for v in verdicts["trials"]] == [
        (1, "pass", ""),
        (2, "fail", "oom at batch 64"),
        (3, "indeterminate", verdicts["trials"][2]["detail"]),
    ]
    assert verdicts["trials"][2]["detail"] == "log file is missing"
    assert [(v["n"], v["outcome"]) for v in verdicts["service"]] == [(1, "pass")]


def test_table_shows_the_log_column_only_when_a_record_declares_a_contract(
    tmp_path: Path,
) -> None:
    _session(tmp_path)
    args = ["inspect", "judged", "--store", str(tmp_path), "--no-color"]
    result = invoke(*args, terminal_width=120)
    assert result.exit_code == 0, result.output
    assert "LOG" in result.output
    assert "fail: oom at batch 64" in result.output
    assert "indeterminate" in result.output
    plain = Store(tmp_path).create(id="plain", pid=None)
    plain.trials.begin().complete({"failed": False})
    result = invoke("inspect", "plain", "--store", tmp_path)
    assert result.exit_code == 0 and "LOG" not in result.output

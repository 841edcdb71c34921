"""`sessionstore inspect` end to end: JSON fields, options, colour, a 10,000-trial store."""

from __future__ import annotations

import os
import pty
import re
import subprocess
import sys
from pathlib import Path

import orjson
import pytest
from cli_runner import Invoked, invoke
from inspect_helpers import attempt, demo_store, metrics, trial

from sessionstore.store.session import Store


def inspect(*args: str, env: dict[str, str] | None = None) -> Invoked:
    """`sessionstore inspect ARGS` in-process, which must succeed."""
    result = invoke("inspect", *args, env=env)
    assert result.exit_code == 0, result.output
    return result


def test_list_json_carries_status_progress_best_constraints(tmp_path: Path) -> None:
    demo_store(tmp_path)
    summaries = orjson.loads(inspect("--store", str(tmp_path), "--json").stdout)
    by_id = {s["id"]: s for s in summaries}
    assert [s["id"] for s in summaries] == ["trialing", "verified", "all-failed", "crashed"]
    for summary in summaries:
        assert {"id", "path", "status", "progress", "best", "constraints", "created_at"} <= set(
            summary
        )
    assert by_id["trialing"]["progress"] == "trialing (3/3)"
    assert by_id["crashed"]["status"] == "interrupted"
    assert by_id["verified"]["best"]["n"] == 2
    assert by_id["verified"]["best"]["value"] == 1100.25
    assert by_id["verified"]["best"]["meets_constraints"] is True
    assert by_id["all-failed"]["best"]["meets_constraints"] is False
    assert by_id["all-failed"]["constraints"] == {"min_context_length": 32768}


def test_detail_json_carries_tables_best_and_lineage(tmp_path: Path) -> None:
    store = demo_store(tmp_path)
    child = store.create(id="child", previous=["verified"], pid=None)
    trial(child, metrics(5.0))
    attempt(child, None)
    detail = orjson.loads(inspect("child", "--store", str(tmp_path), "--json").stdout)
    assert detail["progress"] == "verifying (1)"
    assert detail["best"]["n"] == 1
    assert detail["objective"] == {
        "path": "benchmark.metrics.output_tok_per_s",
        "direction": "higher",
    }
    assert detail["scores"] == [{"n": 1, "value": 5.0, "meets_constraints": True}]
    assert [(s["n"], s["state"]) for s in detail["service"]] == [(1, "in_flight")]
    assert detail["previous"] == ["verified"]
    assert detail["lineage"][0]["id"] == "verified"
    assert detail["lineage"][0]["copied"] is True
    assert detail["lineage"][0]["trials"] == 2


def test_detail_json_best_is_null_without_values(tmp_path: Path) -> None:
    session = Store(tmp_path).create(id="s", pid=None)
    trial(session, None)
    detail = orjson.loads(inspect("s", "--store", str(tmp_path), "--json").stdout)
    assert detail["best"] is None


def test_objective_and_direction_options(tmp_path: Path) -> None:
    session = Store(tmp_path).create(id="s", pid=None)
    trial(session, metrics(100.0, ttft=90.0))
    trial(session, metrics(300.0, ttft=40.0))
    trial(session, metrics(50.0, ttft=10.0))
    args = ["s", "--store", str(tmp_path), "--json", "--objective", "benchmark.metrics.ttft_ms.p99"]
    assert orjson.loads(inspect(*args).stdout)["best"]["n"] == 1
    assert orjson.loads(inspect(*args, "--lower").stdout)["best"]["n"] == 3
    table = inspect("s", "--store", str(tmp_path), "--objective", "benchmark.metrics.ttft_ms.p99")
    assert "ttft_ms.p99" in table.stdout


def test_no_color_env_and_flag(tmp_path: Path) -> None:
    session = Store(tmp_path).create(id="s", pid=None)
    trial(session, metrics(5.0) | {"failed": True})
    coloured = inspect("s", "--store", str(tmp_path), "--color")
    assert "\x1b[" in coloured.stdout
    assert "\x1b[" not in inspect("s", "--store", str(tmp_path), "--no-color").stdout
    # Not a terminal (CliRunner captures output): no colour by default.
    assert "\x1b[" not in inspect("s", "--store", str(tmp_path)).stdout


def test_no_color_env_on_a_terminal(tmp_path: Path) -> None:
    # A real pseudo-terminal, so only NO_COLOR can be what turns colour off.
    session = Store(tmp_path).create(id="s", pid=None)
    trial(session, metrics(5.0) | {"failed": True})
    code = "from sessionstore.cli import main; main()"
    outputs = {}
    for no_color in ("", "1"):
        env = {**os.environ, "TERM": "xterm-256color", "COLUMNS": "80"}
        env.pop("NO_COLOR", None)
        if no_color:
            env["NO_COLOR"] = no_color
        leader, follower = pty.openpty()
        proc = subprocess.Popen(
            [sys.executable, "-c", code, "inspect", "s", "--store", str(tmp_path)],
            stdout=follower,
            stderr=subprocess.DEVNULL,
            env=env,
        )
        os.close(follower)
        chunks = []
        while True:
            try:
                chunk = os.read(leader, 65536)
            except OSError:
                break
            if not chunk:
                break
            chunks.append(chunk)
        proc.wait(timeout=60)
        os.close(leader)
        outputs[no_color] = b"".join(chunks).decode()
    colour = re.compile(r"\x1b\[(?:[0-9;]*;)?(?:3[0-8]|9[0-7])[;m]")  # SGR foreground codes
    assert colour.search(outputs[""])  # colour on a terminal
    assert not colour.search(outputs["1"])


def build_trials(root: Path, sessions: int, trials_each: int) -> Store:
    """Many completed trials, written as plain files (the writer API's fsyncs would dominate)."""
    store = Store(root)
    marker = orjson.dumps(metrics(1000.0, 120.0) | {"context_length": 8192})
    for s in range(sessions):
        session = store.create(id=f"s{s:04d}", trials=trials_each, pid=None)
        for n in range(1, trials_each + 1):
            record = session.trials.path / str(n)
            record.mkdir()
            (record / "trial.json").write_bytes(marker)
    return store


@pytest.mark.slow
def test_list_renders_a_store_with_10000_trials(tmp_path: Path) -> None:
    build_trials(tmp_path, 100, 100)
    table = inspect("--store", str(tmp_path))
    assert table.stdout.count("trialing (100/100)") == 100
    summaries = orjson.loads(inspect("--store", str(tmp_path), "--json").stdout)
    assert sum(s["trial_counts"]["completed"] for s in summaries) == 10_000


@pytest.mark.slow
def test_detail_renders_a_session_with_10000_trials(tmp_path: Path) -> None:
    build_trials(tmp_path, 1, 10_000)
    detail = inspect("s0000", "--store", str(tmp_path), "--all", env={"COLUMNS": "80"})
    assert re.search(r"trials 99\d\d-10000", detail.stdout)  # the spark: the latest trials
    assert detail.stdout.count("completed") == 10_000
    rows = [line.split()[0] for line in detail.stdout.splitlines() if " completed " in line]
    assert rows == [str(n) for n in range(1, 10_001)]
    assert "more trials" not in detail.stdout


def test_columns_of_zero_lose_no_line(tmp_path: Path) -> None:
    # rich takes COLUMNS=0 as a width of 0 and prints no line of Text at all: the detail's
    # header (status, best, constraints) and the list's objective line vanished.
    demo_store(tmp_path)
    wide = inspect("verified", "--store", str(tmp_path), env={"COLUMNS": "80"}).stdout
    zero = inspect("verified", "--store", str(tmp_path), env={"COLUMNS": "0"}).stdout
    assert zero == wide and "status: done" in zero
    listed = inspect("--store", str(tmp_path), env={"COLUMNS": "0"}).stdout
    assert listed == inspect("--store", str(tmp_path), env={"COLUMNS": "80"}).stdout
    assert "BEST: benchmark.metrics.output_tok_per_s" in listed

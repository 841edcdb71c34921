"""Log paths that name no file: `.`, `./`, `a/./.` (a path with no components left).

The output-contract log comes from `--log` (the user) or from the marker's
`output_contract.log` (the agent). A path naming the record directory itself
is a malformed log path: `check --log .` is a usage error (exit 2), and a
marker declaring it is indeterminate, never a crash of `check`, of
`inspect` of that session, or of the listing of every session in the store.
"""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest
from inspect_helpers import metrics, planted, run_cli, trial

from sessionstore.store.session import Store

NO_FILE = [".", "./", "./.", "././/."]


@pytest.mark.parametrize("log", NO_FILE)
def test_check_log_naming_the_record_directory_is_a_usage_error(tmp_path: Path, log: str) -> None:
    store = tmp_path / "store"
    session = Store(store).create(id="s", pid=None)
    trial(session, metrics(1.0), {"run.log": "PASS\n"})
    result = run_cli("check", "s", "--trial", "1", "--log", log, "--store", str(store))
    assert result.returncode == 2, result.stderr
    assert "Traceback" not in result.stderr
    error = result.stderr.strip().splitlines()[-1]
    assert error.startswith("Error: Invalid value for --log"), result.stderr
    assert "names the record directory itself" in error


@pytest.mark.parametrize("log", NO_FILE)
def test_a_marker_declaring_the_record_directory_as_its_log_is_indeterminate(
    tmp_path: Path, log: str
) -> None:
    store = tmp_path / "store"
    session = Store(store).create(id="s", pid=None)
    # The agent's marker, written raw: the API refuses a log no verdict can read.
    planted(session.trials, metrics(1.0, output_contract={"log": log}))
    Store(store).create(id="other", pid=None)
    for args in (("inspect",), ("inspect", "--json"), ("inspect", "s"), ("inspect", "s", "--json")):
        result = run_cli(*args, "--store", str(store))
        assert result.returncode == 0, (args, result.stderr)
    detail = orjson.loads(run_cli("inspect", "s", "--json", "--store", str(store)).stdout)
    assert detail["verdicts"]["trials"][0]["outcome"] == "indeterminate"
    result = run_cli("check", "s", "--trial", "1", "--store", str(store))
    assert result.returncode == 4, result.stderr
    assert "indeterminate" in result.stdout

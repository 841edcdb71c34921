"""The README's first command and the harness example, run for real."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import orjson
from cli_runner import popen, reap, run

from sessionstore.store.session import RecordState, Store

ROOT = Path(__file__).resolve().parents[2]


def env(tmp: Path) -> dict[str, str]:
    """The environment of a child whose temp files land in `tmp`, to be checked afterwards."""
    tmp.mkdir(exist_ok=True)
    return {**os.environ, "NO_COLOR": "1", "COLUMNS": "100", "TMPDIR": str(tmp)}


def test_demo_mirrors_a_fake_session_and_redacts_its_secret(tmp_path: Path) -> None:
    store, tmp = tmp_path / "store", tmp_path / "tmp"
    result = run("demo", "--store", store, env=env(tmp), timeout=120)
    assert result.returncode == 0, result.stderr
    assert list(tmp.iterdir()) == [], "the demo leaves no temp file behind"
    (session,) = Store(store).sessions()
    states = [r.state for r in session.trials.records()]
    # Trial 3's marker is torn in the workspace: the mirror holds it back.
    assert states == [RecordState.COMPLETED, RecordState.COMPLETED] + [RecordState.IN_FLIGHT] * 2
    assert [r.data["status"] for r in session.service.records() if r.data] == ["verified"]
    # Finished as a harness would: demo sessions do not pile up as running ones.
    report = orjson.loads((session.path / "report.json").read_bytes())
    assert report["best_trial"] == 1 and report["status"] == "done"
    assert (session.path / "trials/1/task.yml").read_bytes().count(b"\r\n") == 3
    assert b"\x00\xff" in (session.path / "trials/1/patches/0001-kernel.diff").read_bytes()
    assert (session.path / "trials/2/task.yml").read_bytes() == b"model: fake-7b\nbatch_size: 48\n"
    log = (session.path / "trials/1/run.log").read_text()
    assert "using token REDACTED" in log
    out = result.stdout
    assert "appears nowhere in the session" in out
    assert "held back by the mirror: trials/3/trial.json" in out
    assert "The workspace is deleted" in out
    assert f"sessionstore inspect {session.id}" in out
    assert f"sessionstore view --store {store}" in out
    assert f"sessionstore report {session.id} --store {store} -o report.html" in out
    assert "verified (2/4)" in out
    match = re.search(r"(/\S*sessionstore-demo-\w+)", out)
    assert match is not None and match.group(1).startswith("/")
    assert not Path(match.group(1)).exists()


def test_harness_example_runs_end_to_end(tmp_path: Path) -> None:
    tmp = tmp_path / "tmp"
    harness = ROOT / "examples" / "harness.py"
    result = subprocess.run(
        [sys.executable, harness, "--store", tmp_path / "store"],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        env=env(tmp),
    )
    assert result.returncode == 0, result.stderr
    assert list(tmp.iterdir()) == [], "the workspace, which holds the raw token, is deleted"
    (session,) = Store(tmp_path / "store").sessions()
    report = orjson.loads((session.path / "report.json").read_bytes())
    assert report["best_trial"] == 2 and report["status"] == "done"
    assert [r.state for r in session.trials.records()] == [RecordState.COMPLETED] * 2
    for n in (1, 2):
        log = (session.path / "trials" / str(n) / "run.log").read_text()
        assert "example-api-token" not in log and "REDACTED" in log


def test_ctrl_c_during_the_demo_exits_130_and_leaves_nothing(tmp_path: Path) -> None:
    store, tmp = tmp_path / "store", tmp_path / "tmp"
    demo = popen("demo", "--store", store, env=env(tmp))
    try:
        # Interrupt once the fake agent is at work: the session and its workspace exist.
        for _ in range(400):
            if any(store.glob("*/trials/1")) or demo.poll() is not None:
                break
            time.sleep(0.025)
        assert demo.poll() is None, "the demo ended before it could be interrupted"
        demo.send_signal(signal.SIGINT)
        _, stderr = demo.communicate(timeout=60)
    finally:
        reap(demo)
    assert demo.returncode == 130, stderr
    assert b"Traceback" not in stderr and b"Aborted" not in stderr, stderr
    assert list(tmp.iterdir()) == [], "the workspace holds the raw token: it must go"
    assert Store(store).sessions() == [], "no half-built session is left"
    assert [p.name for p in store.iterdir()] == [], "nothing else is left in the store either"


def test_ctrl_c_at_any_moment_of_the_harness_leaves_no_raw_token(tmp_path: Path) -> None:
    harness = ROOT / "examples" / "harness.py"
    token = b"example-api-token-0123456789"
    # Interrupts spread over the run: before, during and after the agent and the clean-up.
    for i, delay in enumerate((0.35, 0.5, 0.65, 0.8, 0.95, 1.1)):
        tmp = tmp_path / f"tmp{i}"
        proc = subprocess.Popen(
            [sys.executable, str(harness), "--store", str(tmp_path / f"store{i}")],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=env(tmp),
        )
        try:
            time.sleep(delay)
            proc.send_signal(signal.SIGINT)
            _, stderr = proc.communicate(timeout=60)
        finally:
            reap(proc)
        left = [p for p in tmp.rglob("*") if p.is_file() and token in p.read_bytes()]
        assert left == [], f"raw token left after SIGINT at {delay} s"
        # Before Python has its handler the signal kills it (-2), and while it imports it
        # prints a traceback: neither can leave anything, since nothing was written yet.
        if b"Traceback" not in stderr:
            assert proc.returncode in (0, 130, -signal.SIGINT), stderr

"""Status and progress: one named test per rule of docs/inspect.md."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from cli_runner import invoke
from inspect_helpers import attempt, metrics, planted, set_manifest, torn_trial, trial

from sessionstore._proc import process_start_time
from sessionstore.inspect.summary import SessionView
from sessionstore.store.session import Session, Store
from sessionstore.store.status import session_progress, session_status


def progress(session: Session) -> str:
    return str(SessionView.load(session).progress)


# --- status ---------------------------------------------------------------


def test_status_unknown_when_a_manifest_field_is_out_of_range(tmp_path: Path) -> None:
    session = Store(tmp_path).create(id="s", pid=None)
    odd = set_manifest(session, pid=2**31, trials="three")
    view = SessionView.load(odd)
    assert (session_status(odd), view.status) == ("unknown", "unknown")
    assert view.manifest_error == (
        'session.json: trials must be an integer >= 1 or null, not "three"; '
        "pid must be an integer from 1 to 2147483647 or null, not 2147483648"
    )
    assert view.summary()["manifest_error"] == view.manifest_error


def test_status_running_while_writer_alive(tmp_path: Path) -> None:
    session = Store(tmp_path).create(id="s")
    assert session_status(session) == "running"


def test_status_interrupted_when_writer_process_died(tmp_path: Path) -> None:
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        session = Store(tmp_path).create(id="s", pid=proc.pid)
        assert session.manifest is not None
        assert session.manifest["pid_started_at"] is not None
        assert session_status(session) == "running"
    finally:
        proc.kill()
        proc.wait()
    assert session_status(session) == "interrupted"


def test_status_interrupted_when_pid_recycled(tmp_path: Path) -> None:
    # A live pid whose start time differs from the recorded one is another process.
    session = Store(tmp_path).create(id="s")
    started = process_start_time(os.getpid())
    assert started is not None
    session = set_manifest(session, pid=os.getpid(), pid_started_at=started - 3600)
    assert session_status(session) == "interrupted"


def test_status_cli_session_without_pid_is_never_interrupted(tmp_path: Path) -> None:
    result = invoke("new", "--store", tmp_path, "--id", "s")
    assert result.exit_code == 0, result.output
    session = Store(tmp_path).open("s")
    assert session.manifest is not None
    assert session.manifest["pid"] is None
    assert session_status(session) == "running"


def test_status_cli_session_with_pid_tracks_that_process(tmp_path: Path) -> None:
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        args = ["new", "--store", str(tmp_path), "--id", "s", "--pid", str(proc.pid)]
        assert invoke(*args).exit_code == 0
        assert session_status(Store(tmp_path).open("s")) == "running"
    finally:
        proc.kill()
        proc.wait()
    assert session_status(Store(tmp_path).open("s")) == "interrupted"


def test_status_library_session_records_the_caller(tmp_path: Path) -> None:
    session = Store(tmp_path).create(id="s")
    assert session.manifest is not None
    assert session.manifest["pid"] == os.getpid()
    started = process_start_time(os.getpid())
    assert started is not None
    assert abs(session.manifest["pid_started_at"] - started) < 1.0


def test_status_done_from_report(tmp_path: Path) -> None:
    session = Store(tmp_path).create(id="s")
    session.finish({"best_trial": None})
    assert session_status(session) == "done"


def test_status_failed_from_report(tmp_path: Path) -> None:
    session = Store(tmp_path).create(id="s")
    session.finish({}, status="failed")
    assert session_status(session) == "failed"


def test_status_report_beats_dead_writer(tmp_path: Path) -> None:
    # A finished session whose writer has exited is done, not interrupted.
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    session = Store(tmp_path).create(id="s", pid=None)
    session.finish({})
    session = set_manifest(session, status="running", pid=proc.pid, pid_started_at=1.0)
    assert session_status(session) == "done"


def test_status_torn_report_does_not_end_the_session(tmp_path: Path) -> None:
    session = Store(tmp_path).create(id="s", pid=None)
    (session.path / "report.json").write_bytes(b'{"status": "do')
    assert session_status(session) == "running"


def test_status_of_raw_workspace_without_manifest(tmp_path: Path) -> None:
    (tmp_path / "trials").mkdir()
    assert session_status(Session.open(tmp_path)) == "running"


# --- progress while trialing -------------------------------------------------


def test_progress_counts_the_trial_being_worked_on(tmp_path: Path) -> None:
    session = Store(tmp_path).create(id="s", trials=3)
    trial(session, metrics(1.0))
    assert progress(session) == "trialing (2/3)"


def test_progress_uses_highest_in_flight_trial(tmp_path: Path) -> None:
    session = Store(tmp_path).create(id="s", trials=5)
    trial(session, metrics(1.0))
    trial(session, None)
    trial(session, None)
    assert progress(session) == "trialing (3/5)"


def test_progress_first_trial_before_any_record(tmp_path: Path) -> None:
    assert progress(Store(tmp_path).create(id="s", trials=3)) == "trialing (1/3)"


def test_progress_capped_at_planned_count(tmp_path: Path) -> None:
    session = Store(tmp_path).create(id="s", trials=2)
    for _ in range(2):
        trial(session, metrics(1.0))
    assert progress(session) == "trialing (2/2)"
    trial(session, None)  # an extra trial beyond the plan
    assert progress(session) == "trialing (2/2)"


def test_progress_without_planned_count(tmp_path: Path) -> None:
    session = Store(tmp_path).create(id="s")
    trial(session, metrics(1.0))
    assert progress(session) == "trialing (2)"


def test_progress_torn_trial_is_not_completed(tmp_path: Path) -> None:
    session = Store(tmp_path).create(id="s", trials=4)
    trial(session, metrics(1.0))
    torn_trial(session)
    assert progress(session) == "trialing (2/4)"


def test_progress_is_computed_whatever_the_status(tmp_path: Path) -> None:
    session = Store(tmp_path).create(id="s", trials=3)
    trial(session, metrics(1.0))
    session.finish({})
    view = SessionView.load(session)
    assert (view.status, str(view.progress)) == ("done", "trialing (2/3)")


# --- progress while verifying ------------------------------------------------


def test_progress_verifying_counts_completed_trials(tmp_path: Path) -> None:
    session = Store(tmp_path).create(id="s", trials=3)
    for _ in range(3):
        trial(session, metrics(1.0))
    attempt(session, None)
    assert progress(session) == "verifying (3/3)"


def test_progress_verifying_once_any_attempt_exists(tmp_path: Path) -> None:
    session = Store(tmp_path).create(id="s", trials=3)
    trial(session, metrics(1.0))
    trial(session, None)
    attempt(session, None)
    assert progress(session) == "verifying (1/3)"


def test_progress_verified_from_latest_attempt(tmp_path: Path) -> None:
    session = Store(tmp_path).create(id="s", trials=1)
    trial(session, metrics(1.0))
    attempt(session, {"trial": 1, "status": "failed"})
    attempt(session, {"trial": 1, "status": "verified"})
    assert progress(session) == "verified (1/1)"


def test_progress_verification_failed_from_latest_attempt(tmp_path: Path) -> None:
    session = Store(tmp_path).create(id="s", trials=1)
    trial(session, metrics(1.0))
    attempt(session, {"trial": 1, "status": "verified"})
    attempt(session, {"trial": 1, "status": "failed"})
    assert progress(session) == "verification failed (1/1)"


def test_progress_attempt_10_beats_attempt_9(tmp_path: Path) -> None:
    session = Store(tmp_path).create(id="s", trials=1)
    trial(session, metrics(1.0))
    for _ in range(8):
        attempt(session, {"trial": 1, "status": "failed"})
    attempt(session, {"trial": 1, "status": "failed"})  # 9
    attempt(session, {"trial": 1, "status": "verified"})  # 10: sorts after 9 numerically
    assert session.service.numbers()[-2:] == [9, 10]
    assert progress(session) == "verified (1/1)"


def test_progress_missing_result_reads_verifying(tmp_path: Path) -> None:
    session = Store(tmp_path).create(id="s", trials=1)
    trial(session, metrics(1.0))
    attempt(session, {"trial": 1, "status": "verified"})
    attempt(session, None)  # the newest attempt has no result yet
    assert progress(session) == "verifying (1/1)"


def test_progress_torn_result_reads_verifying(tmp_path: Path) -> None:
    session = Store(tmp_path).create(id="s", trials=1)
    trial(session, metrics(1.0))
    attempt(session, {"trial": 1, "status": "verified"})
    writer = session.service.begin()
    (writer.path / "verification.json").write_bytes(b'{"status": "verif')
    assert progress(session) == "verifying (1/1)"


def test_progress_unknown_result_reads_verifying(tmp_path: Path) -> None:
    session = Store(tmp_path).create(id="s", trials=1)
    trial(session, metrics(1.0))
    planted(session.service, {"trial": 1, "status": "pending"})
    assert progress(session) == "verifying (1/1)"


def test_session_progress_is_pure_over_records(tmp_path: Path) -> None:
    # The function needs only the manifest and the records: no status, no processes.
    session = Store(tmp_path).create(id="s", trials=2, pid=None)
    trial(session, metrics(1.0))
    records = session.trials.records()
    assert str(session_progress(session, records, [])) == "trialing (2/2)"

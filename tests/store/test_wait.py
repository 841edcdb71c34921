"""Waiting for records with real watchdog observers, real threads and real processes.

Event-driven tests use a poll interval far longer than the test's deadline,
so a prompt return proves the event path worked; the fallback tests take
events away and prove the periodic re-check alone still converges.
"""

from __future__ import annotations

import logging
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest
from cli_runner import environ, finish, invoke, popen, reap

from sessionstore._watch import Watcher
from sessionstore.cli import wait as wait_command
from sessionstore.errors import InvalidInput, WaitTimedOut
from sessionstore.format.names import MAX_RECORD
from sessionstore.store import wait as wait_module
from sessionstore.store.session import Record, RecordState, Session, Store, read_record
from sessionstore.store.wait import wait_record, wait_report

NO_POLL = 60.0  # longer than any test here waits: only an event can end these waits


@pytest.fixture
def session(tmp_path: Path) -> Session:
    return Store(tmp_path / "store").create(id="s1", pid=None)


@pytest.fixture
def later() -> Iterator[Callable[[float, Callable[[], Any]], None]]:
    """Run a function on a thread after a delay; joined (and its error raised) at teardown."""
    threads: list[threading.Thread] = []
    errors: list[BaseException] = []

    def schedule(delay: float, func: Callable[[], Any]) -> None:
        def run() -> None:
            time.sleep(delay)
            try:
                func()
            except BaseException as exc:
                errors.append(exc)

        thread = threading.Thread(target=run, daemon=True)
        thread.start()
        threads.append(thread)

    yield schedule
    for thread in threads:
        thread.join(10)
    if errors:
        raise errors[0]


def complete_trial(session: Session, record: dict[str, Any] | None = None) -> None:
    writer = session.trials.begin()
    writer.write_text("run.log", "PASS\n")
    writer.complete(record or {"failed": False})


def timed(func: Callable[[], Any]) -> tuple[Any, float]:
    start = time.monotonic()
    result = func()
    return result, time.monotonic() - start


def test_returns_at_once_when_already_completed(session: Session) -> None:
    complete_trial(session)
    record, elapsed = timed(lambda: session.trials.wait(1, timeout=0))
    assert record.state is RecordState.COMPLETED and record.data == {"failed": False}
    assert elapsed < 1


def test_a_writer_thread_wakes_the_waiter_by_event(session: Session, later: Any) -> None:
    later(0.3, lambda: complete_trial(session, {"failed": False, "x": 1}))
    path = session.trials.path / "1"
    record, elapsed = timed(lambda: wait_record(path, "trial.json", 1, 20, poll_interval=NO_POLL))
    assert record.state is RecordState.COMPLETED and record.data == {"failed": False, "x": 1}
    assert 0.3 <= elapsed < 5


def test_collection_and_record_directories_created_late(tmp_path: Path, later: Any) -> None:
    workspace = tmp_path / "raw"  # a raw workspace: no manifest, no trials/ yet
    workspace.mkdir()
    session = Session.open(workspace)

    def write() -> None:
        (workspace / "trials").mkdir()
        time.sleep(0.2)
        (workspace / "trials" / "1").mkdir()
        time.sleep(0.2)
        (workspace / "trials" / "1" / ".sstmp-1-x").write_text('{"late": true}')
        os.replace(workspace / "trials/1/.sstmp-1-x", workspace / "trials/1/trial.json")

    later(0.3, write)
    path = session.trials.path / "1"
    record, elapsed = timed(lambda: wait_record(path, "trial.json", 1, 20, poll_interval=NO_POLL))
    assert record.data == {"late": True}
    assert elapsed < 5


def test_waits_for_the_report_in_the_session_directory(session: Session, later: Any) -> None:
    session.trials.begin().complete({})
    later(0.3, lambda: session.finish({"best_trial": 1}))
    record, elapsed = timed(lambda: wait_report(session, 20, poll_interval=NO_POLL))
    assert record.n == 0 and record.data == {"best_trial": 1, "status": "done"}
    assert elapsed < 5


def test_times_out_with_the_record_still_in_flight(session: Session) -> None:
    session.trials.begin()
    with pytest.raises(WaitTimedOut) as caught:
        timed(lambda: session.trials.wait(1, timeout=0.3))
    assert caught.value.timeout == 0.3 and caught.value.path == session.trials.path / "1"
    assert isinstance(caught.value, TimeoutError)
    with pytest.raises(WaitTimedOut):
        session.trials.wait(7, timeout=0)


@pytest.mark.parametrize("n", [1.5, 1.0, True])
def test_a_record_number_that_is_no_integer_is_refused(session: Session, n: object) -> None:
    # trials/1.5 can never appear: with no timeout, the wait never ended.
    with pytest.raises(InvalidInput, match=f"a record number is an integer, not {n!r}"):
        session.trials.wait(n, timeout=0)  # type: ignore[arg-type]


def test_bad_arguments_are_refused(session: Session) -> None:
    with pytest.raises(InvalidInput, match="record numbers start at 1") as caught:
        session.trials.wait(0, timeout=0)
    assert isinstance(caught.value, ValueError)  # callers catching ValueError still work
    assert caught.value.source == "wait"
    with pytest.raises(InvalidInput, match="timeout must be >= 0"):
        session.trials.wait(1, timeout=-1)
    # NaN compares false with everything: taken, it was a deadline never reached (a hang).
    with pytest.raises(InvalidInput, match="timeout must be >= 0 or None, not nan"):
        session.trials.wait(1, timeout=float("nan"))
    with pytest.raises(InvalidInput, match="timeout must be >= 0"):
        wait_report(session, timeout=float("nan"))


def test_a_number_past_the_largest_record_is_refused_not_read_as_a_record(
    session: Session,
) -> None:
    # `trials/1000000000000000000` (19 digits) is foreign, as `get` says: a wait on it
    # returned its marker as a completed record.
    foreign = session.trials.path / str(MAX_RECORD + 1)
    foreign.mkdir()
    (foreign / "trial.json").write_text("{}")
    past = f"record numbers end at {MAX_RECORD}, not {MAX_RECORD + 1}"
    with pytest.raises(InvalidInput, match=past):
        session.trials.wait(MAX_RECORD + 1, timeout=0)


def test_an_old_torn_marker_is_returned_at_once(session: Session) -> None:
    writer = session.trials.begin()
    marker = writer.path / "trial.json"
    marker.write_text('{"cut')
    os.utime(marker, (time.time() - 60, time.time() - 60))
    record, elapsed = timed(lambda: wait_record(writer.path, "trial.json", 1, 20, settle=30))
    assert record.state is RecordState.TORN and record.error
    assert elapsed < 5


def test_a_fresh_torn_marker_that_stays_torn_is_returned_after_settling(session: Session) -> None:
    writer = session.trials.begin()
    (writer.path / "trial.json").write_text("[1, 2]")
    record, elapsed = timed(lambda: wait_record(writer.path, "trial.json", 1, 20, settle=0.5))
    assert record.state is RecordState.TORN
    assert 0.4 <= elapsed < 5


def test_a_non_atomic_writer_finishing_within_the_settle_time_reads_completed(
    session: Session, later: Any
) -> None:
    writer = session.trials.begin()
    marker = writer.path / "trial.json"

    def rest() -> None:
        with open(marker, "a") as f:
            f.write(' "slow": true}')

    marker.write_text("{")  # written in place, against the format's rule
    later(0.4, rest)
    record = wait_record(writer.path, "trial.json", 1, 20, settle=3, poll_interval=NO_POLL)
    assert record.state is RecordState.COMPLETED and record.data == {"slow": True}


def test_at_the_deadline_a_torn_marker_is_returned_as_torn(session: Session) -> None:
    writer = session.trials.begin()
    (writer.path / "trial.json").write_text("{")
    record = wait_record(writer.path, "trial.json", 1, 0.2, settle=30)
    assert record.state is RecordState.TORN


def _deaf(_on_change: Any) -> Watcher:
    """A real, started watcher that passes every event to nobody: every event is lost."""
    watcher = Watcher(lambda _change: None)
    watcher.start()
    return watcher


@pytest.mark.parametrize(
    "observer",
    [
        pytest.param(_deaf, id="events-lost"),
        pytest.param(lambda _on_change: None, id="no-observer"),
    ],
)
def test_the_periodic_recheck_converges_without_events(
    session: Session, later: Any, monkeypatch: pytest.MonkeyPatch, observer: Any
) -> None:
    monkeypatch.setattr(wait_module, "_new_observer", observer)
    later(0.3, lambda: complete_trial(session))
    path = session.trials.path / "1"
    record, elapsed = timed(lambda: wait_record(path, "trial.json", 1, 20, poll_interval=0.2))
    assert record.state is RecordState.COMPLETED
    assert elapsed < 5


def test_observer_threads_are_stopped_after_each_wait(session: Session) -> None:
    before = threading.active_count()
    for _ in range(3):
        with pytest.raises(WaitTimedOut):
            session.trials.wait(1, timeout=0.05)
    complete_trial(session)
    session.trials.wait(1)
    assert threading.active_count() == before


def test_watchdogs_benign_stop_race_and_overflow_are_not_logged(
    session: Session, caplog: pytest.LogCaptureFixture
) -> None:
    with pytest.raises(WaitTimedOut):
        session.trials.wait(1, timeout=0)  # installs the filter
    inotify_log = logging.getLogger("watchdog.observers.inotify")
    buffer_log = logging.getLogger("watchdog.observers.inotify_c")
    with caplog.at_level(logging.INFO):
        inotify_log.error(wait_module._STOP_RACE)
        buffer_log.warning(wait_module._OVERFLOW)
        inotify_log.error("a real inotify problem")
    assert [r.getMessage() for r in caplog.records] == ["a real inotify problem"]


def test_reading_a_torn_marker_does_not_wake_the_waiter_again(
    session: Session, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The waiter's own open and close of the marker raise inotify events; if they
    # woke it, it would re-read the marker in a loop until the settle time passed.
    writer = session.trials.begin()
    (writer.path / "trial.json").write_bytes(b"{")
    reads: list[int] = []

    def counted(*args: Any) -> Record:
        reads.append(1)
        return read_record(*args)

    monkeypatch.setattr(wait_module, "read_record", counted)
    record = wait_record(writer.path, "trial.json", 1, None, poll_interval=0.5, settle=2.0)
    assert record.state is RecordState.TORN
    assert len(reads) <= 10  # about settle / poll_interval; a wake-up loop makes thousands


def test_many_log_writes_do_not_end_the_wait(session: Session, later: Any) -> None:
    writer = session.trials.begin()

    def chatter() -> None:
        with open(writer.path / "run.log", "a") as f:
            for i in range(200):
                f.write(f"line {i}\n")
                f.flush()

    later(0, chatter)
    with pytest.raises(WaitTimedOut):
        wait_record(writer.path, "trial.json", 1, 0.5, poll_interval=NO_POLL)


# The CLI, as a harness runs it: a separate process waiting on files another writes.


def test_cli_waits_for_a_trial_another_process_writes(session: Session) -> None:
    store = str(session.path.parent)
    args = ["wait", "s1", "--trial", "1", "--json", "--store", store]
    proc = popen(*args, env=environ(NO_COLOR="1"))
    time.sleep(0.5)
    writer = subprocess.run(
        [
            sys.executable,
            "-c",
            "import sys; from sessionstore.store.session import Session;"
            "Session.open(sys.argv[1]).trials.begin().complete({'failed': False})",
            str(session.path),
        ],
        check=True,
        timeout=30,
    )
    assert writer.returncode == 0
    code, out, err = finish(proc, timeout=30)
    assert code == 0, err
    assert orjson.loads(out) == {
        "n": 1,
        "state": "completed",
        "record": {"failed": False},
        "error": None,
    }


def test_cli_plain_output_and_report(session: Session) -> None:
    complete_trial(session)
    session.finish({})
    plain = environ(NO_COLOR="1")
    code, out, _ = finish(popen("wait", session.path, "--trial", "1", env=plain), timeout=30)
    assert (code, out) == (0, f"trial 1 completed: {session.trials.path / '1'}\n")
    code, out, _ = finish(popen("wait", session.path, "--report", env=plain), timeout=30)
    assert (code, out) == (0, f"report completed: {session.path}\n")


def test_cli_timeout_exits_3(session: Session) -> None:
    args = ["wait", str(session.path), "--attempt", "2", "--timeout", "0.2"]
    code, out, err = finish(popen(*args, env=environ(NO_COLOR="1")), timeout=30)
    path = session.service.path / "2"
    expected = (
        f"Error: attempt 2: {path}: not completed after 0.2 s;"
        " wait longer or check that its writer runs\n"
    )
    assert (code, out, err) == (3, "", expected)


def test_cli_torn_exits_1(session: Session) -> None:
    writer = session.trials.begin()
    marker = writer.path / "trial.json"
    marker.write_bytes(b"")
    os.utime(marker, (time.time() - 60, time.time() - 60))
    args = ["wait", str(session.path), "--trial", "1", "--json"]
    code, out, err = finish(popen(*args, env=environ(NO_COLOR="1")), timeout=30)
    assert code == 1
    assert orjson.loads(out)["state"] == "torn"
    assert err == f"Error: trial 1 is torn: {marker}: empty file\n"


def test_cli_a_marker_written_in_place_across_a_writer_check_reads_completed(
    session: Session, later: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The CLI waits in slices (to look at the writer between them); a slice ending on a
    # torn marker that had not settled returned it as torn, exit 1, though its writer
    # completed it a moment later. Short slices and a marker dated ahead (a writer whose
    # clock runs ahead: it settles only by staying the same) make every slice end so.
    monkeypatch.setattr(wait_command, "WRITER_CHECK", 0.05)
    writer = session.trials.begin()
    marker = writer.path / "trial.json"
    marker.write_text("{")  # written in place, against the format's rule
    ahead = time.time() + 3600
    os.utime(marker, (ahead, ahead))

    def rest() -> None:
        with open(marker, "a") as f:
            f.write(' "slow": true}')

    later(0.5, rest)
    waited = invoke("wait", session.path, "--trial", "1", "--timeout", "30", "--json")
    assert waited.exit_code == 0, waited.output
    assert orjson.loads(waited.stdout)["record"] == {"slow": True}


@pytest.mark.parametrize(
    "args", [(), ("--trial", "1", "--report"), ("--trial", "1", "--attempt", "1")]
)
def test_cli_needs_exactly_one_record(session: Session, args: tuple[str, ...]) -> None:
    proc = popen("wait", session.path, *args, env=environ(NO_COLOR="1"))
    code, _, err = finish(proc, timeout=30)
    assert code == 2
    assert err.endswith("Error: give exactly one of --trial N, --attempt K, --report\n")


def test_ctrl_c_stops_a_wait_with_exit_130_and_no_traceback(session: Session) -> None:
    proc = popen("wait", session.path, "--trial", "1")
    try:
        time.sleep(3.0)  # well past start-up: the CLI handles it, not the importing interpreter
        assert proc.poll() is None, "wait returned before trial 1 exists"
        proc.send_signal(signal.SIGINT)
        _, stderr = proc.communicate(timeout=30)
    finally:
        reap(proc)
    assert proc.returncode == 130, stderr
    assert b"Traceback" not in stderr and b"Aborted" not in stderr, stderr

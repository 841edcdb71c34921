"""`store.lifecycle`: begin and complete a record from outside, and who may still write."""

from __future__ import annotations

import fcntl
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from inspect_helpers import dead_pid, set_manifest, torn_trial

from sessionstore.errors import (
    InvalidInput,
    RecordCompleted,
    RecordNotFound,
    SessionFinished,
)
from sessionstore.store.lifecycle import (
    begin_record,
    collection_of,
    complete_record,
    live_writer,
    mirror_daemon,
    recorded_writer,
    sync_record,
)
from sessionstore.store.session import RecordState, Store


def test_begin_and_complete_through_the_lifecycle(tmp_path: Path) -> None:
    session = Store(tmp_path).create(id="abc", pid=None)
    writer = begin_record(session, "trials")
    assert (writer.n, writer.path) == (1, session.path / "trials" / "1")
    (writer.path / "deep" / "er").mkdir(parents=True)
    (writer.path / "deep" / "er" / "log").write_text("PASS\n")
    record = complete_record(session, "trials", 1, {"failed": False})
    assert record.state is RecordState.COMPLETED
    assert session.trials.get(1).data == {"failed": False}
    assert begin_record(session, "service").n == 1
    assert complete_record(session, "service", 1, {"status": "verified"}).n == 1


def test_complete_refuses_completed_torn_missing_and_non_objects(tmp_path: Path) -> None:
    session = Store(tmp_path).create(id="abc", pid=None)
    begin_record(session, "trials")
    complete_record(session, "trials", 1, {})
    with pytest.raises(RecordCompleted):
        complete_record(session, "trials", 1, {})
    torn_trial(session)
    with pytest.raises(InvalidInput, match=r"reads as torn \(trial\.json: "):
        complete_record(session, "trials", 2, {})
    with pytest.raises(RecordNotFound):
        complete_record(session, "trials", 3, {})
    begin_record(session, "trials")
    with pytest.raises(InvalidInput, match=r"trial\.json: expected a JSON object, got list"):
        complete_record(session, "trials", 3, [1])  # type: ignore[arg-type]  # refused at runtime
    assert session.trials.get(3).state is RecordState.IN_FLIGHT
    with pytest.raises(InvalidInput, match="must be trials or service"):
        collection_of(session, "previous")


def test_complete_refuses_a_marker_readers_would_read_as_torn(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Written once, such a marker would leave a record no one can ever complete.
    session = Store(tmp_path).create(id="abc", pid=None)
    begin_record(session, "trials")
    deep: dict[str, object] = {"a": 1}
    for _ in range(249):  # orjson writes it, but readers tear a marker over 246 levels
        deep = {"a": deep}
    with pytest.raises(InvalidInput, match=r"would read as torn \(cannot be written back"):
        complete_record(session, "trials", 1, deep)
    monkeypatch.setattr("sessionstore._json.MAX_MARKER_BYTES", 64)
    with pytest.raises(InvalidInput, match="over the 64 a reader reads"):
        complete_record(session, "trials", 1, {"log": "x" * 64})
    assert session.trials.get(1).state is RecordState.IN_FLIGHT
    monkeypatch.undo()
    assert complete_record(session, "trials", 1, {"log": "x" * 64}).state is RecordState.COMPLETED


def test_a_nan_or_an_infinity_is_refused_not_written_as_null(tmp_path: Path) -> None:
    # JSON has neither: orjson (and pydantic) would write null, a record saying
    # something else than its writer did, sealed for good.
    session = Store(tmp_path / "store").create(id="abc", pid=None)
    begin_record(session, "trials")
    marker = {"benchmark": {"metrics": {"ttft_ms": 182, "runs": [1.0, float("nan")]}}}
    with pytest.raises(InvalidInput, match=r"benchmark\.metrics\.runs\[1\] is nan, which JSON"):
        complete_record(session, "trials", 1, marker)
    assert session.trials.get(1).state is RecordState.IN_FLIGHT
    with pytest.raises(InvalidInput, match=r"^constraints: max_ttft_ms is inf, which JSON"):
        Store(tmp_path / "store").create(constraints={"max_ttft_ms": float("inf")})
    with pytest.raises(InvalidInput, match=r"report\.json: best is -inf, which JSON"):
        session.finish({"best": float("-inf")})
    assert session.report().state is RecordState.IN_FLIGHT
    assert sorted(os.listdir(tmp_path / "store")) == ["abc"]


def test_begin_refuses_a_finished_session(tmp_path: Path) -> None:
    session = Store(tmp_path).create(id="abc", pid=None)
    session.finish({})
    with pytest.raises(SessionFinished) as raised:
        begin_record(session, "trials")
    assert isinstance(raised.value, RecordCompleted)
    assert session.trials.numbers() == []


def test_sync_record_never_follows_a_symlink_or_opens_a_fifo(tmp_path: Path) -> None:
    session = Store(tmp_path / "s").create(id="abc", pid=None)
    writer = begin_record(session, "trials")
    outside = tmp_path / "outside"
    outside.mkdir()
    (writer.path / "out").symlink_to(outside)
    (writer.path / "link").symlink_to(outside / "file")
    os.mkfifo(writer.path / "fifo")  # opening it for reading would block
    (writer.path / "a" / "b").mkdir(parents=True)
    (writer.path / "a" / "b" / "f").write_text("x")
    sync_record(session.trials.get(1))
    assert os.listdir(outside) == []


def test_the_recorded_writer(tmp_path: Path) -> None:
    store = Store(tmp_path)
    assert recorded_writer(store.create(id="none", pid=None)) is None
    live = recorded_writer(store.create(id="live", pid=os.getpid()))
    assert live is not None and (live.pid, live.alive) == (os.getpid(), True)
    pid, started = dead_pid()
    dead = recorded_writer(
        set_manifest(store.create(id="dead", pid=None), pid=pid, pid_started_at=started)
    )
    assert dead is not None and dead.alive is False
    odd = recorded_writer(set_manifest(store.create(id="odd", pid=None), pid="x"))
    assert odd is not None and (odd.pid, odd.alive) == (None, None)


def test_a_mirror_daemon_is_its_held_lock(tmp_path: Path) -> None:
    session = Store(tmp_path).create(id="abc", pid=None)
    assert mirror_daemon(session) is None
    lock = session.path / ".sessionstore-mirror.lock"
    fd = os.open(lock, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        assert mirror_daemon(session) is None, "a lock file nobody holds is no daemon"
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        daemon = mirror_daemon(session)
        assert daemon is not None and (daemon.kind, daemon.pid, daemon.alive) == (
            "mirror daemon",
            None,
            True,
        )
        assert live_writer(session) == daemon
    finally:
        os.close(fd)
    os.unlink(lock)
    lock.symlink_to(tmp_path / "elsewhere")
    assert mirror_daemon(session) is None


# Begins trials of session s of the store argv[1] until the session is finished (bounded).
BEGINNER = """
import sys
from sessionstore.errors import SessionFinished
from sessionstore.store.lifecycle import begin_record
from sessionstore.store.session import Store
session = Store(sys.argv[1]).open("s")
for _ in range(200_000):
    try:
        begin_record(session, "trials")
    except SessionFinished:
        sys.exit(0)
sys.exit(3)
"""


def test_no_record_is_begun_after_the_report_by_a_racing_begin(tmp_path: Path) -> None:
    """A begin that asked for the report just before a `finish` wrote it claimed its number
    after: a record begun in an ended session. Every record a begin hands out is now
    claimed before the report is linked (its directory's ctime is not later)."""
    store = Store(tmp_path / "store")
    session = store.create(id="s", pid=None)
    procs = [subprocess.Popen([sys.executable, "-c", BEGINNER, str(store.root)]) for _ in range(3)]
    try:
        for _ in range(6000):  # until the beginners are at it (a bound, not a timing)
            if len(os.listdir(session.trials.path)) >= 300:
                break
            time.sleep(0.005)
        session.finish({})
    finally:
        codes = [proc.wait(timeout=120) for proc in procs]
    assert codes == [0, 0, 0]
    reported = os.stat(session.path / "report.json").st_ctime_ns
    late = [
        n
        for n in session.trials.numbers()
        if os.stat(session.trials.path / str(n)).st_ctime_ns > reported
    ]
    assert late == []

"""Crash safety of the store: concurrent allocation and failing OS calls."""

from __future__ import annotations

import errno
import json
import os
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from sessionstore._fs.atomic import TEMP_PREFIX, AtomicFile, sweep_temps, write_atomic
from sessionstore.store.session import RecordState, Store

# A writer in its own interpreter: ready, then (all ready) go, then `begin` COUNT times.
_BEGIN_MANY = """
import json, os, sys, time
from sessionstore.store.session import Session
session_path, ready, go, count = sys.argv[1:]
open(ready, "x").close()
for _ in range(12000):  # at most two minutes for the others
    if os.path.exists(go):
        break
    time.sleep(0.01)
session = Session.open(session_path)
print(json.dumps([session.trials.begin().n for _ in range(int(count))]))
"""


def test_concurrent_processes_get_unique_gap_free_numbers(tmp_path: Path) -> None:
    # Real processes, started together (no multiprocessing: its Barrier and Queue leave a
    # resource tracker process running in the test's process until it exits).
    session = Store(tmp_path / "store").create()
    procs, per_proc = 6, 25
    go = tmp_path / "go"
    ready = [tmp_path / f"ready{i}" for i in range(procs)]
    args = [sys.executable, "-c", _BEGIN_MANY, str(session.path)]
    workers = [
        subprocess.Popen(
            [*args, str(mine), str(go), str(per_proc)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        for mine in ready
    ]
    for _ in range(12000):  # every writer ready, then all go at once
        if all(path.exists() for path in ready):
            break
        time.sleep(0.01)
    go.touch()
    numbers: list[int] = []
    for w in workers:
        out, err = w.communicate(timeout=120)
        assert w.returncode == 0, err.decode(errors="replace")
        numbers += json.loads(out)
    assert sorted(numbers) == list(range(1, procs * per_proc + 1))
    assert session.trials.numbers() == list(range(1, procs * per_proc + 1))


def _temps(directory: Path) -> list[str]:
    return [n for n in os.listdir(directory) if n.startswith(TEMP_PREFIX)]


def _fail_after(calls: int, exc: BaseException) -> Callable[..., Any]:
    """A wrapper factory: let `calls` calls through, then raise `exc`."""

    def factory(real: Callable[..., Any]) -> Callable[..., Any]:
        remaining = [calls]

        def wrapper(*args: Any, **kwargs: Any) -> Any:
            if remaining[0] <= 0:
                raise exc
            remaining[0] -= 1
            return real(*args, **kwargs)

        return wrapper

    return factory


FAULTS = {
    # complete() publishes the marker with link(2): a second writer cannot replace it.
    "link": ("link", 0, OSError(errno.EIO, "injected link failure")),
    # complete() fsyncs the marker's temp first, then the record directory.
    "fsync-file": ("fsync", 0, OSError(errno.EIO, "injected fsync failure")),
    "fsync-dir": ("fsync", 1, OSError(errno.EIO, "injected fsync failure")),
    "write-enospc": ("write", 0, OSError(errno.ENOSPC, "No space left on device")),
}


@pytest.mark.parametrize("fault", sorted(FAULTS))
def test_failing_marker_write_leaves_no_marker_and_no_temp(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fault: str
) -> None:
    name, calls, exc = FAULTS[fault]
    session = Store(tmp_path).create()
    writer = session.trials.begin()
    writer.write_text("task.yml", "x: 1\n")
    monkeypatch.setattr(os, name, _fail_after(calls, exc)(getattr(os, name)))
    with pytest.raises(OSError) as info:
        writer.complete({"failed": False})
    monkeypatch.undo()
    assert info.value is exc
    assert not (writer.path / "trial.json").exists()
    assert _temps(writer.path) == []
    assert session.trials.get(writer.n).state is RecordState.IN_FLIGHT
    # The writer is still usable: the next attempt converges.
    writer.complete({"failed": False})
    assert session.trials.get(writer.n).state is RecordState.COMPLETED


def test_write_stopping_half_way_never_shows_a_half_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    target = tmp_path / "log.txt"
    write_atomic(target, b"old content\n")
    real_write = os.write
    state = {"calls": 0}

    def short_then_fail(fd: int, data: Any) -> int:
        state["calls"] += 1
        if state["calls"] == 1:
            return real_write(fd, bytes(data)[:3])  # a short write: must be continued
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(os, "write", short_then_fail)
    with pytest.raises(OSError, match="No space"):
        write_atomic(target, b"new content that is longer\n")
    monkeypatch.undo()
    assert target.read_bytes() == b"old content\n"
    assert _temps(tmp_path) == []


def test_short_writes_are_completed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    real_write = os.write
    monkeypatch.setattr(os, "write", lambda fd, data: real_write(fd, bytes(data)[:2]))
    write_atomic(tmp_path / "f", b"0123456789")
    monkeypatch.undo()
    assert (tmp_path / "f").read_bytes() == b"0123456789"


def test_failed_file_write_in_record_raises_and_leaves_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    writer = Store(tmp_path).create().trials.begin()
    monkeypatch.setattr(os, "replace", _fail_after(0, OSError(errno.EIO, "boom"))(os.replace))
    with pytest.raises(OSError, match="boom"):
        writer.write_bytes("big.bin", b"x" * 100_000)
    monkeypatch.undo()
    assert os.listdir(writer.path) == []


def test_failed_session_creation_leaves_no_session_and_no_staging(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = Store(tmp_path / "store")
    # Let the constraints file through, fail the manifest's rename.
    monkeypatch.setattr(os, "replace", _fail_after(1, OSError(errno.EIO, "boom"))(os.replace))
    with pytest.raises(OSError, match="boom"):
        store.create(id="half")
    monkeypatch.undo()
    assert os.listdir(store.root) == []
    assert store.sessions() == []


def test_atomic_file_sets_the_mode_regardless_of_umask(tmp_path: Path) -> None:
    old = os.umask(0o077)
    try:
        write_atomic(tmp_path / "f", b"x", mode=0o644)
    finally:
        os.umask(old)
    assert (tmp_path / "f").stat().st_mode & 0o777 == 0o644


def test_atomic_file_refuses_to_follow_nothing_and_discards_on_error(tmp_path: Path) -> None:
    target = tmp_path / "f"
    with pytest.raises(RuntimeError), AtomicFile(target) as f:
        f.write(b"partial")
        raise RuntimeError("caller failed mid-write")
    assert not target.exists()
    assert _temps(tmp_path) == []


def test_sweep_removes_temps_of_dead_writers_only(tmp_path: Path) -> None:
    dead = subprocess.Popen([sys.executable, "-c", "pass"])  # a pid nobody has now
    dead.wait()
    dead_temp = tmp_path / f"{TEMP_PREFIX}{dead.pid}-aaaa"
    dead_temp.write_bytes(b"debris")
    dead_dir = tmp_path / f"{TEMP_PREFIX}{dead.pid}-bbbb"
    (dead_dir / "trials").mkdir(parents=True)
    live_temp = tmp_path / f"{TEMP_PREFIX}{os.getpid()}-cccc"
    live_temp.write_bytes(b"being written")
    (tmp_path / "keep.txt").write_bytes(b"not a temp")
    no_pid = tmp_path / f"{TEMP_PREFIX}\u00b2-dddd"  # not a pid, though `str.isdigit`
    no_pid.write_bytes(b"debris")
    removed = sweep_temps(tmp_path)
    assert sorted(removed) == sorted([dead_temp, dead_dir, no_pid])
    assert sorted(os.listdir(tmp_path)) == sorted([live_temp.name, "keep.txt"])


def test_a_marker_is_linked_only_after_every_directory_its_files_were_put_in_is_fsynced(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # put() defers its directory fsync; create() of the marker must do them all first,
    # subdirectories included, or a crash could leave a marker pointing at lost files.
    session = Store(tmp_path).create()
    events: list[str | int] = []
    real_fsync, real_link, real_replace = os.fsync, os.link, os.replace

    def fsync(fd: int) -> None:
        events.append(os.fstat(fd).st_ino)
        real_fsync(fd)

    def link(*args: Any, **kwargs: Any) -> None:
        events.append("link")
        real_link(*args, **kwargs)

    def replace(*args: Any, **kwargs: Any) -> None:
        events.append("replace")
        real_replace(*args, **kwargs)

    monkeypatch.setattr(os, "fsync", fsync)
    monkeypatch.setattr(os, "link", link)
    monkeypatch.setattr(os, "replace", replace)
    writer = session.trials.begin()
    assert session.trials.path.stat().st_ino not in events, "begin() fsynced at once"
    writer.write_text("patches/a.diff", "x\n")
    writer.write_text("run.log", "PASS\n")
    writer.complete({"failed": False})
    monkeypatch.undo()
    last_put = len(events) - 1 - events[::-1].index("replace")
    linked = events.index("link")
    synced = set(events[last_put:linked])
    assert writer.path.stat().st_ino in synced
    assert (writer.path / "patches").stat().st_ino in synced
    # The collection's entry for the record (begin's mkdir) is durable with the marker.
    assert writer.path.parent.stat().st_ino in events[linked:]
    # Per file, no directory fsync of its own: one per directory, at the marker.
    assert events.count("replace") == 2 and events.count(writer.path.stat().st_ino) <= 3

"""A record writer while another process swaps, moves or removes a directory on its way.

`LocalStorage` holds the directory a `claim` made until the marker's `create`
(storage.local_dirs): the record's writes reach it by fd, not by path. Laws:
whatever stands at the record's, the collection's or the session's name
afterwards, nothing outside the store is ever written or read; the writer's
files land in the directory it made (wherever it was moved), never in what
was swapped in; a record removed meanwhile is never re-created; the next
`begin()` reaches the collection by its path again and refuses a symlink.
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from sessionstore.errors import InvalidInput, RecordCompleted, StorageError
from sessionstore.store.session import RecordState, Session, Store

SECRET = b'{"secret": "OUTSIDE-a7f3"}'


def snapshot(root: Path) -> dict[str, bytes | None]:
    """Every entry below `root`: a file's bytes, None for a directory."""
    return {
        str(p.relative_to(root)): None if p.is_dir() else p.read_bytes()
        for p in sorted(root.rglob("*"))
    }


def outside_dir(tmp_path: Path) -> Path:
    """A directory a swapped-in symlink points at, shaped like a collection and a record."""
    outside = tmp_path / "outside"
    (outside / "1").mkdir(parents=True)
    (outside / "trial.json").write_bytes(SECRET)
    (outside / "1" / "trial.json").write_bytes(SECRET)
    return outside


def swap_for_symlink(path: Path, moved: Path, target: Path) -> None:
    """In another process: rename `path` to `moved` and put a symlink to `target` there."""
    script = (
        "import os, sys; os.rename(sys.argv[1], sys.argv[2]); os.symlink(sys.argv[3], sys.argv[1])"
    )
    subprocess.run([sys.executable, "-c", script, str(path), str(moved), str(target)], check=True)


@pytest.mark.parametrize("swapped", ["record", "collection", "session"])
def test_a_directory_swapped_for_a_symlink_mid_record_is_never_written_through(
    tmp_path: Path, swapped: str
) -> None:
    outside = outside_dir(tmp_path)
    before = snapshot(outside)
    session = Store(tmp_path / "store").create(id="abc", pid=None)
    writer = session.trials.begin()
    writer.write_bytes("task.yml", b"x: 1\n")
    path = {"record": writer.path, "collection": writer.path.parent, "session": session.path}[
        swapped
    ]
    moved = path.with_name(path.name + ".moved")
    swap_for_symlink(path, moved, outside / ("1" if swapped == "record" else ""))
    writer.write_bytes("logs/run.log", b"PASS\n")
    record = writer.complete({"failed": False})
    assert record.state is RecordState.COMPLETED
    assert snapshot(outside) == before
    # The files went to the directory begin() made, which the swap moved.
    held = moved.joinpath(*writer.path.relative_to(path).parts)
    assert snapshot(held) == {
        "logs": None,
        "logs/run.log": b"PASS\n",
        "task.yml": b"x: 1\n",
        "trial.json": b'{\n  "failed": false\n}\n',
    }
    # What stands at the record's name now is refused by readers, never read through.
    with pytest.raises(StorageError, match="symlink"):
        Store(tmp_path / "store").storage.get("abc/trials/1/trial.json", 100)
    assert session.trials.numbers() == []
    # The next record reaches the collection by its path again: a symlink is refused.
    if swapped != "record":
        with pytest.raises(StorageError, match="symlink"):
            session.trials.begin()
    assert snapshot(outside) == before


def test_a_record_removed_mid_write_fails_and_is_never_recreated(tmp_path: Path) -> None:
    session = Store(tmp_path / "store").create(id="abc", pid=None)
    writer = session.trials.begin()
    writer.write_bytes("task.yml", b"x: 1\n")
    script = "import shutil, sys; shutil.rmtree(sys.argv[1])"
    subprocess.run([sys.executable, "-c", script, str(writer.path)], check=True)
    with pytest.raises(FileNotFoundError):
        writer.write_bytes("patch.diff", b"+x\n")
    with pytest.raises(FileNotFoundError):
        writer.complete({"failed": False})
    assert not os.path.lexists(writer.path)
    assert session.trials.numbers() == []
    # The number is free again (for a writer that lists the collection), and a new
    # claim of it is a new record, not the removed one held.
    again = Session.open(session.path).trials.begin()
    assert again.n == 1
    again.write_bytes("task.yml", b"x: 2\n")
    assert again.complete({"failed": True}).state is RecordState.COMPLETED
    assert sorted(os.listdir(again.path)) == ["task.yml", "trial.json"]


def test_a_record_completed_by_another_process_is_sealed_for_this_writer(tmp_path: Path) -> None:
    session = Store(tmp_path / "store").create(id="abc", pid=None)
    writer = session.trials.begin()
    script = "import sys; open(sys.argv[1], 'x').write('{}')"
    subprocess.run([sys.executable, "-c", script, str(writer.path / "trial.json")], check=True)
    with pytest.raises(RecordCompleted):
        writer.write_bytes("late.txt", b"late\n")
    with pytest.raises(RecordCompleted):
        writer.complete({"failed": False})
    assert sorted(os.listdir(writer.path)) == ["trial.json"]


def _open_fds() -> int:
    return len(os.listdir("/proc/self/fd"))


def test_more_records_in_flight_than_pins_all_complete_and_hold_no_fd(tmp_path: Path) -> None:
    session = Store(tmp_path / "store").create(id="abc", pid=None)
    session.trials.begin().complete({})  # the thread's caches, before counting
    fds = _open_fds()
    writers = [session.trials.begin() for _ in range(20)]  # more than a thread holds
    for writer in writers:
        writer.write_bytes("task.yml", str(writer.n).encode())
    for writer in reversed(writers):
        writer.complete({"n": writer.n})
    assert _open_fds() <= fds
    records = session.trials.records()
    assert [r.n for r in records] == list(range(1, 22))
    assert all(r.state is RecordState.COMPLETED for r in records)
    assert all((r.path / "task.yml").read_bytes() == str(r.n).encode() for r in records[1:])


def test_a_threads_held_records_are_closed_when_it_ends(tmp_path: Path) -> None:
    session = Store(tmp_path / "store").create(id="abc", pid=None)
    fds = _open_fds()
    thread = threading.Thread(target=lambda: [session.trials.begin() for _ in range(3)])
    thread.start()
    thread.join(10)
    assert not thread.is_alive()
    assert _open_fds() <= fds
    # Abandoned in flight; another thread writes them through their paths.
    writer = Session.open(session.path).trials.begin()
    assert writer.n == 4
    assert session.trials.numbers() == [1, 2, 3, 4]


# Swaps `trials` for a symlink to `outside` and back (the real directory kept aside; a
# `trials` a writer made meanwhile is removed) until `stop` exists or the cap passes.
CYCLER = """
import os, shutil, sys
trials, outside, stop, cycles = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
aside, side = trials + ".aside", trials + ".side"
def put_back():
    for _ in range(1000):
        try:
            os.rename(aside, trials)
            return
        except OSError:  # a `trials` a writer made in the gap, maybe being written
            shutil.rmtree(trials, ignore_errors=True)
    sys.exit("could not put trials back")
for i in range(cycles):
    if os.path.exists(stop):
        break
    os.rename(trials, aside)
    os.symlink(outside, side)
    try:
        os.rename(side, trials)
    except OSError:
        os.unlink(side)
    else:
        os.unlink(trials)
    put_back()
"""


@pytest.mark.timeout(120)
def test_writers_under_a_cycling_collection_never_touch_outside(tmp_path: Path) -> None:
    outside = outside_dir(tmp_path)
    before = snapshot(outside)
    session = Store(tmp_path / "store").create(id="abc", pid=None)
    stop = tmp_path / "stop"
    cycler = subprocess.Popen(
        [sys.executable, "-c", CYCLER, str(session.trials.path), str(outside), str(stop), "50000"]
    )
    completed = refused = 0
    try:
        for _ in range(300):
            try:
                writer = Session.open(session.path, follow=False).trials.begin()
                writer.write_bytes("task.yml", b"x: 1\n")
                writer.write_bytes("logs/run.log", b"PASS\n")
                writer.complete({"failed": False})
                completed += 1
            except (StorageError, InvalidInput, RecordCompleted, FileNotFoundError):
                refused += 1  # the collection was a symlink when it was reached by path
    finally:
        stop.touch()
        cycler.wait(30)
    assert cycler.returncode == 0
    assert completed + refused == 300 and completed > 0
    assert snapshot(outside) == before
    records = session.trials.records()
    for record in records:
        if record.state is RecordState.COMPLETED:
            assert sorted(record.files()) == ["logs/run.log", "task.yml", "trial.json"]

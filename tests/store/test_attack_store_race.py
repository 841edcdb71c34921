"""The store listing while another process creates and removes sessions.

A session that disappears between the store's directory listing and the
reading of its files was simply not there: the listing of every other
session must not fail because of it. Another process makes and removes
session directories (empty ones, which the store lists like any raw
workspace, so the listing also falls back to the directory's mtime) in a
bounded loop while `inspect` and `inspect --json` run as real processes.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import orjson
import pytest
from inspect_helpers import run_cli

from sessionstore.store.session import RecordWriter, Store

MAX_ROUNDS = 200_000
RUNS = 8

# Creates and removes `count` session directories until `stop` exists (or MAX_ROUNDS).
CHURNER = """
import os, sys
root, stop, count, rounds = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
names = [os.path.join(root, f"churn{i:02d}") for i in range(count)]
for i in range(rounds):
    if i % 16 == 0 and os.path.exists(stop):
        break
    for name in names:
        os.mkdir(name)
    for name in names:
        os.rmdir(name)
"""


def test_sessions_removed_during_the_listing_never_fail_it(tmp_path: Path) -> None:
    root = tmp_path / "store"
    store = Store(root)
    for i in range(3):
        store.create(id=f"keep{i}", pid=None)
    stop = tmp_path / "stop"
    proc = subprocess.Popen(
        [sys.executable, "-c", CHURNER, str(root), str(stop), "40", str(MAX_ROUNDS)]
    )
    try:
        for i in range(RUNS):
            args = ("inspect", "--store", str(root), *(("--json",) if i % 2 else ()))
            result = run_cli(*args, timeout=60)
            assert result.returncode == 0, result.stderr
            assert "Traceback" not in result.stderr
            if i % 2:
                ids = {item["id"] for item in orjson.loads(result.stdout)}
                assert {"keep0", "keep1", "keep2"} <= ids
            else:
                assert all(f"keep{k}" in result.stdout for k in range(3))
    finally:
        stop.touch()
        proc.wait(timeout=60)
    assert proc.returncode == 0


def test_a_session_removed_under_a_writer_is_never_made_again(tmp_path: Path) -> None:
    """`rm` by another process between a writer's open of a session and its write: the
    write fails naming the session, and the store holds nothing of it (a directory made
    again with no manifest would list as a session that no `rm` removes)."""
    root = tmp_path / "store"
    store = Store(root)
    for sid in ("beg", "fin", "com"):
        store.create(id=sid, pid=None)
    begun = run_cli("begin", "com", "--trial", "--store", str(root))  # another process
    assert begun.returncode == 0, begun.stderr
    opened = {sid: store.open(sid) for sid in ("beg", "fin", "com")}
    # Its own writer, as `sessionstore complete` makes one, holding no directory fd.
    writer = RecordWriter(1, opened["com"].trials.path / "1", "trial.json")
    removed = run_cli("rm", "beg", "fin", "com", "--store", str(root))
    assert removed.returncode == 0, removed.stderr
    with pytest.raises(FileNotFoundError) as began:
        opened["beg"].trials.begin()
    assert began.value.filename == str(root / "beg")
    with pytest.raises(FileNotFoundError) as finished:
        opened["fin"].finish({})
    assert finished.value.filename == str(root / "fin")
    with pytest.raises(FileNotFoundError) as completed:
        writer.complete({"late": True})
    assert completed.value.filename == str(root / "com" / "trials" / "1")
    assert sorted(p.name for p in root.iterdir()) == []

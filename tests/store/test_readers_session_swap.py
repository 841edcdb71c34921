"""A session directory of the store swapped for a symlink to an outside tree while it is read.

Another process toggles `S/victim` between the real session directory and a
symlink to an outside tree holding its own `session.json`, `constraints.json`,
`report.json` and `trials/1/trial.json` (bounded in swaps and in time), while
`inspect`, `wait` and `check` run as real processes and the library reads the
store in-process. Law: the outside tree's content never appears in any
output; a swapped session reads as an error, unknown or torn state for that
session, never as the outside's content, and nothing raises a traceback.

A session path the user names may itself be a symlink: it is followed once,
when the session is opened.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import orjson
import pytest
from cli_runner import environ, run
from inspect_helpers import run_cli

from sessionstore.errors import CorruptFile
from sessionstore.store.session import RecordState, Session, Store

LEAK = "LEAK-outside-session-5d21c9"
MAX_SWAPS = 1_000_000
MAX_SECONDS = 120

# Swaps `target` between the real directory and a symlink to `outside` by renames
# through side names, until `stop` exists, MAX_SWAPS or MAX_SECONDS; then leaves the
# real directory in place and writes "<real states seen> <symlink states seen>" to
# `counts`. argv = target outside stop counts max_swaps max_seconds.
SWAPPER = """
import os, sys, time
target, outside, stop, counts = sys.argv[1:5]
max_swaps, max_seconds = int(sys.argv[5]), float(sys.argv[6])
parent = os.path.dirname(target)
real, link = os.path.join(parent, "_real"), os.path.join(parent, "_link")
os.symlink(outside, link)
seen = {False: 0, True: 0}
deadline = time.monotonic() + max_seconds
for i in range(max_swaps):
    if i % 64 == 0 and (os.path.exists(stop) or time.monotonic() > deadline):
        break
    os.rename(target, real)
    os.rename(link, target)
    seen[os.path.islink(target)] += 1
    os.rename(target, link)
    os.rename(real, target)
    seen[os.path.islink(target)] += 1
with open(counts, "w") as f:
    f.write(f"{seen[False]} {seen[True]}")
"""


def make_store(tmp_path: Path) -> tuple[Path, Path]:
    """A store with session `victim` (one completed trial) and an outside look-alike tree."""
    store = tmp_path / "S"
    created = run_cli("new", "--store", str(store), "--id", "victim")
    assert created.returncode == 0, created.stderr
    session = Store(store).open("victim")
    writer = session.trials.begin()
    writer.complete({"failed": False, "note": "real"})
    outside = tmp_path / "out"
    (outside / "trials" / "1").mkdir(parents=True)
    (outside / "service").mkdir()
    manifest = {"format": 1, "id": "victim", "name": LEAK, "status": "running"}
    (outside / "session.json").write_bytes(orjson.dumps(manifest))
    (outside / "constraints.json").write_bytes(orjson.dumps({"x": LEAK}))
    (outside / "report.json").write_bytes(orjson.dumps({"status": "done", "x": LEAK}))
    (outside / "trials" / "1" / "trial.json").write_bytes(orjson.dumps({"x": LEAK}))
    (outside / "trials" / "1" / "run.log").write_text(f"FAIL: {LEAK}\n")
    return store, outside


@contextmanager
def swapping(target: Path, outside: Path, tmp_path: Path) -> Iterator[list[int]]:
    """Run the swapper while the body runs; yields [real seen, symlink seen], filled at exit."""
    stop, counts = tmp_path / "stop", tmp_path / "counts"
    seen: list[int] = []
    args = [str(target), str(outside), str(stop), str(counts), str(MAX_SWAPS), str(MAX_SECONDS)]
    proc = subprocess.Popen([sys.executable, "-c", SWAPPER, *args])
    try:
        yield seen
    finally:
        stop.touch()
        proc.wait(timeout=MAX_SECONDS + 30)
    assert proc.returncode == 0
    seen.extend(int(n) for n in counts.read_text().split())
    assert not target.is_symlink() and target.is_dir()


def commands(store: Path) -> list[list[str]]:
    s = ["--store", str(store)]
    return [
        ["inspect", *s, "--json"],
        ["inspect", *s],
        ["inspect", "victim", *s, "--json"],
        ["wait", "victim", "--trial", "1", "--timeout", "1", "--json", *s],
        ["check", "victim", "--trial", "1", *s],
    ]


def assert_clean(result: subprocess.CompletedProcess[str], args: list[str]) -> None:
    out = result.stdout + result.stderr
    assert LEAK not in out, (args, out)
    assert "Traceback" not in out, (args, out)


def read_in_process(store: Path, rounds: int) -> None:
    """The library's own reads of the store: listing, manifest, constraints, records, report."""
    for _ in range(rounds):
        for session in Store(store).sessions():
            seen = [repr(session.manifest), repr(session.manifest_error)]
            try:
                seen.append(repr(session.constraints()))
            except CorruptFile as exc:
                seen.append(str(exc))
            seen += [repr(r) for r in session.trials.records()]
            seen.append(repr(session.report()))
            assert LEAK not in "".join(seen)


def test_a_store_session_swapped_for_a_symlink_is_never_read_through(tmp_path: Path) -> None:
    store, outside = make_store(tmp_path)
    with swapping(store / "victim", outside, tmp_path) as seen:
        deadline = time.monotonic() + 90
        for _ in range(8):
            for args in commands(store):
                assert_clean(run_cli(*args, timeout=30), args)
            read_in_process(store, 200)
            if time.monotonic() > deadline:
                break
    real, link = seen
    assert real > 0 and link > 0, seen  # the race really ran: both states were in place
    # Afterwards the real session reads as it is.
    listed = run_cli("inspect", "victim", "--store", str(store), "--json")
    assert listed.returncode == 0, listed.stderr
    assert LEAK not in listed.stdout and '"real"' in listed.stdout


def test_a_session_opened_then_swapped_reads_torn_or_empty_not_outside(tmp_path: Path) -> None:
    store, outside = make_store(tmp_path)
    session = Store(store).open("victim")
    os.rename(store / "victim", tmp_path / "held")
    (store / "victim").symlink_to(outside)
    with pytest.raises(CorruptFile, match="symlink") as excinfo:
        session.constraints()
    assert LEAK not in str(excinfo.value)
    assert session.trials.records() == [] and session.trials.numbers() == []
    report = session.report()
    assert report.state is RecordState.TORN and LEAK not in repr(report)
    record = session.trials.get(1)
    assert record.state is RecordState.TORN and record.data is None
    assert LEAK not in repr(record)
    # A store entry that is a symlink is no session.
    assert [s.id for s in Store(store).sessions()] == []
    with pytest.raises(LookupError):
        Store(store).open("victim")
    for args in commands(store):
        assert_clean(run_cli(*args, timeout=30), args)


def test_a_user_named_session_path_that_is_a_symlink_is_followed_once(tmp_path: Path) -> None:
    store, _ = make_store(tmp_path)
    link = tmp_path / "link"
    link.symlink_to(store / "victim")
    env = environ(NO_COLOR="1", COLUMNS="200")
    result = run("inspect", "./link", "--json", cwd=tmp_path, env=env)
    assert result.returncode == 0, result.stderr
    view = orjson.loads(result.stdout)
    assert "victim" in result.stdout and '"real"' in result.stdout, view
    session = Session.open(link)
    assert session.id == "victim" and session.constraints() == {}
    assert [r.state for r in session.trials.records()] == [RecordState.COMPLETED]
    assert session.report().state is RecordState.IN_FLIGHT

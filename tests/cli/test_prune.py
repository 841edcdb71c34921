"""`sessionstore prune`: ended sessions go, running ones never, and never unasked."""

from __future__ import annotations

import os
import pty
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path

import cli_runner
import orjson
from inspect_helpers import dead_pid, metrics, set_manifest, trial

from sessionstore.store.session import Store


def ss(store: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return cli_runner.run(args[0], "--store", store, *args[1:])


def _ago(days: float) -> str:
    return (datetime.now(UTC) - timedelta(days=days)).isoformat()


def _store(root: Path) -> Store:
    """done (10 days old), failed (2 days), interrupted (1 hour), and three running ones:
    a live writer, no writer recorded, and one created 30 days ago."""
    store = Store(root)
    set_manifest(store.create(id="done1", pid=None), created_at=_ago(10)).finish({})
    set_manifest(store.create(id="failed1", pid=None), created_at=_ago(2)).finish({}, "failed")
    pid, started = dead_pid()
    set_manifest(
        store.create(id="intr1", pid=None), pid=pid, pid_started_at=started, created_at=_ago(1 / 24)
    )
    set_manifest(store.create(id="live1", pid=os.getpid()), created_at=_ago(30))
    set_manifest(store.create(id="nopid1", pid=None), created_at=_ago(30))
    return store


def test_dry_run_lists_and_removes_nothing(tmp_path: Path) -> None:
    _store(tmp_path)
    before = sorted(os.listdir(tmp_path))
    result = ss(tmp_path, "prune", "--dry-run")
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert [line.split()[:3] for line in lines] == [
        ["would", "remove", "intr1"],
        ["would", "remove", "failed1"],
        ["would", "remove", "done1"],
    ]
    assert lines[2] == f"would remove done1  done  1w old  {tmp_path / 'done1'}"
    assert sorted(os.listdir(tmp_path)) == before


def test_prune_yes_removes_ended_and_interrupted_never_running(tmp_path: Path) -> None:
    _store(tmp_path)
    result = ss(tmp_path, "prune", "--yes")
    assert (result.returncode, result.stdout) == (
        0,
        "pruned 3 sessions: intr1, failed1, done1\n",
    ), result.stderr
    assert sorted(os.listdir(tmp_path)) == ["live1", "nopid1"]
    assert ss(tmp_path, "prune", "--yes", "--older-than", "1s").stdout == "nothing to prune\n"
    assert sorted(os.listdir(tmp_path)) == ["live1", "nopid1"]


def test_filters_by_age_and_status(tmp_path: Path) -> None:
    _store(tmp_path)
    result = ss(tmp_path, "prune", "--dry-run", "--older-than", "3d")
    assert [line.split()[2] for line in result.stdout.splitlines()] == ["done1"]
    result = ss(tmp_path, "prune", "--dry-run", "--older-than", "12h")
    assert [line.split()[2] for line in result.stdout.splitlines()] == ["failed1", "done1"]
    result = ss(tmp_path, "prune", "--yes", "--status", "failed", "--status", "interrupted")
    assert result.returncode == 0
    assert sorted(os.listdir(tmp_path)) == ["done1", "live1", "nopid1"]
    result = ss(tmp_path, "prune", "--yes", "--older-than", "2w")
    assert result.stdout == "nothing to prune\n"


def test_durations(tmp_path: Path) -> None:
    _store(tmp_path)
    for good in ("30s", "15m", "12h", "7d", "2w", "1.5h"):
        assert ss(tmp_path, "prune", "--dry-run", "--older-than", good).returncode == 0, good
    for bad in ("7", "d", "7x", "-1d", "1d2h", ""):
        result = ss(tmp_path, "prune", "--dry-run", "--older-than", bad)
        assert result.returncode == 2, bad
        assert "is not a duration: a number and a unit, s m h d or w" in result.stderr


def test_a_running_status_is_not_a_choice(tmp_path: Path) -> None:
    _store(tmp_path)
    result = ss(tmp_path, "prune", "--yes", "--status", "running")
    assert result.returncode == 2 and "'running' is not one of" in result.stderr
    assert len(os.listdir(tmp_path)) == 5


def test_without_yes_on_a_non_terminal_it_refuses(tmp_path: Path) -> None:
    _store(tmp_path)
    result = cli_runner.run("prune", "--store", tmp_path, input="y\n")
    assert result.returncode == 2 and result.stdout == ""
    assert "refusing to remove sessions unasked: give --yes, or --dry-run" in result.stderr
    assert len(os.listdir(tmp_path)) == 5


def test_a_directory_without_a_manifest_is_neither_listed_nor_a_failure(tmp_path: Path) -> None:
    """A directory of the store named like an id with a report but no session.json reads
    as done, yet `rm` refuses it (not a session): the dry run must not list it, and
    `prune --yes` must not fail on it, run after run."""
    store = Store(tmp_path)
    store.create(id="made", pid=None).finish({})
    (tmp_path / "stray").mkdir()
    (tmp_path / "stray" / "report.json").write_text('{"status": "done"}')
    listed = ss(tmp_path, "prune", "--dry-run", "--nl")
    assert [orjson.loads(line)["id"] for line in listed.stdout.splitlines()] == ["made"]
    for _ in range(2):
        result = ss(tmp_path, "prune", "--yes")
        assert (result.returncode, result.stderr) == (0, ""), result.stderr
    assert os.listdir(tmp_path) == ["stray"]


def test_a_store_that_does_not_exist(tmp_path: Path) -> None:
    result = ss(tmp_path / "nope", "prune", "--dry-run")
    assert result.returncode == 1
    assert result.stderr == f"Error: {tmp_path / 'nope'}: no such store directory\n"
    (tmp_path / "file").write_text("x")
    result = ss(tmp_path / "file", "prune", "--dry-run")
    assert (result.returncode, result.stderr) == (
        1,
        f"Error: {tmp_path / 'file'}: is not a directory\n",
    )


def test_a_store_that_is_a_dangling_symlink_or_a_loop_is_said_so(tmp_path: Path) -> None:
    """A store given as a link is followed (`new` makes its sessions there): one that
    names nothing, or a loop of links, is neither "not a directory" nor "never followed"."""
    dangling, loop = tmp_path / "dangling", tmp_path / "loop"
    dangling.symlink_to(tmp_path / "nowhere")
    loop.symlink_to(loop)
    loops = "unreadable: Too many levels of symbolic links"
    for store, problem in ((dangling, "is a dangling symlink"), (loop, loops)):
        for args in (("prune", "--dry-run"), ("inspect",)):
            result = ss(store, *args)
            assert (result.returncode, result.stderr) == (1, f"Error: {store}: {problem}\n")
    made = ss(loop, "new")
    assert (made.returncode, made.stderr) == (1, f"Error: root {loop}: {loops}\n")


def _on_a_terminal(store: Path, answer: bytes) -> tuple[int, str]:
    """`sessionstore prune` with a pseudo-terminal for stdin, answering `answer`."""
    leader, follower = pty.openpty()
    try:
        proc = subprocess.Popen(
            [sys.executable, "-m", "sessionstore", "prune", "--store", str(store)],
            stdin=follower,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
        )
        os.write(leader, answer)
        out, _ = proc.communicate(timeout=cli_runner.TIMEOUT)
    finally:
        os.close(leader)
        os.close(follower)
    return proc.returncode, out.decode()


def test_on_a_terminal_it_lists_and_asks_first(tmp_path: Path) -> None:
    _store(tmp_path)
    code, out = _on_a_terminal(tmp_path, b"n\n")
    assert code == 1 and "would remove done1" in out
    assert "remove these 3 sessions? [y/N]" in out
    assert len(os.listdir(tmp_path)) == 5
    code, out = _on_a_terminal(tmp_path, b"y\n")
    assert code == 0 and "pruned 3 sessions: intr1, failed1, done1" in out
    assert sorted(os.listdir(tmp_path)) == ["live1", "nopid1"]


def test_verbose_names_each_session_removed(tmp_path: Path) -> None:
    _store(tmp_path)
    result = ss(tmp_path, "prune", "--yes", "-v", "--status", "done", "--status", "failed")
    assert (result.returncode, result.stderr) == (0, "")
    assert result.stdout.splitlines() == [
        f"removed failed1  failed  {tmp_path / 'failed1'}",
        f"removed done1  done  {tmp_path / 'done1'}",
        "pruned 2 sessions",
    ]
    quiet = ss(tmp_path, "prune", "--yes", "-q")
    assert (quiet.returncode, quiet.stdout, quiet.stderr) == (0, "", "")
    assert sorted(os.listdir(tmp_path)) == ["live1", "nopid1"]


def test_sort_best_orders_by_the_best_trial_and_the_objective(tmp_path: Path) -> None:
    store = Store(tmp_path)
    for n, (session_id, value) in enumerate((("low", 10.0), ("none", None), ("high", 99.0))):
        session = set_manifest(store.create(id=session_id, pid=None), created_at=_ago(3 - n))
        if value is not None:
            trial(session, metrics(value))
        session.finish({})

    def order(*args: str) -> list[str]:
        result = ss(tmp_path, "prune", "-n", "--nl", "--sort", "best", *args)
        assert result.returncode == 0, result.stderr
        return [orjson.loads(line)["id"] for line in result.stdout.splitlines()]

    assert order() == ["high", "low", "none"]  # no best trial last
    assert order("--lower") == ["low", "high", "none"]
    assert order("--limit", "1") == ["high"]
    # What the dry run lists first is what goes first.
    result = ss(tmp_path, "prune", "--yes", "-v", "--sort", "best", "--limit", "1")
    assert result.stdout.splitlines()[0] == f"removed high  done  {tmp_path / 'high'}"
    assert sorted(os.listdir(tmp_path)) == ["low", "none"]

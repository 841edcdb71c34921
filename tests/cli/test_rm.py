"""`sessionstore rm`: sessions go whole, a live writer is refused, a killed rm converges."""

from __future__ import annotations

import fcntl
import os
import signal
import subprocess
from pathlib import Path

import cli_runner
from inspect_helpers import dead_pid, set_manifest

from sessionstore.store.session import Store

FILES = 3000  # enough that a removal takes a while, so a kill often lands inside it


def ss(store: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return cli_runner.run(args[0], "--store", store, *args[1:])


def test_rm_removes_sessions_by_id_prefix_and_path(tmp_path: Path) -> None:
    store = Store(tmp_path)
    for session_id in ("abc", "def123", "ghi"):
        store.create(id=session_id, pid=None).trials.begin().write_text("a.txt", "a")
    result = ss(tmp_path, "rm", "abc", "def", str(tmp_path / "ghi"))
    assert (result.returncode, result.stdout, result.stderr) == (
        0,
        "removed 3 sessions: abc, def123, ghi\n",
        "",
    )
    assert os.listdir(tmp_path) == []


def test_verbose_names_each_session_removed_and_each_leftover_swept(tmp_path: Path) -> None:
    store = Store(tmp_path)
    for session_id in ("abc", "def"):
        store.create(id=session_id, pid=None)
    pid, _ = dead_pid()
    leftover = tmp_path / f".sstmp-{pid}-deadbeef"  # what a removal killed half-way leaves
    (leftover / "trials").mkdir(parents=True)
    result = ss(tmp_path, "rm", "-v", "abc", "def")
    assert (result.returncode, result.stderr) == (0, "")
    assert result.stdout.splitlines() == [
        f"removed {tmp_path / 'abc'}",
        f"removed {tmp_path / 'def'}",
        f"swept {leftover} (a temp entry of a process that is gone)",
        "removed 2 sessions",
    ]
    assert os.listdir(tmp_path) == []
    store.create(id="ghi", pid=None)
    clash = ss(tmp_path, "rm", "-q", "-v", "ghi")
    assert (
        clash.returncode == 2 and "-q/--quiet and -v/--verbose cannot be combined" in clash.stderr
    )
    assert (tmp_path / "ghi").is_dir()
    assert ss(tmp_path, "rm", "-q", "ghi").stdout == ""
    assert not (tmp_path / "ghi").exists()


def test_every_target_is_tried_and_the_exit_says_one_failed(tmp_path: Path) -> None:
    Store(tmp_path).create(id="abc", pid=None)
    result = ss(tmp_path, "rm", "nope", "abc")
    assert result.returncode == 1
    assert result.stderr == (
        f"Error: no session 'nope' in store {tmp_path}; list sessions with `sessionstore inspect`\n"
    )
    assert result.stdout == "removed 1 session: abc\n"
    assert not (tmp_path / "abc").exists()


def test_a_live_writer_is_refused_unless_forced(tmp_path: Path) -> None:
    session = Store(tmp_path).create(id="abc", pid=os.getpid())
    result = ss(tmp_path, "rm", "abc")
    assert result.returncode == 1 and result.stdout == ""
    assert result.stderr == (
        f"Error: {session.path}: its writer (pid {os.getpid()}) is alive and may still write; "
        "stop it first, or use --force\n"
    )
    assert (session.path / "session.json").is_file()
    assert ss(tmp_path, "rm", "abc", "--force").returncode == 0
    assert not session.path.exists()


def test_a_dead_writer_or_none_recorded_is_removed(tmp_path: Path) -> None:
    store = Store(tmp_path)
    pid, started = dead_pid()
    set_manifest(store.create(id="dead", pid=None), pid=pid, pid_started_at=started)
    store.create(id="none", pid=None)
    assert ss(tmp_path, "rm", "dead", "none").returncode == 0
    assert os.listdir(tmp_path) == []


def test_a_mirror_daemon_holding_the_lock_is_refused(tmp_path: Path) -> None:
    session = Store(tmp_path).create(id="abc", pid=None)
    (session.path / ".sessionstore-mirror.pid").write_text("4242\n")
    fd = os.open(session.path / ".sessionstore-mirror.lock", os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        result = ss(tmp_path, "rm", "abc")
        assert result.returncode == 1
        assert "its mirror daemon (pid 4242) is alive" in result.stderr
    finally:
        os.close(fd)
    assert ss(tmp_path, "rm", "abc").returncode == 0, "the lock released: a stale file is no daemon"


def test_what_is_not_a_session_is_refused(tmp_path: Path) -> None:
    workspace = tmp_path / "my.workspace"
    (workspace / "trials" / "1").mkdir(parents=True)
    result = cli_runner.run("rm", "--store", tmp_path / "s", workspace)
    assert result.returncode == 1
    assert result.stderr == (
        f"Error: {workspace}: is not a session directory (its name is not a session id); "
        "not removed\n"
    )
    raw = tmp_path / "abc"
    raw.mkdir()
    result = cli_runner.run("rm", "--store", tmp_path / "s", raw)
    assert result.stderr == (
        f"Error: {raw}: has no session.json, so it is not a session; not removed\n"
    )
    assert workspace.is_dir() and raw.is_dir()


def test_a_symlink_in_the_store_is_not_followed(tmp_path: Path) -> None:
    outside = Store(tmp_path / "outside").create(id="abc", pid=None)
    (tmp_path / "s").mkdir()
    (tmp_path / "s" / "abc").symlink_to(outside.path)
    result = ss(tmp_path / "s", "rm", "abc")
    assert result.returncode == 1 and "no session 'abc'" in result.stderr
    assert (outside.path / "session.json").is_file()


def test_a_target_path_that_is_a_symlink_is_refused_not_followed(tmp_path: Path) -> None:
    """`rm ./link` names a link, not the session it leads to (in this store or another):
    nothing is removed through it, and the link stays, whatever its spelling."""
    outside = Store(tmp_path / "outside").create(id="abc", pid=None)
    store = tmp_path / "s"
    store.mkdir()
    (store / "def").symlink_to(outside.path)
    (tmp_path / "link").symlink_to(outside.path)
    (tmp_path / "dangling").symlink_to(tmp_path / "nowhere")
    for link in (
        tmp_path / "link",
        f"{tmp_path / 'link'}/",
        f"{tmp_path / 'link'}/.",
        store / "def",
        tmp_path / "dangling",
    ):
        result = ss(store, "rm", str(link))
        assert (result.returncode, result.stdout, result.stderr) == (
            1,
            "",
            f"Error: {link}: is a symlink; not followed, so nothing was removed\n",
        )
    assert (outside.path / "session.json").is_file()
    assert (tmp_path / "link").is_symlink() and (store / "def").is_symlink()


def test_an_ambiguous_prefix_is_refused_listing_the_candidates(tmp_path: Path) -> None:
    store = Store(tmp_path)
    store.create(id="abc1", pid=None)
    store.create(id="abc2", pid=None)
    result = ss(tmp_path, "rm", "abc")
    assert result.returncode == 1
    assert result.stderr == (
        f"Error: session prefix 'abc' is ambiguous in store {tmp_path}: it matches abc1, abc2; "
        "give more characters of the id\n"
    )
    assert sorted(os.listdir(tmp_path)) == ["abc1", "abc2"]


def test_a_prefix_ambiguous_when_given_stays_refused_after_an_earlier_target_went(
    tmp_path: Path,
) -> None:
    """`rm abc1 abc`: `abc` matched abc1 and abc2 when the command was given; removing
    abc1 first must not make it name abc2, which nobody asked to remove."""
    store = Store(tmp_path)
    store.create(id="abc1", pid=None)
    store.create(id="abc2", pid=None)
    result = ss(tmp_path, "rm", "abc1", "abc")
    assert (result.returncode, result.stdout) == (1, "removed 1 session: abc1\n")
    assert result.stderr == (
        f"Error: session prefix 'abc' is ambiguous in store {tmp_path}: it matches abc1, abc2; "
        "give more characters of the id\n"
    )
    assert os.listdir(tmp_path) == ["abc2"]


def test_rm_sweeps_the_leftover_of_a_killed_rm(tmp_path: Path) -> None:
    store = Store(tmp_path)
    leftover = store.create(id="gone", pid=None)
    pid, _ = dead_pid()
    away = tmp_path / f".sstmp-{pid}-0123456789abcdef"
    os.rename(leftover.path, away)  # what a rm killed after its rename leaves
    live = tmp_path / f".sstmp-{os.getpid()}-fedcba9876543210"
    live.mkdir()  # a live process's temp: left alone
    assert [s.id for s in store.sessions()] == []
    store.create(id="abc", pid=None)
    assert ss(tmp_path, "rm", "abc").returncode == 0
    assert os.listdir(tmp_path) == [live.name]


def _whole_or_absent(store: Path, session_id: str) -> bool:
    """Whether the session is absent from the store, or present with every file."""
    path = store / session_id
    try:
        count = sum(len(files) for _, _, files in os.walk(path / "trials"))
    except OSError:
        return not path.exists()
    return count == FILES or not path.exists()


def test_a_killed_rm_leaves_no_half_session_and_the_next_prune_converges(tmp_path: Path) -> None:
    session = Store(tmp_path).create(id="big", pid=None)
    for _ in range(FILES // 100):
        writer = session.trials.begin()
        for j in range(100):
            (writer.path / f"f{j}").write_text("x")
    session.finish({})
    proc = cli_runner.popen("rm", "--store", tmp_path, "big")
    try:
        # Every look at the store sees the session whole, or not at all; once it is gone
        # from its name, the rm is killed (often in the middle of deleting the renamed tree).
        while (tmp_path / "big").exists():
            assert _whole_or_absent(tmp_path, "big")
            assert proc.poll() is None or proc.returncode == 0
        proc.send_signal(signal.SIGKILL)
    finally:
        cli_runner.finish(proc)
    assert "big" not in os.listdir(tmp_path)
    listed = cli_runner.run("inspect", "--store", tmp_path, "--json")
    assert listed.returncode == 0 and "big" not in listed.stdout
    result = ss(tmp_path, "prune", "--yes")
    assert result.returncode == 0, result.stderr
    assert os.listdir(tmp_path) == [], "the renamed leftover is swept"


def test_an_empty_target_is_refused_not_the_current_directory(tmp_path: Path) -> None:
    # `sessionstore rm "$ID"` with ID unset, run inside a session: "" is not `.`.
    session = Store(tmp_path).create(id="abc", pid=None)
    result = cli_runner.run("rm", "--store", tmp_path, "", cwd=session.path)
    assert (result.returncode, result.stdout) == (1, "")
    assert result.stderr == (
        "Error: TARGET: is empty; name a session id, a prefix of one, or a path\n"
    )
    assert (session.path / "session.json").is_file()


def test_a_session_named_by_path_outside_the_store_leaves_its_directory_unswept(
    tmp_path: Path,
) -> None:
    # Its parent is no store: `.sstmp-*` there (a harness's marker temp, a build dir) stay.
    work = tmp_path / "work"
    session = Store(work).create(id="abc", pid=None)
    (work / ".sstmp-m").write_text("{}")
    (work / ".sstmp-build" / "keep").mkdir(parents=True)
    result = ss(tmp_path / "store", "rm", str(session.path))
    assert (result.returncode, result.stderr) == (0, "")
    assert sorted(os.listdir(work)) == [".sstmp-build", ".sstmp-m"]
    assert (work / ".sstmp-build" / "keep").is_dir()

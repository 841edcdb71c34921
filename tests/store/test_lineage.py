"""Lineage: what `previous/<id>/` holds, refusals, warnings, and healing after a crash."""

from __future__ import annotations

import fcntl
import os
import subprocess
import sys
import warnings
from pathlib import Path
from typing import Any
from unittest import mock

import pytest
from cli_runner import invoke, run
from inspect_helpers import attempt, metrics, set_manifest, trial

from sessionstore._fs.atomic import is_temp_name
from sessionstore.errors import LineageWarning, PreviousRunning, SessionNotFound
from sessionstore.inspect.summary import SessionView
from sessionstore.store import lineage
from sessionstore.store.lifecycle_remove import remove_session
from sessionstore.store.lineage import include_previous, select_files
from sessionstore.store.session import Session, Store

# finished_session plants trials/1/link.yml -> /etc/hostname: every copy of it warns so.
LINK_WARNING = (
    "previous session {}: trials/1/link.yml is a symlink (never followed), "
    "not a regular file; not copied"
)
pytestmark = pytest.mark.filterwarnings(
    # (`.` for the colon: the filter's fields are separated by colons)
    r"ignore:previous session [a-z]+. trials/1/link.yml is a symlink"
    ":sessionstore.errors.LineageWarning"
)

EXPECTED = [
    "constraints.json",
    "report.json",
    "service/1/service.yml",
    "service/1/verification.json",
    "trials/1/patches/deep/b.diff",
    "trials/1/patches/fix.diff",
    "trials/1/task.yml",
    "trials/1/trial.json",
    "trials/2/task.yml",  # in flight: its config, no marker
]


def finished_session(store: Store, session_id: str, **create: Any) -> Session:
    """A finished session with every kind of file lineage must copy or skip."""
    session = store.create(id=session_id, constraints={"max_ttft_ms": 200}, pid=None, **create)
    trial(
        session,
        metrics(100.0),
        {
            "task.yml": "files: [patches/fix.diff]\r\n",
            "patches/fix.diff": "+x\n",
            "patches/deep/b.diff": "+y\n",
            "agent.log": "noise\n",
            "logs/run.txt": "noise\n",
        },
    )
    trial(session, None, {"task.yml": "in flight\n", "stdout.log": "noise\n"})
    attempt(session, {"trial": 1, "status": "verified"})
    (session.service.path / "1" / "server.log").write_text("noise\n")
    (session.trials.path / "README").write_text("foreign\n")
    os.symlink("/etc/hostname", session.trials.path / "1" / "link.yml")
    session.finish({"best_trial": 1})
    return session


def files_under(path: Path) -> list[str]:
    return sorted(
        p.relative_to(path).as_posix() for p in path.rglob("*") if p.is_file() or p.is_symlink()
    )


def test_lineage_copies_only_records_configs_patches_and_reports(tmp_path: Path) -> None:
    store = Store(tmp_path)
    old = finished_session(store, "old")
    assert select_files(old.path) == EXPECTED
    new = store.create(id="new", previous=["old"])
    copy = new.path / "previous" / "old"
    assert files_under(copy) == EXPECTED
    for rel in EXPECTED:
        assert (copy / rel).read_bytes() == (old.path / rel).read_bytes()
    assert new.manifest is not None and new.manifest["previous"] == ["old"]


def test_lineage_copy_reads_as_a_raw_session(tmp_path: Path) -> None:
    store = Store(tmp_path)
    finished_session(store, "old")
    new = store.create(id="new", previous=["old"])
    view = SessionView.load(Session.open(new.path / "previous" / "old"))
    assert view.status == "done"
    assert [r.state.value for r in view.trials] == ["completed", "in_flight"]
    assert view.best is not None and view.best.n == 1
    assert SessionView.load(new).detail()["lineage"] == [
        {
            "id": "old",
            "path": str(new.path / "previous" / "old"),
            "copied": True,
            "trials": 2,
            "service": 1,
            "problem": None,
        }
    ]


def test_lineage_refuses_a_running_previous_session(tmp_path: Path) -> None:
    store = Store(tmp_path)
    store.create(id="busy")  # this process is its writer, and it is alive
    with pytest.raises(PreviousRunning):
        store.create(id="new", previous=["busy"])
    assert not (tmp_path / "new").exists()


def test_lineage_refuses_a_cli_session_without_report(tmp_path: Path) -> None:
    # No writer recorded: only report.json can say it ended, so it counts as running.
    store = Store(tmp_path)
    store.create(id="open", pid=None)
    with pytest.raises(PreviousRunning):
        store.create(id="new", previous=["open"])


def test_lineage_accepts_an_interrupted_previous_session(tmp_path: Path) -> None:
    store = Store(tmp_path)
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    crashed = store.create(id="crashed", pid=None)
    trial(crashed, metrics(5.0))
    set_manifest(crashed, pid=proc.pid, pid_started_at=1.0)
    new = store.create(id="new", previous=["crashed"])
    assert (new.path / "previous" / "crashed" / "trials" / "1" / "trial.json").is_file()


def test_lineage_missing_previous_session_is_not_found(tmp_path: Path) -> None:
    with pytest.raises(SessionNotFound):
        Store(tmp_path).create(id="new", previous=["ghost"])


def test_lineage_warns_when_a_chained_parent_is_left_out(tmp_path: Path) -> None:
    store = Store(tmp_path)
    finished_session(store, "grandparent")
    finished_session(store, "parent", previous=["grandparent"])
    with pytest.warns(LineageWarning, match="'parent' builds on 'grandparent'"):
        store.create(id="child", previous=["parent"])
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        store.create(id="child2", previous=["parent", "grandparent"])
    # Only the planted link.yml of each, no chain gap.
    assert [str(w.message) for w in caught] == [
        LINK_WARNING.format("parent"),
        LINK_WARNING.format("grandparent"),
    ]


def test_lineage_warning_printed_by_new_on_stderr(tmp_path: Path) -> None:
    store = Store(tmp_path)
    finished_session(store, "grandparent")
    finished_session(store, "parent", previous=["grandparent"])
    args = ["new", "--store", str(tmp_path), "--id", "child", "--previous", "parent"]
    result = invoke(*args)
    assert result.exit_code == 0, result.output
    assert result.stdout == "child\n"
    assert result.stderr.startswith("warning: previous session 'parent' builds on 'grandparent'")


def test_lineage_advises_adding_only_a_parent_new_would_take(tmp_path: Path) -> None:
    # A hand-edited manifest pinning no id, or a parent removed since: advising
    # `--previous ../../etc` (or a removed id) is advice that fails when followed.
    store = Store(tmp_path)
    finished_session(store, "gone")
    parent = finished_session(store, "parent", previous=["gone"])
    set_manifest(parent, previous=["gone", "../../etc"])
    remove_session(store.open("gone"))
    args = ["new", "--store", str(tmp_path), "--id", "child", "--previous", "parent"]
    result = invoke(*args)
    assert result.exit_code == 0, result.output
    assert "--previous ../../etc" not in result.stderr
    assert "--previous gone" not in result.stderr
    assert (
        "warning: previous session 'parent' builds on 'gone', which is not in the store; "
        "its records cannot be included\n"
    ) in result.stderr
    assert (
        "warning: previous session 'parent' builds on '../../etc', which is not a valid "
        "session id; its records cannot be included\n"
    ) in result.stderr


def test_lineage_create_crash_mid_copy_publishes_nothing(tmp_path: Path) -> None:
    store = Store(tmp_path)
    finished_session(store, "old")
    real = lineage._copy_file
    calls = 0

    def crash_half_way(*args: Any) -> None:
        nonlocal calls
        calls += 1
        if calls == 4:
            raise OSError(5, "injected I/O error")
        real(*args)

    with mock.patch.object(lineage, "_copy_file", crash_half_way), pytest.raises(OSError):
        store.create(id="new", previous=["old"])
    assert sorted(os.listdir(tmp_path)) == ["old"]  # no session, no staging debris
    assert files_under(store.create(id="new", previous=["old"]).path / "previous/old") == EXPECTED


def test_lineage_heal_after_injected_crash(tmp_path: Path) -> None:
    store = Store(tmp_path)
    finished_session(store, "old")
    new = store.create(id="new", previous=["old"])
    copy = new.path / "previous" / "old"
    (copy / "trials" / "1" / "trial.json").unlink()  # damage the copy
    real = lineage._copy_file
    calls = 0

    def crash_half_way(*args: Any) -> None:
        nonlocal calls
        calls += 1
        if calls == len(EXPECTED) // 2:
            raise OSError(28, "injected: no space left on device")
        real(*args)

    with mock.patch.object(lineage, "_copy_file", crash_half_way), pytest.raises(OSError):
        include_previous(store, new)
    # The failed pass changed nothing visible: no partial copy, no debris.
    assert not any(is_temp_name(n) for n in os.listdir(copy.parent))
    include_previous(store, new)  # the next call heals
    assert files_under(copy) == EXPECTED
    include_previous(store, new)  # and is idempotent
    assert files_under(copy) == EXPECTED


def test_a_previous_session_removed_while_it_is_copied_is_not_copied(tmp_path: Path) -> None:
    # `rm` renames a session away, then deletes its files: a copy that went on reading
    # gave some records and not others (a completed trial without its marker), and was
    # published as whole. The removal happens after the copy's first file here.
    store = Store(tmp_path)
    real = lineage._copy_file

    def removed_after_first_file(*args: Any) -> None:
        real(*args)
        away = tmp_path / "old"
        if away.exists():
            away.rename(tmp_path / ".sstmp-1-removing")

    finished_session(store, "old")
    with (
        mock.patch.object(lineage, "_copy_file", removed_after_first_file),
        pytest.raises(SessionNotFound, match="removed while it was copied"),
    ):
        store.create(id="new", previous=["old"])
    assert sorted(os.listdir(tmp_path)) == [".sstmp-1-removing"]  # no session made
    # Re-copying an existing copy keeps it whole, as for a session deleted before.
    (tmp_path / ".sstmp-1-removing").rename(tmp_path / "old")
    new = store.create(id="new", previous=["old"])
    with mock.patch.object(lineage, "_copy_file", removed_after_first_file):
        assert include_previous(store, new) == [new.path / "previous" / "old"]
    assert files_under(new.path / "previous" / "old") == EXPECTED


def test_a_previous_session_a_mirror_daemon_writes_into_is_refused(tmp_path: Path) -> None:
    # Its harness died (interrupted) but the daemon holding its lock still mirrors:
    # records may still be changing, as in a running session.
    store = Store(tmp_path)
    finished_session(store, "old")
    (tmp_path / "old" / ".sessionstore-mirror.pid").write_text("4242\n")
    fd = os.open(tmp_path / "old" / ".sessionstore-mirror.lock", os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        with pytest.raises(PreviousRunning, match=r"mirror daemon \(pid 4242\); stop it"):
            store.create(id="new", previous=["old"])
        result = run("new", "--store", str(tmp_path), "--previous", "old")
        assert result.returncode == 1 and "mirror daemon (pid 4242)" in result.stderr
    finally:
        os.close(fd)
    assert sorted(os.listdir(tmp_path)) == ["old"]
    assert files_under(store.create(id="new", previous=["old"]).path / "previous/old") == EXPECTED


_KILLED_COPIER = """
import os, sys
from sessionstore.store import lineage
from sessionstore.store.lineage import include_previous
from sessionstore.store.session import Store
real, calls = lineage._copy_file, [0]
def die_half_way(*args):
    calls[0] += 1
    if calls[0] == 4:
        os._exit(9)  # a real crash: no cleanup, no exception handlers
    real(*args)
lineage._copy_file = die_half_way
store = Store(sys.argv[1])
include_previous(store, store.open("new"))
"""


def test_lineage_heal_after_a_killed_copier(tmp_path: Path) -> None:
    store = Store(tmp_path)
    finished_session(store, "old")
    new = store.create(id="new", previous=["old"])
    previous_dir = new.path / "previous"
    import shutil

    shutil.rmtree(previous_dir / "old")  # as if the first copy never finished
    proc = subprocess.run([sys.executable, "-c", _KILLED_COPIER, str(tmp_path)], check=False)
    assert proc.returncode == 9
    debris = [n for n in os.listdir(previous_dir) if is_temp_name(n)]
    assert debris and "old" not in os.listdir(previous_dir)  # partial copy only as a temp
    assert not SessionView.load(new).detail()["lineage"][0]["copied"]
    include_previous(store, new)
    assert sorted(os.listdir(previous_dir)) == ["old"]
    assert files_under(previous_dir / "old") == EXPECTED


def test_lineage_heal_keeps_copy_of_a_deleted_previous_session(tmp_path: Path) -> None:
    store = Store(tmp_path)
    old = finished_session(store, "old")
    new = store.create(id="new", previous=["old"])
    import shutil

    shutil.rmtree(old.path)
    assert include_previous(store, new) == [new.path / "previous" / "old"]
    assert files_under(new.path / "previous" / "old") == EXPECTED
    shutil.rmtree(new.path / "previous" / "old")
    with pytest.raises(SessionNotFound):
        include_previous(store, new)


def empty_session(store: Store, session_id: str) -> Session:
    """A finished session with constraints and a report but no records lineage copies."""
    session = store.create(id=session_id, constraints={"max_ttft_ms": 200}, pid=None)
    writer = session.trials.begin()
    writer.write_text("agent.log", "crashed before writing anything\n")  # nothing lineage copies
    session.finish({"best_trial": None})
    return session


def test_lineage_duplicate_previous_ids_are_pinned_once_in_first_seen_order(
    tmp_path: Path,
) -> None:
    store = Store(tmp_path)
    finished_session(store, "a")
    finished_session(store, "b")
    args = ["--id", "new", "--previous", "b", "--previous", "a", "--previous", "b"]
    result = run("new", "--store", tmp_path, *args, "--previous", "a")
    warned = "".join(f"warning: {LINK_WARNING.format(i)}\n" for i in ("b", "a"))
    assert (result.returncode, result.stdout, result.stderr) == (0, "new\n", warned)
    new = store.open("new")
    assert new.manifest is not None and new.manifest["previous"] == ["b", "a"]
    assert sorted(os.listdir(new.path / "previous")) == ["a", "b"]
    assert files_under(new.path / "previous" / "b") == EXPECTED
    lineage_ids = [item["id"] for item in SessionView.load(new).detail()["lineage"]]
    assert lineage_ids == ["b", "a"]


def test_lineage_a_previous_session_without_records_warns_and_copies_nothing(
    tmp_path: Path,
) -> None:
    store = Store(tmp_path)
    empty_session(store, "empty")
    finished_session(store, "full")
    args = ["--id", "new", "--previous", "empty", "--previous", "full"]
    result = run("new", "--store", tmp_path, *args)
    assert (result.returncode, result.stdout) == (0, "new\n")
    assert result.stderr == (
        "warning: previous session empty has no records; nothing copied from it\n"
        f"warning: {LINK_WARNING.format('full')}\n"
    )
    new = store.open("new")
    assert os.listdir(new.path / "previous") == ["full"]
    assert new.manifest is not None and new.manifest["previous"] == ["empty", "full"]
    lineage_info = SessionView.load(new).detail()["lineage"]
    assert [(i["id"], i["copied"]) for i in lineage_info] == [("empty", False), ("full", True)]


def test_lineage_only_sessions_without_records_leave_no_previous_dir(tmp_path: Path) -> None:
    store = Store(tmp_path)
    empty_session(store, "empty")
    with pytest.warns(LineageWarning, match="^previous session empty has no records"):
        new = store.create(id="new", previous=["empty", "empty"])
    assert not (new.path / "previous").exists()
    with pytest.warns(LineageWarning, match="^previous session empty has no records"):
        assert include_previous(store, new) == []
    assert not (new.path / "previous").exists()


def test_lineage_an_old_manifest_with_repeated_ids_is_read_once_each(tmp_path: Path) -> None:
    store = Store(tmp_path)
    finished_session(store, "old")
    new = store.create(id="new", previous=["old"])
    set_manifest(new, previous=["old", "old"])  # written before ids were de-duplicated
    assert include_previous(store, new) == [new.path / "previous" / "old"]
    assert [i["id"] for i in SessionView.load(new).detail()["lineage"]] == ["old"]

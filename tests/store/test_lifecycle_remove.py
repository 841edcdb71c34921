"""`store.lifecycle_remove`: removal whole, its refusals, the sweep, and prune's choice."""

from __future__ import annotations

import os
import re
import shutil
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from inspect_helpers import dead_pid, set_manifest

from sessionstore.errors import InvalidInput, SessionBusy, SessionNotFound
from sessionstore.store.lifecycle_remove import prunable, prune, remove_session, sweep_removed
from sessionstore.store.session import Session, Store


def test_remove_session_removes_it_whole(tmp_path: Path) -> None:
    store = Store(tmp_path)
    session = store.create(id="abc", pid=None)
    writer = session.trials.begin()
    writer.write_text("a/b/c.txt", "x")
    (writer.path / "link").symlink_to(tmp_path)  # removed as a link, never followed
    keep = store.create(id="keep", pid=None)
    assert remove_session(session) == session.path
    assert os.listdir(tmp_path) == ["keep"] and (keep.path / "session.json").is_file()
    with pytest.raises(SessionNotFound):
        remove_session(session)


def test_a_session_swapped_for_a_symlink_is_not_followed(tmp_path: Path) -> None:
    store = Store(tmp_path / "s")
    session = store.create(id="abc", pid=None)
    victim = Store(tmp_path / "victim").create(id="abc", pid=None)
    shutil.rmtree(session.path)
    session.path.symlink_to(victim.path)
    with pytest.raises(InvalidInput, match="not a directory; not removed"):
        remove_session(session)
    assert (victim.path / "session.json").is_file() and session.path.is_symlink()


def test_a_live_writer_is_refused_unless_forced(tmp_path: Path) -> None:
    session = Store(tmp_path).create(id="abc", pid=os.getpid())
    with pytest.raises(SessionBusy) as raised:
        remove_session(session)
    assert (raised.value.writer, raised.value.pid) == ("writer", os.getpid())
    assert session.path.is_dir()
    remove_session(session, force=True)
    assert not session.path.exists()


def test_only_sessions_are_removed(tmp_path: Path) -> None:
    raw = tmp_path / "abc"
    raw.mkdir()
    with pytest.raises(InvalidInput, match=r"has no session\.json"):
        remove_session(Session.open(raw))
    odd = tmp_path / "Not.An.Id"
    odd.mkdir()
    (odd / "session.json").write_text("{}")
    with pytest.raises(InvalidInput, match="its name is not a session id"):
        remove_session(Session.open(odd))
    assert raw.is_dir() and odd.is_dir()


def test_a_torn_manifest_is_still_a_session_and_removable(tmp_path: Path) -> None:
    session = Store(tmp_path).create(id="abc", pid=None)
    (session.path / "session.json").write_text("{torn")
    remove_session(Session.open(session.path))
    assert os.listdir(tmp_path) == []


def test_sweep_removes_dead_writers_leftovers_only(tmp_path: Path) -> None:
    pid, _ = dead_pid()
    dead_dir = tmp_path / f".sstmp-{pid}-aa"
    (dead_dir / "trials" / "1").mkdir(parents=True)
    (dead_dir / "trials" / "1" / "f").write_text("x")
    (tmp_path / f".sstmp-{pid}-bb").write_text("a temp file")
    (tmp_path / ".sstmp-junk").mkdir()  # no pid: no writer to wait for
    live = tmp_path / f".sstmp-{os.getpid()}-cc"
    live.mkdir()
    (tmp_path / "abc").mkdir()  # not a temp entry: never touched
    removed, problems = sweep_removed(tmp_path)
    assert sorted(removed) == sorted([f".sstmp-{pid}-aa", f".sstmp-{pid}-bb", ".sstmp-junk"])
    assert problems == []
    assert sorted(os.listdir(tmp_path)) == sorted([live.name, "abc"])
    assert sweep_removed(tmp_path / "missing") == ([], [])


def _ago(days: float) -> str:
    return (datetime.now(UTC) - timedelta(days=days)).isoformat()


def test_prunable_and_prune(tmp_path: Path) -> None:
    store = Store(tmp_path)
    set_manifest(store.create(id="old", pid=None), created_at=_ago(9)).finish({})
    set_manifest(store.create(id="new", pid=None), created_at=_ago(0.1)).finish({}, "failed")
    store.create(id="running", pid=None)
    set_manifest(store.create(id="unknown", pid=None), pid="x")
    pid, started = dead_pid()
    set_manifest(store.create(id="intr", pid=None), pid=pid, pid_started_at=started)
    assert {c.id for c in prunable(store)} == {"old", "new", "intr"}
    assert [c.id for c in prunable(store, older_than=86400)] == ["old"]
    assert {c.id for c in prunable(store, statuses=["failed", "running"])} == {"new"}
    candidates = prunable(store)
    # One of them runs again by the time prune reaches it: it is left out.
    (tmp_path / "new" / "report.json").unlink()
    set_manifest(Session.open(tmp_path / "new"), status="running")
    removed, left = prune(store, candidates)
    assert {c.id for c in removed} == {"old", "intr"} and left == []
    assert sorted(os.listdir(tmp_path)) == ["new", "running", "unknown"]
    assert prune(store, candidates) == ([], [])


def test_prune_leaves_a_session_whose_status_changed_since_it_was_chosen(
    tmp_path: Path,
) -> None:
    # `prune --status interrupted`: one finished since it was listed (while the prompt
    # waited) is a done session, which was not asked for; removed, its report was lost.
    store = Store(tmp_path)
    pid, started = dead_pid()
    session = set_manifest(store.create(id="intr", pid=None), pid=pid, pid_started_at=started)
    candidates = prunable(store, statuses=["interrupted"])
    assert [c.id for c in candidates] == ["intr"]
    session.finish({})
    assert prune(store, candidates) == ([], [])
    assert (tmp_path / "intr" / "report.json").is_file()


def test_a_relative_path_names_the_directory_it_resolves_to(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = Store(tmp_path / "s")
    session = store.create(id="abc", pid=None)
    monkeypatch.chdir(store.root)
    assert remove_session(Session.open("abc")) == session.path
    monkeypatch.chdir(tmp_path)
    with pytest.raises(
        InvalidInput, match="^" + re.escape(f"{tmp_path}: is not a session directory")
    ):
        remove_session(Session.open("."))
    assert os.listdir(store.root) == []


def test_a_live_session_swapped_in_after_the_check_is_not_removed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The manifest is read when the session is opened, its directory's identity later:
    # a running session renamed in between is checked again, under the removal's name.
    store = Store(tmp_path)
    dead = store.create(id="dead", pid=None)
    set_manifest(dead, pid=dead_pid()[0])
    live = store.create(id="live", pid=os.getpid())
    opened = store.open("dead")
    os.rename(dead.path, tmp_path / "aside")
    os.rename(live.path, dead.path)
    with pytest.raises(SessionBusy):
        remove_session(opened)
    assert (Store(tmp_path).open("dead").manifest or {})["pid"] == os.getpid()
    assert sorted(os.listdir(tmp_path)) == ["aside", "dead"]

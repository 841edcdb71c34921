"""`doctor`: each problem kind is found, a healthy session has none, and `repair` removes
only provably garbage temps (a live writer's temp is kept: real writer processes)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path

import orjson
import pytest

from sessionstore import Session, Store
from sessionstore.store.doctor import SAFE_AGE, Checkup, doctor, temp_verdict


@pytest.fixture
def session(tmp_path: Path) -> Session:
    """A healthy session: two trials (one completed, one in flight), an attempt, a report."""
    s = Store(tmp_path / "store").create(name="doctor", pid=None)
    trial = s.trials.begin()
    trial.write_text("logs/run.log", "ok\n")
    trial.complete({"failed": False})
    s.trials.begin()
    s.service.begin().complete({"trial": 1, "status": "verified"})
    s.finish({"best_trial": 1})
    return Session.open(s.path)


def kinds(checkup: Checkup) -> list[tuple[str, str]]:
    return [(str(p.path.relative_to(checkup.path)), p.kind) for p in checkup.problems]


def reopen(session: Session) -> Session:
    return Session.open(session.path)


def test_a_healthy_session_has_no_problem(session: Session) -> None:
    checkup = doctor(session)
    assert checkup.problems == () and checkup.healthy


def test_each_file_problem(session: Session) -> None:
    (session.path / "session.json").write_text('{"id": "x", "pid": "x"')
    (session.path / "constraints.json").write_text("[]")
    (session.path / "report.json").write_text("")
    assert kinds(doctor(reopen(session))) == [
        ("constraints.json", "constraints"),
        ("report.json", "report"),
        ("session.json", "manifest"),
    ]


def test_missing_constraints(session: Session) -> None:
    (session.path / "constraints.json").unlink()
    assert kinds(doctor(session)) == [("constraints.json", "constraints")]


def test_manifest_fields_and_id(session: Session) -> None:
    (session.path / "session.json").write_text('{"id": "other", "pid": "x", "format": 1}')
    problems = doctor(reopen(session)).problems
    details = [p.detail for p in problems]
    assert any("pid must be" in d for d in details)
    assert any("is not the directory's name" in d for d in details)


def test_a_directory_without_a_manifest(tmp_path: Path) -> None:
    (tmp_path / "raw").mkdir(mode=0o700)
    assert kinds(doctor(Session.open(tmp_path / "raw"))) == [("session.json", "manifest")]


def test_torn_markers_foreign_entries_and_collections(session: Session, tmp_path: Path) -> None:
    (session.path / "trials" / "2" / "trial.json").write_text("[1, 2]")
    (session.path / "trials" / "notes.txt").write_text("x")
    (session.path / "trials" / "007").mkdir()
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    (session.path / "trials" / "3").symlink_to(outside)
    (session.path / "service" / "1" / "verification.json").unlink()
    os.rmdir(session.path / "service" / "1")
    os.rmdir(session.path / "service")
    (session.path / "service").symlink_to(outside)
    assert kinds(doctor(reopen(session))) == [
        ("service", "collection"),
        ("trials/007", "foreign"),
        ("trials/2/trial.json", "torn"),
        ("trials/3", "foreign"),
        ("trials/notes.txt", "foreign"),
    ]


def test_modes(session: Session) -> None:
    os.chmod(session.path, 0o755)
    os.chmod(session.path / "trials" / "1", 0o777)
    os.chmod(session.path / "session.json", 0o600)
    os.chmod(session.path / "trials" / "1" / "trial.json", 0o666)
    os.chmod(session.path / "trials" / "1" / "logs" / "run.log", 0o600)  # the harness's own
    found = {str(p.path.relative_to(session.path)): p.detail for p in doctor(session).problems}
    assert found == {
        ".": "0755, expected 0700",
        "session.json": "0600, expected 0644",
        "trials/1": "0777, expected 0700",
        "trials/1/trial.json": (
            "0666: a marker must be readable by its owner and writable by no one else"
        ),
    }


@pytest.mark.skipif(os.geteuid() == 0, reason="root lists directories whatever their mode")
def test_an_unreadable_directory(session: Session) -> None:
    locked = session.path / "trials" / "1" / "logs"
    locked.chmod(0)
    try:
        assert ("trials/1/logs", "unreadable") in kinds(doctor(session))
    finally:
        locked.chmod(0o700)


@pytest.mark.skipif(os.geteuid() == 0, reason="root lists directories whatever their mode")
def test_an_unlistable_collection_or_copy_is_one_problem(tmp_path: Path) -> None:
    # The collection (or lineage) check and the tree walk both meet it: reported once.
    store = Store(tmp_path / "store")
    old = store.create(id="old", pid=None)
    old.trials.begin().complete({"failed": False})
    old.finish({})
    new = store.create(id="new", previous=["old"], pid=None)
    locked = [new.service.path, new.path / "previous" / "old"]
    for path in locked:
        path.chmod(0o300)
    try:
        found = kinds(doctor(reopen(new)))
    finally:
        for path in locked:
            path.chmod(0o700)
    assert sorted(found) == [
        ("previous/old", "unreadable"),
        ("service", "mode"),  # 0300, not 0700: a problem of its own
        ("service", "unreadable"),
    ], found


@pytest.mark.filterwarnings("ignore:previous session empty has no records")
def test_damaged_lineage_copies(tmp_path: Path) -> None:
    # What `inspect` shows as a problem of a copy in previous/ is one; a missing copy is
    # none (a previous session without records has none), nor is a sound one.
    store = Store(tmp_path / "store")
    old = store.create(id="old", pid=None)
    old.trials.begin().complete({"failed": False})
    old.finish({})
    store.create(id="empty", pid=None).finish({})
    new = store.create(id="new", previous=["old", "empty"], pid=None)
    assert doctor(reopen(new)).problems == ()
    copy = new.path / "previous" / "old"
    shutil.rmtree(copy / "trials")
    (copy / "trials").write_text("")
    assert kinds(doctor(reopen(new))) == [("previous/old", "lineage")]
    shutil.rmtree(copy)
    os.symlink(tmp_path, copy)
    assert kinds(doctor(reopen(new))) == [("previous/old", "lineage")]
    os.rename(new.path / "previous", tmp_path / "aside")
    os.symlink(tmp_path / "aside", new.path / "previous")
    problems = doctor(reopen(new)).problems  # once, not once per pinned id
    assert [(p.path, p.kind) for p in problems] == [(new.path / "previous", "lineage")]
    assert "is a symlink" in problems[0].detail
    (new.path / "previous").unlink()
    os.rename(tmp_path / "aside", new.path / "previous")
    set_previous = orjson.loads((new.path / "session.json").read_bytes())
    set_previous["previous"] = ["../x", "old"]
    (new.path / "session.json").write_bytes(orjson.dumps(set_previous))
    found = doctor(reopen(new)).problems
    assert [(p.path.name, p.kind) for p in found] == [
        ("old", "lineage"),  # still the symlink planted above
        ("session.json", "lineage"),
    ]
    assert "'../x', not a valid session id" in found[1].detail


def writer(record: Path, *, die: bool) -> subprocess.Popen[str]:
    """A real writer process with a temp open in `record` (the library's AtomicFile); it
    prints the temp's name, then dies without cleaning up or waits for stdin to close."""
    code = textwrap.dedent(
        f"""
        import os, sys
        from sessionstore._fs.atomic import AtomicFile
        f = AtomicFile({str(record / "big.bin")!r})
        f.write(b"partial")
        print(os.path.basename(f.temp), flush=True)
        if {die!r}:
            os._exit(9)  # killed mid-write: the temp stays
        sys.stdin.read()
        f.discard()
        """
    )
    return subprocess.Popen(
        [sys.executable, "-c", code], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )


@pytest.fixture
def live_temp(session: Session) -> Iterator[Path]:
    proc = writer(session.path / "trials" / "2", die=False)
    try:
        assert proc.stdout is not None
        yield session.path / "trials" / "2" / proc.stdout.readline().strip()
    finally:
        proc.communicate(timeout=30)


def dead_temp(record: Path) -> Path:
    proc = writer(record, die=True)
    out, _ = proc.communicate(timeout=30)
    assert proc.returncode == 9
    return record / out.strip()


def test_repair_removes_a_dead_writers_temp_and_keeps_a_live_ones(
    session: Session, live_temp: Path
) -> None:
    dead = dead_temp(session.path / "trials" / "1")
    assert dead.exists() and live_temp.exists()
    before = doctor(session)
    assert kinds(before) == [(str(dead.relative_to(session.path)), "temp")]
    assert before.in_progress == (live_temp,) and not before.healthy
    after = doctor(session, repair=True)
    assert [p.repaired for p in after.problems] == [True] and after.healthy
    assert not dead.exists() and live_temp.exists()
    assert doctor(session).problems == ()


def test_repair_removes_a_temp_symlink_as_a_link(session: Session, tmp_path: Path) -> None:
    target = tmp_path / "keep-me"
    target.write_text("not garbage")
    link = session.path / ".sstmp-999999999-0123"
    link.symlink_to(target)
    doctor(session, repair=True)
    assert not os.path.lexists(link) and target.read_text() == "not garbage"


def test_a_dead_writers_temp_directory_goes_whole(session: Session) -> None:
    temp = session.path / ".sstmp-999999999-0456"
    (temp / "a" / "b").mkdir(parents=True)
    (temp / "a" / "b" / "f").write_text("x")
    assert doctor(session, repair=True).healthy
    assert not temp.exists()


def test_nothing_but_temps_is_ever_removed(session: Session) -> None:
    (session.path / "trials" / "notes.txt").write_text("x")
    (session.path / "trials" / "2" / "trial.json").write_text("torn")
    before = sorted(str(p) for p in session.path.rglob("*"))
    doctor(session, repair=True)
    assert sorted(str(p) for p in session.path.rglob("*")) == before


# `²` and `٣` pass `str.isdigit` but are no pid (`int("²")` raises): doctor raised.
@pytest.mark.parametrize("name", [".sstmp-not-a-pid", ".sstmp-\u00b2-x", ".sstmp-\u0663-x"])
def test_a_temp_naming_no_writer(session: Session, name: str) -> None:
    temp = session.path / "trials" / "1" / name
    temp.write_text("x")
    fresh = doctor(session, repair=True)
    assert [p.repaired for p in fresh.problems] == [False] and temp.exists()
    assert "kept" in fresh.problems[0].detail
    later = time.time() + SAFE_AGE + 60
    old = doctor(session, repair=True, now=later)
    assert [p.repaired for p in old.problems] == [True] and not temp.exists()


def test_a_temp_naming_no_writer_is_kept_while_the_sessions_writer_lives(tmp_path: Path) -> None:
    alive = Store(tmp_path / "store").create(pid="self")  # this process: alive
    temp = alive.path / ".sstmp-x"
    temp.write_text("x")
    checkup = doctor(alive, repair=True, now=time.time() + 2 * SAFE_AGE)
    assert [p.repaired for p in checkup.problems] == [False] and temp.exists()
    assert "a writer of the session is alive" in checkup.problems[0].detail


def test_a_recycled_pid_does_not_keep_a_temp(tmp_path: Path) -> None:
    """The process that has the temp's pid now started after the temp last changed."""
    (tmp_path / "t").write_text("x")
    st = os.stat(tmp_path / "t")
    proc = subprocess.Popen([sys.executable, "-c", "import sys; sys.stdin.read()"], stdin=-1)
    try:
        name = f".sstmp-{proc.pid}-abcd"
        old = os.stat_result((*st[:9], int(time.time()) - 600))
        garbage, why = temp_verdict(name, old, lambda: True, time.time())
        assert garbage is True and "started after" in why
        fresh = os.stat_result((*st[:9], int(time.time()) + 5))
        assert temp_verdict(name, fresh, lambda: True, time.time())[0] is None
    finally:
        proc.communicate(timeout=30)

"""`sessionstore doctor` end to end, as real processes: healthy, problems, --repair, bad input."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import orjson
from cli_runner import run

from sessionstore import Session, Store


def make_session(tmp_path: Path) -> Session:
    session = Store(tmp_path / "store").create(name="doctor-cli", pid=None)
    session.trials.begin().complete({"failed": False})
    return session


def doctor(session: Session, *args: str) -> subprocess.CompletedProcess[str]:
    return run("doctor", session.id or "", "--store", session.path.parent, *args)


def test_healthy_exits_0(tmp_path: Path) -> None:
    session = make_session(tmp_path)
    done = doctor(session)
    assert (done.returncode, done.stdout) == (0, "")
    assert done.stderr == f"doctor: {session.path}: healthy\n"


def test_problems_one_line_each_exit_1(tmp_path: Path) -> None:
    session = make_session(tmp_path)
    (session.path / "trials" / "1" / "trial.json").chmod(0o666)
    (session.path / "trials" / "evil\x1b[31m\nname").write_text("x")
    (session.path / "trials" / ".sstmp-999999999-00").write_text("x")
    done = doctor(session)
    assert done.returncode == 1
    trials = session.path / "trials"
    assert done.stdout.splitlines() == [
        f"{trials}/.sstmp-999999999-00: temp: leftover of a dead writer: "
        "no process has its pid 999999999",
        f"{trials}/1/trial.json: mode: 0666: a marker must be readable by its owner and "
        "writable by no one else",
        f"{trials}/evil\\x1b[31m\\nname: foreign: not a record of trials/ (ignored by every "
        "reader)",
    ]
    assert done.stderr == f"doctor: {session.path}: 3 problems\n"


def test_repair_keeps_a_live_writers_temp(tmp_path: Path) -> None:
    session = make_session(tmp_path)
    record = session.path / "trials" / "1"
    (record / ".sstmp-999999999-01").write_text("debris")
    code = textwrap.dedent(
        f"""
        import os, sys
        from sessionstore._fs.atomic import AtomicFile
        f = AtomicFile({str(record / "log.txt")!r})
        print(os.path.basename(f.temp), flush=True)
        sys.stdin.read()
        f.discard()
        """
    )
    live = subprocess.Popen(
        [sys.executable, "-c", code], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    try:
        assert live.stdout is not None
        live_temp = record / live.stdout.readline().strip()
        done = doctor(session, "--repair")
        assert done.returncode == 0, done.stdout + done.stderr
        assert done.stdout.endswith("(removed)\n") and done.stdout.count("\n") == 1
        assert done.stderr == (
            f"doctor: {session.path}: 0 problems left, 1 repaired (1 write in progress)\n"
        )
        assert live_temp.exists() and not (record / ".sstmp-999999999-01").exists()
    finally:
        live.communicate(timeout=30)


def test_bad_target_is_one_line(tmp_path: Path) -> None:
    done = run("doctor", "nosuch", "--store", tmp_path)
    assert done.returncode == 1
    assert "no session 'nosuch'" in done.stderr and done.stderr.count("\n") == 1
    assert "Traceback" not in done.stderr
    assert run("doctor").returncode == 2


def test_help_has_examples() -> None:
    done = run("doctor", "--help")
    assert "Examples:" in done.stdout and done.returncode == 0


def test_a_record_30000_levels_deep_is_walked_in_one_pass(tmp_path: Path) -> None:
    """Each entry's path was built for every entry, at the cost of its depth: a record
    30,000 levels deep took minutes (the run's hang guard). Built only for what is
    reported, the walk is linear, and a dead writer's temp at the bottom is still found."""
    from mirror_helpers import make_deep, remove_deep

    session = make_session(tmp_path)
    base = session.path / "trials" / "1" / "deep"
    make_deep(base, 30_000)
    try:
        bottom = os.open(base, os.O_RDONLY | os.O_DIRECTORY)
        try:
            for _ in range(30_000):
                below = os.open("d", os.O_RDONLY | os.O_DIRECTORY, dir_fd=bottom)
                os.close(bottom)
                bottom = below
            os.close(os.open(".sstmp-999999999-00", os.O_CREAT | os.O_WRONLY, dir_fd=bottom))
        finally:
            os.close(bottom)
        done = doctor(session)
        assert done.returncode == 1, done.stderr
        (line,) = done.stdout.splitlines()
        temp = f"{'/d' * 30_000}/.sstmp-999999999-00"
        assert (
            line
            == f"{base}{temp}: temp: leftover of a dead writer: no process has its pid 999999999"
        )
    finally:
        remove_deep(base)


def test_an_id_with_a_backslash_or_esc_is_escaped_once(tmp_path: Path) -> None:
    """The ids were repr'd, then escaped: `'a\\\\\\\\b\\\\x1b'` for `a\\b` and an ESC."""
    session = Store(tmp_path / "store").create(id="s1", pid=None)
    manifest = session.path / "session.json"
    data = orjson.loads(manifest.read_bytes())
    manifest.write_bytes(orjson.dumps({**data, "id": "a\\b\x1b", "previous": ["x\\y\x1b"]}))
    done = doctor(session)
    assert (done.returncode, done.stdout.splitlines()) == (
        1,
        [
            rf"{manifest}: manifest: id 'a\\b\x1b' is not the directory's name 's1'",
            rf"{manifest}: lineage: previous names 'x\\y\x1b', not a valid session id",
        ],
    )

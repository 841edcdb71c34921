"""`sessionstore begin`: the next record, allocated in flight; and its refusals."""

from __future__ import annotations

import subprocess
from pathlib import Path

import cli_runner
import orjson

from sessionstore.store.session import RecordState, Store


def ss(store: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return cli_runner.run(args[0], "--store", store, *args[1:])


def test_begin_allocates_the_next_trial_and_attempt(tmp_path: Path) -> None:
    session = Store(tmp_path).create(id="abc", pid=None)
    first = ss(tmp_path, "begin", "abc", "--trial")
    assert (first.returncode, first.stderr) == (0, "")
    assert first.stdout == f"1 {session.path / 'trials' / '1'}\n"
    second = ss(tmp_path, "begin", "abc", "--trial", "--json")
    assert orjson.loads(second.stdout) == {"n": 2, "path": str(session.path / "trials" / "2")}
    attempt = ss(tmp_path, "begin", "abc", "--attempt")
    assert attempt.stdout == f"1 {session.path / 'service' / '1'}\n"
    states = [r.state for r in session.trials.records()] + [session.service.get(1).state]
    assert states == [RecordState.IN_FLIGHT] * 3, "begun records stay in flight"


def test_begin_after_a_completed_record_and_by_prefix_and_path(tmp_path: Path) -> None:
    session = Store(tmp_path).create(id="abc123", pid=None)
    session.trials.begin().complete({"failed": False})
    result = ss(tmp_path, "begin", "abc", "--trial")
    assert result.returncode == 0 and result.stdout.startswith("2 ")
    result = cli_runner.run("begin", session.path, "--trial")
    assert result.returncode == 0 and result.stdout.startswith("3 ")


def test_begin_needs_exactly_one_of_trial_and_attempt(tmp_path: Path) -> None:
    Store(tmp_path).create(id="abc", pid=None)
    for args in ((), ("--trial", "--attempt")):
        result = ss(tmp_path, "begin", "abc", *args)
        assert result.returncode == 2, args
        assert "give exactly one of --trial and --attempt" in result.stderr
    assert not (tmp_path / "abc" / "trials" / "1").exists()


def test_begin_in_a_finished_session_is_refused(tmp_path: Path) -> None:
    session = Store(tmp_path).create(id="abc", pid=None)
    session.finish({})
    result = ss(tmp_path, "begin", "abc", "--trial")
    assert result.returncode == 1 and result.stdout == ""
    assert result.stderr == (
        f"Error: {session.path / 'report.json'}: the session is finished already "
        "(its report is written once); start a new session to record more\n"
    )
    assert session.trials.numbers() == []


def test_begin_in_no_session(tmp_path: Path) -> None:
    result = ss(tmp_path, "begin", "nope", "--attempt")
    assert result.returncode == 1 and "no session 'nope'" in result.stderr


def test_an_ambiguous_prefix_is_refused_listing_the_candidates(tmp_path: Path) -> None:
    store = Store(tmp_path)
    store.create(id="abc1", pid=None)
    store.create(id="abc2", pid=None)
    result = ss(tmp_path, "begin", "ab", "--trial")
    assert result.returncode == 1 and result.stdout == ""
    assert result.stderr == (
        f"Error: session prefix 'ab' is ambiguous in store {tmp_path}: it matches abc1, abc2; "
        "give more characters of the id\n"
    )
    inspected = cli_runner.run("inspect", "--store", tmp_path, "abc")
    assert inspected.returncode == 1 and "matches abc1, abc2" in inspected.stderr
    assert cli_runner.run("inspect", "--store", tmp_path, "abc2").returncode == 0
    assert store.open("abc1").trials.numbers() == store.open("abc2").trials.numbers() == []


def test_a_collection_that_is_a_symlink_is_refused_and_not_followed(tmp_path: Path) -> None:
    session = Store(tmp_path / "s").create(id="abc", pid=None)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (session.path / "trials").rmdir()
    (session.path / "trials").symlink_to(elsewhere)
    result = ss(tmp_path / "s", "begin", "abc", "--trial")
    assert result.returncode == 1
    assert result.stderr == (
        f"Error: {session.path / 'trials'}: cannot hold records: "
        "is a symlink (never followed), not a directory\n"
    )
    assert list(elsewhere.iterdir()) == []

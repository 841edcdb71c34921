"""`sessionstore complete`: the marker last, once, as a JSON object; and its refusals."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import cli_runner
import pytest
from inspect_helpers import torn_trial

from sessionstore._json import MAX_MARKER_BYTES
from sessionstore.store.session import RecordState, Store


def ss(store: Path, *args: str, input: str | None = None) -> subprocess.CompletedProcess[str]:
    return cli_runner.run(args[0], "--store", store, *args[1:], input=input)


def test_a_shell_harness_begins_writes_and_completes(tmp_path: Path) -> None:
    session = Store(tmp_path).create(id="abc", pid=None)
    begun = ss(tmp_path, "begin", "abc", "--trial")
    n, path = begun.stdout.split()
    (Path(path) / "run.log").write_text("PASS\n")
    result = ss(tmp_path, "complete", "abc", "--trial", n, "--marker", '{"failed": false}')
    assert (result.returncode, result.stderr) == (0, "")
    assert result.stdout == f"completed trial 1: {path}\n"
    record = session.trials.get(1)
    assert record.state is RecordState.COMPLETED and record.data == {"failed": False}
    assert record.files() == ["run.log", "trial.json"]
    check = cli_runner.run("check", "--store", tmp_path, "abc", "--trial", "1", "--log", "run.log")
    assert check.returncode == 0, check.stderr


def test_complete_an_attempt_from_a_file_and_from_stdin(tmp_path: Path) -> None:
    session = Store(tmp_path / "s").create(id="abc", pid=None)
    session.service.begin()
    session.service.begin()
    marker = tmp_path / "v.json"
    marker.write_text('{"trial": 1, "status": "verified"}')
    assert (
        ss(tmp_path / "s", "complete", "abc", "--attempt", "1", "--marker", f"@{marker}").returncode
        == 0
    )
    result = ss(
        tmp_path / "s",
        "complete",
        "abc",
        "--attempt",
        "2",
        "--marker",
        "@-",
        input='{"status": "failed"}',
    )
    assert result.returncode == 0, result.stderr
    assert [r.data for r in session.service.records()] == [
        {"trial": 1, "status": "verified"},
        {"status": "failed"},
    ]
    assert (session.path / "service" / "2" / "verification.json").is_file()


def test_a_completed_record_is_refused_and_kept(tmp_path: Path) -> None:
    session = Store(tmp_path).create(id="abc", pid=None)
    session.trials.begin().complete({"failed": False})
    before = (session.path / "trials" / "1" / "trial.json").read_bytes()
    result = ss(tmp_path, "complete", "abc", "--trial", "1", "--marker", '{"failed": true}')
    assert result.returncode == 1
    assert result.stderr == (
        f"Error: {session.path / 'trials' / '1'}: record is completed and immutable; "
        "begin a new record\n"
    )
    assert (session.path / "trials" / "1" / "trial.json").read_bytes() == before


def test_a_torn_record_is_refused_naming_why(tmp_path: Path) -> None:
    session = Store(tmp_path).create(id="abc", pid=None)
    torn_trial(session)
    result = ss(tmp_path, "complete", "abc", "--trial", "1", "--marker", "{}")
    assert result.returncode == 1 and result.stderr.count("\n") == 1
    assert "reads as torn (trial.json: " in result.stderr
    assert (session.path / "trials" / "1" / "trial.json").read_bytes() == b'{"failed": fal'


def test_a_collection_that_is_a_symlink_is_named_not_the_record_as_torn(tmp_path: Path) -> None:
    # Not "trials/1 reads as torn ...: begin a new one": `begin` refuses that collection too.
    session = Store(tmp_path / "s").create(id="abc", pid=None)
    elsewhere = tmp_path / "elsewhere"
    (elsewhere / "1").mkdir(parents=True)
    (session.path / "trials").rmdir()
    (session.path / "trials").symlink_to(elsewhere)
    result = ss(tmp_path / "s", "complete", "abc", "--trial", "1", "--marker", "{}")
    assert (result.returncode, result.stdout) == (1, "")
    assert result.stderr == (
        f"Error: {session.path / 'trials'}: cannot hold records: "
        "is a symlink (never followed), not a directory\n"
    )
    assert os.listdir(elsewhere / "1") == []


def test_a_record_that_does_not_exist_is_refused(tmp_path: Path) -> None:
    session = Store(tmp_path).create(id="abc", pid=None)
    result = ss(tmp_path, "complete", "abc", "--trial", "1", "--marker", "{}")
    assert result.returncode == 1
    assert result.stderr == f"Error: {session.path / 'trials'}: no record 1\n"
    assert not (session.path / "trials" / "1").exists()


def test_an_entry_of_the_number_that_is_no_directory_is_named(tmp_path: Path) -> None:
    # Not "no record 1": the user sees trials/1 there and needs to know what is wrong.
    session = Store(tmp_path).create(id="abc", pid=None)
    trials = session.trials.path
    (tmp_path / "outside").mkdir()
    (trials / "1").symlink_to(tmp_path / "outside")
    os.mkfifo(trials / "2")
    (trials / "3").write_bytes(b"")
    kinds = {1: "a symlink (never followed)", 2: "a FIFO", 3: "a regular file"}
    for n, kind in kinds.items():
        result = ss(tmp_path, "complete", "abc", "--trial", str(n), "--marker", "{}")
        assert (result.returncode, result.stdout) == (1, "")
        assert result.stderr == (
            f"Error: {trials / str(n)}: is {kind}, not a directory, so it is no record\n"
        )
    assert os.listdir(tmp_path / "outside") == []


def test_markers_that_are_not_json_objects(tmp_path: Path) -> None:
    session = Store(tmp_path).create(id="abc", pid=None)
    session.trials.begin()
    for value, kind in (
        ("[]", "an array"),
        ('"x"', "a string"),
        ("null", "null"),
        ("true", "a boolean"),
    ):
        result = ss(tmp_path, "complete", "abc", "--trial", "1", "--marker", value)
        assert result.returncode == 1
        assert result.stderr == f"Error: --marker: must be a JSON object, not {kind}\n"
    result = ss(tmp_path, "complete", "abc", "--trial", "1", "--marker", "{")
    assert result.returncode == 1 and result.stderr.startswith("Error: --marker: invalid JSON: ")
    assert session.trials.get(1).state is RecordState.IN_FLIGHT


def test_a_contract_log_with_a_backslash_or_esc_is_escaped_once(tmp_path: Path) -> None:
    """It was repr'd, then escaped: `'../a\\\\\\\\b\\\\x1b'` for `a\\b` and an ESC."""
    Store(tmp_path / "s").create(id="abc", pid=None)
    assert ss(tmp_path / "s", "begin", "abc", "--trial").returncode == 0
    marker = '{"output_contract": {"log": "../a\\\\b\\u001b"}}'
    result = ss(tmp_path / "s", "complete", "abc", "--trial", "1", "--marker", marker)
    expected = r"output_contract.log '../a\\b\x1b': must not contain '..'; not written"
    marker_path = tmp_path / "s" / "abc" / "trials" / "1" / "trial.json"
    assert (result.returncode, result.stderr) == (1, f"Error: {marker_path}: {expected}\n")


@pytest.mark.parametrize(
    ("written", "shown"),
    [
        ('{"seed": 18446744073709551616}', "18446744073709551616"),
        ('{"a": [{"b": -9223372036854775809}]}', "-9223372036854775809"),
        ('{"n": ' + "9" * 60 + "}", "9" * 40 + "..."),
    ],
)
def test_an_integer_json_readers_would_round_is_refused_not_sealed_rounded(
    tmp_path: Path, written: str, shown: str
) -> None:
    """orjson reads an integer past 64 bits as a double: sealed, the marker would hold
    another number than the one given (1.8446744073709552e+19 for 2**64)."""
    session = Store(tmp_path).create(id="abc", pid=None)
    session.trials.begin()
    (tmp_path / "m.json").write_text(written)
    for value in (written, "@" + str(tmp_path / "m.json")):
        result = ss(tmp_path, "complete", "abc", "--trial", "1", "--marker", value)
        source = "--marker" if value == written else str(tmp_path / "m.json")
        assert (result.returncode, result.stdout, result.stderr) == (
            1,
            "",
            f"Error: {source}: the integer {shown} is beyond 64 bits, which JSON readers "
            "round; write it as a string\n",
        )
    assert session.trials.get(1).state is RecordState.IN_FLIGHT
    # The edges of what orjson reads exactly, and digits in a string, are taken as written.
    marker = '{"hi": 18446744073709551615, "lo": -9223372036854775808, "s": "1' + "0" * 30 + '"}'
    result = ss(tmp_path, "complete", "abc", "--trial", "1", "--marker", marker)
    assert result.returncode == 0, result.stderr
    stored = (tmp_path / "abc" / "trials" / "1" / "trial.json").read_text()
    assert "18446744073709551615" in stored and "-9223372036854775808" in stored


def test_usage_errors(tmp_path: Path) -> None:
    Store(tmp_path).create(id="abc", pid=None).trials.begin()
    for args in (
        ("--marker", "{}"),
        ("--trial", "1", "--attempt", "1", "--marker", "{}"),
        ("--trial", "0", "--marker", "{}"),
        ("--trial", "1"),
    ):
        result = ss(tmp_path, "complete", "abc", *args)
        assert result.returncode == 2, (args, result.stderr)


@pytest.mark.timeout(60)
def test_a_marker_file_that_is_no_regular_file_or_too_big_is_refused_at_once(
    tmp_path: Path,
) -> None:
    # A FIFO would block the read and /dev/zero never ends: both refused, nothing written.
    session = Store(tmp_path / "s").create(id="abc", pid=None)
    session.trials.begin()
    fifo = tmp_path / "marker.fifo"
    os.mkfifo(fifo)
    big = tmp_path / "big.json"
    with open(big, "wb") as f:
        f.truncate(MAX_MARKER_BYTES + 1)
    link = tmp_path / "link.json"
    link.symlink_to(fifo)
    cases = {
        f"@{fifo}": "is not a regular file",
        f"@{link}": "is not a regular file",
        "@/dev/zero": "is not a regular file",
        f"@{big}": f"is larger than {MAX_MARKER_BYTES} bytes",
    }
    for marker, reason in cases.items():
        result = ss(tmp_path / "s", "complete", "abc", "--trial", "1", "--marker", marker)
        assert result.returncode == 1, (marker, result.stderr)
        assert reason in result.stderr and result.stderr.count("\n") == 1, result.stderr
    assert session.trials.get(1).state is RecordState.IN_FLIGHT

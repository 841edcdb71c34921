"""Output contracts: the verdict comes from the log's last non-empty line, never the marker."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path
from typing import Any

import orjson
import pytest
from cli_runner import invoke, run
from hypothesis import given
from hypothesis import strategies as st

from sessionstore._fs.atomic import write_atomic
from sessionstore.cli.check import check
from sessionstore.errors import InvalidInput
from sessionstore.harness import verdict as verdict_module
from sessionstore.harness.verdict import (
    LINE_LIMIT,
    TAIL_LIMIT,
    Outcome,
    Verdict,
    declares_output_contract,
    evaluate_output_contract,
    judge,
    last_line_outcome,
    line_outcome,
    output_verdict,
)
from sessionstore.store.session import Record, RecordState, Session, Store, read_record


@pytest.fixture
def session(tmp_path: Path) -> Session:
    return Store(tmp_path / "store").create(id="s1", pid=None)


def trial(session: Session, log: bytes | None, marker: dict[str, Any] | None = None) -> Record:
    """A trial completed with `marker` written raw: the malformed declarations judged here
    are markers the API refuses (the published schema rejects them), as a harness in
    another language could write them."""
    writer = session.trials.begin()
    if log is not None:
        writer.write_bytes("run.log", log)
    write_atomic(writer.path / writer.marker, orjson.dumps(marker or {}))
    return session.trials.get(writer.n)


def outcome(session: Session, log: bytes) -> Verdict:
    return evaluate_output_contract(trial(session, log), log="run.log")


@pytest.mark.parametrize(
    "log",
    [
        b"PASS",
        b"PASS\n",
        b"building\nPASS\n",
        b"x\nPASS\r\n",
        b"x\nPASS \t\n\n  \r\n\n",
        b"PASS\n\n",
    ],
)
def test_pass(session: Session, log: bytes) -> None:
    assert outcome(session, log) == Verdict(Outcome.PASS, "", session.trials.path / "1/run.log")


@pytest.mark.parametrize(
    ("log", "detail"),
    [
        (b"FAIL:out of memory\n", "out of memory"),
        (b"PASS\nFAIL: ttft 250 ms > 200 ms \r\n", "ttft 250 ms > 200 ms"),
        (b"FAIL\n", ""),
        (b"FAIL:\n", ""),
        (b"FAIL:a:b\n", "a:b"),
        (b"FAIL:caf\xc3\xa9 \xff\n", "café \ufffd"),
    ],
)
def test_fail_carries_the_detail(session: Session, log: bytes, detail: str) -> None:
    verdict = outcome(session, log)
    assert (verdict.outcome, verdict.detail) == (Outcome.FAIL, detail)
    assert not verdict.passed


@pytest.mark.parametrize(
    ("log", "detail"),
    [
        (b"", "log is empty"),
        (b"\n \r\n\t\n", "log has no non-empty line"),
        (b"PASS\ndone\n", "last line is not PASS or FAIL:<detail>: 'done'"),
        (b"pass\n", "last line is not PASS or FAIL:<detail>: 'pass'"),
        (b"PASSED\n", "last line is not PASS or FAIL:<detail>: 'PASSED'"),
        (b"  PASS\n", "last line is not PASS or FAIL:<detail>: '  PASS'"),
        (b"FAILED\n", "last line is not PASS or FAIL:<detail>: 'FAILED'"),
        (b"PASS: fine\n", "last line is not PASS or FAIL:<detail>: 'PASS: fine'"),
        (b"exit code 0\n", "last line is not PASS or FAIL:<detail>: 'exit code 0'"),
        # Lines end at \n only; colour escapes and a NUL are text (docs/harness.md).
        (b"50%\rPASS\n", "last line is not PASS or FAIL:<detail>: '50%\rPASS'"),
        (
            b"\x1b[32mPASS\x1b[0m\n",
            "last line is not PASS or FAIL:<detail>: '\x1b[32mPASS\x1b[0m'",
        ),
        (b"PASS\x00\n", "last line is not PASS or FAIL:<detail>: 'PASS\x00'"),
    ],
)
def test_anything_else_is_indeterminate(session: Session, log: bytes, detail: str) -> None:
    verdict = outcome(session, log)
    assert (verdict.outcome, verdict.detail) == (Outcome.INDETERMINATE, detail)
    assert not verdict.passed


def test_the_log_decides_not_the_marker_status(session: Session) -> None:
    record = trial(
        session,
        b"benchmark ok\nFAIL:verification crashed\n",
        {"status": "verified", "failed": False, "output_contract": {"log": "run.log"}},
    )
    assert evaluate_output_contract(record).outcome is Outcome.FAIL
    # And the other way round: a marker saying failed does not fail a PASS log.
    record = trial(session, b"PASS\n", {"status": "failed", "failed": True})
    assert evaluate_output_contract(record, "run.log").outcome is Outcome.PASS


def test_in_flight_and_torn_records_are_indeterminate(session: Session) -> None:
    writer = session.trials.begin()
    writer.write_bytes("run.log", b"PASS\n")
    in_flight = read_record(1, writer.path, "trial.json")
    assert evaluate_output_contract(in_flight, "run.log") == Verdict(
        Outcome.INDETERMINATE, "record is in_flight"
    )
    (writer.path / "trial.json").write_bytes(b"{")
    torn = read_record(1, writer.path, "trial.json")
    verdict = evaluate_output_contract(torn, "run.log")
    assert verdict.outcome is Outcome.INDETERMINATE
    assert verdict.detail.startswith("record is torn: trial.json: invalid JSON")


def test_missing_or_odd_log_files_are_indeterminate(session: Session) -> None:
    record = trial(session, None)
    assert evaluate_output_contract(record, "run.log").detail == "log file is missing"
    os.mkdir(record.path / "dir")
    assert evaluate_output_contract(record, "dir").detail == (
        "log 'dir' is a directory, not a regular file"
    )
    os.mkfifo(record.path / "fifo")
    assert evaluate_output_contract(record, "fifo").detail == (
        "log 'fifo' is a FIFO, not a regular file"
    )


def test_a_symlink_is_never_followed_even_inside_the_record(
    session: Session, tmp_path: Path
) -> None:
    outside = tmp_path / "outside.log"
    outside.write_bytes(b"PASS\n")
    record = trial(session, b"PASS\n")
    os.symlink(outside, record.path / "escape.log")
    os.symlink("run.log", record.path / "inside.log")
    os.symlink("..", record.path / "up")
    symlink = "is a symlink (never followed), not a regular file"
    assert evaluate_output_contract(record, "escape.log") == Verdict(
        Outcome.INDETERMINATE, f"log 'escape.log' {symlink}", record.path / "escape.log"
    )
    assert evaluate_output_contract(record, "inside.log").detail == f"log 'inside.log' {symlink}"
    assert evaluate_output_contract(record, "up/1/run.log").detail == (
        "log 'up/1/run.log': 'up' is a symlink (never followed), not a directory"
    )


@pytest.mark.parametrize(
    ("log", "problem"),
    [
        ("../2/run.log", "must not contain '..'"),
        ("/etc/passwd", "must be a path relative to the record directory"),
        ("", "empty or contains NUL"),
        (".sstmp-1-x", "names a temp file, which is never part of a record"),
    ],
)
def test_a_malformed_log_argument_is_refused(session: Session, log: str, problem: str) -> None:
    record = trial(session, b"PASS\n")
    with pytest.raises(InvalidInput) as caught:
        evaluate_output_contract(record, log)
    assert str(caught.value) == f"--log {log!r}: {problem}"


def test_a_declared_contract_names_the_log(session: Session) -> None:
    record = trial(session, b"PASS\n", {"output_contract": {"log": "run.log"}})
    assert declares_output_contract(record)
    expected = Verdict(Outcome.PASS, "", record.path / "run.log")
    assert output_verdict(record) == evaluate_output_contract(record) == expected
    plain = trial(session, b"PASS\n", {"failed": False})
    assert not declares_output_contract(plain) and output_verdict(plain) is None
    assert evaluate_output_contract(plain).detail == (
        "no log given and the record declares no output_contract"
    )


@pytest.mark.parametrize(
    ("declared", "detail"),
    [
        ("run.log", 'output_contract must be {"log": "<path>"}'),
        ({"log": 3}, 'output_contract must be {"log": "<path>"}'),
        # Declared (inspect shows a verdict for it), so not "declares no output_contract".
        (None, 'output_contract must be {"log": "<path>"}'),
        ({"log": "../../x"}, "output_contract.log '../../x': must not contain '..'"),
    ],
)
def test_a_malformed_declaration_is_indeterminate(
    session: Session, declared: object, detail: str
) -> None:
    record = trial(session, b"PASS\n", {"output_contract": declared})
    assert output_verdict(record) == Verdict(Outcome.INDETERMINATE, detail)


def test_a_huge_log_is_read_from_its_end(session: Session) -> None:
    record = trial(session, b"")
    with open(record.path / "run.log", "r+b") as f:
        f.truncate(8 * 1024**3)  # sparse: 8 GiB that a whole read would take minutes for
        f.seek(0, os.SEEK_END)
        f.write(b"\nFAIL:late\n")
    assert evaluate_output_contract(record, "run.log").detail == "late"


def test_limits(session: Session) -> None:
    tail = outcome(session, b"PASS\n" + b" \n" * (TAIL_LIMIT // 2 + 1))
    assert tail.detail == f"no non-empty line in the last {TAIL_LIMIT} bytes of the log"
    long = outcome(session, b"PASS\n" + b"x" * (LINE_LIMIT + 1) + b"\n")
    assert long.detail == f"the log's last line is longer than {LINE_LIMIT} bytes"
    assert outcome(session, b"x" * (LINE_LIMIT + 1)).detail == long.detail
    assert outcome(session, b"x" * LINE_LIMIT + b"\nPASS").outcome is Outcome.PASS


lines = st.lists(
    st.sampled_from([b"PASS", b"FAIL", b"FAIL:x y", b"", b" ", b"\r", b"ok", b"\xff", b"\t"]),
    max_size=12,
)


@given(lines)
def test_the_backward_reader_agrees_with_a_whole_file_reference(parts: Any) -> None:
    """Law: with any chunk size, the verdict equals judging the whole file split on newlines."""
    data = b"\n".join(parts)
    with tempfile.TemporaryDirectory() as tmp:
        (Path(tmp) / "run.log").write_bytes(data)
        record = Record(1, Path(tmp), RecordState.COMPLETED, {}, None)
        _check_against_reference(record, data)


def _check_against_reference(record: Record, data: bytes) -> None:
    non_empty = [line.rstrip() for line in data.split(b"\n") if line.strip()]
    last = non_empty[-1].decode("utf-8", "replace") if non_empty else None
    expected = (
        Outcome.PASS
        if last == "PASS"
        else Outcome.FAIL
        if last is not None and (last == "FAIL" or last.startswith("FAIL:"))
        else Outcome.INDETERMINATE
    )
    for chunk in (1, 2, 3, 7, 64 * 1024):
        with pytest.MonkeyPatch.context() as patch:
            patch.setattr(verdict_module, "_CHUNK", chunk)
            assert evaluate_output_contract(record, "run.log").outcome is expected


@pytest.mark.parametrize(
    ("line", "expected"),
    [
        ("PASS", Outcome.PASS),
        ("FAIL", Outcome.FAIL),
        ("FAIL:detail", Outcome.FAIL),
        ("FAIL: spaced", Outcome.FAIL),
        ("PASS: extra", Outcome.INDETERMINATE),
        ("PASSED", Outcome.INDETERMINATE),
        ("  PASS", Outcome.INDETERMINATE),
        ("\tFAIL:x", Outcome.INDETERMINATE),
        ("pass", Outcome.INDETERMINATE),
        ("FAILED", Outcome.INDETERMINATE),
        ("", Outcome.INDETERMINATE),
    ],
)
def test_line_outcome_is_the_rule_of_one_line(line: str, expected: Outcome) -> None:
    assert line_outcome(line) is expected


# The viewer's rule: a log's bytes in memory, the index of the deciding line among
# `data.split(b"\n")`, and its outcome (None when no line decides).
@pytest.mark.parametrize(
    ("data", "expected"),
    [
        (b"", None),
        (b"\n \r\n\t\n", None),
        (b"PASS", (0, Outcome.PASS)),
        (b"start\nPASS: extra\n", (1, Outcome.INDETERMINATE)),
        (b"start\nPASSED\n", (1, Outcome.INDETERMINATE)),
        (b"start\nFAIL:detail\n", (1, Outcome.FAIL)),
        (b"a\nPASS\n\n  \t\n\r\n \n", (1, Outcome.PASS)),  # blank lines after it
        (b"PASS\n" + b"x" * (LINE_LIMIT + 1) + b"\n", None),  # the last line is too long
        (b"PASS\nFAIL:" + b"x" * LINE_LIMIT, None),
        (b"x" * LINE_LIMIT + b"\nPASS", (1, Outcome.PASS)),
    ],
)
def test_last_line_outcome_names_the_deciding_line(
    data: bytes, expected: tuple[int, Outcome] | None
) -> None:
    assert last_line_outcome(data) == expected


verdict_lines = st.lists(
    st.sampled_from(
        [
            *(b"PASS", b"FAIL", b"FAIL:x", b"PASS: extra", b"PASSED", b"  PASS", b"ok", b"\xff"),
            *(b"", b" \t", b"\r", b"x" * (LINE_LIMIT - 1), b"x" * (LINE_LIMIT + 1)),
        ]
    ),
    max_size=8,
)


@given(verdict_lines)
def test_the_in_memory_rule_is_checks_and_names_its_line(parts: Any) -> None:
    """Law: `last_line_outcome` says what `check` says of the same bytes in a file, and
    its index names a line with content that only blank lines follow."""
    data = b"\n".join(parts)
    with tempfile.TemporaryDirectory() as tmp:
        (Path(tmp) / "run.log").write_bytes(data)
        record = Record(1, Path(tmp), RecordState.COMPLETED, {}, None)
        verdict = evaluate_output_contract(record, "run.log")
    found = last_line_outcome(data)
    if found is None:
        assert verdict.outcome is Outcome.INDETERMINATE
        return
    index, said = found
    assert said is verdict.outcome
    lines = data.split(b"\n")
    assert lines[index].strip() and not b"".join(lines[index + 1 :]).strip()


# The CLI: exit 0 pass, 1 fail, 4 indeterminate (and errors that prevent judging), 2 usage.


def test_cli_exit_codes_and_output(session: Session) -> None:
    trial(session, b"PASS\n", {"output_contract": {"log": "run.log"}})
    trial(session, b"FAIL:too slow\n", {"status": "verified"})
    trial(session, b"", {})
    path = session.path
    assert invoke(path, "--trial", "1", command=check).outcome == (0, "pass\n", "")
    assert invoke(path, "--trial", "2", "--log", "run.log", command=check).outcome == (
        1,
        "fail: too slow\n",
        "",
    )
    assert invoke(path, "--trial", "3", "--log", "run.log", command=check).outcome == (
        4,
        "indeterminate: log is empty\n",
        "",
    )
    code, out, _ = invoke(path, "--trial", "9", "--log", "run.log", command=check).outcome
    assert (code, out) == (4, f"indeterminate: no record 9 in {session.trials.path}\n")


def test_cli_a_line_or_name_with_a_backslash_or_esc_is_escaped_once(session: Session) -> None:
    """The detail repr'd them, then `check` escaped it: `\\\\` for a backslash, `\\\\x1b`."""
    record = trial(session, b"a\\b\x1b[0m\n")
    (record.path / "d\\\x1b").mkdir()
    args: list[str | os.PathLike[str]] = ["check", session.path, "--trial", "1"]
    done = run(*args, "--log", "run.log")
    expected = r"indeterminate: last line is not PASS or FAIL:<detail>: 'a\\b\x1b[0m'"
    assert (done.returncode, done.stdout) == (4, expected + "\n")
    done = run(*args, "--log", "d\\\x1b")
    expected = r"indeterminate: log 'd\\\x1b' is a directory, not a regular file"
    assert (done.returncode, done.stdout) == (4, expected + "\n")


def test_cli_json_and_attempts(session: Session) -> None:
    writer = session.service.begin()
    writer.write_bytes("out/service.log", b"FAIL:no GPU\n")
    writer.complete({"trial": 1, "status": "verified"})
    args = ["--attempt", "1", "--log", "out/service.log", "--json"]
    code, out, _ = invoke(session.path, *args, command=check).outcome
    assert code == 1
    assert orjson.loads(out) == {
        "collection": "service",
        "n": 1,
        "outcome": "fail",
        "detail": "no GPU",
        "log": str(session.service.path / "1/out/service.log"),
    }


def test_cli_errors(session: Session, tmp_path: Path) -> None:
    trial(session, b"PASS\n")
    args = ["--trial", "1", "--log", "../1/run.log"]
    code, _, err = invoke(session.path, *args, command=check).outcome
    assert code == 2
    assert err.endswith("Error: Invalid value for --log '../1/run.log': must not contain '..'\n")
    code, _, err = invoke(session.path, "--log", "run.log", command=check).outcome
    assert (code, err.splitlines()[-1]) == (2, "Error: give exactly one of --trial N, --attempt K")
    result = invoke("nope", "--trial", "1", "--store", tmp_path, command=check)
    assert result.exit_code == 4
    assert result.stderr == (
        f"Error: no session 'nope' in store {tmp_path}; list sessions with `sessionstore inspect`\n"
    )


def test_judge_reads_the_record_now(session: Session) -> None:
    assert judge(session.trials, 1, "run.log").outcome is Outcome.INDETERMINATE
    trial(session, b"PASS\n")
    assert judge(session.trials, 1, "run.log").passed


def test_on_disk_problems_never_raise_they_are_indeterminate(session: Session) -> None:
    import shutil

    record = trial(session, b"PASS\n")
    shutil.rmtree(record.path)
    gone = evaluate_output_contract(record, "run.log")
    assert gone.outcome is Outcome.INDETERMINATE
    assert gone.detail.startswith(f"record directory {record.path}: ")
    record.path.write_bytes(b"now a file")
    as_file = evaluate_output_contract(record, "run.log")
    assert as_file.detail == f"record directory {record.path}: is a regular file, not a directory"


def test_a_log_that_shrinks_while_read_backwards_is_indeterminate_not_spliced(
    session: Session, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Its last line is `PAYSS`, and `PA` once cut to 3 bytes: neither passes. Read by
    # chunks of 4 from the end, `SS\n ` was read before the cut and `\nPA` (short) after
    # it, and the two were joined into a `PASS` the log never held.
    record = trial(session, b"\nPAYSS\n ")
    log = record.path / "run.log"
    real_pread = os.pread
    reads: list[int] = []

    def cut_before_the_second_read(fd: int, length: int, offset: int) -> bytes:
        reads.append(offset)
        if len(reads) == 2:
            os.truncate(log, 3)  # as a writer rewriting the log would, between two reads
        return real_pread(fd, length, offset)

    monkeypatch.setattr(verdict_module, "_CHUNK", 4)
    monkeypatch.setattr(os, "pread", cut_before_the_second_read)
    verdict = evaluate_output_contract(record, "run.log")
    assert reads == [4, 0]
    assert verdict == Verdict(Outcome.INDETERMINATE, "the log shrank while it was read", log)


def test_a_number_past_the_largest_record_is_no_record(session: Session) -> None:
    # `trials/1000000000000000000` (19 digits) is foreign, as `get` says; `judge` read
    # the directory as a record and judged its log.
    n = 10**18
    foreign = session.trials.path / str(n)
    foreign.mkdir()
    (foreign / "trial.json").write_text("{}")
    (foreign / "run.log").write_text("PASS\n")
    verdict = judge(session.trials, n, "run.log")
    assert verdict == Verdict(Outcome.INDETERMINATE, f"no record {n} in {session.trials.path}")

"""`sessionstore finish`: the report is written once, its status is done or failed."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import cli_runner
import orjson
import pytest

from sessionstore.store.session import Session, Store


def ss(store: Path, *args: str, input: str | None = None) -> subprocess.CompletedProcess[str]:
    return cli_runner.run(args[0], "--store", store, *args[1:], input=input)


def _read(path: Path) -> object:
    return orjson.loads(path.read_bytes())


def _trials(session: Session, n: int) -> Session:
    """`session` with trials 1 to `n` completed, for a report's best_trial to name."""
    for _ in range(n):
        session.trials.begin().complete({})
    return session


def test_finish_writes_the_report_and_the_status(tmp_path: Path) -> None:
    session = _trials(Store(tmp_path).create(id="abc", pid=None), 2)
    result = ss(tmp_path, "finish", "abc", "--report", '{"best_trial": 2}')
    assert (result.returncode, result.stdout, result.stderr) == (0, "finished abc: done\n", "")
    assert _read(session.path / "report.json") == {"best_trial": 2, "status": "done"}
    manifest = _read(session.path / "session.json")
    assert isinstance(manifest, dict) and manifest["status"] == "done"
    inspected = cli_runner.run("inspect", "--store", tmp_path, "abc", "--json")
    assert orjson.loads(inspected.stdout)["status"] == "done"


def test_finish_without_a_report_and_failed(tmp_path: Path) -> None:
    session = Store(tmp_path).create(id="abc", pid=None)
    result = ss(tmp_path, "finish", "abc", "--failed")
    assert result.returncode == 0 and result.stdout == "finished abc: failed\n"
    assert _read(session.path / "report.json") == {"status": "failed"}


def test_the_report_s_own_status_counts_and_failed_overrides_it(tmp_path: Path) -> None:
    store = Store(tmp_path)
    one, two = store.create(id="one", pid=None), store.create(id="two", pid=None)
    assert ss(tmp_path, "finish", "one", "--report", '{"status": "failed"}').returncode == 0
    assert _read(one.path / "report.json") == {"status": "failed"}
    assert (
        ss(tmp_path, "finish", "two", "--failed", "--report", '{"status": "done"}').returncode == 0
    )
    assert _read(two.path / "report.json") == {"status": "failed"}


def test_the_report_from_a_file_and_from_standard_input(tmp_path: Path) -> None:
    store = Store(tmp_path / "s")
    one, two = store.create(id="one", pid=None), _trials(store.create(id="two", pid=None), 1)
    report = tmp_path / "report.json"
    report.write_text('{"verified": {"ttft_ms": 180}}')
    assert ss(tmp_path / "s", "finish", "one", "--report", f"@{report}").returncode == 0
    assert _read(one.path / "report.json") == {"verified": {"ttft_ms": 180}, "status": "done"}
    result = ss(tmp_path / "s", "finish", "two", "--report", "@-", input='{"best_trial": 1}')
    assert result.returncode == 0, result.stderr
    assert _read(two.path / "report.json") == {"best_trial": 1, "status": "done"}


def test_a_second_finish_is_refused_and_changes_nothing(tmp_path: Path) -> None:
    session = _trials(Store(tmp_path).create(id="abc", pid=None), 1)
    assert ss(tmp_path, "finish", "abc", "--report", '{"best_trial": 1}').returncode == 0
    before = (session.path / "report.json").read_bytes()
    result = ss(tmp_path, "finish", "abc", "--failed")
    assert result.returncode == 1 and result.stdout == ""
    assert result.stderr == (
        f"Error: {session.path / 'report.json'}: the session is finished already "
        "(its report is written once); start a new session to record more\n"
    )
    assert (session.path / "report.json").read_bytes() == before


def test_bad_reports_are_one_line_errors(tmp_path: Path) -> None:
    Store(tmp_path / "s").create(id="abc", pid=None)
    cases = {
        "[1, 2]": "Error: --report: must be a JSON object, not an array\n",
        "{nope": "Error: --report: invalid JSON: ",
        f"@{tmp_path / 'missing.json'}": f"Error: {tmp_path / 'missing.json'}: cannot read: ",
        '{"status": "maybe"}': "status must be done or failed, not 'maybe'",
    }
    for value, expected in cases.items():
        result = ss(tmp_path / "s", "finish", "abc", "--report", value)
        assert result.returncode == 1, value
        assert expected in result.stderr and result.stderr.count("\n") == 1, result.stderr
    assert not (tmp_path / "s" / "abc" / "report.json").exists()
    result = ss(tmp_path / "s", "finish", "abc", "--report", "@-", input="42")
    assert (
        result.stderr
        == "Error: --report @- (standard input): must be a JSON object, not a number\n"
    )


def test_a_status_with_a_backslash_or_esc_is_escaped_once(tmp_path: Path) -> None:
    """It was repr'd, then escaped: `'a\\\\\\\\b\\\\x1b'` for `a\\b` and an ESC."""
    Store(tmp_path / "s").create(id="abc", pid=None)
    result = ss(tmp_path / "s", "finish", "abc", "--report", '{"status": "a\\\\b\\u001b"}')
    expected = r"status must be done or failed, not 'a\\b\x1b'"
    report = tmp_path / "s" / "abc" / "report.json"
    assert (result.returncode, result.stderr) == (1, f"Error: {report}: {expected}\n")
    result = ss(tmp_path / "s", "finish", "abc", "--report", '{"status": 5}')
    assert result.stderr.endswith("status must be done or failed, not 5\n")


def test_a_report_readers_would_read_as_torn_is_refused(tmp_path: Path) -> None:
    # orjson writes 250 levels, but readers tear a report nested over 246: never written.
    Store(tmp_path / "s").create(id="abc", pid=None)
    deep = '{"a":' * 250 + "1" + "}" * 250
    result = ss(tmp_path / "s", "finish", "abc", "--report", "@-", input=deep)
    assert result.returncode == 1 and result.stderr.count("\n") == 1, result.stderr
    assert "report.json: would read as torn (cannot be written back" in result.stderr
    assert not (tmp_path / "s" / "abc" / "report.json").exists()


def test_finish_of_no_session(tmp_path: Path) -> None:
    result = ss(tmp_path, "finish", "nope")
    assert result.returncode == 1
    assert result.stderr.startswith(f"Error: no session 'nope' in store {tmp_path}")


@pytest.mark.parametrize("torn", ["directory", "fifo", "list"])
def test_a_torn_report_leaves_the_session_running_for_every_command(
    tmp_path: Path, torn: str
) -> None:
    """docs/inspect.md: a torn report.json does not end a session. inspect and resume said
    running while begin and finish said "the session is finished already"."""
    session = Store(tmp_path).create(id="abc", pid=None)
    report = session.path / "report.json"
    if torn == "directory":
        report.mkdir()
    elif torn == "fifo":
        os.mkfifo(report)
    else:
        report.write_bytes(b"[1]")
    inspected = orjson.loads(ss(tmp_path, "inspect", "abc", "--json").stdout)
    planned = orjson.loads(ss(tmp_path, "resume", "abc", "--json").stdout)
    assert (inspected["status"], planned["status"], planned["finished"]) == (
        "running",
        "running",
        False,
    )
    begun = ss(tmp_path, "begin", "abc", "--trial")
    assert (begun.returncode, begun.stdout) == (0, f"1 {session.trials.path / '1'}\n")
    finished = ss(tmp_path, "finish", "abc")
    assert (finished.returncode, finished.stdout) == (1, "")
    assert finished.stderr.startswith(f"Error: {report}: reads as torn (report.json: ")
    assert finished.stderr.endswith(
        "); a report is written once, so it is not replaced and this session cannot be finished\n"
    )
    assert orjson.loads(ss(tmp_path, "inspect", "abc", "--json").stdout)["status"] == "running"


def _finish_killed_before_its_manifest(store: Path, session_id: str) -> None:
    """Run `finish` under strace, which SIGKILLs it at its first rename: the manifest's
    `os.replace`, after report.json was linked into place."""
    inject = "inject=rename,renameat,renameat2:signal=SIGKILL"
    cmd = ["strace", "-f", "-qq", "-o", os.devnull, "-e", inject, *cli_runner.SESSIONSTORE]
    args = ["finish", session_id, "--store", str(store), "--report", '{"best_trial": 1}']
    result = subprocess.run([*cmd, *args], capture_output=True, timeout=cli_runner.TIMEOUT)
    assert result.returncode == -9, result.stderr  # strace dies of what killed its tracee


def test_a_finish_killed_between_report_and_manifest_is_told_and_converges(
    tmp_path: Path,
) -> None:
    session = _trials(Store(tmp_path).create(id="abc", pid=None), 1)
    _finish_killed_before_its_manifest(tmp_path, "abc")
    assert _read(session.path / "report.json") == {"best_trial": 1, "status": "done"}
    manifest = _read(session.path / "session.json")
    assert isinstance(manifest, dict) and manifest["status"] == "running"  # left behind
    doctor = ss(tmp_path, "doctor", "abc")
    assert doctor.returncode == 1
    assert (
        f"{session.path / 'session.json'}: manifest: status running, but report.json ended "
        "the session as done (a finish cut short); finishing it again brings it to the "
        "report's (the report is not replaced)\n"
    ) in doctor.stdout
    # The same finish again completes the one cut short, and only that once.
    again = ss(tmp_path, "finish", "abc", "--report", '{"best_trial": 1}', "-v")
    assert (again.returncode, again.stderr) == (0, "")
    assert again.stdout == (
        f"found (a finish cut short wrote it) {session.path / 'report.json'}\n"
        f"set status done in {session.path / 'session.json'}\n"
        "finished abc: done\n"
    )
    manifest = _read(session.path / "session.json")
    assert isinstance(manifest, dict) and manifest["status"] == "done"
    assert ss(tmp_path, "doctor", "abc", "--repair", "-q").returncode == 0  # the dead temp
    third = ss(tmp_path, "finish", "abc", "--report", '{"best_trial": 1}')
    assert third.returncode == 1 and "finished already" in third.stderr


def test_another_report_after_a_killed_finish_is_refused_but_the_manifest_follows(
    tmp_path: Path,
) -> None:
    session = _trials(Store(tmp_path).create(id="abc", pid=None), 1)
    _finish_killed_before_its_manifest(tmp_path, "abc")
    result = ss(tmp_path, "finish", "abc", "--failed")
    assert result.returncode == 1 and "finished already" in result.stderr
    assert _read(session.path / "report.json") == {"best_trial": 1, "status": "done"}
    manifest = _read(session.path / "session.json")
    assert isinstance(manifest, dict) and manifest["status"] == "done"

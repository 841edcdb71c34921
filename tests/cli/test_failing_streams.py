"""A standard stream open at start that fails when written: a full device, a reader gone,
an encoding that cannot hold a name.

Output that cannot be written is one `Error: stdout: <reason>` line and exit 1
(a closed pipe, `| head`, exit 1 in silence, as click has it; `check`, whose 1
says FAIL, exits 4), never a
traceback nor the interpreter's exit 120; a diagnostic that cannot be written
to stderr is dropped, so the exit status stays the command's, as with stderr
closed (test_closed_streams.py); what stdout cannot encode is escaped. Each
case is a real process whose descriptor is replaced after the pipes are set up
(`preexec_fn`).
"""

from __future__ import annotations

import os
import signal
from collections.abc import Callable
from pathlib import Path

import pytest
from cli_runner import TIMEOUT, environ, popen, reap, run, wait_for

FULL = "Error: stdout: No space left on device\n"


def onto(fd: int, path: str) -> Callable[[], None]:
    """A `preexec_fn` putting `path` on descriptor `fd`."""

    def put() -> None:
        os.dup2(os.open(path, os.O_WRONLY), fd)

    return put


def reader_gone(fd: int) -> Callable[[], None]:
    """A `preexec_fn` putting on descriptor `fd` a pipe whose reader is already closed."""

    def put() -> None:
        read, write = os.pipe()
        os.close(read)
        os.dup2(write, fd)

    return put


@pytest.fixture
def store(tmp_path: Path) -> Path:
    root = tmp_path / "store"
    name = "h\u00e9llo \u2713 \u540d"  # non-ASCII, for the encodings
    assert run("new", "--store", root, "--name", name, "--id", "s1").returncode == 0
    return root


# Where stdout is written: before click is imported (--version, an empty store), by
# click itself (help), by a command without library_errors (schema), by a command.
WRITERS = [
    ["--version"],
    ["--help"],
    ["inspect", "--help"],
    ["schema"],
    ["--store", "{empty}", "inspect"],
    ["inspect"],
    ["inspect", "s1", "--json"],
    ["contract", "s1"],
]


def argv(args: list[str], tmp_path: Path) -> list[str]:
    (tmp_path / "empty").mkdir(exist_ok=True)
    return [a.format(empty=tmp_path / "empty") for a in args]


@pytest.mark.skipif(not os.path.exists("/dev/full"), reason="needs /dev/full")
@pytest.mark.parametrize("args", WRITERS, ids=" ".join)
def test_output_to_a_full_device_is_one_line_naming_stdout(
    store: Path, tmp_path: Path, args: list[str]
) -> None:
    env = environ(SESSIONSTORE_HOME=str(store))
    env.pop("PYTHONUNBUFFERED", None)  # buffered, as a user's: the failure comes at exit
    done = run(*argv(args, tmp_path), env=env, preexec_fn=onto(1, "/dev/full"))
    assert (done.returncode, done.stderr) == (1, FULL)


@pytest.mark.parametrize("args", WRITERS, ids=" ".join)
def test_output_to_a_pipe_with_no_reader_exits_1_in_silence(
    store: Path, tmp_path: Path, args: list[str]
) -> None:
    env = environ(SESSIONSTORE_HOME=str(store))
    done = run(*argv(args, tmp_path), env=env, preexec_fn=reader_gone(1))
    assert (done.returncode, done.stderr) == (1, "")


@pytest.mark.parametrize("stderr", ["full", "reader gone"])
@pytest.mark.parametrize(
    ("args", "code"),
    [
        (["mirror", "{src}", "{dst}", "--once"], 0),  # its summary is on stderr
        (["doctor", "s1"], 0),  # its verdict is on stderr
        (["inspect", "nosuch"], 1),
        (["inspect", "--bogus"], 2),
    ],
    ids=lambda value: " ".join(value) if isinstance(value, list) else str(value),
)
def test_a_diagnostic_stderr_cannot_take_leaves_the_exit_status_as_it_was(
    store: Path, tmp_path: Path, args: list[str], code: int, stderr: str
) -> None:
    if stderr == "full" and not os.path.exists("/dev/full"):
        pytest.skip("needs /dev/full")
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "a.log").write_bytes(b"a\n")
    line = [a.format(src=tmp_path / "src", dst=tmp_path / "dst") for a in args]
    fail = onto(2, "/dev/full") if stderr == "full" else reader_gone(2)
    done = run(*line, env=environ(SESSIONSTORE_HOME=str(store)), preexec_fn=fail)
    assert done.returncode == code
    if args[0] == "mirror":
        assert (tmp_path / "dst" / "a.log").read_bytes() == b"a\n"


def test_the_daemon_runs_on_when_stderr_has_no_reader(tmp_path: Path) -> None:
    src, dst = tmp_path / "src", tmp_path / "dst"
    src.mkdir()
    (src / "a.log").write_bytes(b"a\n")
    read, write = os.pipe()
    os.close(read)
    proc = popen("mirror", src, dst, "--debounce", "0.05", stderr=write)
    os.close(write)
    try:
        wait_for(lambda: (dst / "a.log").exists(), "the first pass")
        (src / "b.log").write_bytes(b"b\n")  # a daemon that died after its first pass misses it
        wait_for(lambda: (dst / "b.log").exists() or proc.poll() is not None, "the second pass")
        assert proc.poll() is None
        proc.send_signal(signal.SIGINT)
        assert proc.wait(timeout=TIMEOUT) == 0
    finally:
        reap(proc)


@pytest.mark.parametrize("encoding", ["ascii", "latin-1", "utf-8"])
@pytest.mark.parametrize("args", [["inspect"], ["inspect", "s1"], ["contract", "s1"]], ids=" ".join)
def test_what_stdout_cannot_encode_is_escaped_not_a_traceback(
    store: Path, args: list[str], encoding: str
) -> None:
    env = environ(SESSIONSTORE_HOME=str(store), PYTHONIOENCODING=encoding)
    done = run(*args, env=env, text=False)
    assert (done.returncode, done.stderr) == (0, b"")
    if args[0] == "inspect" and encoding != "utf-8":
        assert "h\u00e9llo \\u2713".encode(encoding, "backslashreplace") in done.stdout


def test_a_csv_on_an_ascii_stdout_escapes_a_name_it_cannot_encode(store: Path) -> None:
    env = environ(SESSIONSTORE_HOME=str(store), PYTHONIOENCODING="ascii")
    done = run("inspect", "--csv", env=env)
    assert (done.returncode, done.stderr) == (0, "")
    assert "h\\xe9llo \\u2713 \\u540d" in done.stdout


def test_unbuffered_output_to_a_full_device_says_so_once(store: Path) -> None:
    if not os.path.exists("/dev/full"):
        pytest.skip("needs /dev/full")
    env = environ(SESSIONSTORE_HOME=str(store), PYTHONUNBUFFERED="1")
    for args in (["--version"], ["inspect"], ["schema"]):
        done = run(*args, env=env, preexec_fn=onto(1, "/dev/full"))
        assert (done.returncode, done.stderr) == (1, FULL), args


@pytest.mark.parametrize("line", ["PASS", "FAIL: oom", "step 3"])
@pytest.mark.parametrize("fmt", [[], ["--json"]], ids=["text", "json"])
def test_check_whose_reader_is_gone_never_exits_1_the_fail_status(
    tmp_path: Path, line: str, fmt: list[str]
) -> None:
    # click exits 1 on a closed pipe; check's 1 says the log said FAIL. A verdict that
    # went unread exits 4, as one stdout cannot take at all does.
    from sessionstore.store.session import Store

    session = Store(tmp_path / "store").create(id="c1", pid=None)
    writer = session.trials.begin()
    writer.write_bytes("run.log", f"{line}\n".encode())
    writer.complete({"output_contract": {"log": "run.log"}})
    args: tuple[str | Path, ...] = ("check", "c1", "--trial", "1", "--store", tmp_path / "store")
    args += tuple(fmt)
    done = run(*args, preexec_fn=reader_gone(1))
    assert (done.returncode, done.stderr) == (4, "")
    if not fmt:  # quiet writes nothing: the status is the verdict, as ever
        quiet = run(*args, "-q", preexec_fn=reader_gone(1)).returncode
        assert quiet == {"P": 0, "F": 1}.get(line[0], 4)


def _closed(fd: int) -> Callable[[], None]:
    return lambda: os.close(fd)


@pytest.mark.parametrize(
    ("put", "reason"),
    [
        pytest.param(_closed(1), "Bad file descriptor", id="closed"),
        pytest.param(onto(1, "/dev/full"), "No space left on device", id="full"),
        pytest.param(reader_gone(1), "Broken pipe", id="reader-gone"),
    ],
)
@pytest.mark.parametrize("json", [[], ["--json"]], ids=["text", "json"])
def test_new_and_begin_name_what_they_made_when_stdout_cannot_take_it(
    store: Path, put: Callable[[], None], reason: str, json: list[str]
) -> None:
    # The session (the record) is made before its id can be printed: an error line that
    # did not name it left it made with nobody told, a closed pipe's with no line at all.
    made = run("new", "--store", store, "--id", "s2", *json, preexec_fn=put)
    assert (made.returncode, made.stdout) == (1, "")
    assert made.stderr == f"Error: stdout: {reason}; session s2 was made: {store / 's2'}\n"
    begun = run("begin", "s2", "--store", store, "--trial", *json, preexec_fn=put)
    assert (begun.returncode, begun.stdout) == (1, "")
    trial = store / "s2" / "trials" / "1"
    assert begun.stderr == f"Error: stdout: {reason}; trial 1 was begun: {trial}\n"
    assert trial.is_dir()


@pytest.mark.parametrize(
    ("put", "reason"),
    [
        pytest.param(_closed(1), "Bad file descriptor", id="closed"),
        pytest.param(onto(1, "/dev/full"), "No space left on device", id="full"),
        pytest.param(reader_gone(1), "Broken pipe", id="reader-gone"),
    ],
)
def test_complete_and_finish_say_what_was_written_when_stdout_cannot_confirm_it(
    store: Path, put: Callable[[], None], reason: str
) -> None:
    assert run("begin", "s1", "--store", store, "--trial").returncode == 0
    trial = store / "s1" / "trials" / "1"
    done = run("complete", "s1", "--store", store, "--trial", "1", "--marker", "{}", preexec_fn=put)
    assert (done.returncode, done.stdout) == (1, "")
    assert done.stderr == f"Error: stdout: {reason}; trial 1 was completed: {trial}\n"
    assert (trial / "trial.json").read_bytes() == b"{}\n"
    ended = run("finish", "s1", "--store", store, "--failed", preexec_fn=put)
    assert (ended.returncode, ended.stdout) == (1, "")
    assert ended.stderr == f"Error: stdout: {reason}; session s1 was finished (failed)\n"
    quiet = run("complete", "s1", "--store", store, "--trial", "1", "--marker", "{}", "-q")
    assert quiet.returncode == 1 and "completed" in quiet.stderr  # written once: refused

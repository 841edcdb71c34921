"""Conventions every command keeps: colour rules, -q, errors that name real paths, and
`wait` that stops on a dead writer."""

from __future__ import annotations

import os
import pty
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import orjson
import pytest
from cli_runner import SESSIONSTORE, environ, invoke, run
from inspect_helpers import dead_pid, metrics, set_manifest, trial

from sessionstore.store.session import Session, Store

SGR = "\x1b["


@pytest.fixture
def session(tmp_path: Path) -> Session:
    session = Store(tmp_path / "store").create(id="c1", name="colours", pid=None)
    trial(session, metrics(5.0) | {"failed": True})
    trial(session, metrics(7.0))
    return session


def on_a_terminal(args: list[str], env: dict[str, str]) -> str:
    """What `sessionstore ARGS` prints on a real pseudo-terminal (bounded: it exits)."""
    leader, follower = pty.openpty()
    proc = subprocess.Popen(
        [*SESSIONSTORE, *args], stdout=follower, stderr=subprocess.DEVNULL, env=env
    )
    os.close(follower)
    chunks = []
    try:
        while True:
            try:
                chunk = os.read(leader, 65536)
            except OSError:  # EIO: the child closed its side
                break
            if not chunk:
                break
            chunks.append(chunk)
        proc.wait(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        os.close(leader)
    return b"".join(chunks).decode()


def terminal_env(**extra: str) -> dict[str, str]:
    env = {**os.environ, "TERM": "xterm-256color", "COLUMNS": "100", **extra}
    if "NO_COLOR" not in extra:
        env.pop("NO_COLOR", None)
    return env


def test_no_color_strips_every_style_bold_included(session: Session) -> None:
    args = ["inspect", "c1", "--store", str(session.path.parent)]
    assert SGR in on_a_terminal(args, terminal_env())  # styled on a terminal
    plain = on_a_terminal(args, terminal_env(NO_COLOR="1"))
    assert "trials" in plain and SGR not in plain  # no colour, no bold, no dim
    listed = on_a_terminal(
        ["inspect", "--store", str(session.path.parent)], terminal_env(NO_COLOR="1")
    )
    assert "colours" in listed and SGR not in listed


def test_color_never_and_always_and_the_group_option(session: Session) -> None:
    store = str(session.path.parent)
    assert SGR not in on_a_terminal(
        ["inspect", "c1", "--store", store, "--color", "never"], terminal_env()
    )
    assert SGR not in on_a_terminal(
        ["--color", "never", "inspect", "c1", "--store", store], terminal_env()
    )
    # Not a terminal: plain unless asked; an explicit request beats NO_COLOR.
    env = environ(NO_COLOR="1")
    assert SGR not in run("inspect", "c1", "--store", store, env=env).stdout
    assert SGR in run("inspect", "c1", "--store", store, "--color", "always", env=env).stdout
    assert SGR in run("--color", "always", "inspect", "c1", "--store", store, env=env).stdout
    assert SGR in run("inspect", "c1", "--store", store, "--color", env=env).stdout  # bare: always
    dumb = environ(TERM="dumb")  # rich styles nothing there, even forced: asked for, it is
    assert SGR in run("inspect", "c1", "--store", store, "--color", "always", env=dumb).stdout
    assert SGR in run("inspect", "--store", store, "--color", "always", env=dumb).stdout
    # The command's own option wins over the group's.
    both = run("--color", "always", "inspect", "c1", "--store", store, "--color", "never", env=env)
    assert (both.returncode, SGR in both.stdout) == (0, False)
    bad = run("inspect", "c1", "--store", store, "--color", "sometimes")
    assert bad.returncode == 2 and "'sometimes' is not one of" in bad.stderr
    clash = run("inspect", "c1", "--store", store, "--color", "always", "--no-color")
    assert clash.returncode == 2 and "give one of --color and --no-color" in clash.stderr


def test_quiet_leaves_out_confirmations_not_errors(tmp_path: Path) -> None:
    store = Store(tmp_path)
    session = store.create(id="q1", pid=None)
    writer = session.trials.begin()
    root = str(tmp_path)
    done = invoke("complete", "q1", "--store", root, "--trial", "1", "--marker", "{}", "-q")
    assert done.outcome == (0, "", "")
    assert invoke("wait", "q1", "--store", root, "--trial", "1", "-q").outcome == (0, "", "")
    assert invoke("finish", "q1", "--store", root, "-q").outcome == (0, "", "")
    assert invoke("doctor", "q1", "--store", root, "-q").outcome == (0, "", "")
    assert invoke("rm", "q1", "--store", root, "-q").outcome == (0, "", "")
    assert not writer.path.exists()
    missing = invoke("rm", "q1", "--store", root, "-q")
    assert missing.exit_code == 1 and "q1" in missing.stderr


def test_verbose_says_each_thing_done(tmp_path: Path) -> None:
    store = Store(tmp_path)
    session = store.create(id="v1", pid=None)
    writer = session.trials.begin()
    writer.write_text("run.log", "PASS\n")
    root = str(tmp_path)
    record = session.trials.path / "1"
    waited = invoke("wait", "v1", "--store", root, "--trial", "1", "--timeout", "0", "-v")
    assert waited.exit_code == 3
    assert waited.stderr.startswith(
        f"waiting for trial 1: {record} (timeout 0 s; no writer recorded)\n"
    )
    done = invoke("complete", "v1", "--store", root, "--trial", "1", "--marker", "{}", "-v")
    assert done.outcome == (
        0,
        f"synced {record / 'run.log'}\nwrote {record / 'trial.json'}\n"
        f"completed trial 1: {record}\n",
        "",
    )
    checked = invoke("check", "v1", "--store", root, "--trial", "1", "--log", "run.log", "-v")
    assert checked.outcome == (0, "pass\n", f"judged {record / 'run.log'} (from --log run.log)\n")
    assert invoke(
        "check", "v1", "--store", root, "--trial", "1", "--log", "run.log", "-q"
    ).outcome == (0, "", "")
    out = tmp_path.parent / f"{tmp_path.name}-export"
    exported = invoke("export", "v1", out, "--store", root, "--trial", "1", "-v")
    assert exported.exit_code == 0, exported.output
    assert exported.stdout.splitlines() == [
        f"copied {out / 'run.log'}",
        f"copied {out / 'trial.json'}",
        f"trial 1 exported to {out}",
    ]
    finished = invoke("finish", "v1", "--store", root, "-v")
    assert finished.outcome == (
        0,
        f"wrote {session.path / 'report.json'}\n"
        f"set status done in {session.path / 'session.json'}\n"
        "finished v1: done\n",
        "",
    )
    healthy = invoke("doctor", "v1", "--store", root, "-v")
    assert healthy.exit_code == 0 and healthy.stdout == ""
    lines = healthy.stderr.splitlines()
    assert len(lines) == 10 and all(line.endswith(": ok") for line in lines[:9])
    assert lines[0] == (
        "doctor: checked session.json: present, parses, fields of the right types, "
        "status the report's: ok"
    )
    assert lines[9] == f"doctor: {session.path}: healthy"
    (record / "trial.json").chmod(0o666)
    sick = invoke("doctor", "v1", "--store", root, "-v")
    assert sick.exit_code == 1
    assert "doctor: checked modes and readability of every entry: 1 problem" in sick.stderr
    clash = invoke("finish", "v1", "--store", root, "-q", "-v")
    assert clash.exit_code == 2 and "cannot be combined" in clash.stderr


# What an unwritable directory answers: root is refused only by chattr +i (EPERM); anyone
# else by a mode without write permission (EACCES), since chattr +i needs root.
REFUSED = "Operation not permitted" if os.geteuid() == 0 else "Permission denied"


@contextmanager
def immutable(path: Path) -> Iterator[None]:
    """`path` made unwritable for the block: chattr +i as root (which modes do not stop),
    else read-only permission bits."""
    if os.geteuid() != 0:
        mode = path.stat().st_mode
        path.chmod(0o555)
        try:
            yield
        finally:
            path.chmod(mode)
        return
    subprocess.run(["chattr", "+i", str(path)], check=True, timeout=30)
    try:
        yield
    finally:
        subprocess.run(["chattr", "-i", str(path)], check=True, timeout=30)


def test_errors_on_an_unwritable_store_name_the_real_path(tmp_path: Path) -> None:
    store = Store(tmp_path)
    session = store.create(id="u1", pid=None)
    session.trials.begin()
    root = str(tmp_path)
    with immutable(tmp_path):
        done = run("new", "--store", root, "--id", "u2")
        assert done.returncode == 1
        assert done.stderr == f"Error: {tmp_path / 'u2'}: {REFUSED}\n"
    with immutable(session.path):
        done = run("finish", "u1", "--store", root)
        assert done.stderr == f"Error: {session.path / 'report.json'}: {REFUSED}\n"
    record = session.trials.path / "1"
    with immutable(record):
        done = run("complete", "u1", "--store", root, "--trial", "1", "--marker", "{}")
        assert done.stderr == f"Error: {record / 'trial.json'}: {REFUSED}\n"
    assert ".sstmp" not in done.stderr
    assert sorted(os.listdir(record)) == []  # no temp left behind


def test_rm_and_prune_in_an_unwritable_store_name_the_session(tmp_path: Path) -> None:
    # Not `r1: ...` (the bare name) nor `[Errno 1] ...: 'r1' -> '.sstmp-...'` (the rename's
    # temp, which the user never made), and prune does not also say "nothing to prune".
    store = Store(tmp_path)
    store.create(id="r1", pid=None).finish({})
    root = str(tmp_path)
    with immutable(tmp_path):
        removed = run("rm", "r1", "--store", root)
        pruned = run("prune", "--yes", "--store", root)
    assert (removed.returncode, removed.stdout) == (1, "")
    assert removed.stderr == f"Error: {tmp_path / 'r1'}: {REFUSED}\n"
    assert (pruned.returncode, pruned.stdout) == (1, "")
    assert pruned.stderr == f"Error: not removed: {tmp_path / 'r1'}: {REFUSED}\n"
    assert sorted(os.listdir(tmp_path)) == ["r1"]


def test_begin_into_an_unwritable_session_names_the_real_path(tmp_path: Path) -> None:
    store = Store(tmp_path)
    session = store.create(id="b1", pid=None)
    root = str(tmp_path)
    trials = session.trials.path
    with immutable(trials):
        done = run("begin", "b1", "--store", root, "--trial")
        assert (done.returncode, done.stdout) == (1, "")
        assert done.stderr == f"Error: {trials / '1'}: {REFUSED}\n"
    assert os.listdir(trials) == []
    trials.rmdir()  # a session whose collection must be made first, in an unwritable directory
    with immutable(session.path):
        done = run("begin", "b1", "--store", root, "--trial")
        assert done.stderr == f"Error: {trials}: {REFUSED}\n"
        assert ".sstmp" not in done.stderr and "unreadable" not in done.stderr
    # An unwritable store is no obstacle: begin writes in the session only.
    with immutable(tmp_path):
        done = run("begin", "b1", "--store", root, "--attempt")
        assert (done.returncode, done.stdout) == (0, f"1 {session.service.path / '1'}\n")


def test_begin_into_an_unreadable_session_says_so_not_finished(tmp_path: Path) -> None:
    session = Store(tmp_path).create(id="b2", pid=None)
    session.path.chmod(0)
    try:
        done = run("begin", "b2", "--store", tmp_path, "--trial")
    finally:
        session.path.chmod(0o700)
    if os.geteuid() == 0:  # permission bits do not stop root: the trial is begun
        assert (done.returncode, done.stdout) == (0, f"1 {session.trials.path / '1'}\n")
    else:
        assert (done.returncode, done.stdout) == (1, "")
        assert done.stderr == f"Error: {session.path}: Permission denied\n"
        assert session.trials.numbers() == []


def test_hostile_values_are_one_line_usage_or_input_errors(tmp_path: Path) -> None:
    Store(tmp_path).create(id="x1", pid=None)
    root = str(tmp_path)
    # NaN passes a float range (no comparison with it is true): a NaN deadline would hang.
    nan = run("wait", "x1", "--store", root, "--trial", "1", "--timeout", "nan")
    assert nan.returncode == 2 and "nan is not a number of seconds" in nan.stderr
    for args, option in (
        (("finish", "x1", "--report", "@"), "--report"),
        (("complete", "x1", "--trial", "1", "--marker", "@"), "--marker"),
        (("new", "--constraints", "@"), "--constraints"),
    ):
        done = run(*args, "--store", root)
        assert (done.returncode, done.stdout) == (1, "")
        assert done.stderr == (
            f"Error: {option}: @ names no file: give @FILE, or @- for standard input\n"
        )
    assert not (tmp_path / "x1" / "report.json").exists()


@pytest.mark.parametrize(
    ("args", "where", "problem"),
    [
        (["new", "--store", ""], "'--store'", "name a directory (. for this one) or s3://"),
        (["--store", "", "inspect"], "'--store'", "name a directory (. for this one) or s3://"),
        (["mirror", "{src}", "", "--once"], "'DST'", "write . for the current directory"),
        (["mirror", "", "{dst}", "--once"], "'SRC'", "write . for the current directory"),
        (["mirror", "{src}", "{dst}", "-n", "--store", ""], "'--store'", "name a directory"),
        (
            ["mirror", "{src}", "{dst}", "--once", "--secrets-file", ""],
            "'--secrets-file'",
            "name a file",
        ),
        (["export", "x1", "", "--trial", "1"], "'DEST'", "write . for the current directory"),
        (["contract", "x1", "--workspace", ""], "'--workspace'", "write . for the current"),
        (["inspect", "--objective", ""], "'--objective'", "name a dotted key path"),
        (["report", "x1", "--objective", ""], "'--objective'", "name a dotted key path"),
    ],
    ids=lambda value: " ".join(value) if isinstance(value, list) else None,
)
def test_an_empty_path_is_a_usage_error_not_the_current_directory(
    tmp_path: Path, args: list[str], where: str, problem: str
) -> None:
    """pathlib reads "" as `.`: `--store "$UNSET"` made a store of the working directory."""
    Store(tmp_path / "store").create(id="x1", pid=None)
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "a.log").write_bytes(b"a\n")
    cwd = tmp_path / "cwd"
    cwd.mkdir()
    argv = [a.format(src=tmp_path / "src", dst=tmp_path / "dst") for a in args]
    done = run(*argv, env=environ(SESSIONSTORE_HOME=str(tmp_path / "store")), cwd=cwd)
    assert (done.returncode, done.stdout) == (2, "")
    last = done.stderr.splitlines()[-1]
    assert last.startswith(f"Error: Invalid value for {where}: is empty; ") and problem in last
    assert list(cwd.iterdir()) == [] and not (tmp_path / "dst").exists()


def test_export_to_a_missing_parent_names_it(tmp_path: Path) -> None:
    session = Store(tmp_path / "store").create(id="e1", pid=None)
    trial(session, metrics(1.0))
    dest = tmp_path / "no" / "such" / "out"
    done = run("export", "e1", dest, "--trial", "1", "--store", tmp_path / "store")
    assert done.returncode == 1
    assert done.stderr == f"Error: {dest.parent}: No such file or directory\n"


def test_wait_on_a_dead_writer_exits_3_and_says_so(tmp_path: Path) -> None:
    pid, started = dead_pid()
    store = Store(tmp_path)
    session = store.create(id="w1", pid=None)
    set_manifest(session, pid=pid, pid_started_at=started)
    done = run("wait", "w1", "--store", tmp_path, "--trial", "1")
    assert (done.returncode, done.stdout) == (3, "")
    assert done.stderr == (
        f"Error: trial 1: the session's writer (pid {pid}) is dead and no mirror daemon "
        "writes into it: nothing will complete it\n"
    )
    done = run("wait", "w1", "--store", tmp_path, "--report", "--json")
    assert done.returncode == 3
    assert orjson.loads(done.stdout) == {
        "n": None,
        "state": "writer_dead",
        "path": str(session.path),
        "timeout": None,
        "writer": {"kind": "writer", "pid": pid, "alive": False},
        "error": done.stderr.removeprefix("Error: ").rstrip("\n"),
    }
    # A record the dead writer completed before it died is no dead end.
    trial(Session.open(session.path), metrics(1.0))
    done = run("wait", "w1", "--store", tmp_path, "--trial", "1", "--json")
    assert (done.returncode, orjson.loads(done.stdout)["state"]) == (0, "completed")


def test_wait_json_on_a_timeout_prints_an_object(tmp_path: Path) -> None:
    session = Store(tmp_path).create(id="t1", pid=os.getpid())  # alive: waits to the end
    done = run("wait", "t1", "--store", tmp_path, "--attempt", "2", "--timeout", "0.2", "--json")
    assert done.returncode == 3
    assert orjson.loads(done.stdout) == {
        "n": 2,
        "state": "timed_out",
        "path": str(session.service.path / "2"),
        "timeout": 0.2,
        "writer": None,
        "error": (
            f"attempt 2: {session.service.path / '2'}: not completed after 0.2 s; "
            "wait longer or check that its writer runs"
        ),
    }


def test_python_m_and_the_group_help_name_the_global_options() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "sessionstore", "--help"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0
    assert "--store" in done.stdout and "--color" in done.stdout


def test_the_fast_version_line_is_clicks() -> None:
    # `sessionstore --version` answers before click is imported (start-up): its line
    # must be what click's own version option prints.
    from sessionstore.cli import VERSION_LINE

    assert invoke("--version").outcome == (0, VERSION_LINE, "")
    done = run("--version")
    assert (done.returncode, done.stdout, done.stderr) == (0, VERSION_LINE, "")
    code = (
        "import sys; from sessionstore.cli import main; main(['--version']); "
        "print(sorted(sys.modules))"
    )
    modules = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True
    ).stdout
    assert "'click'" not in modules
    assert "'orjson'" not in modules  # its init imports dataclasses, inspect, json, uuid


def test_orjson_is_imported_only_through_its_sigint_guard() -> None:
    """A Ctrl-C during orjson's first import crashes CPython: one guarded import for all."""
    import sessionstore

    package = Path(sessionstore.__file__).parent
    direct = [
        str(path.relative_to(package))
        for path in sorted(package.rglob("*.py"))
        if path.name != "_orjson.py"
        and any(line.strip().startswith("import orjson") for line in path.read_text().splitlines())
    ]
    assert direct == []

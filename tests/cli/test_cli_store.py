"""`sessionstore new` and `inspect` from outside: real processes, exit codes, JSON shapes."""

from __future__ import annotations

import os
import subprocess
import sysconfig
from pathlib import Path

import cli_runner
import orjson
import pytest

import sessionstore
from sessionstore.cli import COMMANDS
from sessionstore.store.session import Store


def run(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[bytes]:
    """`sessionstore ARGS` as a real process, uncoloured, `env` added; its raw bytes."""
    return cli_runner.run(*args, env=cli_runner.environ(NO_COLOR="1", **(env or {})), text=False)


def test_version_and_help() -> None:
    result = run("--version")
    assert result.returncode == 0 and result.stdout.startswith(b"sessionstore, version ")
    assert run("-h").returncode == 0


@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_every_command_has_help_with_an_example(command: str) -> None:
    result = run(command, "--help")
    assert result.returncode == 0, result.stderr
    assert b"Example" in result.stdout


def test_console_script_is_installed() -> None:
    # Beside this interpreter, not on PATH: `venv/bin/python -m pytest` without activating
    # the venv must test the venv's script, not fail (or find another install's).
    script = Path(sysconfig.get_path("scripts")) / "sessionstore"
    result = subprocess.run([script, "--version"], capture_output=True, timeout=60, check=False)
    assert result.returncode == 0, result.stderr
    assert result.stdout.decode().split()[-1] == sessionstore.__version__


def test_new_prints_the_id_and_json(tmp_path: Path) -> None:
    result = run("new", "--store", str(tmp_path), "--name", "tune", "--trials", "3")
    assert result.returncode == 0, result.stderr
    session_id = result.stdout.decode().strip()
    assert len(session_id) == 8
    manifest = orjson.loads((tmp_path / session_id / "session.json").read_bytes())
    assert manifest["pid"] is None, "a CLI-created session tracks no writer by default"
    result = run("new", "--store", str(tmp_path), "--id", "named", "--json")
    assert orjson.loads(result.stdout) == {"id": "named", "path": str(tmp_path / "named")}


def test_new_uses_sessionstore_home(tmp_path: Path) -> None:
    result = run("new", "--id", "home", env={"SESSIONSTORE_HOME": str(tmp_path)})
    assert result.returncode == 0 and (tmp_path / "home" / "session.json").is_file()


def test_new_with_pid_records_the_writer(tmp_path: Path) -> None:
    result = run("new", "--store", str(tmp_path), "--id", "p", "--pid", str(os.getpid()))
    assert result.returncode == 0
    manifest = orjson.loads((tmp_path / "p" / "session.json").read_bytes())
    assert manifest["pid"] == os.getpid() and manifest["pid_started_at"] is not None


def test_constraints_from_json_and_file(tmp_path: Path) -> None:
    run("new", "--store", str(tmp_path), "--id", "a", "--constraints", '{"max_ttft_ms": 200}')
    spec = tmp_path / "c.json"
    spec.write_text('{"min_context_length": 8192}')
    run("new", "--store", str(tmp_path), "--id", "b", "--constraints", f"@{spec}")
    assert Store(tmp_path).open("a").constraints() == {"max_ttft_ms": 200}
    assert Store(tmp_path).open("b").constraints() == {"min_context_length": 8192}
    made = cli_runner.run(
        "new", "--store", tmp_path, "--id", "c", "--constraints", "@-", input='{"x": 1}'
    )
    assert made.returncode == 0, made.stderr
    assert Store(tmp_path).open("c").constraints() == {"x": 1}


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["--id", "../etc"], b"invalid session id '../etc'"),
        (["--id", "Upper"], b"invalid session id 'Upper'"),
        (["--constraints", "{bad"], b"--constraints: invalid JSON"),
        (["--constraints", "[1]"], b"--constraints: must be a JSON object"),
        # Empty (`--constraints "$UNSET"`) is no document, not "no constraints".
        (["--constraints", ""], b"--constraints: invalid JSON"),
        (["--constraints", "@/nonexistent/c.json"], b"/nonexistent/c.json: cannot read"),
        (["--previous", "ghost"], b"no session 'ghost'"),
        # Bytes that are not UTF-8 cannot be JSON: refused, never a traceback, never U+FFFD.
        (["--name", os.fsdecode(b"a\xff\x1b")], b"name: a\\xff\\x1b is not valid UTF-8"),
        (["--label", os.fsdecode(b"k\xff=v")], b"labels.k\\xff: k\\xff is not valid UTF-8"),
        (["--label", os.fsdecode(b"k=v\xff")], b"labels.k: v\\xff is not valid UTF-8"),
    ],
)
def test_bad_input_is_one_line_and_exit_1(tmp_path: Path, args: list[str], needle: bytes) -> None:
    result = run("new", "--store", str(tmp_path / "s"), *args)
    assert result.returncode == 1
    assert needle in result.stderr
    assert result.stderr.count(b"\n") == 1, result.stderr
    assert not (tmp_path / "s").exists() or os.listdir(tmp_path / "s") == []


def test_duplicate_id_exits_1(tmp_path: Path) -> None:
    run("new", "--store", str(tmp_path), "--id", "x")
    result = run("new", "--store", str(tmp_path), "--id", "x")
    assert result.returncode == 1 and b"already exists" in result.stderr


@pytest.mark.parametrize("kind", ["file", "fifo"])
def test_a_store_that_is_not_a_directory_is_said_so(tmp_path: Path, kind: str) -> None:
    store = tmp_path / "store"
    if kind == "file":
        store.write_bytes(b"x")
    else:
        os.mkfifo(store)
    for args in (["--id", "abc"], []):
        result = run("new", "--store", str(store), *args)
        assert (result.returncode, result.stdout) == (1, b""), result.stderr
        assert result.stderr == f"Error: root {store}: is not a directory\n".encode()


def test_a_store_that_cannot_be_created_is_said_so_not_unreadable(tmp_path: Path) -> None:
    dangling = tmp_path / "dangling"
    dangling.symlink_to(tmp_path / "nowhere")
    for store, problem in (
        (dangling, "is a dangling symlink"),
        (dangling / "sub", "cannot create: No such file or directory"),
    ):
        result = run("new", "--store", str(store))
        assert (result.returncode, result.stdout) == (1, b"")
        assert result.stderr == f"Error: root {store}: {problem}\n".encode()
    assert not (tmp_path / "nowhere").exists()


@pytest.mark.parametrize(
    "args",
    [["new", "--trials", "0"], ["new", "--bogus"], ["nosuchcommand"], ["new", "--label", "x"]],
)
def test_usage_errors_exit_2(tmp_path: Path, args: list[str]) -> None:
    assert run(*args, "--store", str(tmp_path)).returncode == 2


def _populated(tmp_path: Path) -> Store:
    store = Store(tmp_path)
    session = store.create(id="s1", trials=3, pid=None)
    first = session.trials.begin()
    first.complete({"failed": False})
    torn = session.trials.begin()
    (torn.path / "trial.json").write_bytes(b'{"fail')
    session.trials.begin()
    (session.trials.path / "notes").mkdir()
    for _ in range(10):
        session.service.begin().complete({"trial": 1, "status": "failed"})
    store.create(id="s2", pid=None)
    return store


def test_inspect_lists_sessions_as_json(tmp_path: Path) -> None:
    _populated(tmp_path)
    result = run("inspect", "--store", str(tmp_path), "--json")
    assert result.returncode == 0, result.stderr
    summaries = orjson.loads(result.stdout)
    assert [s["id"] for s in summaries] == ["s2", "s1"]
    for summary in summaries:
        assert {"id", "path", "status", "progress"} <= summary.keys()
    assert summaries[1]["status"] == "running"


def test_inspect_session_json_shows_every_state_in_numeric_order(tmp_path: Path) -> None:
    _populated(tmp_path)
    for target in ["s1", str(tmp_path / "s1")]:
        result = run("inspect", target, "--store", str(tmp_path), "--json")
        assert result.returncode == 0, result.stderr
        detail = orjson.loads(result.stdout)
        assert detail["id"] == "s1" and detail["path"] == str(tmp_path / "s1")
        assert [(t["n"], t["state"]) for t in detail["trials"]] == [
            (1, "completed"),
            (2, "torn"),
            (3, "in_flight"),
        ]
        assert detail["trials"][0]["record"] == {"failed": False}
        assert detail["trials"][1]["error"].startswith("trial.json: invalid JSON")
        assert [a["n"] for a in detail["service"]] == list(range(1, 11))
        for item in detail["trials"] + detail["service"]:
            assert set(item) == {"n", "state", "record", "error"}


def test_inspect_raw_workspace_without_manifest(tmp_path: Path) -> None:
    (tmp_path / "trials" / "1").mkdir(parents=True)
    result = run("inspect", str(tmp_path), "--json")
    assert result.returncode == 0, result.stderr
    detail = orjson.loads(result.stdout)
    assert detail["id"] is None
    assert detail["trials"] == [{"n": 1, "state": "in_flight", "record": None, "error": None}]


def test_inspect_tables_render(tmp_path: Path) -> None:
    _populated(tmp_path)
    listing = run("inspect", "--store", str(tmp_path))
    assert listing.returncode == 0 and b"s1" in listing.stdout and b"s2" in listing.stdout
    detail = run("inspect", "s1", "--store", str(tmp_path))
    assert detail.returncode == 0 and b"torn" in detail.stdout and b"notes" in detail.stdout


def test_inspect_unknown_target_exits_1(tmp_path: Path) -> None:
    result = run("inspect", "ghost", "--store", str(tmp_path))
    assert result.returncode == 1 and b"no session 'ghost'" in result.stderr

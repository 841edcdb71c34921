"""A standard stream closed before `sessionstore` starts (`>&-`, `2>&-`, `<&-`).

Python makes such a stream None. Output and input then fail as on the closed
descriptor: one `Error: stdout: Bad file descriptor` line, exit 1, never a
traceback; diagnostics with nowhere to go are dropped, so a pass that worked
exits 0; and each closed slot holds /dev/null, so no file the process opens
takes descriptor 0, 1 or 2. Each case is a real process whose descriptors are
closed after the pipes are set up (`preexec_fn`).
"""

from __future__ import annotations

import os
import signal
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest
from cli_runner import SESSIONSTORE, TIMEOUT, reap, run, wait_for

BAD_FD = "Error: {}: Bad file descriptor\n"


def closing(*fds: int) -> Callable[[], None]:
    def close() -> None:
        for fd in fds:
            os.close(fd)

    return close


@pytest.fixture
def src(tmp_path: Path) -> Path:
    tree = tmp_path / "src"
    (tree / "logs").mkdir(parents=True)
    (tree / "config.yaml").write_bytes(b"lr: 0.1\n")
    (tree / "logs" / "train.log").write_bytes(b"step 1\n" * 100)
    return tree


def same_tree(src: Path, dst: Path) -> bool:
    files = {p.relative_to(src): p.read_bytes() for p in src.rglob("*") if p.is_file()}
    return all((dst / rel).read_bytes() == data for rel, data in files.items())


@pytest.mark.parametrize("closed", [(2,), (0, 1, 2)], ids=["stderr", "all-three"])
def test_a_pass_that_worked_exits_0_with_its_diagnostics_closed(
    src: Path, tmp_path: Path, closed: tuple[int, ...]
) -> None:
    dst = tmp_path / "dst"
    for _ in range(2):  # the initial copy (it says what it copied), then a no-op
        done = run("mirror", src, dst, "--once", preexec_fn=closing(*closed))
        assert (done.returncode, done.stdout, done.stderr) == (0, "", "")
        assert same_tree(src, dst)
    quiet = run("mirror", src, dst, "--once", "-q", preexec_fn=closing(*closed))
    assert quiet.returncode == 0


def test_a_pass_that_failed_still_exits_1_with_stderr_closed(src: Path, tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_bytes(b"not a directory")
    done = run("mirror", src, blocker / "dst", "--once", preexec_fn=closing(2))
    assert (done.returncode, done.stdout) == (1, "")
    assert blocker.read_bytes() == b"not a directory"


@pytest.mark.parametrize(
    "args",
    [
        ["--version"],
        ["--help"],
        ["inspect", "--help"],
        ["inspect", "--json"],
        ["inspect"],
        ["inspect", "--store", "{empty}"],  # answered before click is imported
        ["mirror", "{src}", "{dst}", "--once", "--json"],
        ["mirror", "{src}", "{dst}", "--once", "-v"],
    ],
    ids=lambda args: " ".join(args),
)
def test_output_to_a_closed_stdout_is_one_error_line_and_exit_1(
    src: Path, tmp_path: Path, args: list[str]
) -> None:
    store = tmp_path / "store"
    assert run("new", "--store", store, "--name", "one", "--id", "s1").returncode == 0
    (tmp_path / "empty").mkdir()
    argv = [a.format(src=src, dst=tmp_path / "dst", empty=tmp_path / "empty") for a in args]
    done = run(*argv, env={**os.environ, "SESSIONSTORE_HOME": str(store)}, preexec_fn=closing(1))
    assert done.returncode == 1
    assert done.stderr.endswith(BAD_FD.format("stdout"))
    assert "Traceback" not in done.stderr


@pytest.mark.parametrize("option", ["--secrets-file", "--exclude-from"])
def test_a_file_on_a_closed_stdin_is_one_error_line_and_nothing_copied(
    src: Path, tmp_path: Path, option: str
) -> None:
    dst = tmp_path / "dst"
    done = run("mirror", src, dst, "--once", option, "-", preexec_fn=closing(0))
    assert (done.returncode, done.stdout, done.stderr) == (1, "", BAD_FD.format("stdin"))
    assert not dst.exists()


def test_each_closed_slot_holds_dev_null_while_the_daemon_runs(src: Path, tmp_path: Path) -> None:
    """No file the daemon opens (a temp, the cache, a watch) takes descriptor 0, 1 or 2."""
    dst = tmp_path / "dst"
    proc = subprocess.Popen(
        [*SESSIONSTORE, "mirror", os.fspath(src), os.fspath(dst), "--debounce", "0.1"],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        preexec_fn=closing(0, 1, 2),
    )
    try:
        wait_for(lambda: same_tree(src, dst) if (dst / "config.yaml").exists() else False, "a pass")
        (src / "logs" / "eval.log").write_bytes(b"more\n")  # a second pass, with a copy
        wait_for(lambda: (dst / "logs" / "eval.log").exists(), "the second pass")
        fds = [os.readlink(f"/proc/{proc.pid}/fd/{fd}") for fd in (0, 1, 2)]
        assert fds == [os.devnull] * 3
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=TIMEOUT) == 0
    finally:
        reap(proc)

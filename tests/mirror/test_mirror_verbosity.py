"""`-q`/`-v` for `mirror --once` and the daemon, and a SRC that is not a directory."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest
from cli_runner import environ, popen, run
from mirror_helpers import mirror_cli, settle, tree, write

from sessionstore.format.names import MIRROR_PID as PID_NAME

pytestmark = pytest.mark.timeout(120)


@pytest.fixture
def src(tmp_path: Path) -> Path:
    write(tmp_path / "src" / "a.txt", b"a")
    write(tmp_path / "src" / "trials" / "1" / "trial.json", b"{torn")
    (tmp_path / "src" / "link").symlink_to("/etc/hostname")
    settle()
    return tmp_path / "src"


def test_quiet_once_prints_nothing_on_success(src: Path, tmp_path: Path) -> None:
    proc = mirror_cli(src, tmp_path / "dst", "--once", "-q")
    assert (proc.returncode, proc.stdout, proc.stderr) == (0, "", "")
    assert tree(tmp_path / "dst") == {"a.txt": b"a"}


def test_quiet_once_prints_errors_alone(src: Path, tmp_path: Path) -> None:
    dst = tmp_path / "dst"
    dst.mkdir()
    (dst / "trials").symlink_to(tmp_path)  # an error for that subtree
    proc = mirror_cli(src, dst, "--once", "--quiet")
    assert proc.returncode == 1 and proc.stdout == ""
    assert proc.stderr == (
        "mirror: error: trials: a symlink is where a directory belongs; "
        "nothing is written through it\n"
    )


def test_items_on_an_ascii_stdout_are_escaped_not_a_crash(tmp_path: Path) -> None:
    """`-v` and `-n` with PYTHONIOENCODING=ascii: a name stdout cannot encode is written
    backslash-escaped (as on stderr), and the pass exits 0 (it stopped with a traceback)."""
    write(tmp_path / "src" / "café.txt", b"x")
    settle()
    for flags in (["--once", "-v"], ["-n"]):
        dst = tmp_path / f"dst{len(flags)}"
        proc = run("mirror", tmp_path / "src", dst, *flags, env=environ(PYTHONIOENCODING="ascii"))
        assert (proc.returncode, proc.stdout) == (0, "A ./\nA caf\\xe9.txt\n"), proc.stderr


def test_verbose_once_itemizes_on_stdout_and_counts_on_stderr(src: Path, tmp_path: Path) -> None:
    proc = mirror_cli(src, tmp_path / "dst", "--once", "-v")
    assert proc.returncode == 0
    assert proc.stdout.splitlines() == [
        "A ./",
        "A a.txt",
        "S link: symlink",
        "A trials/",  # trials/1/ holds only the held-back marker: not created yet
        "H trials/1/trial.json: not a JSON object: "
        "unexpected character, expected a string key at line 1 column 2",
    ]
    assert proc.stderr == (
        "mirror: 1 copied, 0 unchanged, 0 unstable, 1 held back, 1 skipped, 0 errors\n"
    )


def test_default_output_is_unchanged(src: Path, tmp_path: Path) -> None:
    proc = mirror_cli(src, tmp_path / "dst", "--once")
    assert proc.stdout == ""
    assert proc.stderr.splitlines() == [
        "mirror: 1 copied, 0 unchanged, 0 unstable, 1 held back, 1 skipped, 0 errors",
        "  held back: trials/1/trial.json: not a JSON object: "
        "unexpected character, expected a string key at line 1 column 2",
        "  skipped: link: symlink",
    ]


def test_json_replaces_itemized_lines(src: Path, tmp_path: Path) -> None:
    proc = mirror_cli(src, tmp_path / "dst", "--once", "-v", "--json")
    assert proc.stdout.startswith("{") and "\nA " not in proc.stdout


def test_quiet_and_verbose_together_is_usage_error(src: Path, tmp_path: Path) -> None:
    proc = mirror_cli(src, tmp_path / "dst", "--once", "-q", "-v")
    assert proc.returncode == 2
    assert proc.stderr.splitlines()[-1] == ("Error: -q/--quiet and -v/--verbose cannot be combined")
    assert not (tmp_path / "dst").exists()


def _fifo(p: Path) -> None:
    os.mkfifo(p)


def _socket(p: Path) -> None:
    sock = socket.socket(socket.AF_UNIX)
    sock.bind(str(p))
    sock.close()


@pytest.mark.parametrize(
    ("make", "problem"),
    [
        pytest.param(lambda p: p.write_bytes(b"x"), "is a regular file, not a directory",
                     id="file"),
        pytest.param(_fifo, "is a FIFO, not a directory", id="fifo"),
        pytest.param(_socket, "is a socket, not a directory", id="socket"),
        pytest.param(lambda p: p.symlink_to(p.parent / "nowhere"), "is a dangling symlink",
                     id="dangling"),
        pytest.param(lambda p: None, "does not exist", id="missing"),
    ],
)  # fmt: skip
@pytest.mark.parametrize("mode", [["--once"], ["-n"], ["--once", "-q"]])
def test_bad_source_exits_1_naming_it(
    tmp_path: Path, make: object, problem: str, mode: list[str]
) -> None:
    source = tmp_path / "weird\nsrc"
    make(source)  # type: ignore[operator]
    proc = mirror_cli(source, tmp_path / "dst", *mode)
    assert (proc.returncode, proc.stdout) == (1, "")
    assert proc.stderr == f"Error: source {tmp_path}/weird\\nsrc: {problem}\n"
    assert not (tmp_path / "dst").exists()


@pytest.mark.parametrize(
    "make", [pytest.param(_fifo, id="fifo"), pytest.param(lambda p: p.write_bytes(b""), id="file")]
)
def test_daemon_on_a_non_directory_exits_1_at_once(tmp_path: Path, make: object) -> None:
    make(tmp_path / "src")  # type: ignore[operator]
    proc = mirror_cli(tmp_path / "src", tmp_path / "dst", timeout=30)
    assert proc.returncode == 1 and "not a directory" in proc.stderr
    assert proc.stderr.count("\n") == 1 and not (tmp_path / "dst").exists()


def test_daemon_waits_for_the_target_of_a_dangling_source(tmp_path: Path) -> None:
    (tmp_path / "src").symlink_to(tmp_path / "later")
    write(tmp_path / "staged" / "a.txt", b"a")
    settle()

    def appear() -> None:
        (tmp_path / "staged").rename(tmp_path / "later")

    code, _, err = _daemon_output(tmp_path / "src", tmp_path / "dst", then=appear)
    assert code == 0, err
    assert tree(tmp_path / "dst") == {"a.txt": b"a"}


def _daemon_output(
    src: Path, dst: Path, *flags: str, then: Callable[[], None] | None = None
) -> tuple[int, str, str]:
    """Run the daemon until a pass copied `a.txt`, then stop it: (code, out, err).

    `then` runs once the daemon holds DST (its pid file is there).
    """
    proc = popen("mirror", src, dst, *flags, env=environ(NO_COLOR="1"), text=True)
    try:
        for _ in range(600):  # bounded: at most ~60 s
            if then is not None and (dst / PID_NAME).exists():
                then()
                then = None
            if (dst / "a.txt").exists():
                break
            try:
                proc.wait(timeout=0.1)
                break  # it exited by itself: the asserts below say why
            except subprocess.TimeoutExpired:
                continue
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    return proc.returncode, out, err


def test_daemon_quiet_prints_errors_only(src: Path, tmp_path: Path) -> None:
    dst = tmp_path / "dst"
    dst.mkdir()
    (dst / "trials").symlink_to(tmp_path)
    code, out, err = _daemon_output(src, dst, "-q")
    assert code == 1 and out == ""
    lines = err.splitlines()
    assert lines and all(
        line.endswith(" error trials: a symlink is where a directory belongs; nothing is "
                      "written through it") for line in lines
    )  # fmt: skip


def test_daemon_verbose_itemizes_changes_on_stdout(src: Path, tmp_path: Path) -> None:
    code, out, err = _daemon_output(src, tmp_path / "dst", "-v")
    assert code == 0, err
    # The daemon's lock made DST, so the pass did not.
    assert out.splitlines()[:2] == ["A a.txt", "A trials/"]
    assert "copied a.txt" not in err and "initial pass" in err

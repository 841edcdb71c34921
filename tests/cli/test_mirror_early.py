"""`mirror --once` run before click (`cli.early_mirror`): click's parameters, click's answers.

Two laws. Wherever `mirror_params` reads a command line, click's own parse of
it (the real group and command, up to the call of `cli.mirror_run.run`) gives
the same parameters: checked on generated command lines, hostile ones
included. And a real process through `main` (which may run early) and one
through the click group (which never does) print the same, exit the same and
leave the same destination.
"""

from __future__ import annotations

import fcntl
import os
import shutil
import signal
import subprocess
import sys
import termios
import time
from pathlib import Path
from typing import Any
from unittest import mock

import pytest
from cli_runner import TWO_PATHS, invoke
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from mirror_helpers import snapshot

from sessionstore.cli import mirror as mirror_command
from sessionstore.cli.early_mirror import mirror_params
from sessionstore.store.session import Store


@pytest.fixture(scope="module")
def paths(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """The paths the command lines name (`{src}`, `{file}`, ...), made once per module."""
    work = tmp_path_factory.mktemp("early")
    (work / "src" / "sub").mkdir(parents=True)
    (work / "secrets.txt").write_text("hunter2-hunter2\n")
    (work / "patterns").write_text("*.tmp\n")
    return {
        "src": str(work / "src"),
        "file": str(work / "secrets.txt"),
        "patterns": str(work / "patterns"),
        "dir": str(work / "src" / "sub"),
        "missing": str(work / "missing"),
    }


def _line(text: str, paths: dict[str, str]) -> list[str]:
    """`text`'s words with the `paths` put in."""
    return [word.format(**paths) for word in text.split()]


def click_params(args: list[str]) -> dict[str, Any] | None:
    """The parameters click passes to `mirror_run.run` for `sessionstore ARGS`; None when
    click refuses the line, prints help, or runs another command."""
    seen: list[dict[str, Any]] = []
    with mock.patch.object(mirror_command, "run", lambda **params: seen.append(params)):
        # --single-writer sets this variable: the invocation restores it.
        result = invoke(*args, env={"SESSIONSTORE_S3_SINGLE_WRITER": None})
    return seen[0] if result.exit_code == 0 and seen else None


# Values: mostly ones the early parser takes, else hostile ones (stdin, buckets, options).
_PLAIN = ["{src}", "{dir}", "{file}", "{patterns}", "{missing}", "out", "1a2b3c4d", "*.log", "a=b"]
_HOSTILE = ["-", "", "--once", "-q", "s3://bucket/prefix", "S3:x", "x://y", "é x", "HF_TOKEN"]
_VALUES = st.one_of(st.sampled_from(_PLAIN), st.sampled_from(_PLAIN), st.sampled_from(_HOSTILE))
_POSITIONALS = st.one_of(st.sampled_from(["{src}", "out", "1a2b3c4d", "{dir}"]), _VALUES)
_FLAGS = [
    "--once",
    "--allow-short-secrets",
    "--no-fsync",
    "--delete",
    "-n",
    "--dry-run",
    "-q",
    "--quiet",
    "-v",
    "--verbose",
    "--json",
]
_OTHERS = ["--single-writer", "-h", "--help", "--", "-qn", "--full-every", "--debounce"]
_OTHERS += ["--max-wait", "--color", "-x", "--store", "mirror"]
_VALUED = ["--secret", "--secret-env", "--secrets-file", "--exclude", "--exclude-from", "--store"]
_KINDS = ["flag"] * 4 + ["valued"] * 3 + ["equals"] * 2 + ["other", "stray"]


@st.composite
def command_lines(draw: st.DrawFn) -> list[str]:
    """`[GROUP OPTIONS] mirror` and two positionals among options: each option alone, with
    a value (`--opt VALUE` or `--opt=VALUE`), another option, or a stray token. Words name
    paths as `{src}` and the like (the `paths` fixture fills them in)."""
    tokens = [draw(_POSITIONALS), draw(_POSITIONALS)]
    if draw(st.integers(0, 5)):
        tokens.append(draw(st.sampled_from(["--once", "--once", "-n", "--dry-run"])))
    for _ in range(draw(st.integers(0, 4))):
        kind = draw(st.sampled_from(_KINDS))
        if kind == "flag":
            tokens.append(draw(st.sampled_from(_FLAGS)))
        elif kind == "valued":
            tokens += [draw(st.sampled_from(_VALUED)), draw(_VALUES)]
        elif kind == "equals":
            option = draw(st.sampled_from(_VALUED * 3 + _FLAGS + _OTHERS))
            tokens.append(f"{option}={draw(_VALUES)}")
        else:
            tokens.append(draw(st.sampled_from(_OTHERS) if kind == "other" else _VALUES))
    order = draw(st.permutations(range(len(tokens))))
    value = draw(_VALUES)
    group = draw(
        st.sampled_from([[], [], ["--store", value], [f"--store={value}"], ["--color", "never"]])
    )
    name = draw(st.sampled_from(["mirror"] * 5 + ["inspect", "--store"]))
    return [*group, name, *(tokens[i] for i in order)]


@settings(max_examples=400, suppress_health_check=[HealthCheck.too_slow])
@given(command_lines(), st.sampled_from(["", "/tmp/home-store", "s3://bucket/home"]))
def test_wherever_the_early_parser_reads_a_line_click_reads_the_same(
    paths: dict[str, str], words: list[str], home: str
) -> None:
    args = [word.format(**paths) for word in words]
    with mock.patch.dict(os.environ, {"SESSIONSTORE_HOME": home} if home else {}, clear=False):
        if not home:
            os.environ.pop("SESSIONSTORE_HOME", None)
        early = mirror_params(args)
        if early is not None:
            assert click_params(args) == early, args


@pytest.mark.parametrize(
    "line",
    [
        "mirror {src} out --once",
        "mirror {src} out --once -q",
        "mirror --once {src} out --no-fsync --delete",
        "mirror {src} out -n -v",
        "mirror {src} out --once --json --secret-env HF_TOKEN",
        "mirror {src} out --once --secrets-file {file} --exclude *.log --exclude=*.tmp",
        "mirror {src} out --once --exclude-from {patterns} --allow-short-secrets",
        "--store {dir} mirror {src} 1a2b3c4d --once",
        "mirror {src} 1a2b3c4d --once --store={dir}",
    ],
)
def test_the_spellings_a_harness_uses_are_read_early(paths: dict[str, str], line: str) -> None:
    args = _line(line, paths)
    early = mirror_params(args)
    assert early is not None
    assert click_params(args) == early


@pytest.mark.parametrize(
    "line",
    [
        "mirror {src} out",  # the daemon
        "mirror {src} out --once --full-every 5",
        "mirror {src} out --once -q -v",  # click's usage error
        "mirror {src} out --once --help",
        "mirror {src} out --once -qn",
        "mirror {src} out --once --secrets-file -",  # standard input
        "mirror {src} out --once --exclude-from=-",
        "mirror {src} out --once --secrets-file {dir}",  # click: is a directory
        "mirror {src} s3://bucket/prefix/1a2b3c4d --once",
        "mirror {src} 1a2b3c4d --once --store s3://bucket/prefix",
        "--store s3://bucket/x mirror {src} out --once --store {dir}",  # click checks both
        "--color never mirror {src} out --once",
        "mirror {src} out extra --once",
        "mirror {src} --once",
        "mirror {src} out --once --exclude",  # no value
        "mirror {src} out --once --exclude --delete",  # a value click may read otherwise
        "mirror {src} out --once -- -x",
        "mirror {src} out --once --single-writer",
    ],
)
def test_anything_else_is_left_to_click(paths: dict[str, str], line: str) -> None:
    assert mirror_params(_line(line, paths)) is None


def test_a_completion_request_is_left_to_click(
    paths: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("_SESSIONSTORE_COMPLETE", "bash_complete")
    assert mirror_params(_line("mirror {src} out --once", paths)) is None


def _run(
    args: list[str], cwd: Path, marker: Path, env: dict[str, str], stdout: Any = subprocess.PIPE
) -> tuple[int, bytes, bytes, str]:
    done = subprocess.run(
        [sys.executable, "-c", TWO_PATHS, str(marker), *args],
        stdout=stdout,
        stderr=subprocess.PIPE,
        env=env,
        cwd=cwd,
        timeout=60,
        check=False,
    )
    return done.returncode, done.stdout or b"", _steady(done.stderr), marker.read_text()


def _steady(text: bytes) -> bytes:
    """`text` without what differs from run to run (a pass's duration in its JSON)."""
    lines = [line for line in text.splitlines(keepends=True) if b'"duration"' not in line]
    return b"".join(lines)


def both(tmp_path: Path, line: str, env: dict[str, str] | None = None) -> tuple[Any, str]:
    """Run `sessionstore LINE` through `main` and through click, each into its own copy of
    the destinations (`{dst}`, `{store}`), from the same source `{src}`; assert that both
    exit, print and leave the same; return that outcome and the path `main` took."""
    src = tmp_path / "src"
    environ = {k: v for k, v in os.environ.items() if k != "SESSIONSTORE_HOME"}
    environ.update(env or {})
    template = tmp_path / "store-template"
    if not template.exists():
        Store(template).create(id="1a2b3c4d", pid=None)
    results = []
    for way in ("main", "click"):
        work = tmp_path / way
        if not work.exists():
            shutil.copytree(template, work / "store")
        args = line.format(src=src, dst=work / "dst", store=work / "store").split()
        code, out, err, path = _run(args, work, tmp_path / f"marker-{way}", environ)
        shown = (code, _steady(out).replace(bytes(work), b"W"), err.replace(bytes(work), b"W"))
        results.append((shown, _mirrored(work), path))
    (fast, fast_trees, path), (slow, slow_trees, click_path) = results
    assert click_path == "click"
    assert fast == slow
    assert fast_trees == slow_trees
    return fast, path


def _mirrored(work: Path) -> dict[str, Any]:
    """What the passes left under `work`, but the mirror's own root files (its cache holds
    inode numbers and times)."""
    trees = {name: snapshot(work / name) for name in ("dst", "store") if (work / name).exists()}
    return {
        name: {path: entry for path, entry in tree.items() if ".sessionstore-" not in path}
        for name, tree in trees.items()
    }


def _workspace(root: Path) -> Path:
    (root / "src" / "trials" / "1").mkdir(parents=True)
    (root / "src" / "trials" / "1" / "log.txt").write_text("token hunter2-secret-1 used\n")
    (root / "src" / "trials" / "1" / "trial.json").write_text('{"ok": true}')
    (root / "src" / "notes.tmp").write_text("scratch")
    (root / "patterns").write_text("*.tmp\n")
    return root / "src"


@pytest.mark.parametrize(
    "line",
    [
        "mirror {src} {dst} --once",
        "mirror {src} {dst} --once -q",
        "mirror {src} {dst} --once -v --no-fsync",
        "mirror {src} {dst} -n",
        "mirror {src} {dst} --once --json --secret-env TOKEN",
        "mirror --once {src} {dst} --exclude *.tmp --secret hunter2-secret-1",
        "mirror {src} 1a2b3c4d --once --store {store} --delete",
        "--store {store} mirror {src} 1a2b3c4d --once -v",
    ],
)
def test_a_pass_run_early_prints_and_leaves_what_clicks_does(tmp_path: Path, line: str) -> None:
    _workspace(tmp_path)
    env = {"TOKEN": "hunter2-secret-1"}
    (code, out, err), path = both(tmp_path, line, env)
    assert (code, path) == (0, "early")
    assert b"hunter2-secret-1" not in out + err
    (code, out, err), path = both(tmp_path, line, env)  # again: a no-op pass over the same
    assert (code, path) == (0, "early")


@pytest.mark.parametrize(
    ("line", "code", "path"),
    [
        ("mirror {src}/missing {dst} --once", 1, "early+said"),  # a library error: one line
        ("mirror {src}/trials/1/log.txt {dst} --once", 1, "early+said"),
        ("mirror {src} 9f9f9f9f --once --store {store}", 2, "click"),  # a mistyped id
        ("mirror {src} {dst} --once --exclude !", 2, "click"),  # a bad pattern
        ("mirror {src} {dst} --once -q -v", 2, "click"),
        ("mirror {src} {dst} --once --secret short", 1, "early+said"),
    ],
)
def test_a_failing_pass_fails_as_clicks_does(
    tmp_path: Path, line: str, code: int, path: str
) -> None:
    _workspace(tmp_path)
    outcome, taken = both(tmp_path, line)
    assert (outcome[0], taken) == (code, path)
    assert outcome[2].count(b"\n") >= 1 and b"Traceback" not in outcome[2]


def test_a_closed_stdout_exits_1_in_silence_either_way(tmp_path: Path) -> None:
    """`mirror -v ... | head -0`: both ways exit 1 and print nothing more (no traceback)."""
    _workspace(tmp_path)
    outcomes = []
    for way in ("main", "click"):
        read, write = os.pipe()
        os.close(read)  # the reader is gone before the pass prints
        try:
            args = ["mirror", str(tmp_path / "src"), str(tmp_path / way), "--once", "-v"]
            outcomes.append(_run(args, tmp_path, tmp_path / f"marker-{way}", {**os.environ}, write))
        finally:
            os.close(write)
    (code, _, err, path), (click_code, _, click_err, _) = outcomes
    assert (code, err, path) == (click_code, click_err, "early") == (1, b"", "early")


def test_ctrl_c_during_an_early_pass_exits_130_as_clicks_does(tmp_path: Path) -> None:
    """SIGINT while the pass is stuck writing its items to a full pipe: 130 either way,
    no traceback, and the pass's files are in place."""
    src = tmp_path / "src"
    src.mkdir()
    for i in range(1000):  # ~100 KiB of item lines: more than a pipe holds
        (src / f"{i:04d}-{'x' * 96}").write_bytes(b"x")
    outcomes = []
    for way in ("main", "click"):
        args = ["mirror", str(src), str(tmp_path / way), "--once", "-v"]
        launch = [sys.executable, "-c", TWO_PATHS, str(tmp_path / f"marker-{way}"), *args]
        proc = subprocess.Popen(launch, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        try:
            for _ in range(600):  # bounded: at most ~60 s until the pipe is full
                waiting = bytearray(4)
                fcntl.ioctl(proc.stdout.fileno(), termios.FIONREAD, waiting)  # type: ignore[union-attr]
                if int.from_bytes(waiting, sys.byteorder) >= 60_000:
                    break
                time.sleep(0.1)
            proc.send_signal(signal.SIGINT)
            _, err = proc.communicate(timeout=60)
        finally:
            proc.kill()
            proc.wait()
        outcomes.append((proc.returncode, err, len(os.listdir(tmp_path / way))))
        assert (tmp_path / f"marker-{way}").read_text() == ("early" if way == "main" else "click")
    assert outcomes[0] == outcomes[1] == (130, b"", 1001)  # the files and the mirror's cache


def test_an_error_is_said_as_click_says_it_on_an_ascii_stderr(tmp_path: Path) -> None:
    """click writes a misconfigured (ASCII) stderr as UTF-8: so does the early path."""
    _workspace(tmp_path)
    (code, _, err), path = both(tmp_path, "mirror {src}/café {dst} --once", {"LC_ALL": "C"})
    assert (code, path) == (1, "early+said")
    (code, _, err), path = both(
        tmp_path, "mirror {src}/café {dst} --once", {"PYTHONIOENCODING": "ascii"}
    )
    assert (code, path) == (1, "early+said") and "café".encode() in err


def test_an_error_with_stderr_closed_is_dropped_on_both_paths(tmp_path: Path) -> None:
    """`2>&-`: the error has nowhere to go and is dropped (`cli.main`: stdout is for
    data, so click's own fallback there is never reached); exit 1 either way. `--`
    sends the same pass through click."""
    _workspace(tmp_path)
    outcomes = []
    for way, split in (("early", []), ("click", ["--"])):
        marker = tmp_path / f"marker-{way}-by-main"  # not `click`: through main
        args = [
            "mirror",
            "--once",
            "--json",
            *split,
            str(tmp_path / "missing"),
            str(tmp_path / way),
        ]
        done = subprocess.run(
            ["sh", "-c", 'exec "$@" 2>&-', "sh", sys.executable, "-c", TWO_PATHS, marker, *args],
            capture_output=True,
            timeout=60,
            check=False,
        )
        outcomes.append((done.returncode, done.stdout, marker.read_text()))
        assert not (tmp_path / way).exists()
    assert outcomes == [(1, b"", "early+said"), (1, b"", "click")]


# Sends SIGINT to itself as the mirror command's module is first imported, then runs
# ARGS as TWO_PATHS does.
_INTERRUPT_AT_IMPORT = """
import os, signal, sys
class Trap:
    def find_spec(self, name, path=None, target=None):
        if name == "sessionstore.cli.mirror_run":
            os.kill(os.getpid(), signal.SIGINT)
        return None
sys.meta_path.insert(0, Trap())
"""


def test_ctrl_c_while_the_early_path_reads_its_line_exits_130(tmp_path: Path) -> None:
    """SIGINT during the first import of the command's module: 130 and no traceback,
    as click's group answers one during the same import (in its invoke)."""
    src = _workspace(tmp_path)
    outcomes = []
    for way in ("main", "click"):
        marker = tmp_path / f"marker-{way}"
        args = ["mirror", str(src), str(tmp_path / way), "--once"]
        done = subprocess.run(
            [sys.executable, "-c", _INTERRUPT_AT_IMPORT + TWO_PATHS, marker, *args],
            capture_output=True,
            timeout=60,
            check=False,
        )
        outcomes.append((done.returncode, done.stdout, done.stderr))
        assert not (tmp_path / way).exists()  # interrupted before the pass began
    assert outcomes[0] == outcomes[1] == (130, b"", b"")

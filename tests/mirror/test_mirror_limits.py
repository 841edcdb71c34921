"""No recursion, bounded memory, no hang, names as data: a real deep tree, a real huge
marker, real fifos, sockets and devices, and names that try to forge lines."""

from __future__ import annotations

import os
import socket
import stat
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import orjson
import pytest
from mirror_helpers import (
    DaemonProcess,
    depth_of,
    make_deep,
    mirror_cli,
    remove_deep,
    settle,
    tree,
    write,
)

from sessionstore.mirror.frame import MAX_DEPTH
from sessionstore.mirror.mirror import Mirror

pytestmark = pytest.mark.timeout(180)

MIB = 1024 * 1024
LEVELS = 10_000
TOO_DEEP = f"deeper than {MAX_DEPTH} levels; not mirrored"


# Runs the CLI in-process and reports its own peak RSS. VmHWM belongs to the
# process image after exec; wait4's ru_maxrss would also count the moments
# between fork and exec, when the child is a copy of this (large) test process.
RSS_PROBE = """
import runpy, sys
sys.argv = ["sessionstore", *sys.argv[1:]]
try:
    runpy.run_module("sessionstore", run_name="__main__")
    code = 0
except SystemExit as exc:
    code = exc.code
peak = next(line for line in open("/proc/self/status") if line.startswith("VmHWM:"))
print("PEAK", peak.split()[1], file=sys.stderr)
sys.exit(code)
"""


def max_rss_mib(*args: str | Path, timeout: float = 120) -> tuple[int, float]:
    """Run `sessionstore ARGS`; (exit status, its peak RSS in MiB)."""
    proc = subprocess.run(
        [sys.executable, "-c", RSS_PROBE, *map(str, args)],
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )
    peak = proc.stderr.splitlines()[-1]
    assert peak.startswith("PEAK "), proc.stderr
    return proc.returncode, int(peak.split()[1]) / 1024


@pytest.fixture
def runaway(src: Path, dst: Path) -> Iterator[Path]:
    """A 10,000-level `src/runaway/d/d/...`, removed afterwards (from dst too)."""
    make_deep(src / "runaway", LEVELS)
    yield src / "runaway"
    remove_deep(src / "runaway")
    if (dst / "runaway").exists():
        remove_deep(dst / "runaway")


def test_a_10000_level_tree_is_reported_in_one_line_and_the_rest_mirrored(
    src: Path, dst: Path, runaway: Path
) -> None:
    write(src / "trials" / "1" / "log.txt", b"ok")
    write(src / "trials" / "1" / "trial.json", b"{}")
    settle()
    proc = mirror_cli(src, dst, "--once", "--json", timeout=120)
    assert proc.returncode == 1
    report = orjson.loads(proc.stdout)
    assert [e["error"] for e in report["errors"]] == [TOO_DEEP]
    assert report["errors"][0]["path"] == "runaway/" + "/".join(["d"] * MAX_DEPTH)
    assert [line for line in proc.stderr.splitlines() if line.startswith("  error:")] == [
        f"  error: {report['errors'][0]['path']}: {TOO_DEEP}"
    ]
    assert tree(dst / "trials") == {"1/log.txt": b"ok", "1/trial.json": b"{}"}
    assert depth_of(dst / "runaway") == MAX_DEPTH - 1


def test_the_daemon_keeps_running_beside_a_10000_level_tree(
    src: Path, dst: Path, runaway: Path
) -> None:
    settle()
    daemon = DaemonProcess(src, dst, "--json", "--full-every", "0.2")
    try:
        first = daemon.next()  # the initial pass: the tree is reported
        assert [e["error"] for e in first["errors"]] == [TOO_DEEP]
        write(src / "trials" / "1" / "log.txt", b"written after the daemon started")
        write(src / "trials" / "1" / "trial.json", b"{}")
        for _ in range(200):  # each line is one pass; a full pass comes every 0.2 s
            if "trials/1/trial.json" in daemon.next()["copied"]:
                break
        else:
            raise AssertionError("the trial written after the start was never mirrored")
        assert daemon.running(), "the daemon exited"
    finally:
        code, err = daemon.stop()
    assert code == 1  # the deep tree is an error in the final pass too
    assert (dst / "trials" / "1" / "log.txt").read_bytes() == b"written after the daemon started"
    assert "Traceback" not in err
    assert "cannot watch" in err  # watchdog cannot walk it: polling, said once
    assert err.count("cannot watch") == 1


def test_a_subset_pass_below_the_depth_bound_reports_it_as_a_full_pass_does(
    src: Path, dst: Path
) -> None:
    # The daemon's event for a directory 300 levels down: a full pass does not go past
    # MAX_DEPTH, so neither may a pass that starts at that directory.
    levels = MAX_DEPTH + 44
    make_deep(src / "runaway", levels)
    try:
        mirror = Mirror(src, dst, durable=False)
        full = mirror.run_once()
        too_deep = "runaway/" + "/".join(["d"] * MAX_DEPTH)
        assert [(e["path"], e["error"]) for e in full.errors] == [(too_deep, TOO_DEEP)]
        report = mirror.run_dirs(["runaway/" + "/".join(["d"] * levels)])
        assert [(e["path"], e["error"]) for e in report.errors] == [(too_deep, TOO_DEEP)]
        assert report.copied == []
        assert depth_of(dst / "runaway") == MAX_DEPTH - 1
    finally:
        remove_deep(src / "runaway")
        remove_deep(dst / "runaway")


SUBSET_AT_64_FDS = """
import resource, sys
import orjson
from sessionstore.mirror.mirror import Mirror
from sessionstore.redact.redactor import Redactor
redactor = None
if sys.argv[4] == "redacted":  # names are then checked for collisions on the way down
    redactor = Redactor()
    redactor.add("hf_TopSecretValue123")
resource.setrlimit(resource.RLIMIT_NOFILE, (64, 64))
report = Mirror(sys.argv[1], sys.argv[2], redactor, durable=False).run_dirs([sys.argv[3]])
print(orjson.dumps(report.errors).decode())
"""


@pytest.mark.parametrize("names", ["plain", "redacted"])
def test_a_subset_pass_that_runs_out_of_descriptors_says_so(
    src: Path, dst: Path, names: str
) -> None:
    # 100 levels under `ulimit -n 64`: the way down to the event's directory fails with
    # EMFILE, which is not the directory gone; a pass that said nothing was ok, and the
    # change unmirrored until the next full pass.
    make_deep(src / "chain", 100)
    try:
        deep = "chain/" + "/".join(["d"] * 100)
        proc = subprocess.run(
            [sys.executable, "-c", SUBSET_AT_64_FDS, src, dst, deep, names],
            capture_output=True,
            text=True,
            timeout=60,
            check=True,
        )
        errors = orjson.loads(proc.stdout)
        assert errors, "the pass was ok without mirroring the directory"
        assert all("Too many open files" in e["error"] for e in errors)
    finally:
        remove_deep(src / "chain")
        if (dst / "chain").exists():
            remove_deep(dst / "chain")


@pytest.mark.parametrize("sealed", [False, True], ids=["new", "sealed"])
def test_a_300_mb_marker_is_torn_for_the_mirror_and_never_read_whole(
    src: Path, dst: Path, sealed: bool
) -> None:
    marker = src / "trials" / "1" / "trial.json"
    write(src / "trials" / "1" / "log.txt", b"ok")
    if sealed:  # committed small, then the agent blows it up
        write(marker, b"{}")
        settle()
        assert mirror_cli(src, dst, "--once", "--no-fsync").returncode == 0
    write(marker, b"{")
    os.truncate(marker, 300 * MIB)  # sparse: costs no disk
    settle()
    code, rss = max_rss_mib("mirror", src, dst, "--once")
    assert code == 0
    assert rss < 64, f"peak RSS {rss:.0f} MiB: the marker was held in memory"
    proc = mirror_cli(src, dst, "--once", "--json")
    report = orjson.loads(proc.stdout)
    if sealed:
        assert [d["files"] for d in report["diverged"]] == [["trials/1/trial.json"]]
        assert (dst / "trials" / "1" / "trial.json").read_bytes() == b"{}"
    else:
        assert report["held_back"] == [
            {"path": "trials/1/trial.json", "reason": "torn: larger than the 64 MiB marker limit"}
        ]
        assert not (dst / "trials" / "1" / "trial.json").exists()


def test_fifos_sockets_and_devices_are_skipped_with_their_kind_and_never_opened(
    src: Path, dst: Path
) -> None:
    write(src / "trials" / "1" / "log.txt", b"ok")
    os.mkfifo(src / "trials" / "1" / "trial.json")  # a fifo where the marker belongs
    os.mkfifo(src / "pipe")
    server = socket.socket(socket.AF_UNIX)
    server.bind(str(src / "agent.sock"))
    kinds = {"trials/1/trial.json": "fifo", "pipe": "fifo", "agent.sock": "socket"}
    try:
        os.mknod(src / "null", stat.S_IFCHR | 0o600, os.makedev(1, 3))
        kinds["null"] = "device"
    except PermissionError:
        pass  # not root: the fifo and the socket still cover the class
    settle()
    try:
        proc = mirror_cli(src, dst, "--once", "--json", timeout=30)
    finally:
        server.close()
    assert proc.returncode == 0, proc.stderr
    skipped = {i["path"]: i["reason"] for i in orjson.loads(proc.stdout)["skipped"]}
    assert skipped == {path: f"special file ({kind})" for path, kind in kinds.items()}
    assert tree(dst) == {"trials/1/log.txt": b"ok"}


FORGERS = [
    "evil\nmirror: 999 copied, 0 errors",
    "title\x1b]0;pwned\x07",
    "cr\rerror: forged",
    "bidi\u202etxt.exe",
]


def test_names_are_escaped_in_the_summary_one_problem_one_line(src: Path, dst: Path) -> None:
    src.mkdir()
    for name in FORGERS:
        (src / name).symlink_to("/etc/hostname")  # each is one "skipped" problem
    settle()
    proc = mirror_cli(src, dst, "--once")
    lines = proc.stderr.splitlines()
    assert len(lines) == 1 + len(FORGERS)
    assert not any(c in proc.stderr for c in "\x1b\x07\r\u202e")
    assert sorted(lines[1:]) == sorted(
        [
            "  skipped: evil\\nmirror: 999 copied, 0 errors: symlink",
            "  skipped: title\\x1b]0;pwned\\x07: symlink",
            "  skipped: cr\\rerror: forged: symlink",
            "  skipped: bidi\\u202etxt.exe: symlink",
        ]
    )


def test_names_are_escaped_in_the_daemon_log(src: Path, dst: Path) -> None:
    src.mkdir()
    for name in FORGERS:
        (src / name).symlink_to("/etc/hostname")
    write(src / "d\x1b[31m" / "f.txt", b"colored dir")
    write(src / ("long" * 50) / "f.txt", b"a path wider than the terminal")
    settle()
    # COLUMNS: rich must not wrap a long path.
    daemon = DaemonProcess(src, dst, "--json", env={**os.environ, "COLUMNS": "40"})
    try:
        daemon.next()  # the initial pass ran
    finally:
        code, err = daemon.stop()
    assert code == 0, err
    assert not any(c in err for c in "\x1b\x07\r\u202e")
    lines = err.splitlines()
    assert all(line[:2].isdigit() and line[2] == ":" for line in lines), err  # stamped, unwrapped
    assert any(line.endswith("copied d\\x1b[31m/f.txt") for line in lines)
    assert any(line.endswith("copied " + "long" * 50 + "/f.txt") for line in lines)
    skipped = [line.split(" skipped ", 1)[1] for line in lines if " skipped " in line]
    assert "evil\\nmirror: 999 copied, 0 errors (symlink)" in skipped

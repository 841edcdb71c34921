"""The daemon recovers when a watchdog thread dies: a real daemon process, a real deep tree.

A directory chain deeper than the interpreter's recursion limit, moved into the
source whole, kills watchdog's inotify reader thread (it walks the chain to
watch it, recursively before Python 3.12); the observer and emitter threads
live on and report nothing ever again. And a daemon that cannot watch at all
(a tree too deep to walk, no inotify instance left) polls: it never exits for it,
and watches again once it can.
"""

from __future__ import annotations

import logging
import os
import re
import shutil
import sys
from pathlib import Path

import cli_runner
import pytest
from cli_runner import SESSIONSTORE
from mirror_helpers import (
    DaemonProcess,
    in_namespace,
    lowered_sysctl,
    make_deep,
    remove_deep,
    write,
)

from sessionstore import Mirror
from sessionstore.mirror.daemon import WatchConfig

pytestmark = pytest.mark.timeout(120)

TOO_DEEP = sys.getrecursionlimit() + 100  # the daemon runs this interpreter, with its limit
# A hang guard on each pass, far below the periodic full pass (an hour here):
# the dead thread is noticed within a second, and polling passes come every 2 s.
GUARD = 20.0


def _stop_and_remove_chains(daemon: DaemonProcess, src: Path, dst: Path) -> tuple[int, str]:
    """Stop the daemon, then remove the too-deep chains (rmtree would recurse too far)."""
    code, err = daemon.stop()
    for root in (src / "chain", dst / "chain"):
        if root.exists():
            remove_deep(root)
    return code, err


def test_files_written_after_the_inotify_reader_died_are_mirrored_at_once(
    src: Path, dst: Path, tmp_path: Path
) -> None:
    src.mkdir()
    stage = tmp_path / "stage"
    make_deep(stage, TOO_DEEP)
    daemon = DaemonProcess(src, dst, "--json", "--full-every", "3600")
    try:
        assert daemon.next()["pass"] == "initial"
        os.rename(stage, src / "chain")  # the reader's walk of it fails: the reader is gone
        write(src / "late.txt", b"written after the reader died")  # queued after the move
        for _ in range(10):  # a full pass at once, then one every 2 s (polling)
            report = daemon.next(timeout=GUARD)
            if "late.txt" in report["copied"]:
                break
        else:
            raise AssertionError("late.txt was never mirrored")
        assert report["pass"] == "full"
        assert daemon.running(), "the daemon exited"
    finally:
        code, err = _stop_and_remove_chains(daemon, src, dst)
    assert (dst / "late.txt").read_bytes() == b"written after the reader died"
    assert code == 1, err  # the chain is deeper than the mirror goes: an error, every pass
    lines = err.splitlines()
    stopped = [line for line in lines if line.startswith("mirror: a watcher thread stopped")]
    assert stopped == ["mirror: a watcher thread stopped: RecursionError"], err
    # Restarted, the observer cannot walk the chain either: polling from then on, said once.
    assert sum("cannot watch" in line for line in lines) == 1, err
    said = next(line for line in lines if "cannot watch" in line)
    assert re.fullmatch(
        r"\d\d:\d\d:\d\d cannot watch the source \(the tree is too deep\); polling only", said
    )
    assert str(src) not in err  # a source path may hold a secret: never printed
    assert "Traceback" not in err


def test_a_quiet_daemon_whose_inotify_reader_died_prints_its_errors_alone(
    src: Path, dst: Path, tmp_path: Path
) -> None:
    src.mkdir()
    stage = tmp_path / "stage"
    make_deep(stage, TOO_DEEP)
    daemon = DaemonProcess(src, dst, "-q", "--json", "--full-every", "3600")
    try:
        assert daemon.next()["pass"] == "initial"  # run once the watcher started
        os.rename(stage, src / "chain")  # the reader's walk of it fails: the reader is gone
        write(src / "late.txt", b"late")
        cli_runner.wait_for(lambda: (dst / "late.txt").exists(), "a pass after the death")
    finally:
        code, err = _stop_and_remove_chains(daemon, src, dst)
    assert code == 1, err  # the chain is deeper than the mirror goes: an error
    # -q: errors only, each a stamped line; a watcher restarted is no error (it said
    # `mirror: a watcher thread stopped: RecursionError`).
    assert err and all(" error chain/" in line for line in err.splitlines()), err


def test_a_quiet_daemon_that_cannot_watch_prints_its_errors_alone(src: Path, dst: Path) -> None:
    write(src / "a.txt", b"a")
    make_deep(src / "chain", TOO_DEEP)  # watchdog cannot walk it: polling from the start
    daemon = DaemonProcess(src, dst, "-q", "--full-every", "3600")
    try:
        cli_runner.wait_for(lambda: (dst / "a.txt").exists(), "the initial pass")
    finally:
        code, err = _stop_and_remove_chains(daemon, src, dst)
    assert code == 1, err  # the chain is deeper than the mirror goes: an error
    lines = err.splitlines()
    assert lines, "the error was not said"
    # -q: errors only, each a stamped line; being unable to watch is no error.
    assert all(" error chain/" in line for line in lines), err


def test_a_daemon_with_no_inotify_instance_left_polls_then_watches_again(
    src: Path, dst: Path
) -> None:
    write(src / "a.txt", b"a")
    with lowered_sysctl("fs.inotify.max_user_instances", "0"):  # none for a new watcher
        daemon = DaemonProcess(src, dst, "--json", "--full-every", "3600")
        try:
            # The initial pass runs only after the observer was tried: it failed by then.
            report = daemon.next(timeout=GUARD)
        except AssertionError:
            code, err = daemon.stop()
            raise AssertionError(f"the daemon exited {code}: {err}") from None
    try:
        assert report["copied"] == ["a.txt"]
        write(src / "b.txt", b"b")  # no event: a polling pass, one every 2 s
        for _ in range(10):
            if "b.txt" in daemon.next(timeout=GUARD)["copied"]:
                break
        else:
            raise AssertionError("b.txt was never mirrored")
        # The limit is back (the sysctl restored): the watcher is tried again and starts,
        # and a change is an event again, no longer a polling pass's find.
        for n in range(20):  # tried again after 2 s, then 4, 8...: a few polling passes
            write(src / f"c{n}.txt", b"c")
            if daemon.next(timeout=GUARD)["pass"] == "events":
                break
        else:
            raise AssertionError("the daemon never watched again")
    finally:
        code, err = daemon.stop()
    assert code == 0, err
    # Stamped as every line of the daemon's (`12:34:56 initial pass: ...`).
    said = [line for line in err.splitlines() if "cannot watch" in line]
    assert len(said) == 1, err  # once, not on every try
    assert re.fullmatch(
        r"\d\d:\d\d:\d\d cannot watch the source \(EMFILE: Too many open files\); polling only",
        said[0],
    ), err
    assert re.search(r"^\d\d:\d\d:\d\d watching the source again$", err, re.MULTILINE), err
    assert "Traceback" not in err


def test_a_daemon_that_could_not_watch_watches_again_once_it_can(
    src: Path, dst: Path, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    make_deep(src / "chain", TOO_DEEP)  # watchdog cannot walk it: polling from the start
    kinds: list[str] = []
    config = WatchConfig(full_every=3600, unwatched_every=0.05)
    try:
        with (
            caplog.at_level(logging.INFO, logger="sessionstore.mirror.daemon"),
            Mirror(src, dst).running(config, lambda report, kind: kinds.append(kind)) as daemon,
        ):
            cli_runner.wait_for(lambda: daemon.passes > 0, "the initial pass")
            os.rename(src / "chain", tmp_path / "chain")  # now it can: tried again, it starts
            cli_runner.wait_for(lambda: "watching the source again" in caplog.text, "a watch")
            write(src / "late.txt", b"late")
            cli_runner.wait_for(lambda: "events" in kinds, "a pass on an event")
    finally:
        for chain in (src / "chain", tmp_path / "chain", dst / "chain"):
            if chain.exists():
                remove_deep(chain)
    assert (dst / "late.txt").read_bytes() == b"late"
    assert caplog.text.count("cannot watch") == 1  # said once, not on every try


# Run as root of a user namespace of its own, whose inotify watch limit is its own too
# (`/proc/sys/user/max_inotify_watches`, gone with it): none left for the daemon's
# watcher, then room again once its first pass ran. Prints what the daemon did (JSON).
_NO_WATCH_LEFT = r"""
import json, os, signal, subprocess, sys
src, dst, ss = sys.argv[1], sys.argv[2], sys.argv[3:]
def limit(value):
    with open("/proc/sys/user/max_inotify_watches", "w") as f:
        f.write(value)
limit("0")
proc = subprocess.Popen(
    [*ss, "mirror", src, dst, "--json", "--full-every", "3600"],
    stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
)
kinds = [json.loads(proc.stdout.readline())["pass"]]
limit("100000")
for n in range(20):  # tried again after 2 s, then 4, 8...: a few polling passes
    with open(os.path.join(src, f"c{n}.txt"), "w") as f:
        f.write("c")
    kinds.append(json.loads(proc.stdout.readline())["pass"])
    if kinds[-1] == "events":
        break
proc.send_signal(signal.SIGTERM)
out, err = proc.communicate(timeout=60)
print(json.dumps({"kinds": kinds, "code": proc.returncode, "err": err}))
"""


@pytest.mark.skipif(shutil.which("unshare") is None, reason="needs unshare(1)")
def test_a_daemon_with_no_inotify_watch_left_says_so_then_watches_again(
    src: Path, dst: Path
) -> None:
    write(src / "a.txt", b"a")
    found = in_namespace("-r", _NO_WATCH_LEFT, str(src), str(dst), *SESSIONSTORE)
    err = found["err"]
    assert found["code"] == 0, err
    assert found["kinds"][0] == "initial" and found["kinds"][-1] == "events", found
    said = [line for line in err.splitlines() if "cannot watch" in line]
    # The watch limit, not "No space left on device", which sends one to look at the disk.
    limit = "ENOSPC: the inotify watch limit is reached, fs.inotify.max_user_watches"
    assert len(said) == 1, err
    assert re.fullmatch(
        rf"\d\d:\d\d:\d\d cannot watch the source \({limit}\); polling only", said[0]
    )
    assert "watching the source again" in err and "Traceback" not in err

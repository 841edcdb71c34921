"""The lifecycle commands on a full disk and on a read-only file system: one line naming
the file, exit 1, and the same commands converge once there is room again (a real full
or read-only tmpfs, in a private mount namespace: `unshare -rm`, gone with it)."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from cli_runner import SESSIONSTORE

# What every namespace script starts with: the mount point, the `sessionstore` command,
# a store on the mount, and `run`, which runs a command on that store ([code, out, err]).
_PROLOGUE = r"""
import json, os, subprocess, sys
mnt = sys.argv[1]
ss = sys.argv[2:]
store = os.path.join(mnt, "s")
def run(*args):
    done = subprocess.run([*ss, *args, "--store", store], capture_output=True, text=True)
    return [done.returncode, done.stdout, done.stderr]
"""

# Fills a 64 KiB tmpfs with a session whose trial holds a big file, then runs the
# commands that write (each as a real process), then gives room and runs them again.
_IN_NAMESPACE = r"""
subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", mnt], check=True)
out = {"made": [run("new", "--id", "abc"), run("begin", "abc", "--trial")]}
with open(os.path.join(store, "abc", "trials", "1", "blob"), "wb") as blob:
    try:
        blob.write(os.urandom(1 << 20))
        blob.flush()
    except OSError:
        pass  # the disk is full now: what the commands below meet
big = '{"note": "%s"}' % ("x" * 8192)
out["full"] = {
    "new": run("new", "--id", "def"),
    "complete": run("complete", "abc", "--trial", "1", "--marker", big),
    "finish": run("finish", "abc", "--report", big),
}
out["left"] = sorted(os.listdir(store)) + sorted(os.listdir(os.path.join(store, "abc")))
out["left"] += sorted(os.listdir(os.path.join(store, "abc", "trials", "1")))
# The type and source given: a user namespace's mount cannot look them up (no mtab entry).
subprocess.run(["mount", "-t", "tmpfs", "-o", "remount,size=16m", "tmpfs", mnt], check=True)
out["room"] = {
    "new": run("new", "--id", "def"),
    "complete": run("complete", "abc", "--trial", "1", "--marker", big),
    "finish": run("finish", "abc", "--report", big),
    "doctor": run("doctor", "abc"),
}
# An export into a read-only filesystem fails making its staging temp beside DEST.
ro = os.path.join(mnt, "ro")
os.mkdir(ro)
subprocess.run(["mount", "-t", "tmpfs", "-o", "ro,size=4k", "tmpfs", ro], check=True)
out["export"] = run("export", "abc", os.path.join(ro, "x"), "--trial", "1")
print(json.dumps(out))
"""


@pytest.mark.skipif(shutil.which("unshare") is None, reason="needs unshare(1)")
def test_a_full_disk_is_one_line_naming_the_file_and_a_rerun_converges(tmp_path: Path) -> None:
    out = _in_namespace(tmp_path, _IN_NAMESPACE)
    mnt = tmp_path / "mnt"
    store = mnt / "s"
    # Each fails on its own file, in one line: a write failing on its fd names no file
    # by itself (ENOSPC, EIO), so the path is the store's.
    where = {
        "new": f"{store}/def",
        "complete": f"{store}/abc/trials/1/trial.json",
        "finish": f"{store}/abc/report.json",
    }
    for command, (code, stdout, stderr) in out["full"].items():
        assert (code, stdout) == (1, ""), (command, stderr)
        assert stderr == f"Error: {where[command]}: No space left on device\n", command
    # Nothing torn, nothing half made, no temp left behind.
    assert out["left"] == ["abc", "constraints.json", "service", "session.json", "trials", "blob"]
    for command, (code, _, stderr) in out["room"].items():
        assert code == 0, (command, stderr)
    assert out["room"]["doctor"][2].endswith("healthy\n")
    # Not the staging temp (`.sstmp-...`), which the user never made: DEST.
    assert out["export"] == [1, "", f"Error: {mnt}/ro/x: Read-only file system\n"]


# A store on a tmpfs with a session `abc` (trial 1 begun) and a finished session `old`,
# then the tmpfs remounted read-only and the commands that write run against it.
_READ_ONLY = r"""
subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", mnt], check=True)
out = {"made": [run("new", "--id", "abc"), run("begin", "abc", "--trial")]}
out["made"] += [run("new", "--id", "old"), run("finish", "old")]
subprocess.run(["mount", "-t", "tmpfs", "-o", "remount,ro", "tmpfs", mnt], check=True)
out["begin"] = run("begin", "abc", "--trial")
print(json.dumps(out))
"""


def _in_namespace(tmp_path: Path, script: str) -> dict[str, Any]:
    """What `script` prints (JSON), run as root of a user and mount namespace of its own
    with a mount point `<tmp_path>/mnt` and the `sessionstore` command as arguments."""
    mnt = tmp_path / "mnt"
    mnt.mkdir()
    probe = subprocess.run(["unshare", "-rm", "true"], capture_output=True, check=False)
    if probe.returncode != 0:
        pytest.skip("no user and mount namespaces here")
    done = subprocess.run(
        ["unshare", "-rm", sys.executable, "-c", _PROLOGUE + script, str(mnt), *SESSIONSTORE],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    found: dict[str, Any] = json.loads(done.stdout)
    assert all(code == 0 for code, _, _ in found["made"]), found
    return found


@pytest.mark.skipif(shutil.which("unshare") is None, reason="needs unshare(1)")
def test_begin_on_a_read_only_file_system_says_so_naming_the_record(tmp_path: Path) -> None:
    # Not "cannot hold records: unreadable: Read-only file system": nothing is in the way.
    out = _in_namespace(tmp_path, _READ_ONLY)
    trial = tmp_path / "mnt" / "s" / "abc" / "trials" / "2"
    assert out["begin"] == [1, "", f"Error: {trial}: Read-only file system\n"]

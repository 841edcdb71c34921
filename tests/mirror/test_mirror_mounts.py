"""Mount points in the source: a filesystem mounted below SRC is mirrored like any directory.

A directory's listing gives a mount point the inode of the directory it covers
(`d_ino`), never the mounted root's that opening it gives, so the walk's check that
it opened what it listed must tell a mount point from a directory swapped in. The
mounts are made as root of a user and mount namespace of its own (`unshare -rm`,
gone with it), and the passes run there as real processes.
"""

from __future__ import annotations

import shutil
import sys
from pathlib import Path
from typing import Any

import pytest
from mirror_helpers import in_namespace, settle, write

SS = [sys.executable, "-m", "sessionstore"]

# In the namespace: a tmpfs at src/tmp, src/other bound at src/bound (the same
# filesystem), a tmpfs at src/out that is the destination of the second run.
_IN_NAMESPACE = r"""
import json, os, subprocess, sys
src, dst = sys.argv[1], sys.argv[2]
subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", f"{src}/tmp"], check=True)
with open(f"{src}/tmp/on-tmpfs.txt", "w") as f:
    f.write("on a tmpfs\n")
subprocess.run(["mount", "--bind", f"{src}/other", f"{src}/bound"], check=True)
subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", f"{src}/out"], check=True)
os.utime(f"{src}/tmp/on-tmpfs.txt", (0, 0))
import time; time.sleep(0.05)  # settled (the racy rule)
def run(*args):
    done = subprocess.run([*sys.argv[3:], "mirror", *args, "--once", "--json"],
                          capture_output=True, text=True)
    return [done.returncode, json.loads(done.stdout) if done.stdout else None, done.stderr]
found = {"into": run(src, dst), "again": run(src, dst), "inside": run(src, f"{src}/out")}
found["files"] = sorted(os.path.relpath(os.path.join(d, n), dst)
                        for d, _, names in os.walk(dst) for n in names)
print(json.dumps(found))
"""


def _in_namespace(src: Path, dst: Path) -> dict[str, Any]:
    found: dict[str, Any] = in_namespace("-rm", _IN_NAMESPACE, str(src), str(dst), *SS)
    return found


@pytest.mark.skipif(shutil.which("unshare") is None, reason="needs unshare(1)")
def test_a_filesystem_mounted_in_the_source_is_mirrored(src: Path, dst: Path) -> None:
    """A tmpfs and a bind mount below SRC are walked like directories (each was
    reported `replaced during the pass` on every pass, and never mirrored); the
    destination mounted below SRC is still skipped as the destination."""
    write(src / "top.txt", b"top\n")
    write(src / "other" / "shared.txt", b"shared\n")
    for name in ("tmp", "bound", "out"):
        (src / name).mkdir()
    settle()
    found = _in_namespace(src, dst)
    code, report, stderr = found["into"]
    assert code == 0, stderr
    assert report["unstable"] == [] and report["errors"] == []
    assert sorted(report["copied"]) == [
        "bound/shared.txt",
        "other/shared.txt",
        "tmp/on-tmpfs.txt",
        "top.txt",
    ]
    code, report, stderr = found["again"]
    assert (code, report["copied"], report["unstable"]) == (0, [], []), stderr
    assert report["unchanged"] == 4
    assert [f for f in found["files"] if not f.startswith(".sessionstore-")] == [
        "bound/shared.txt",
        "other/shared.txt",
        "tmp/on-tmpfs.txt",
        "top.txt",
    ]
    code, report, stderr = found["inside"]
    assert code == 0, stderr
    assert {"path": "out", "reason": "the destination itself"} in report["skipped"]
    assert report["unstable"] == []

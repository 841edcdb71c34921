"""A burst of events over many directories costs the daemon one pass over them, not a wait.

Events mark directories dirty; the next pass visits each marked subtree once,
after dropping those inside another. A change of attributes (a `touch`, a
`chmod`) marks the file's directory alone, so one over a big tree marks tens
of thousands of sibling directories at once: a real daemon process, a real
tree, changed from this process.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from mirror_helpers import DaemonProcess, write

pytestmark = pytest.mark.timeout(180)

SIBLINGS = 20_000
# A hang guard on each pass: the pass over the marked directories takes about a
# second; dropping nested ones by scanning those kept took 30 s for these.
GUARD = 20.0


def test_a_touch_over_twenty_thousand_directories_is_one_quick_pass(src: Path, dst: Path) -> None:
    # An excluded tree, as a virtualenv is: watched and waking the daemon, never read.
    venv = src / ".venv"
    for i in range(SIBLINGS):
        write(venv / f"d{i}" / "f.py", b"")
    # A new file marks its directory and that one's parent: not the root, whose mark
    # would make the pass a whole one.
    (src / "work/sub").mkdir(parents=True)
    # One batch for the whole burst: the touch below takes well under a second.
    args = ("--json", "--no-fsync", "--exclude", ".venv/", "--debounce", "1", "--max-wait", "5")
    daemon = DaemonProcess(src, dst, *args, "--full-every", "3600")
    try:
        assert daemon.next(timeout=60)["pass"] == "initial"
        for i in range(SIBLINGS):
            os.utime(venv / f"d{i}" / "f.py", (1, 1))  # an attribute event: its directory only
        write(src / "work/sub/after.txt", b"written after the burst")
        for _ in range(20):
            report = daemon.next(timeout=GUARD)
            if "work/sub/after.txt" in report["copied"]:
                break
        else:
            raise AssertionError("after.txt was never mirrored")
    finally:
        code, err = daemon.stop()
    assert code == 0, err
    assert (dst / "work/sub/after.txt").read_bytes() == b"written after the burst"
    assert not (dst / ".venv").exists()

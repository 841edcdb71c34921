"""A daemon whose source is replaced under it watches the new one: real daemon processes.

inotify watches an inode, not a name. A source moved away with another
directory put at its name (a harness resetting its workspace), or a symlink
source retargeted, leaves the observer on the old directory: alive, healthy,
and deaf to the new one. The periodic full pass is an hour away here, so only
a daemon that notices the swap mirrors what is written in the new source.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from mirror_helpers import DaemonProcess, write

pytestmark = pytest.mark.timeout(120)

# A hang guard on each pass, far below the periodic full pass (an hour here):
# the swap is noticed by the health check, within a second.
GUARD = 20.0


def mirrored(daemon: DaemonProcess, path: str) -> dict[str, object]:
    """The first pass that copies `path` (each pass bounded by GUARD)."""
    for _ in range(20):
        report = daemon.next(timeout=GUARD)
        if path in report["copied"]:
            return report
    raise AssertionError(f"{path} was never mirrored")


def test_a_source_moved_away_and_made_again_is_watched_anew(
    src: Path, dst: Path, tmp_path: Path
) -> None:
    write(src / "a.txt", b"a")
    daemon = DaemonProcess(src, dst, "--json", "--full-every", "3600")
    try:
        assert daemon.next()["pass"] == "initial"
        os.rename(src, tmp_path / "old-src")  # the watch goes with it: no event, no death
        write(src / "b.txt", b"in the new source")
        mirrored(daemon, "b.txt")
        write(src / "c.txt", b"and events from it")  # watched now: an event, not a poll
        assert mirrored(daemon, "c.txt")["pass"] == "events"
        write(tmp_path / "old-src" / "d.txt", b"no longer the source")
    finally:
        code, err = daemon.stop()
    assert code == 0, err
    assert (dst / "b.txt").read_bytes() == b"in the new source"
    assert (dst / "c.txt").read_bytes() == b"and events from it"
    assert not (dst / "d.txt").exists()

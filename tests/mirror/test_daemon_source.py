"""The daemon watches the directory its source names, whatever names it: real daemon processes.

inotify watches an inode, not a name. A source moved away with another
directory put at its name (a harness resetting its workspace), or a symlink
source retargeted, leaves the observer on the old directory: alive, healthy,
and deaf to the new one. And a source given as a symlink must be watched in
the directory it points to, not as the link. The periodic full pass is an
hour away here, so only events (or a daemon that notices the swap) mirror
what is written.
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


def test_files_right_in_a_symlinked_source_are_seen_by_events(tmp_path: Path, dst: Path) -> None:
    target = tmp_path / "run-1"
    write(target / "sub" / "a.txt", b"a")
    link = tmp_path / "current"
    link.symlink_to(target)
    daemon = DaemonProcess(link, dst, "--json", "--full-every", "3600")
    try:
        assert daemon.next()["pass"] == "initial"
        write(target / "top.txt", b"in the source's own directory")
        assert mirrored(daemon, "top.txt")["pass"] == "events"
        write(target / "sub" / "b.txt", b"below it")
        assert mirrored(daemon, "sub/b.txt")["pass"] == "events"
    finally:
        code, err = daemon.stop()
    assert code == 0, err
    assert (dst / "top.txt").read_bytes() == b"in the source's own directory"


def test_a_retargeted_symlink_source_is_watched_at_its_new_target(
    tmp_path: Path, dst: Path
) -> None:
    first, second = tmp_path / "run-1", tmp_path / "run-2"
    write(first / "a.txt", b"a")
    second.mkdir()
    link = tmp_path / "current"
    link.symlink_to(first)
    daemon = DaemonProcess(link, dst, "--json", "--full-every", "3600")
    try:
        assert daemon.next()["pass"] == "initial"
        (tmp_path / "next").symlink_to(second)
        os.replace(tmp_path / "next", link)  # atomically: the source never goes missing
        write(second / "b.txt", b"in the new target")
        mirrored(daemon, "b.txt")
        write(second / "c.txt", b"and events from it")
        assert mirrored(daemon, "c.txt")["pass"] == "events"
    finally:
        code, err = daemon.stop()
    assert code == 0, err
    assert (dst / "b.txt").read_bytes() == b"in the new target"


def test_a_source_swapped_for_a_symlink_to_the_destination_is_not_copied_onto_itself(
    src: Path, dst: Path, tmp_path: Path
) -> None:
    write(src / "a.txt", b"a")
    daemon = DaemonProcess(src, dst, "--json", "--full-every", "3600")
    try:
        assert daemon.next()["copied"] == ["a.txt"]
        before = (dst / "a.txt").stat().st_ino
        os.rename(src, tmp_path / "old-src")
        src.symlink_to(dst)  # the swap is seen within a second: a full pass
        for _ in range(20):
            report = daemon.next(timeout=GUARD)
            if report["errors"]:
                break
        else:
            raise AssertionError("the swap was never reported")
    finally:
        code, err = daemon.stop()
    assert report["copied"] == [], report
    assert report["errors"] == [
        {"path": ".", "error": "source: is the destination now; nothing mirrored"}
    ]
    assert (dst / "a.txt").stat().st_ino == before  # not rewritten by a copy of itself
    assert code == 1, err  # the final pass found it too


def test_a_source_retargeted_inside_the_destination_is_not_copied_into_it(
    dst: Path, tmp_path: Path
) -> None:
    """A symlinked source retargeted to a directory of the destination: each pass is
    an error and copies nothing. (The directory was copied to the destination's top,
    `dst/work/notes.txt` to `dst/notes.txt`: a source inside the destination, which
    `Mirror` refuses when it is made.)"""
    real = tmp_path / "real"
    write(real / "work" / "notes.txt", b"notes")
    link = tmp_path / "current"
    link.symlink_to(real)
    daemon = DaemonProcess(link, dst, "--json", "--full-every", "3600")
    try:
        assert daemon.next()["copied"] == ["work/notes.txt"]
        (tmp_path / "next").symlink_to(dst / "work")
        os.replace(tmp_path / "next", link)  # the swap is seen within a second: a full pass
        for _ in range(20):
            report = daemon.next(timeout=GUARD)
            if report["pass"] == "full":  # the swap's
                break
        else:
            raise AssertionError("the swap was never noticed")
    finally:
        code, err = daemon.stop()
    assert report["copied"] == [], report
    assert report["errors"] == [
        {"path": ".", "error": "source: is inside the destination now; nothing mirrored"}
    ]
    assert sorted(p.name for p in dst.iterdir() if not p.name.startswith(".")) == ["work"]
    assert code == 1, err  # the final pass found it too


def test_a_directory_moved_out_then_made_and_removed_again_stops_cleanly(
    src: Path, dst: Path, tmp_path: Path
) -> None:
    # watchdog keeps a watch on the moved-out directory under its old path; the second
    # `A`'s watch then takes that path, and its removal leaves the first watch naming a
    # path watchdog no longer holds: stopping the watcher raised KeyError, and the
    # daemon died with a traceback (the path in it), without its final pass.
    src.mkdir()
    daemon = DaemonProcess(src, dst, "--json", "--full-every", "3600")
    try:
        assert daemon.next(timeout=GUARD)["pass"] == "initial"
        write(src / "A" / "one.txt", b"1")
        mirrored(daemon, "A/one.txt")  # A is watched by now
        os.rename(src / "A", tmp_path / "moved-out")
        write(src / "A" / "two.txt", b"2")
        mirrored(daemon, "A/two.txt")  # the second A is watched by now
        os.unlink(src / "A" / "two.txt")
        os.rmdir(src / "A")
        write(src / "after.txt", b"after")
        mirrored(daemon, "after.txt")  # the removal was read by the watcher by now
        write(src / "last.txt", b"last")  # left for the final pass
    finally:
        code, err = daemon.stop()
    assert code == 0, err
    assert "Traceback" not in err and str(src) not in err, err
    assert (dst / "last.txt").read_bytes() == b"last"

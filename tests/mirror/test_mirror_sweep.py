"""The sweep after an interrupted pass: dead temps go wherever they are in the destination.

A pass that finds the in-progress flag (the last pass was killed) walks the whole
destination for dead temps before it starts, not only the directories its own
walk of the source reaches, and clears the flag only when nothing was left out.
"""

from __future__ import annotations

import contextlib
import os
import resource
import shutil
import subprocess
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import cli_runner
import pytest
from mirror_helpers import make_deep, remove_deep, run, settle, snapshot, temps, tree, write

from sessionstore.mirror.mirror import DIRTY_NAME
from sessionstore.storage import journal

DEAD = f".sstmp-{2**22 + 1}-deadbeef"  # pid 2**22 + 1 is above the default pid_max


def _interrupted(dst: Path) -> None:
    """What a killed pass leaves besides its temps: the in-progress flag."""
    (dst / DIRTY_NAME).touch()


def test_a_killed_passs_temp_in_a_directory_the_source_lost_is_swept(tmp_path: Path) -> None:
    src, dst = tmp_path / "src", tmp_path / "dst"
    write(src / "keep" / "a.txt", b"a")
    write(src / "gone" / "big.bin", os.urandom(64 << 20))
    settle()
    proc = cli_runner.popen("mirror", src, dst, "--once", "--no-fsync")
    try:
        cli_runner.wait_for(
            lambda: (dst / "gone").is_dir() and temps(dst / "gone") != [],
            "a temp of the pass",
            timeout=60,
        )
    finally:
        proc.kill()
        proc.communicate(timeout=60)
    assert temps(dst) != [] and (dst / DIRTY_NAME).exists()
    shutil.rmtree(src / "gone")  # the agent removed the directory meanwhile
    done = cli_runner.run("mirror", src, dst, "--once", "--no-fsync")
    assert done.returncode == 0, done.stderr
    assert temps(dst) == [] and not (dst / DIRTY_NAME).exists()
    assert tree(dst) == {"keep/a.txt": b"a"}


def test_dead_temps_anywhere_go_and_everything_else_stays(tmp_path: Path) -> None:
    src, dst, outside = tmp_path / "src", tmp_path / "dst", tmp_path / "outside"
    write(src / "kept" / "f", b"x")
    write(src / "excluded" / "f", b"x")
    settle()
    run(src, dst)
    write(outside / "target", b"not ours")
    write(outside / DEAD, b"a temp name outside the destination")
    before_outside = snapshot(outside)
    live = subprocess.Popen(["sleep", "60"])
    try:
        live_temp = f".sstmp-{live.pid}-cafe"
        dead = [
            dst / DEAD,
            dst / "kept" / DEAD,
            dst / "excluded" / DEAD,  # the source's, but now excluded: never walked
            dst / "only-here" / "a" / "b" / DEAD,  # the source never had it
        ]
        for path in dead:
            write(path, b"debris")
        (dst / "only-here" / f".sstmp-{2**22 + 2}-dir" / "inside").mkdir(parents=True)
        os.symlink(outside / "target", dst / "kept" / f".sstmp-{2**22 + 3}-link")
        os.symlink(outside, dst / "only-here" / "link-to-outside")  # never followed
        write(dst / "kept" / live_temp, b"a live writer's")
        old = write(dst / "only-here" / f".sstmp-{live.pid}-old", b"live pid, stale")
        two_hours_ago = time.time() - 7200
        os.utime(old, (two_hours_ago, two_hours_ago))
        _interrupted(dst)
        report = run(src, dst, exclude=["excluded/"])
        assert report.errors == []
        assert sorted(temps(dst)) == [str(dst / "kept" / live_temp)]
        assert not (dst / DIRTY_NAME).exists()
        assert (dst / "only-here" / "link-to-outside").is_symlink()
        assert snapshot(outside) == before_outside
    finally:
        live.kill()
        live.wait()


def _at_bottom(root: Path, act: Callable[[int], object]) -> object:
    """`act(fd)` on the bottom directory of `make_deep(root, ...)` (its path is too long)."""
    fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY)
    try:
        while "d" in os.listdir(fd):
            child = os.open("d", os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW, dir_fd=fd)
            os.close(fd)
            fd = child
        return act(fd)
    finally:
        os.close(fd)


def test_a_temp_at_the_bottom_of_a_10000_level_tree_is_swept_with_few_fds(
    tmp_path: Path,
) -> None:
    src, dst = tmp_path / "src", tmp_path / "dst"
    write(src / "f", b"x")
    settle()
    assert run(src, dst).copied == ["f"]
    make_deep(dst / "deep", 10_000)
    try:
        # Where a killed pass left a temp (a tree the source has lost since).
        _at_bottom(dst / "deep", lambda fd: os.close(os.open(DEAD, os.O_CREAT, dir_fd=fd)))
        _interrupted(dst)

        def few_fds() -> None:
            resource.setrlimit(resource.RLIMIT_NOFILE, (64, 64))

        done = cli_runner.run("mirror", src, dst, "--once", "--no-fsync", preexec_fn=few_fds)
        assert done.returncode == 0, done.stderr
        assert _at_bottom(dst / "deep", os.listdir) == ["bottom.txt"]
        assert not (dst / DIRTY_NAME).exists()
    finally:
        remove_deep(dst / "deep")


def test_a_subset_pass_sweeps_the_whole_destination_before_clearing_the_flag(
    tmp_path: Path,
) -> None:
    from sessionstore.mirror.mirror import Mirror

    src, dst = tmp_path / "src", tmp_path / "dst"
    write(src / "a" / "f", b"x")
    write(src / "b" / "g", b"y")
    settle()
    run(src, dst)
    write(dst / "b" / DEAD, b"debris")  # outside the subset the next pass walks
    _interrupted(dst)
    write(src / "a" / "f", b"changed")
    settle()
    report = Mirror(src, dst, durable=False).run_dirs(["a"])
    assert report.copied == ["a/f"] and report.errors == []
    assert temps(dst) == [] and not (dst / DIRTY_NAME).exists()


@contextlib.contextmanager
def _unremovable(directory: Path) -> Iterator[None]:
    """Entries of `directory` cannot be removed meanwhile: for root, whom modes do not
    stop, by the immutable attribute."""
    if os.geteuid() == 0:
        lock, unlock = ["chattr", "+i", str(directory)], ["chattr", "-i", str(directory)]
    else:
        lock, unlock = ["chmod", "500", str(directory)], ["chmod", "700", str(directory)]
    made = subprocess.run(lock, capture_output=True, text=True, check=False)
    if made.returncode != 0:  # a filesystem without the attribute (tmpfs before 6.0)
        pytest.skip(f"cannot make a directory whose entries root cannot remove: {made.stderr}")
    try:
        yield
    finally:
        subprocess.run(unlock, check=True)


def test_a_temp_that_cannot_be_removed_keeps_the_flag_until_one_pass_can(
    tmp_path: Path,
) -> None:
    src, dst = tmp_path / "src", tmp_path / "dst"
    write(src / "f", b"x")
    settle()
    run(src, dst)
    stuck = write(dst / "gone" / DEAD, b"debris").parent
    _interrupted(dst)
    with _unremovable(stuck):
        for content in (b"y", b"z"):
            write(src / "f", content)  # each pass commits a file: a claim in the flag
            settle()
            report = run(src, dst)
            assert report.copied == ["f"]
            assert [e["path"] for e in report.errors] == [f"gone/{DEAD}"]
            assert "cannot sweep temp files" in report.errors[0]["error"]
            # Kept for the sweep, not for its claims: the saved cache holds them, and a
            # flag kept for many passes does not grow with each.
            assert (dst / DIRTY_NAME).read_bytes() == b"", "the flag went or kept claims"
    report = run(src, dst)
    assert report.errors == [] and temps(dst) == [] and not (dst / DIRTY_NAME).exists()


def test_a_kept_flag_keeps_the_claims_its_pass_could_not_settle(tmp_path: Path) -> None:
    src, dst = tmp_path / "src", tmp_path / "dst"
    write(src / "f", b"x")
    settle()
    run(src, dst)
    stuck = write(dst / "gone" / DEAD, b"debris").parent
    new = write(dst / "extra" / "new.txt", b"committed by a killed pass")
    st = new.stat()
    claims = {"extra/new.txt": (st.st_size, st.st_mtime_ns, st.st_ino)}
    (dst / DIRTY_NAME).write_bytes(journal.record(*next(iter(claims.items()))))
    (dst / "extra").rename(dst / "away")  # its directory cannot be reached meanwhile
    (dst / "extra").symlink_to("away")
    with _unremovable(stuck):
        write(src / "f", b"y")
        settle()
        assert run(src, dst).copied == ["f"]
        assert journal.read((dst / DIRTY_NAME).read_bytes()) == {
            key: [claim] for key, claim in claims.items()
        }
    (dst / "extra").unlink()
    (dst / "away").rename(dst / "extra")
    report = run(src, dst, delete=True)  # the claim settled: the file is the mirror's
    assert report.deleted == ["extra/new.txt"] and report.errors == []
    assert not (dst / DIRTY_NAME).exists()

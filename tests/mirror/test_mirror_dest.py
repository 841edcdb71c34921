"""The destination is reached only through directory fds: planted or swapped symlinks are refused.

Each test plants the fault from outside (a real symlink, a real fifo, another
thread renaming directories while a real `sessionstore mirror` process runs)
and checks that a sibling "outside" tree is byte-, name- and mode-identical
afterwards, that nothing hangs, and that the problem is one line.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import threading
import time
from pathlib import Path

import orjson
import pytest
from mirror_helpers import (
    mirror_cli,
    outside_tree,
    run,
    settle,
    snapshot,
    tree,
    write,
)

from sessionstore.format.names import MIRROR_LOCK as LOCK_NAME
from sessionstore.format.names import MIRROR_PID as PID_NAME
from sessionstore.mirror.lock import acquire_lock
from sessionstore.mirror.mirror import CACHE_NAME, DIRTY_NAME, Mirror
from sessionstore.storage.local_tree import UNKNOWN, LocalDir, LocalTree

pytestmark = pytest.mark.timeout(120)

SYMLINK_PROBLEM = "a symlink is where a directory belongs; nothing is written through it"


@pytest.fixture
def outside(tmp_path: Path) -> Path:
    return outside_tree(tmp_path / "outside")


def workspace(src: Path) -> None:
    write(src / "trials" / "1" / "log.txt", b"same bytes as the source's\n", 0o644)
    write(src / "trials" / "1" / "trial.json", b'{"t": 1}')
    write(src / "trials" / "2" / "log.txt", b"in flight")
    write(src / "notes.txt", b"scratch")
    settle()


def plant(dst: Path, name: str, target: Path) -> None:
    """Replace the destination's `name` (a directory the mirror made) by a symlink."""
    shutil.rmtree(dst / name)
    (dst / name).symlink_to(target)


@pytest.mark.parametrize("delete", [False, True], ids=["plain", "delete"])
def test_a_planted_directory_symlink_is_one_error_and_never_followed(
    src: Path, dst: Path, outside: Path, delete: bool
) -> None:
    workspace(src)
    assert mirror_cli(src, dst, "--once", "--no-fsync").returncode == 0
    plant(dst, "trials", outside)
    (src / "trials" / "2" / "log.txt").unlink()  # --delete would want it gone
    (src / "notes.txt").unlink()
    before = snapshot(outside)
    args = ["--once", "--json", *(["--delete"] if delete else [])]
    proc = mirror_cli(src, dst, *args)
    assert snapshot(outside) == before
    assert proc.returncode == 1
    report = orjson.loads(proc.stdout)
    assert report["errors"] == [{"path": "trials", "error": SYMLINK_PROBLEM}]
    assert [line for line in proc.stderr.splitlines() if "error:" in line] == [
        f"  error: trials: {SYMLINK_PROBLEM}"
    ]
    if delete:  # outside the broken subtree, --delete still does its job
        assert report["deleted"] == ["notes.txt"]


def test_a_symlink_where_the_destination_root_was_is_refused(
    src: Path, dst: Path, outside: Path
) -> None:
    workspace(src)
    mirror = Mirror(src, dst, durable=False)
    assert mirror.run_once().ok
    shutil.rmtree(dst)
    dst.symlink_to(outside)
    before = snapshot(outside)
    report = mirror.run_once()
    assert snapshot(outside) == before
    assert [e["path"] for e in report.errors] == ["."]
    assert report.errors[0]["error"] == f"destination: {dst}: {SYMLINK_PROBLEM}"


def test_planted_file_symlinks_and_fifos_are_replaced_not_followed_or_opened(
    src: Path, dst: Path, outside: Path
) -> None:
    workspace(src)
    dst.mkdir()
    # No cache yet: the pass compares every existing destination file before writing.
    (dst / "notes.txt").symlink_to(outside / "keep.txt")
    (dst / "trials" / "2").mkdir(parents=True)
    os.mkfifo(dst / "trials" / "2" / "log.txt")
    (dst / CACHE_NAME).symlink_to(outside / "1" / "precious.txt")
    (dst / DIRTY_NAME).symlink_to(outside / "1" / "trial.json")
    before = snapshot(outside)
    proc = mirror_cli(src, dst, "--once", "--json", timeout=30)
    assert proc.returncode == 0, proc.stderr
    assert snapshot(outside) == before
    assert tree(dst) == tree(src)
    assert not (dst / "notes.txt").is_symlink()
    assert not (dst / DIRTY_NAME).exists() and not (dst / CACHE_NAME).is_symlink()


def test_the_daemon_lock_is_never_opened_through_a_symlink(
    src: Path, dst: Path, outside: Path
) -> None:
    dst.mkdir()
    (dst / LOCK_NAME).symlink_to(outside / "keep.txt")
    before = snapshot(outside)
    with pytest.raises(OSError):
        acquire_lock(Mirror(src, dst))
    assert snapshot(outside) == before


@pytest.mark.parametrize("name", [LOCK_NAME, PID_NAME])
def test_a_directory_at_the_lock_or_pid_name_is_one_line_naming_it(
    src: Path, dst: Path, name: str
) -> None:
    # The pid file's error named its temp (`.sstmp-...: Is a directory`), the lock's the
    # bare name: neither said which destination.
    (dst / name).mkdir(parents=True)
    proc = mirror_cli(src, dst, timeout=30)
    assert proc.returncode == 1
    assert proc.stderr == f"Error: {dst / name}: Is a directory\n"
    assert sorted(p.name for p in dst.iterdir()) == sorted({LOCK_NAME, name})


def test_a_directory_swapped_for_a_symlink_mid_pass_never_leaks_writes(
    tmp_path: Path, outside: Path
) -> None:
    """DST inside SRC (supported): the agent swaps DST/trials for a symlink, over and over."""
    src = tmp_path / "ws"
    dst = src / "mirror"
    for n in range(1, 41):
        for name in ("task.yml", "patches/a.diff", "log.txt"):
            write(src / "trials" / str(n) / name, os.urandom(2000))
    settle()
    assert mirror_cli(src, dst, "--once", "--no-fsync").returncode == 0
    for n in range(1, 41):  # new work: every record changes, so every pass writes
        write(src / "trials" / str(n) / "log.txt", os.urandom(3000))
    settle()
    before = snapshot(outside)
    stop = threading.Event()
    swaps = [0]

    trials, away = dst / "trials", dst / "trials.away"

    def swap_once() -> None:
        os.rename(trials, away)
        os.symlink(outside, trials)
        time.sleep(0.0005)
        os.unlink(trials)
        os.rename(away, trials)

    def restore() -> None:  # after a swap the mirror raced: the real trials/ back in place
        if trials.is_symlink():
            os.unlink(trials)
        if away.is_dir():
            if trials.is_dir():
                shutil.rmtree(trials)  # a fresh one the mirror made meanwhile
            os.rename(away, trials)

    def swapper() -> None:
        deadline = time.monotonic() + 20
        while not stop.is_set() and swaps[0] < 20_000 and time.monotonic() < deadline:
            try:
                swap_once()
            except OSError:
                with contextlib.suppress(OSError):
                    restore()
            swaps[0] += 1

    thread = threading.Thread(target=swapper)
    thread.start()
    try:
        problems = 0
        for _ in range(5):
            proc = mirror_cli(src, dst, "--once", "--no-fsync", "--json", timeout=60)
            report = orjson.loads(proc.stdout)
            problems += len(report["errors"]) + len(report["unstable"])
    finally:
        stop.set()
        thread.join()
    assert swaps[0] > 50, "the swapper never ran during the passes; the test proves nothing"
    assert snapshot(outside) == before
    assert problems > 0, "no pass ever met the swapped symlink"


def test_a_directory_moved_out_mid_copy_gets_no_rename_and_keeps_no_temp(
    tmp_path: Path, src: Path, dst: Path, outside: Path
) -> None:
    write(src / "trials" / "1" / "log.txt", b"old" * 100)
    settle()
    run(src, dst)
    write(src / "trials" / "1" / "log.txt", b"new" * 100)
    settle()
    elsewhere = tmp_path / "elsewhere"
    before = snapshot(outside)

    def move_out(drel: str) -> None:  # between two chunks of the copy: the temp exists
        if not elsewhere.exists():
            os.rename(dst / "trials", elsewhere)
            (dst / "trials").symlink_to(outside)

    mirror = Mirror(src, dst, durable=False, chunk_size=16, _on_chunk=move_out)
    report = mirror.run_once()
    assert elsewhere.exists(), "the hook never ran; the test proves nothing"
    assert report.errors == [
        {"path": "trials", "error": "moved or replaced during the pass; nothing written there"}
    ]
    assert snapshot(outside) == before
    assert snapshot(elsewhere) == {
        ".": ("dir", 0o700),
        "1": ("dir", 0o700),
        "1/log.txt": ("file", 0o644, b"old" * 100),
    }


def test_an_interrupted_pass_is_swept_through_the_fds_and_temp_symlinks_are_not_followed(
    src: Path, dst: Path, outside: Path
) -> None:
    workspace(src)
    run(src, dst)
    dead = dst / "trials" / "1" / ".sstmp-99999999-deadbeef"  # a pid above pid_max: dead
    dead.write_bytes(b"half a file")
    live = dst / "trials" / "1" / f".sstmp-{os.getpid()}-0123456789abcdef"
    live.write_bytes(b"being written")
    link = dst / ".sstmp-99999999-feedface"
    link.symlink_to(outside / "1")
    (dst / DIRTY_NAME).touch()  # the last pass was killed
    before = snapshot(outside)
    report = run(src, dst)
    assert report.ok, report.errors
    assert not dead.exists() and live.exists() and not link.is_symlink()
    assert snapshot(outside) == before
    assert not (dst / DIRTY_NAME).exists()


@pytest.mark.parametrize("moved", ["trials", "trials/1"], ids=["ancestor", "record"])
def test_a_record_moved_out_behind_a_symlink_is_never_reported_in_place(
    tmp_path: Path, src: Path, dst: Path, moved: str
) -> None:
    """The no-op pass reads the destination by paths from the root's fd: a directory moved
    out with a symlink to it left behind keeps its files' inodes, sizes and mtimes, which
    the change cache would vouch for if the path were followed."""
    workspace(src)
    assert mirror_cli(src, dst, "--once", "--no-fsync").returncode == 0
    elsewhere = tmp_path / "elsewhere"
    os.rename(dst / moved, elsewhere)
    (dst / moved).symlink_to(elsewhere)
    before = snapshot(elsewhere)
    proc = mirror_cli(src, dst, "--once", "--json")
    report = orjson.loads(proc.stdout)
    assert proc.returncode == 1
    assert report["errors"] == [{"path": moved, "error": SYMLINK_PROBLEM}]
    assert report["unchanged"] == len(tree(src)) - len(tree(src / moved))
    assert report["copied"] == []
    assert snapshot(elsewhere) == before


def test_the_walk_opens_each_destination_directory_through_its_parents_fd(
    dst: Path, outside: Path
) -> None:
    """`open_below` opens a real directory (its files are then stat'ed through its fd) and
    leaves a symlink unopened and unknown; asked for, it is reported once, never read."""
    write(dst / "real" / "f.txt", b"x")
    (dst / "link").symlink_to(outside)
    errors: list[tuple[str, str]] = []
    root = LocalDir(None, "", "")
    local = LocalTree(root, lambda p, m: errors.append((p, m)), lambda: None, False)
    assert local.open_root(str(dst.resolve()))
    try:
        real, link = LocalDir(root, "real", "real"), LocalDir(root, "link", "link")
        local.open_below(root, real)
        local.open_below(root, link)
        assert real.fd is not None and link.fd is None and link.state == UNKNOWN
        found = local.entry(real, "f.txt", "real/f.txt")
        assert found is not None and found.st_size == 1
        assert local.entry(link, "1", "link/1") is None
        assert local.entry(link, "2", "link/2") is None
        assert errors == [("link", SYMLINK_PROBLEM)]
    finally:
        local.close(real)
        local.close_all()

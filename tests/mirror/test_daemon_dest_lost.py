"""A daemon whose destination is removed or replaced under it stops, and writes nothing there.

The daemon's lock lives in its destination (`mirror.lock`), so `rm --force` of
the session, or the destination moved away and another directory put in its
place, takes the lock with it. Mirroring on would re-create a removed session
without its `session.json`, or write into a directory a second daemon may lock.
Each pass of a daemon checks that the destination's lock is the one it holds
and otherwise raises `DestinationLost` before writing; a lock file deleted
outright is noticed by the daemon's health timer within a second. Real daemon
processes and a real `rm`, and moto on loopback for a bucket.
"""

from __future__ import annotations

import os
import shutil
import threading
from pathlib import Path

import cli_runner
import pytest
from mirror_helpers import DaemonProcess, settle, write
from s3_servers import S3Server

from sessionstore import DestinationLost, Mirror, Store, WatchConfig
from sessionstore.format.names import MIRROR_LOCK

pytestmark = pytest.mark.timeout(120)

LOST = "the destination was removed or replaced while the daemon mirrored into it"


def exited(daemon: DaemonProcess) -> tuple[int, str]:
    """The daemon's exit status and stderr, once it ends by itself (bounded)."""
    cli_runner.wait_for(lambda: not daemon.running(), "the daemon to stop by itself", timeout=60)
    return daemon.stop()


def assert_stopped_lost(code: int, err: str, dest: Path | str) -> None:
    assert code == 1, err
    lines = err.splitlines()
    assert lines[-1].startswith(f"Error: {dest}: {LOST}"), err
    assert "Traceback" not in err


def test_rm_force_of_the_session_stops_its_daemon(tmp_path: Path, src: Path) -> None:
    store = tmp_path / "store"
    session = Store(store).create(id="abc123", pid=None)
    write(src / "trials/1/log.txt", b"step 1\n")
    settle()
    daemon = DaemonProcess(src, "abc123", "--store", store, "--json")
    try:
        assert daemon.next()["copied"] == ["trials/1/log.txt"]
        refused = cli_runner.run("rm", "--store", store, "abc123")
        assert refused.returncode == 1 and "mirror daemon" in refused.stderr
        removed = cli_runner.run("rm", "--store", store, "--force", "abc123")
        assert removed.returncode == 0, removed.stderr
        # No source event: the health timer sees the lock file deleted.
        code, err = exited(daemon)
    finally:
        daemon.stop()
    assert_stopped_lost(code, err, session.path)
    assert os.listdir(store) == []  # not re-created, not even empty


def test_rm_force_stops_the_daemon_when_a_snapshot_links_the_lock_file_too(
    tmp_path: Path, src: Path
) -> None:
    store = tmp_path / "store"
    session = Store(store).create(id="abc123", pid=None)
    write(src / "a.txt", b"a")
    settle()
    # No full pass for an hour: only the health timer can notice before then.
    daemon = DaemonProcess(src, "abc123", "--store", store, "--json", "--full-every", "3600")
    try:
        assert daemon.next()["copied"] == ["a.txt"]
        # A `cp -al` snapshot: every file of the destination, the lock file too, keeps a name.
        shutil.copytree(session.path, tmp_path / "snapshot", copy_function=os.link)
        removed = cli_runner.run("rm", "--store", store, "--force", "abc123")
        assert removed.returncode == 0, removed.stderr
        code, err = exited(daemon)
    finally:
        daemon.stop()
    assert_stopped_lost(code, err, session.path)
    assert os.listdir(store) == []
    assert (tmp_path / "snapshot" / "a.txt").read_bytes() == b"a"


def test_a_replaced_destination_gets_nothing_and_the_moved_one_nothing_more(
    tmp_path: Path, src: Path, dst: Path
) -> None:
    write(src / "a.txt", b"a")
    settle()
    daemon = DaemonProcess(src, dst, "--json")
    try:
        assert daemon.next()["copied"] == ["a.txt"]
        moved = tmp_path / "moved"
        os.rename(dst, moved)  # the lock file keeps its name and inode: only a pass sees it
        dst.mkdir()
        write(src / "b.txt", b"b")  # an event: a pass, which finds another directory
        code, err = exited(daemon)
    finally:
        daemon.stop()
    assert_stopped_lost(code, err, dst)
    assert os.listdir(dst) == []
    assert not (moved / "b.txt").exists()
    assert (moved / "a.txt").read_bytes() == b"a"


def test_a_deleted_lock_file_stops_the_daemon_before_a_second_can_take_over(
    src: Path, dst: Path
) -> None:
    write(src / "a.txt", b"a")
    settle()
    daemon = DaemonProcess(src, dst, "--json")
    try:
        daemon.next()
        (dst / MIRROR_LOCK).unlink()
        code, err = exited(daemon)
    finally:
        daemon.stop()
    assert_stopped_lost(code, err, dst)
    # The destination itself is intact, and free for the next daemon.
    assert (dst / "a.txt").read_bytes() == b"a"
    again = DaemonProcess(src, dst, "--json")
    try:
        assert again.next()["unchanged"] == 1
    finally:
        code, err = again.stop()
    assert code == 0, err


def test_the_python_api_raises_it_when_the_block_ends(src: Path, dst: Path) -> None:
    write(src / "a.txt", b"a")
    settle()
    mirror = Mirror(src, dst)
    passes: list[str] = []
    first = threading.Event()

    def on_pass(_report: object, kind: str) -> None:
        passes.append(kind)
        first.set()

    config = WatchConfig(full_every=0.2)
    with pytest.raises(DestinationLost) as raised, mirror.running(config, on_pass=on_pass):
        assert first.wait(30)
        shutil.rmtree(dst)
        # The daemon lets go of its lock once its pass has raised.
        cli_runner.wait_for(lambda: mirror.held_lock is None, "the daemon to stop")
    assert raised.value.path == str(dst.resolve())
    assert not dst.exists()
    assert "final" not in passes  # no final pass into a lost destination
    assert mirror.held_lock is None
    assert mirror.run_once().copied == ["a.txt"]  # a pass of its own may create it again


def test_rm_force_of_a_bucket_session_stops_its_daemon(moto_s3: S3Server, src: Path) -> None:
    bucket = moto_s3.new_bucket()
    store = f"s3://{bucket}/st"
    moto_s3.client().put_object(Bucket=bucket, Key="st/abc123/session.json", Body=b"{}")
    write(src / "a.txt", b"a")
    settle()
    env = moto_s3.env()
    args = ("--store", store, "--json", "--full-every", "0.3")
    daemon = DaemonProcess(src, "abc123", *args, env=env)
    try:
        assert daemon.next()["copied"] == ["a.txt"]
        removed = cli_runner.run("rm", "--store", store, "--force", "abc123", env=env)
        assert removed.returncode == 0, removed.stderr
        code, err = exited(daemon)  # its next full pass finds the lease gone
    finally:
        daemon.stop()
    assert_stopped_lost(code, err, f"{store}/abc123")
    assert "st/abc123/session.json" not in moto_s3.keys(bucket)

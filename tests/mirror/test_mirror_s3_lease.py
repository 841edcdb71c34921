"""A bucket destination's one-daemon lease (`mirror.lock._acquire_lease`), on moto.

A lease left by a dead daemon of this host is taken over; one of another host,
or of a live daemon, never is; and of two daemons taking one dead lease over at
once, exactly one holds it.
"""

from __future__ import annotations

import json
import socket
import subprocess
import sys
from pathlib import Path

import cli_runner
import pytest
from mirror_s3_helpers import settings
from s3_servers import S3Server

from sessionstore._proc import process_alive
from sessionstore.errors import LockHeld
from sessionstore.mirror import lock
from sessionstore.mirror.mirror import Mirror
from sessionstore.storage.s3_config import parse_s3_url
from sessionstore.storage.s3_tree_io import S3Dest

LEASE = "p/d/.sessionstore-mirror.lock"


@pytest.fixture
def bucket(moto_s3: S3Server) -> str:
    return moto_s3.new_bucket()


def _dead_pid() -> int:
    done = subprocess.Popen([sys.executable, "-c", "pass"])
    done.wait()
    return done.pid


def _mirror(server: S3Server, bucket: str, src: Path) -> Mirror:
    return Mirror(src, S3Dest(parse_s3_url(f"s3://{bucket}/p/d"), settings(server)))


def _lease(server: S3Server, bucket: str) -> dict[str, object]:
    body = server.client().get_object(Bucket=bucket, Key=LEASE)["Body"].read()
    found: dict[str, object] = json.loads(body)
    return found


def _put_lease(server: S3Server, bucket: str, host: str, pid: int) -> bytes:
    body = json.dumps({"token": "old", "host": host, "pid": pid, "pid_started_at": None})
    server.client().put_object(Bucket=bucket, Key=LEASE, Body=body.encode())
    return body.encode()


def test_a_dead_daemons_lease_of_this_host_is_taken_over(
    moto_s3: S3Server, bucket: str, tmp_path: Path
) -> None:
    _put_lease(moto_s3, bucket, socket.gethostname(), _dead_pid())
    held = lock.acquire_lock(_mirror(moto_s3, bucket, tmp_path))
    try:
        assert _lease(moto_s3, bucket)["token"] != "old"
    finally:
        held.release()
    assert LEASE not in moto_s3.keys(bucket)


@pytest.mark.parametrize("holder", ["another host", "a live daemon"])
def test_a_lease_that_is_not_a_dead_daemons_of_this_host_is_never_taken(
    moto_s3: S3Server, bucket: str, tmp_path: Path, holder: str
) -> None:
    if holder == "another host":
        before = _put_lease(moto_s3, bucket, "elsewhere.example", _dead_pid())
    else:
        before = _put_lease(moto_s3, bucket, socket.gethostname(), 1)  # init: alive
    with pytest.raises(LockHeld):
        lock.acquire_lock(_mirror(moto_s3, bucket, tmp_path))
    assert moto_s3.client().get_object(Bucket=bucket, Key=LEASE)["Body"].read() == before


def test_of_two_taking_over_one_dead_lease_only_one_holds_it(
    moto_s3: S3Server, bucket: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The slower daemon has read the dead lease and found its holder dead; the faster one
    # takes the lease over right then. The slower one removed the lease and created its
    # own (both held it); now its replace finds the lease changed and it looks again.
    _put_lease(moto_s3, bucket, socket.gethostname(), _dead_pid())
    alive = process_alive
    faster: list[lock.DestLock] = []

    def dead_but_another_takes_it_over(pid: int, started: float | None) -> bool:
        if not faster:
            monkeypatch.setattr(lock, "process_alive", alive)
            faster.append(lock.acquire_lock(_mirror(moto_s3, bucket, tmp_path)))
            return False  # what the slower one read: the dead daemon's lease
        return alive(pid, started)

    monkeypatch.setattr(lock, "process_alive", dead_but_another_takes_it_over)
    try:
        with pytest.raises(LockHeld):  # the faster one's, alive (this process)
            lock.acquire_lock(_mirror(moto_s3, bucket, tmp_path))
        assert len(faster) == 1
        assert _lease(moto_s3, bucket)["token"] not in ("old", None)
    finally:
        for held in faster:
            held.release()
    # The faster one's release removed it: a release removes only a lease of its token.
    assert LEASE not in moto_s3.keys(bucket)


def test_a_lease_hosts_backslash_or_esc_is_escaped_once(
    moto_s3: S3Server, bucket: str, tmp_path: Path
) -> None:
    """The host was repr'd, then escaped: `'a\\\\\\\\b\\\\x1b'` for `a\\b` and an ESC."""
    pid = _dead_pid()
    _put_lease(moto_s3, bucket, "a\\b\x1b", pid)
    url = f"s3://{bucket}/p/d"
    done = cli_runner.run("mirror", tmp_path, url, env=moto_s3.env(), timeout=60)
    expected = (
        rf"Error: {url}/.sessionstore-mirror.lock (host 'a\\b\x1b'): already locked by "
        f"process {pid}; stop it or mirror elsewhere\n"
    )
    assert (done.returncode, done.stderr) == (1, expected)

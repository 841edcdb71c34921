"""The test servers themselves: a test run killed by a signal leaves none running.

A killed run executes no fixture teardown, so only the parent-death signal that
`s3_servers._serve` arranges stops the server then.
"""

from __future__ import annotations

import signal
import subprocess
import sys
from pathlib import Path

import cli_runner
import pytest
import s3_servers

pytestmark = [
    pytest.mark.timeout(120),
    pytest.mark.skipif(sys.platform != "linux", reason="the parent-death signal is Linux's"),
]

# Starts one server the way the fixtures do, prints its pid, then waits to be killed.
HOLDER = r"""
import os, sys, time
sys.path.insert(0, sys.argv[1])
import s3_servers
from pathlib import Path

start = getattr(s3_servers, sys.argv[2])
with start(Path(sys.argv[3])) as server:
    me = os.getpid()
    children = Path(f"/proc/{me}/task/{me}/children").read_text().split()
    print(" ".join(children), server.endpoint, flush=True)
    time.sleep(100)
"""


def _running(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()[0]
    except FileNotFoundError:
        return False
    return state != "Z"


@pytest.mark.parametrize("server", ["rclone_server", "seaweedfs_server"])
def test_a_killed_test_run_leaves_no_server_running(tmp_path: Path, server: str) -> None:
    tests = Path(__file__).resolve().parent.parent
    with subprocess.Popen(
        [sys.executable, "-c", HOLDER, str(tests), server, str(tmp_path / "work")],
        stdout=subprocess.PIPE,
        env=cli_runner.environ(),
    ) as holder:  # leaving it closes the pipe and reaps the holder
        try:
            assert holder.stdout is not None
            line = holder.stdout.readline()  # bounded by the server's own readiness timeout
        finally:
            holder.send_signal(signal.SIGKILL)
    *pids, endpoint = line.decode().split() or [""]
    assert len(pids) == 1, line
    cli_runner.wait_for(lambda: not _running(int(pids[0])), f"{server} to die with its parent", 30)
    if server == "seaweedfs_server":  # no teardown ran: its sockets in /tmp stayed
        s3_servers.remove_weed_sockets(endpoint)

"""`sessionstore view` under a flood of idle connections and short of file descriptors.

Real server, real sockets: the thread and CPU figures are read off the
server's own /proc entries, never timed.
"""

from __future__ import annotations

import os
import resource
import select
import socket
import socketserver
import threading
import time
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from http.server import ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from cli_runner import wait_for
from inspect_helpers import trial
from view_helpers import Viewer, viewer

from sessionstore.store.session import Store
from sessionstore.view.limits import MAX_CONNECTIONS, BoundedServer

REQUEST = b"GET /api/sessions/limits01 HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n"


@pytest.fixture
def view(tmp_path: Path) -> Iterator[Viewer]:
    store = Store(tmp_path / "store")
    trial(store.create(id="limits01", pid=None), {"failed": False}, {"a.txt": "a\n"})
    with viewer(store.root) as running:
        yield running


def _threads(pid: int) -> int:
    return len(os.listdir(f"/proc/{pid}/task"))


def _cpu_ticks(pid: int) -> int:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return int(fields[11]) + int(fields[12])  # utime + stime


@contextmanager
def _connections(port: int, count: int) -> Iterator[list[socket.socket]]:
    with ExitStack() as stack:
        socks = []
        for _ in range(count):
            sock = stack.enter_context(socket.create_connection(("127.0.0.1", port), timeout=30))
            socks.append(sock)
        yield socks


def _answered(sock: socket.socket, within: float) -> bool:
    ready, _, _ = select.select([sock], [], [], within)
    return bool(ready)


def test_idle_connections_past_the_bound_wait_in_the_queue_and_are_served_in_turn(
    view: Viewer,
) -> None:
    pid = view.proc.pid
    base = _threads(pid)
    extra = 10
    with _connections(view.port, MAX_CONNECTIONS + extra) as socks:
        # Every one up to the bound gets its thread; none past it.
        wait_for(lambda: _threads(pid) >= base + MAX_CONNECTIONS, "a thread each", timeout=10)
        last = socks[-1]
        last.sendall(REQUEST)
        assert not _answered(last, 1.0), "answered past the bound: no bound"
        assert _threads(pid) == base + MAX_CONNECTIONS
        for sock in socks[:extra]:
            sock.close()  # their handlers read EOF and end: slots free
        assert _answered(last, 30), "still queued after slots freed"
        assert last.recv(12) == b"HTTP/1.0 200"
    assert view.get("/api/sessions/limits01")[0] == 200
    # Every slot comes back once the clients are gone.
    wait_for(lambda: _threads(pid) == base, "every slot back", timeout=10)


def test_short_of_descriptors_it_backs_off_and_serves_again_once_they_free(view: Viewer) -> None:
    pid = view.proc.pid
    soft, hard = resource.prlimit(pid, resource.RLIMIT_NOFILE)
    in_use = len(os.listdir(f"/proc/{pid}/fd"))
    resource.prlimit(pid, resource.RLIMIT_NOFILE, (in_use + 2, hard))
    try:
        with _connections(view.port, 12):
            time.sleep(0.5)  # accepts the two it can, then fails on the rest (EMFILE)
            before = _cpu_ticks(pid)
            time.sleep(2)
            spent = (_cpu_ticks(pid) - before) / os.sysconf("SC_CLK_TCK")
            # A spinning accept loop burns the whole 2 s; backing off, almost nothing.
            assert spent < 0.5, f"{spent:.2f} s of CPU in 2 s while short of descriptors"
    finally:
        resource.prlimit(pid, resource.RLIMIT_NOFILE, (soft, hard))
    status, _, body = view.get("/api/sessions/limits01")
    assert status == 200, body


class _CtrlCOnceItRan(ThreadingHTTPServer):
    """Ctrl-C where it once landed: in `Thread.start`, once the connection's thread has
    run and freed its slot. A real SIGINT hits that instant by chance; here it always."""

    def process_request(self, request: Any, client_address: Any) -> None:
        super().process_request(request, client_address)
        for thread in threading.enumerate():
            if thread.name.endswith("(process_request_thread)"):
                thread.join(timeout=30)
        raise KeyboardInterrupt


class _Interrupted(BoundedServer, _CtrlCOnceItRan):
    pass


def test_ctrl_c_as_a_connection_thread_starts_stops_the_server() -> None:
    # The slot was freed twice (by the thread, then for the interrupted start): the
    # ValueError replaced the KeyboardInterrupt, and the server served on after Ctrl-C.
    server = _Interrupted(("127.0.0.1", 0), socketserver.BaseRequestHandler)
    try:
        port = server.server_address[1]
        with (
            socket.create_connection(("127.0.0.1", port), timeout=30),
            pytest.raises(KeyboardInterrupt),
        ):
            server.handle_request()
        taken = [server._slots.acquire(blocking=False) for _ in range(MAX_CONNECTIONS + 1)]
        assert taken == [True] * MAX_CONNECTIONS + [False]  # every slot free, none extra
    finally:
        server.server_close()

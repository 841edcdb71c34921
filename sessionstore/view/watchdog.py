"""A deadline on each request's head (request line and headers), for `view.server`.

A socket timeout bounds each read, not a request: a client sending a header
byte every few seconds (slowloris) would hold its thread for ever. One
thread watches every connection still reading its head and shuts down the
reading side of those past `HEAD_TIMEOUT`: the handler's read ends, it
answers what it got, and its thread is free.
"""

from __future__ import annotations

import contextlib
import socket
import threading
import time

HEAD_TIMEOUT = 30


class HeadDeadlines:
    """The connections still reading their request head, and when each must be done."""

    def __init__(self) -> None:
        self._due: dict[socket.socket, float] = {}
        self._lock = threading.Lock()
        threading.Thread(target=self._watch, name="view-deadlines", daemon=True).start()

    def start(self, sock: socket.socket) -> None:
        with self._lock:
            self._due[sock] = time.monotonic() + HEAD_TIMEOUT

    def done(self, sock: socket.socket) -> None:
        with self._lock:
            self._due.pop(sock, None)

    def _watch(self) -> None:
        while True:
            time.sleep(1)
            now = time.monotonic()
            with self._lock:
                late = [sock for sock, due in self._due.items() if due < now]
                for sock in late:
                    del self._due[sock]
            for sock in late:
                with contextlib.suppress(OSError):  # closed meanwhile
                    sock.shutdown(socket.SHUT_RD)

"""A deadline on each request's head (request line and headers), and a bound on its size,
for `view.server`.

A socket timeout bounds each read, not a request: a client sending a header
byte every few seconds (slowloris) would hold its thread for ever. One
thread watches every connection still reading its head and shuts down the
reading side of those past `HEAD_TIMEOUT`: the handler's read ends, `done`
says the head was cut, the handler answers 408 (never the request it did
not finish: served, 64 such clients made 64 pages at once), and its thread
is free.

The standard library bounds each header line (64 KiB) and their number
(100), not their sum: 100 lines of 64 KiB, held while they arrive and then
parsed, cost about 30 MB a connection, and 64 connections took the server
from 25 MB to 1.8 GB. `HeadReader` bounds the sum.
"""

from __future__ import annotations

import contextlib
import http.client
import io
import socket
import threading
import time

HEAD_TIMEOUT = 30
HEAD_LIMIT = 64 * 1024  # bytes of header lines, all of them and the blank line


class HeadReader(io.BufferedIOBase):
    """A request's `rfile` while its headers are read: at most `HEAD_LIMIT` bytes in all.

    Past that it raises what `http.client` raises for too many headers, which
    the standard library answers 431; a line is never returned cut short.
    """

    def __init__(self, rfile: io.BufferedIOBase) -> None:
        super().__init__()
        self._rfile = rfile
        self._left = HEAD_LIMIT

    def readline(self, size: int | None = -1, /) -> bytes:
        want = self._left + 1 if size is None or size < 0 else min(size, self._left + 1)
        line = self._rfile.readline(want)
        self._left -= len(line)
        if self._left < 0:
            raise http.client.HTTPException(f"headers past {HEAD_LIMIT} bytes in all")
        return line


class HeadDeadlines:
    """The connections still reading their request head, and when each must be done."""

    def __init__(self) -> None:
        self._due: dict[socket.socket, float] = {}
        self._cut: set[socket.socket] = set()
        self._lock = threading.Lock()
        threading.Thread(target=self._watch, name="view-deadlines", daemon=True).start()

    def start(self, sock: socket.socket) -> None:
        with self._lock:
            self._due[sock] = time.monotonic() + HEAD_TIMEOUT

    def done(self, sock: socket.socket) -> bool:
        """Stop watching `sock`; whether its deadline had passed (its reading side cut)."""
        with self._lock:
            self._due.pop(sock, None)
            if sock in self._cut:
                self._cut.discard(sock)
                return True
            return False

    def _watch(self) -> None:
        while True:
            time.sleep(1)
            now = time.monotonic()
            with self._lock:
                late = [sock for sock, due in self._due.items() if due < now]
                for sock in late:
                    del self._due[sock]
                self._cut.update(late)
            for sock in late:
                with contextlib.suppress(OSError):  # closed meanwhile
                    sock.shutdown(socket.SHUT_RD)

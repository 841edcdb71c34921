"""A bound on the connections `view.server` handles at once, and an accept that cannot spin.

The standard library's threading server starts a thread for every connection
it accepts, with no bound: a client opening thousands of idle connections
costs the server thousands of threads and then every file descriptor. Once
none is left, `accept` fails with EMFILE while the connection stays queued,
so the listening socket is readable again at once and the accepting loop
spins a core until a descriptor frees.

Here at most `MAX_CONNECTIONS` are handled at once. At the bound the
accepting thread waits for one to end (each is bounded: `HEAD_TIMEOUT`, the
idle `TIMEOUT`), and new connections wait in the kernel's backlog, as in a
burst: none is refused (past the backlog the kernel drops SYNs, and the
client retries). An accept that fails for want of a descriptor or of memory
waits `ACCEPT_BACKOFF` before the next try.
"""

from __future__ import annotations

import errno
import socket
import threading
import time
from http.server import ThreadingHTTPServer
from typing import Any

# Far below the usual 1024-descriptor limit: each connection holds its socket and,
# while it reads a record, a few directory and file descriptors.
MAX_CONNECTIONS = 64
ACCEPT_BACKOFF = 0.1  # seconds
# How often a wait for a free slot looks whether the server is shutting down.
_SLOT_POLL = 0.25
_SCARCE = frozenset({errno.EMFILE, errno.ENFILE, errno.ENOBUFS, errno.ENOMEM})


class BoundedServer(ThreadingHTTPServer):
    """A threading HTTP server handling at most `MAX_CONNECTIONS` connections at once."""

    daemon_threads = True

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self._slots = threading.BoundedSemaphore(MAX_CONNECTIONS)
        self._stopping = threading.Event()
        super().__init__(*args, **kwargs)

    def get_request(self) -> tuple[socket.socket, Any]:
        try:
            return super().get_request()
        except OSError as exc:
            if exc.errno in _SCARCE:  # the connection stays queued: try again later, not at once
                time.sleep(ACCEPT_BACKOFF)
            raise  # the standard library drops the failed accept and goes on

    def process_request(self, request: Any, client_address: Any) -> None:
        while not self._slots.acquire(timeout=_SLOT_POLL):
            if self._stopping.is_set():
                self.shutdown_request(request)
                return
        try:
            super().process_request(request, client_address)  # starts its thread
        except Exception:  # no thread started (`can't start new thread`): free the slot
            # Not on Ctrl-C: it can land while `Thread.start` waits for a thread that ran
            # and freed its slot itself. Freeing it twice raised ValueError in place of
            # the KeyboardInterrupt, which the standard library logged, serving on.
            self._slots.release()
            raise

    def process_request_thread(self, request: Any, client_address: Any) -> None:
        try:
            super().process_request_thread(request, client_address)
        finally:
            self._slots.release()

    def shutdown(self) -> None:
        self._stopping.set()  # a wait for a slot ends rather than holding shutdown up
        super().shutdown()

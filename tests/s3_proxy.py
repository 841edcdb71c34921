"""A counting (and optionally slowing) HTTP proxy in front of a loopback S3 server.

The mirror's S3 tests point `AWS_ENDPOINT_URL` at it to count the requests
a pass really sends (retries included: they are counted where they arrive),
to hold multipart part uploads for a while (so a test can kill a mirror
while its upload is certainly in flight), to refuse chosen PUTs, to fail
chosen requests with a status (a 500, a 403), to cut chosen GETs' bodies
short (a connection lost mid-download) and to hold chosen requests until the
test lets them go. It binds
127.0.0.1 and a free port, forwards every request unchanged (the Host header
too: the signature covers it) and is stopped by the test that started it.
"""

from __future__ import annotations

import contextlib
import http.client
import threading
import time
import urllib.parse
from collections import Counter
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

HOST = "127.0.0.1"
_INTERNAL = b"<?xml version='1.0'?><Error><Code>InternalError</Code><Message>x</Message></Error>"
_DENIED = b"<?xml version='1.0'?><Error><Code>AccessDenied</Code><Message>no</Message></Error>"


class Proxy:
    """What the proxy saw: a count of requests by kind (`LIST`, `PUT`, `HEAD`, `PART`, ...)."""

    def __init__(self, upstream: str) -> None:
        parsed = urllib.parse.urlsplit(upstream)
        self.upstream = (parsed.hostname or HOST, parsed.port or 80)
        self.counts: Counter[str] = Counter()
        self.part_delay = 0.0  # seconds each UploadPart request is held before forwarding
        self.refuse = ""  # PUTs whose path holds this are answered 403 AccessDenied
        # Requests whose path holds `fail[0]` are answered with the HTTP status `fail[1]`.
        self.fail: tuple[str, int] | None = None
        # GETs whose path holds `cut[0]` send the first `cut[1]` bytes of their body (with
        # the whole body's Content-Length), then the connection is closed.
        self.cut: tuple[str, int] | None = None
        # Requests whose path holds `hold` (and whose method is `hold_method`, if set) wait
        # (at most 30 s) until `release` is set: a test puts another writer's requests
        # between this one's (counted as "HELD").
        self.hold = ""
        self.hold_method = ""
        self.release = threading.Event()
        # Each LIST's answer body is replaced by what this returns for (its path, the body),
        # sent as a 200: a test makes a server that lists keys it should not, or pages forever.
        self.listing: Callable[[str, bytes], bytes] | None = None
        self.lock = threading.Lock()
        self.endpoint = ""

    def total(self) -> int:
        with self.lock:
            return sum(self.counts.values())

    def reset(self) -> None:
        with self.lock:
            self.counts.clear()

    def snapshot(self) -> dict[str, int]:
        with self.lock:
            return dict(self.counts)


def _kind(method: str, path: str) -> str:
    query = urllib.parse.urlsplit(path).query
    if "partNumber=" in query:
        return "PART"
    if method == "GET" and ("list-type" in query or "prefix=" in query or "uploads" in query):
        return "LIST"
    return method


def _handler(proxy: Proxy) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, format: str, *args: object) -> None:
            pass

        def _forward(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            body = self.rfile.read(length) if length else b""
            kind = _kind(self.command, self.path)
            with proxy.lock:
                proxy.counts[kind] += 1
            if kind == "PART" and proxy.part_delay:
                time.sleep(proxy.part_delay)
            if proxy.hold and proxy.hold in self.path and proxy.hold_method in ("", self.command):
                with proxy.lock:
                    proxy.counts["HELD"] += 1
                proxy.release.wait(30)
            if proxy.refuse and self.command == "PUT" and proxy.refuse in self.path:
                self._answer(403, _DENIED)
                return
            fail = proxy.fail
            if fail is not None and fail[0] in self.path:
                with proxy.lock:
                    proxy.counts["FAILED"] += 1
                self._answer(fail[1], _DENIED if fail[1] == 403 else _INTERNAL)
                return
            conn = http.client.HTTPConnection(*proxy.upstream, timeout=60)
            try:
                headers = {k: v for k, v in self.headers.items() if k.lower() != "connection"}
                conn.request(self.command, self.path, body=body, headers=headers)
                answer = conn.getresponse()
                data = answer.read()
                status, reason = answer.status, answer.reason
                if proxy.listing is not None and kind == "LIST":
                    data, status, reason = proxy.listing(self.path, data), 200, "OK"
                self.send_response(status, reason)
                for key, value in answer.getheaders():
                    if key.lower() not in ("transfer-encoding", "connection", "content-length"):
                        self.send_header(key, value)
                # A HEAD has no body but the object's length, which a client reads as its size.
                size = answer.getheader("Content-Length") if self.command == "HEAD" else None
                self.send_header("Content-Length", size or str(len(data)))
                self.end_headers()
                cut = proxy.cut
                if cut is not None and self.command == "GET" and cut[0] in self.path:
                    self.wfile.write(data[: cut[1]])
                    self.close_connection = True
                elif self.command != "HEAD":
                    self.wfile.write(data)
            finally:
                conn.close()

        def _answer(self, status: int, data: bytes) -> None:
            self.send_response(status)
            self.send_header("Content-Type", "application/xml")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        do_GET = do_PUT = do_POST = do_DELETE = do_HEAD = _forward

    return Handler


@contextlib.contextmanager
def counting_proxy(upstream: str) -> Iterator[Proxy]:
    """A `Proxy` to `upstream` on 127.0.0.1 while the block runs."""
    proxy = Proxy(upstream)
    server = ThreadingHTTPServer((HOST, 0), _handler(proxy))
    server.daemon_threads = True
    proxy.endpoint = f"http://{HOST}:{server.server_address[1]}"
    thread = threading.Thread(target=server.serve_forever, name="s3-proxy", daemon=True)
    thread.start()
    try:
        yield proxy
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=10)

"""Faults between the store and its server, injected by a loopback proxy in front of moto:
a 409 ConditionalRequestConflict, and a conditional PUT that lands but whose answer is lost.
Either way numbers stay unique and gap-free, and a write that landed is ours. And two
writers taking one id's debris at once, one held by a proxy between the other's requests."""

from __future__ import annotations

import http.client
import http.server
import json
import threading
import time
from collections.abc import Iterator
from dataclasses import replace
from email.message import Message
from urllib.parse import urlsplit

import pytest
from s3_proxy import counting_proxy
from s3_servers import S3Server

from sessionstore import Store
from sessionstore.storage.s3 import CLAIM, S3Storage
from sessionstore.storage.s3_config import parse_s3_url
from sessionstore.store import remote

_CONFLICT = (
    b'<?xml version="1.0" encoding="UTF-8"?><Error><Code>ConditionalRequestConflict</Code>'
    b"<Message>A conflicting operation is in progress</Message></Error>"
)


class FaultProxy:
    """Forwards every request to `upstream`; the next `faults` conditional PUTs (those
    with If-None-Match) get `mode`: "conflict" (409, not forwarded) or "lost"
    (forwarded, then the connection is closed without an answer)."""

    def __init__(self, upstream: str) -> None:
        self.upstream = urlsplit(upstream)
        self.mode = "conflict"
        self.faults = 0
        self.injected: list[str] = []
        self.drop = ""  # a request header never forwarded: a server that ignores it
        self._lock = threading.Lock()
        proxy = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def log_message(self, format: str, *args: object) -> None:
                pass

            def _forward(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length) if length else b""
                fault = proxy._take_fault(self.command, self.headers)
                if fault == "conflict":
                    self.send_response(409)
                    self.send_header("Content-Length", str(len(_CONFLICT)))
                    self.end_headers()
                    self.wfile.write(_CONFLICT)
                    return
                status, headers, data = proxy._send(self.command, self.path, self.headers, body)
                if fault == "lost":
                    self.close_connection = True
                    self.connection.shutdown(2)  # landed upstream; the client never hears
                    return
                self.send_response(status)
                for name, value in headers:
                    if name.lower() not in ("transfer-encoding", "connection"):
                        self.send_header(name, value)
                self.end_headers()
                self.wfile.write(data)

            do_GET = do_PUT = do_POST = do_DELETE = do_HEAD = _forward

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.endpoint = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def inject(self, mode: str, count: int = 1) -> None:
        with self._lock:
            self.mode, self.faults = mode, count

    def _take_fault(self, method: str, headers: Message[str, str]) -> str | None:
        with self._lock:
            if method != "PUT" or "If-None-Match" not in headers or self.faults <= 0:
                return None
            self.faults -= 1
            self.injected.append(self.mode)
            return self.mode

    def _send(
        self, method: str, path: str, headers: Message[str, str], body: bytes
    ) -> tuple[int, list[tuple[str, str]], bytes]:
        host = self.upstream.hostname or "127.0.0.1"
        conn = http.client.HTTPConnection(host, self.upstream.port, timeout=30)
        try:
            forwarded = {k: v for k, v in headers.items() if k.lower() != self.drop.lower()}
            conn.request(method, path, body, forwarded)
            response = conn.getresponse()
            data = b"" if method == "HEAD" else response.read()
            return response.status, response.getheaders(), data
        finally:
            conn.close()

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()
        self.thread.join(timeout=10)


@pytest.fixture
def proxy(moto_s3: S3Server, monkeypatch: pytest.MonkeyPatch) -> Iterator[FaultProxy]:
    faulty = FaultProxy(moto_s3.endpoint)
    for name, value in moto_s3.env(AWS_ENDPOINT_URL=faulty.endpoint).items():
        if name.startswith("AWS_"):
            monkeypatch.setenv(name, value)
    try:
        yield faulty
    finally:
        faulty.stop()


@pytest.mark.parametrize("mode", ["conflict", "lost"])
def test_a_fault_on_a_claim_leaves_numbers_gap_free(
    proxy: FaultProxy, moto_s3: S3Server, mode: str
) -> None:
    bucket = moto_s3.new_bucket()
    session = Store(f"s3://{bucket}/runs").create(id="abc")
    proxy.inject(mode, count=2)
    first = session.trials.begin()
    assert proxy.injected == [mode, mode]  # the claim met both faults and still won
    second = session.trials.begin()
    assert (first.n, second.n) == (1, 2)  # a landed claim is ours: no number skipped
    keys = moto_s3.keys(bucket, "runs/abc/trials/")
    assert keys == [f"runs/abc/trials/1/{CLAIM}", f"runs/abc/trials/2/{CLAIM}"]


@pytest.mark.parametrize("mode", ["conflict", "lost"])
def test_a_fault_on_a_marker_still_completes_once(
    proxy: FaultProxy, moto_s3: S3Server, mode: str
) -> None:
    from sessionstore.errors import RecordCompleted

    bucket = moto_s3.new_bucket()
    writer = Store(f"s3://{bucket}/runs").create(id="abc").trials.begin()
    proxy.inject(mode)
    assert writer.complete({"ok": True}).data == {"ok": True}
    assert proxy.injected == [mode]
    with pytest.raises(RecordCompleted):
        writer.complete({"ok": False})
    record = Store(f"s3://{bucket}/runs").open("abc").trials.get(1)
    assert record.data == {"ok": True}


def test_a_lost_create_of_a_key_another_writer_took_with_more_bytes_is_taken(
    proxy: FaultProxy, moto_s3: S3Server
) -> None:
    # The 412 after a lost answer is resolved by reading the object back, limited to our
    # own size: a bigger one (another host's claim, a longer marker) raised `TooLarge`,
    # and `begin` or `complete` failed where the key was simply taken.
    bucket = moto_s3.new_bucket()
    storage = S3Storage(parse_s3_url(f"s3://{bucket}/runs"))
    moto_s3.client().put_object(Bucket=bucket, Key="runs/k", Body=b"theirs, longer than ours")
    proxy.inject("lost")
    assert storage.create("k", b"ours") is False
    assert proxy.injected == ["lost"]
    assert storage.get("k", 100) == b"theirs, longer than ours"


def test_two_creates_taking_one_ids_debris_leave_the_winner_whole(
    moto_s3: S3Server, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Debris (a crashed create's constraints.json) was removed, then the id created: a
    # slower writer's removal deleted what the faster one had created meanwhile, and the
    # faster one's session was left with the slower one's constraints.
    monkeypatch.setattr(remote, "DEBRIS_AGE", 2.0)  # not an hour
    for name, value in moto_s3.env().items():
        if name.startswith("AWS_"):
            monkeypatch.setenv(name, value)
    bucket = moto_s3.new_bucket()
    url = parse_s3_url(f"s3://{bucket}/runs")
    for key in ("constraints.json", "previous/p/report.json"):  # a partial lineage too
        moto_s3.client().put_object(Bucket=bucket, Key=f"runs/x/{key}", Body=b"{}")
    time.sleep(3.5)  # older than DEBRIS_AGE (S3 keeps LastModified in whole seconds)
    direct = S3Storage(url)
    results: dict[str, bool] = {}
    with counting_proxy(moto_s3.endpoint) as proxy:
        proxied = S3Storage(url, replace(direct.settings, endpoint=proxy.endpoint))
        proxy.hold = "?delete"  # the slow writer's removal waits while the fast one creates

        def slow() -> None:
            results["slow"] = remote.create_session(proxied, "x", {"who": "slow"}, {"s": 1}, [])

        thread = threading.Thread(target=slow)
        thread.start()
        for _ in range(300):  # until it holds, or is done without a removal to hold
            if proxy.snapshot().get("HELD") or not thread.is_alive():
                break
            time.sleep(0.05)
        results["fast"] = remote.create_session(direct, "x", {"who": "fast"}, {"f": 1}, [])
        proxy.release.set()
        thread.join(timeout=60)
    assert sorted(results.values()) == [False, True]  # one winner
    winner = next(who for who, won in results.items() if won)
    assert json.loads(direct.get("x/session.json", 1000) or b"") == {"who": winner}
    assert json.loads(direct.get("x/constraints.json", 1000) or b"") == {winner[0]: 1}
    assert moto_s3.keys(bucket) == ["runs/x/constraints.json", "runs/x/session.json"]


def test_a_server_that_ignores_if_match_is_refused_unless_single_writer(
    proxy: FaultProxy, moto_s3: S3Server
) -> None:
    # It enforced If-None-Match, so the probe let it write; but a crashed create's debris
    # is taken over with If-Match, which it ignored: two `new`s of that id both replaced
    # its constraints, and the loser's removal of the debris took the winner's lineage.
    from sessionstore.errors import StorageError

    proxy.drop = "If-Match"
    bucket = moto_s3.new_bucket()
    with pytest.raises(StorageError, match=r"ignores If-Match \(conditional replace\)"):
        Store(f"s3://{bucket}/runs").create(id="abc")
    assert moto_s3.keys(bucket) == []  # the probe cleaned up; nothing else was written
    # Accepted as single-writer when asked again in the same process (the refusal's gate,
    # left pending on the shared storage, refused it too).
    Store(f"s3://{bucket}/runs", single_writer=True).create(id="abc")
    assert moto_s3.keys(bucket) == ["runs/abc/constraints.json", "runs/abc/session.json"]


def test_a_tail_is_the_size_and_bytes_of_one_version(
    moto_s3: S3Server, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A HEAD for the size, then a range of the bytes: an object replaced between the two
    # (a log the mirror puts again) was read as one version's size and another's bytes,
    # or failed when it had shrunk. One suffix-range GET answers both.
    for name, value in moto_s3.env().items():
        if name.startswith("AWS_"):
            monkeypatch.setenv(name, value)
    bucket = moto_s3.new_bucket()
    client = moto_s3.client()
    client.put_object(Bucket=bucket, Key="runs/log", Body=b"x" * 100 + b"\nold last line\n")
    url = parse_s3_url(f"s3://{bucket}/runs")
    found: list[object] = []
    with counting_proxy(moto_s3.endpoint) as proxy:
        storage = S3Storage(url, replace(S3Storage(url).settings, endpoint=proxy.endpoint))
        proxy.hold, proxy.hold_method = "/runs/log", "GET"
        thread = threading.Thread(target=lambda: found.append(storage.tail("log", 20)))
        thread.start()
        for _ in range(300):  # until the GET is held
            if proxy.snapshot().get("HELD") or not thread.is_alive():
                break
            time.sleep(0.05)
        client.put_object(Bucket=bucket, Key="runs/log", Body=b"new\n")
        proxy.release.set()
        thread.join(timeout=60)
    assert found == [(4, b"new\n")]
    client.put_object(Bucket=bucket, Key="runs/empty", Body=b"")
    assert S3Storage(url).tail("empty", 20) == (0, b"")  # no range to ask of it
    assert S3Storage(url).tail("absent", 20) is None

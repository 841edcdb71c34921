"""`sessionstore view` is read-only and never reads outside the store: from real clients.

Paths are sent byte for byte over a raw socket (http.client and browsers
normalise `..`), so the server sees exactly what an attacker would send.
"""

from __future__ import annotations

import os
import re
import select
import signal
import socket
import struct
from collections.abc import Iterator
from pathlib import Path

import pytest
from cli_runner import finish, popen, reap, run, wait_for
from inspect_helpers import trial
from mirror_helpers import make_deep, remove_deep
from view_helpers import SCRIPT_BODY, SCRIPT_NAME, Viewer, one, rich_session, soup, viewer

from sessionstore.store.session import MAX_RECORD_DEPTH, Store
from sessionstore.view.watchdog import HEAD_TIMEOUT

SECRET = b"the-secret-outside-the-store"
BIG = 64 << 20


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Viewer, Path]]:
    base = tmp_path_factory.mktemp("safety")
    outside = base / "outside"
    outside.mkdir()
    (outside / "secret.txt").write_bytes(SECRET)
    (outside / "session.json").write_bytes(b'{"id": "outside"}')
    store = Store(base / "store")
    session = rich_session(store)
    record = session.trials.get(1).path
    os.symlink(outside / "secret.txt", record / "link.txt")
    os.symlink(outside, record / "linkdir")
    os.mkfifo(record / "pipe.log")
    # A session directory and a record directory that are symlinks to the outside.
    os.symlink(outside, store.root / "evil0001")
    os.symlink(outside, session.trials.path / "9")
    other = store.create(id="other001", pid=None)
    trial(other, {"failed": False}, {"a.txt": "a\n"})
    with open(other.trials.get(1).path / "big.bin", "wb") as f:
        f.truncate(BIG)  # sparse: more than loopback's socket buffers hold
    with viewer(store.root) as running:
        yield running, outside


def _status(response: bytes) -> int:
    return int(response.split(b" ", 2)[1])


@pytest.mark.parametrize(
    "path",
    [
        "/s/../outside/secret.txt",
        "/s/rich0001/../../outside/secret.txt",
        "/s/rich0001/trials/1/files/../../../../outside/secret.txt",
        "/s/rich0001/trials/1/files/%2e%2e/%2e%2e/%2e%2e/%2e%2e/outside/secret.txt",
        "/s/rich0001/trials/1/files/%2E%2E%2F%2E%2E%2Fsession.json",
        "/s/rich0001/trials/1/files/..%2f..%2f..%2fsession.json",
        "/s/rich0001/trials/1/files//etc/passwd",
        "/s/rich0001/trials/1/files/%2Fetc%2Fpasswd",
        "//etc/passwd",
        "//s/rich0001",
        "///api/sessions",
        "/s/%2e%2e",
        "/s/rich0001/trials/1/files/./run.log",
        "/s/rich0001/trials/1/files/run.log%00.txt",
        "/s/rich0001/trials/1/files/link.txt",
        "/s/rich0001/trials/1/files/linkdir/secret.txt",
        "/s/rich0001/trials/1/files/pipe.log",
        "/s/rich0001/trials/9",
        "/s/rich0001/trials/9/files/secret.txt",
        "/s/evil0001",
        "/api/sessions/evil0001",
        "/s/evil0001/trials/1",
        "/s/rich0001/trials/0",
        "/s/rich0001/trials/01",
        "/s/rich0001/trials/99",
        "/s/rich0001/files/session.json",
        "/s/rich0001/trials/1/files/trial.json/x",
        "/s/rich0001/trials/1/files/patches",
        "http://127.0.0.1/etc/passwd",
        "/etc/passwd",
        "/s/other001/trials/1/files/../../../rich0001/trials/1/run.log",
        "/?" + "&".join(f"f{i}=1" for i in range(50)),
    ],
)
def test_paths_outside_the_store_are_404_and_never_read(
    site: tuple[Viewer, Path], path: str
) -> None:
    view, _ = site
    response = view.raw(f"GET {path} HTTP/1.0")
    assert _status(response) == 404, response[:200]
    assert SECRET not in response and b"root:" not in response
    assert b"X-Content-Type-Options: nosniff" in response


def test_a_fifo_is_refused_at_once_and_the_listing_shows_why(site: tuple[Viewer, Path]) -> None:
    view, _ = site
    status, _, body = view.get("/s/rich0001/trials/1")
    assert status == 200 and SECRET not in body
    # The planted entries are listed with why they are not read; their targets never are.
    assert b"pipe.log" in body and b"not a regular file" in body
    assert b"link.txt" in body and b"symlink" in body


@pytest.mark.parametrize(
    "method", ["POST", "PUT", "DELETE", "PATCH", "OPTIONS", "TRACE", "CONNECT", "PROPFIND", "FOO"]
)
def test_any_method_but_get_and_head_is_405(site: tuple[Viewer, Path], method: str) -> None:
    view, _ = site
    for path in ("/", "/s/rich0001", "/api/sessions", "/s/../x"):
        response = view.raw(f"{method} {path} HTTP/1.0")
        assert _status(response) == 405, (method, path, response[:200])
        assert b"\r\nAllow: GET, HEAD\r\n" in response


def test_head_sends_headers_only(site: tuple[Viewer, Path]) -> None:
    view, _ = site
    status, headers, body = view.get("/s/rich0001", method="HEAD")
    assert status == 200 and body == b""
    assert int(headers["Content-Length"]) > 1000
    assert headers["X-Content-Type-Options"] == "nosniff"
    assert "script-src 'sha256-" in headers["Content-Security-Policy"]


def test_a_script_named_file_is_text(site: tuple[Viewer, Path]) -> None:
    view, _ = site
    status, headers, body = view.get("/s/rich0001/trials/1")
    assert status == 200
    assert b"<script>alert" not in body and b"<img src=x" not in body
    doc = soup(body)
    assert len(doc.find_all("script")) == 1  # the page's own, allowed by its hash
    heading = next(h for h in doc.find_all("h3") if h.get_text() == SCRIPT_NAME)
    shown = heading.find_next_sibling("pre")
    assert shown is not None and shown.get_text() == SCRIPT_BODY
    assert "frame-ancestors 'none'" in headers["Content-Security-Policy"]
    status, headers, raw = view.get("/s/rich0001/trials/1/files/%3Cscript%3E")
    assert (status, raw) == (200, SCRIPT_BODY.encode())
    assert headers["Content-Type"] == "text/plain; charset=utf-8"
    assert headers["Content-Security-Policy"] == "default-src 'none'; sandbox"


def _listening(store: Path, host: str) -> tuple[str, str]:
    """(the URL line, stderr) of `view --host HOST --port 0`, stopped once it listens."""
    proc = popen("view", "--store", store, "--host", host, "--port", "0")
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline().decode()
        proc.send_signal(signal.SIGINT)
        code, _, err = finish(proc)
    finally:
        reap(proc)
    assert code == 130 and line.startswith("http://"), (host, line, err)
    return line, err


def _loopback_name() -> str:
    """A host name (not `localhost`) this machine resolves to a loopback address."""
    name = socket.gethostname()
    try:
        if name != "localhost" and socket.gethostbyname(name).startswith("127."):
            return name
    except OSError:
        pass
    pytest.skip(f"the host name {name!r} does not resolve to loopback here")


@pytest.mark.parametrize("spelled", ["127.1", "0x7f000001", "127.0.0.2", "[::1]", "name"])
def test_loopback_however_spelled_is_not_warned_about(tmp_path: Path, spelled: str) -> None:
    # Decided by the spelling, `127.1` or a name resolving to 127.0.0.1 was warned about
    # as the network; `[::1]` (as a URL spells it) could not be bound at all.
    if spelled == "[::1]" and not socket.has_ipv6:
        pytest.skip("no IPv6 here")
    host = _loopback_name() if spelled == "name" else spelled
    (tmp_path / "store").mkdir()
    line, err = _listening(tmp_path / "store", host)
    assert "warning" not in err, err
    assert re.fullmatch(r"http://(127\.0\.0\.[12]|\[::1\]):\d+/\n", line), line


def test_every_interface_is_warned_about(tmp_path: Path) -> None:
    # `0` binds 0.0.0.0: the warning comes before the URL, so before any request is
    # answered. (The store is empty, and the server stops as soon as it listens.)
    (tmp_path / "store").mkdir()
    line, err = _listening(tmp_path / "store", "0")
    assert re.fullmatch(r"http://0\.0\.0\.0:\d+/\n", line), line
    (warning,) = err.splitlines()[:1]
    assert warning.startswith("warning: listening on 0: the store ")
    assert "visible to the network" in warning


def test_an_address_that_cannot_be_bound_is_the_error_alone(tmp_path: Path) -> None:
    (tmp_path / "store").mkdir()
    # 192.0.2.1 (TEST-NET-1) is no address of this machine: nothing listens, so nothing
    # becomes visible to the network and there is no warning; the error names it.
    result = run("view", "--store", tmp_path / "store", "--host", "192.0.2.1", "--port", "9")
    assert result.returncode == 1
    (error,) = result.stderr.splitlines()
    assert error.startswith("Error: --host 192.0.2.1 --port 9: cannot listen:")
    assert result.stdout == ""


def test_a_busy_port_and_a_missing_store_are_clear_errors(
    site: tuple[Viewer, Path], tmp_path: Path
) -> None:
    view, _ = site
    (tmp_path / "store").mkdir()
    busy = run("view", "--store", tmp_path / "store", "--port", str(view.port))
    assert busy.returncode == 1
    assert busy.stderr.startswith(f"Error: --host 127.0.0.1 --port {view.port}: cannot listen:")
    missing = run("view", "--store", tmp_path / "nope")
    assert missing.returncode == 1
    assert missing.stderr == f"Error: {tmp_path / 'nope'}: is not a directory; no store to view\n"


def test_prints_its_url_on_one_line_and_ctrl_c_ends_it(tmp_path: Path) -> None:
    (tmp_path / "store").mkdir()
    proc = popen("view", "--store", tmp_path / "store", "--port", "0")
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline().decode()
        assert re.fullmatch(r"http://127\.0\.0\.1:[1-9]\d*/\n", line), line
        port = int(line.rsplit(":", 1)[1].rstrip("/\n"))
        with socket.create_connection(("127.0.0.1", port), timeout=30):
            pass  # it listens on the port it printed
        proc.send_signal(signal.SIGINT)
        code, out, err = finish(proc)
    finally:
        reap(proc)
    assert (code, out) == (130, "")
    assert "Traceback" not in err


def _answer(view: Viewer, request: bytes) -> tuple[bytes, dict[str, str], bytes]:
    """(status line, headers, body) of the response to `request` sent byte for byte."""
    with socket.create_connection(("127.0.0.1", view.port), timeout=30) as sock:
        sock.sendall(request)
        chunks = []
        while chunk := sock.recv(65536):
            chunks.append(chunk)
    head, _, body = b"".join(chunks).partition(b"\r\n\r\n")
    status, *lines = head.decode("latin-1").split("\r\n")
    headers = dict(line.split(": ", 1) for line in lines)
    return status.encode(), headers, body


@pytest.mark.parametrize(
    "host",
    ["evil.example.com", "evil.example.com:80", "127.0.0.1.evil.example", "[::2]:1", "[", "[::1"],
)
def test_a_foreign_host_header_is_refused(site: tuple[Viewer, Path], host: str) -> None:
    # DNS rebinding: a page of evil.example.com whose name now resolves to 127.0.0.1
    # reaches the loopback server with its own name as Host; it must read nothing.
    view, _ = site
    for path in ("/api/sessions", "/s/rich0001/trials/1/files/run.log"):
        request = f"GET {path} HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n"
        status, headers, body = _answer(view, request.encode())
        assert status.startswith(b"HTTP/1.0 403 "), (host, status)
        assert b"rich0001" not in body and b"PASS" not in body
        assert headers["X-Content-Type-Options"] == "nosniff"


@pytest.mark.parametrize(
    "hosts",
    [
        "Host: 127.0.0.1\r\nHost: evil.example.com",
        "Host: evil.example.com\r\nHost: 127.0.0.1",
        "Host : evil.example.com",
        "Host\t: evil.example.com",
    ],
)
def test_an_ambiguous_host_is_400(site: tuple[Viewer, Path], hosts: str) -> None:
    # The Host check read the first of two Host headers, and `Host : x` (whitespace
    # before the colon) as no Host at all: served. RFC 9112 answers both 400.
    view, _ = site
    request = f"GET /api/sessions HTTP/1.1\r\n{hosts}\r\n\r\n"
    status, headers, body = _answer(view, request.encode())
    assert status.startswith(b"HTTP/1.0 400 "), (hosts, status)
    assert b"rich0001" not in body and headers["X-Content-Type-Options"] == "nosniff"


@pytest.mark.parametrize(
    "host",
    [
        "127.0.0.1:{port}",
        "localhost:{port}",
        "LOCALHOST",
        "127.0.0.2",
        "[::1]:{port}",
        "app.localhost:{port}",
    ],
)
def test_loopback_host_headers_are_served(site: tuple[Viewer, Path], host: str) -> None:
    view, _ = site
    request = f"GET /api/sessions HTTP/1.1\r\nHost: {host.format(port=view.port)}\r\n\r\n"
    status, _, body = _answer(view, request.encode())
    assert status.startswith(b"HTTP/1.0 200 ") and b"rich0001" in body


@pytest.mark.parametrize("spelled", ["127.1", "2130706433", "0x7f000001"])
def test_loopback_spelled_otherwise_keeps_the_host_check(tmp_path: Path, spelled: str) -> None:
    # `--host 127.1` (or another inet_aton spelling) binds loopback as `127.0.0.1` does;
    # decided by its spelling, it was taken for the network and every Host was served:
    # DNS rebinding read the store. The spelling itself is a Host it answers.
    store = Store(tmp_path / "store")
    rich_session(store)
    with viewer(store.root, "--host", spelled, log_dir=tmp_path) as view:
        for host, code in ((f"{spelled}:{view.port}", b"200"), ("evil.example.com", b"403")):
            request = f"GET /api/sessions HTTP/1.1\r\nHost: {host}\r\n\r\n"
            status, _, body = _answer(view, request.encode())
            assert status.startswith(b"HTTP/1.0 " + code), (host, status)
            assert (b"rich0001" in body) is (code == b"200")


def test_loopback_mapped_into_ipv6_keeps_the_host_check(tmp_path: Path) -> None:
    # `--host ::ffff:127.0.0.1` binds IPv4 loopback alone, but Python before 3.13 calls
    # that address no loopback: it warned of the network and served every Host (DNS
    # rebinding read the store).
    try:
        with socket.socket(socket.AF_INET6) as probe:
            probe.bind(("::ffff:127.0.0.1", 0))
    except OSError as exc:
        pytest.skip(f"no IPv4-mapped IPv6 here: {exc}")
    store = Store(tmp_path / "store")
    rich_session(store)
    proc = popen("view", "--store", store.root, "--host", "::ffff:127.0.0.1", "--port", "0")
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline().decode()
        match = re.fullmatch(r"http://\[::ffff:127\.0\.0\.1\]:(\d+)/\n", line)
        assert match, line
        view = Viewer(proc, line.strip(), int(match.group(1)))
        for host, answer in (("[::ffff:127.0.0.1]", b"200"), ("evil.example.com", b"403")):
            request = f"GET /api/sessions HTTP/1.1\r\nHost: {host}\r\n\r\n"
            status, _, body = _answer(view, request.encode())
            assert status.startswith(b"HTTP/1.0 " + answer), (host, status)
            assert (b"rich0001" in body) is (answer == b"200")
        proc.send_signal(signal.SIGINT)
        code, _, err = finish(proc)
    finally:
        reap(proc)
    assert code == 130
    assert "warning" not in err


@pytest.mark.parametrize(
    "request_bytes",
    [
        b"GARBAGE\r\n\r\n",
        b"GET / HTTP/2.0\r\n\r\n",
        b"GET / HTTP/1.x\r\n\r\n",
        b"GET / HTTP/1.0 extra\r\n\r\n",
        b"GET / HTTP/1.0\r\nX: " + b"a" * 70_000 + b"\r\n\r\n",
        b"GET / HTTP/1.0\r\n" + b"".join(b"X%d: 1\r\n" % i for i in range(120)) + b"\r\n",
        b"GET /" + b"a" * 70_000 + b" HTTP/1.0\r\n\r\n",
        b"GET /s/rich0001/trials/1/files/%3Cscript%3E\r\n\r\n",  # HTTP/0.9: no headers asked
    ],
)
def test_malformed_requests_are_answered_with_the_safety_headers(
    site: tuple[Viewer, Path], request_bytes: bytes
) -> None:
    view, _ = site
    status, headers, body = _answer(view, request_bytes)
    assert re.fullmatch(rb"HTTP/1\.[01] [2-5]\d\d .*", status), status
    assert headers["X-Content-Type-Options"] == "nosniff"
    assert "Content-Security-Policy" in headers
    if not status.startswith(b"HTTP/1.0 200 "):
        assert headers["Content-Type"] == "text/plain; charset=utf-8"
        assert b"<" not in body  # the client's bytes are never echoed as markup


def test_a_raw_byte_past_ascii_in_the_target_is_400_not_another_file(tmp_path: Path) -> None:
    # The request line is read as Latin-1: a raw `\xff` named the file `ÿ` (UTF-8 c3 bf),
    # not the file `%FF` names, and a raw `é` (c3 a9) was 404 while `%C3%A9` served it.
    # RFC 9112: a target is ASCII; a server answers 400 rather than guess.
    store = Store(tmp_path / "store")
    session = store.create(id="names001", pid=None)
    files: dict[str, str | bytes] = {
        "é.txt": "e-acute\n",
        "ÿ.txt": "y-umlaut\n",
        os.fsdecode(b"\xff.txt"): "ff\n",
    }
    trial(session, {"failed": False}, files)
    base = "/s/names001/trials/1/files/"
    with viewer(store.root) as view:
        for encoded, body in (("%C3%A9.txt", b"e-acute\n"), ("%FF.txt", b"ff\n")):
            response = view.raw(f"GET {base}{encoded} HTTP/1.0")
            assert _status(response) == 200 and response.endswith(b"\r\n\r\n" + body)
        for raw in ("\xc3\xa9.txt", "\xff.txt", "a\x01b", "\x7f"):
            response = view.raw(f"GET {base}{raw} HTTP/1.0")
            assert _status(response) == 400, (raw, response[:200])
            assert b"y-umlaut" not in response and b"X-Content-Type-Options: nosniff" in response


def test_headers_past_64_kib_in_all_are_431(site: tuple[Viewer, Path]) -> None:
    # Each line under 64 KiB and fewer than 100 of them, which is all the standard
    # library bounds: 100 such lines held about 30 MB a connection, and 64 connections
    # took the server to 1.8 GB. The sum is bounded too; a head just under it is served.
    view, _ = site
    for count, code in ((15, b"200"), (17, b"431")):
        lines = b"".join(b"X-%d: %s\r\n" % (i, b"a" * 4000) for i in range(count))
        request = b"GET /api/sessions HTTP/1.0\r\n" + lines + b"\r\n"
        status, headers, body = _answer(view, request)
        assert status.startswith(b"HTTP/1.0 " + code), (count, status)
        assert headers["X-Content-Type-Options"] == "nosniff"
        assert (b"rich0001" in body) is (code == b"200")


def test_a_burst_of_connections_is_queued_while_the_server_is_busy(
    site: tuple[Viewer, Path],
) -> None:
    # Slow clients and bursts: while the server is stalled (stopped here), the kernel
    # must queue new connections, not drop them (a dropped SYN costs a client >= 1 s);
    # once it runs again every one is answered.
    view, _ = site
    socks: list[socket.socket] = []
    os.kill(view.proc.pid, signal.SIGSTOP)
    try:
        for _ in range(100):
            sock = socket.create_connection(("127.0.0.1", view.port), timeout=5)
            socks.append(sock)
            sock.sendall(b"GET /api/sessions/other001 HTTP/1.0\r\n\r\n")
    finally:
        os.kill(view.proc.pid, signal.SIGCONT)
    try:
        for sock in socks:
            sock.settimeout(30)
            assert sock.recv(12) == b"HTTP/1.0 200"
    finally:
        for sock in socks:
            sock.close()


@pytest.mark.parametrize("host", ["192.0.2.1", "no-such-host.invalid", "[]"])
def test_an_address_that_cannot_be_bound_names_it_even_with_port_0(
    tmp_path: Path, host: str
) -> None:
    (tmp_path / "store").mkdir()
    result = run("view", "--store", tmp_path / "store", "--host", host, "--port", "0")
    assert result.returncode == 1
    (error,) = result.stderr.splitlines()  # no network warning: nothing listens
    assert error.startswith(f"Error: --host {host} --port 0: cannot listen: "), error


def test_a_client_dribbling_its_request_head_is_cut_off(site: tuple[Viewer, Path]) -> None:
    # Slowloris: a header byte every second never trips the 30 s idle timeout, so
    # without a deadline on the whole head one client holds a thread for ever. What it
    # sent by then is no whole request: 408, never served (64 such clients, all cut at
    # once, had 64 pages made at once).
    view, _ = site
    with socket.create_connection(("127.0.0.1", view.port), timeout=30) as sock:
        sock.sendall(b"GET /api/sessions/other001 HTTP/1.0\r\n")
        answer = None
        for _ in range(HEAD_TIMEOUT + 30):  # well past the deadline, bounded
            try:
                sock.sendall(b"X")
            except OSError:  # reset: the server closed its side
                answer = b""
                break
            ready, _, _ = select.select([sock], [], [], 1)
            if ready:  # answered (or closed) before the head ended
                chunks = []
                while chunk := sock.recv(65536):
                    chunks.append(chunk)
                answer = b"".join(chunks)
                break
        assert answer is not None, "the server still waits for the request head"
    assert answer.startswith(b"HTTP/1.0 408 ") or answer == b"", answer[:100]
    assert b"other001" not in answer
    status, _, _ = view.get("/api/sessions/other001")
    assert status == 200  # and serves everyone else meanwhile


def test_an_http09_request_is_answered_without_waiting_for_headers(
    site: tuple[Viewer, Path],
) -> None:
    # HTTP/0.9: a request line and no headers, so no blank line after them; the client
    # waits for the answer. Waiting for headers, the server would answer only once the
    # head deadline cut it off: the guard is half that deadline, a hang guard.
    view, _ = site
    with socket.create_connection(("127.0.0.1", view.port), timeout=30) as sock:
        sock.sendall(b"GET /api/sessions/other001\r\n")
        ready, _, _ = select.select([sock], [], [], HEAD_TIMEOUT / 2)
        assert ready, "no answer: the server waits for headers HTTP/0.9 never sends"
        chunks = []
        while chunk := sock.recv(65536):
            chunks.append(chunk)
    head, _, body = b"".join(chunks).partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.0 200 ") and b"\r\nX-Content-Type-Options: nosniff" in head
    assert b'"other001"' in body


def test_a_client_that_resets_mid_answer_is_one_escaped_log_line(
    site: tuple[Viewer, Path],
) -> None:
    view, outside = site
    log = outside.parent / "view.log"
    start = log.stat().st_size
    with socket.create_connection(("127.0.0.1", view.port), timeout=30) as sock:
        path = "/s/other001/trials/1/files/big.bin"
        sock.sendall(f"GET {path} HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n".encode())
        head = b""
        for _ in range(100):  # the status line and headers, then leave mid-body
            head += sock.recv(4096)
            if b"\r\n\r\n" in head:
                break
        assert head.startswith(b"HTTP/1.0 200 ") and f"{BIG}".encode() in head
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    # Closed with unread data and no linger: a reset, while the server writes the body.

    def logged() -> str:
        return log.read_bytes()[start:].decode("utf-8", "replace")

    gone = re.compile(r".*(ConnectionReset|BrokenPipe)Error.*")
    wait_for(lambda: gone.search(logged()) is not None, "the reset in the server's log")
    assert "Traceback" not in logged() and "Exception occurred" not in logged()
    (line,) = [line for line in logged().splitlines() if gone.fullmatch(line)]
    assert re.fullmatch(
        r"127\.0\.0\.1 the client left: (ConnectionReset|BrokenPipe)Error: .+", line
    )
    assert view.get("/api/sessions/other001")[0] == 200  # and it serves on


def test_a_path_deeper_than_a_record_is_listed_is_refused_before_any_listing(
    tmp_path: Path,
) -> None:
    # Each level of a path is checked against its parent's listing, and past PATH_MAX
    # each listing opens every level from the store's root: a file 4,000 levels down
    # cost minutes of one core. Refused at once (the client's 30 s is a hang guard).
    store = Store(tmp_path / "store")
    session = store.create(id="deep0001", pid=None)
    trial(session, {"failed": False}, {"a.txt": "a\n"})
    record = session.trials.get(1).path
    make_deep(record / "deep", 4000)
    make_deep(record / "edge", MAX_RECORD_DEPTH - 1)  # its file: the deepest a record lists
    make_deep(record / "over", MAX_RECORD_DEPTH)  # one level deeper
    files = "/s/deep0001/trials/1/files/"
    edge = "edge/" + "d/" * (MAX_RECORD_DEPTH - 1) + "bottom.txt"
    try:
        with viewer(store.root) as view:
            assert view.get(files + "deep/" + "d/" * 4000 + "bottom.txt")[0] == 404
            assert view.get(files + "over/" + "d/" * MAX_RECORD_DEPTH + "bottom.txt")[0] == 404
            status, _, body = view.get(files + edge)
            assert (status, body) == (200, b"at the bottom")
            # What is served is what the record page lists.
            page = soup(view.get("/s/deep0001/trials/1")[2])
            listed = [one(tr, "td").get_text() for tr in page.select("table.files tbody tr")]
            assert listed == ["a.txt", edge, "trial.json"]
    finally:
        for name in ("deep", "edge", "over"):
            remove_deep(record / name)

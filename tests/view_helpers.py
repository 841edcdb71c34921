"""Sessions, a real `sessionstore view` process and HTML parsing for the tests of `view`.

Sessions are written through the public writer API (real files); only what
the API refuses to produce (torn markers, foreign entries, symlinks, odd
names) is planted raw. The server is a real `python -m sessionstore view
--port 0` process on 127.0.0.1; requests go through `http.client`, or a raw
socket where the path must reach the server exactly as written.
"""

from __future__ import annotations

import http.client
import os
import re
import socket
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import cli_runner
from bs4 import BeautifulSoup, Tag
from inspect_helpers import attempt, metrics, torn_trial, trial

from sessionstore.store.session import Session, Store

# An attribute value that names something outside the document (or the server).
EXTERNAL = re.compile(r"^\s*(?:[a-z][a-z0-9+.-]*:|//)", re.IGNORECASE)
HOSTILE_NAME = "<script>alert('pwned')</script>\x1b[31m\u202e"
# Secret-shaped: what a token looks like; it must be shown as text, escaped, not run.
SECRET_NAME = "hf_AbCdEfGhIjKlMnOpQrStUvWxYz0123456789<img src=x onerror=alert(1)>"
SCRIPT_NAME = "<script>"
SCRIPT_BODY = "<script>alert('from a file')</script>\n"
BAD_BYTES_NAME = os.fsdecode(b"ctl-\xff\xfe-\x07name.log")


def rich_session(store: Store) -> Session:
    """One session with every kind of record: completed (a pass, a FAIL), torn, in
    flight, a foreign entry, a verification attempt, hostile and non-UTF-8 names."""
    session = store.create(
        id="rich0001",
        name=HOSTILE_NAME,
        trials=6,
        constraints={"max_ttft_ms.mean": 200},
        labels={"team": "infra", "kind": "<b>bold</b>"},
        pid=None,
    )
    contract = {"output_contract": {"log": "run.log"}}
    trial(
        session,
        metrics(950.5, 150.0) | contract | {"learned": "fp8 fits"},
        {
            "task.yml": "model: m\nbatch: 32\n",
            "run.log": "start\nttft 150 ms\nPASS\n",
            "patches/0001.diff": "--- a/x\n+++ b/x\n@@ -1 +1 @@\n-old\n+new\n",
            "blob.bin": b"\x00\x01\x02\xff" * 64,
            SECRET_NAME: "secret-shaped file\n",
            SCRIPT_NAME: SCRIPT_BODY,
            BAD_BYTES_NAME: "bytes that are not UTF-8 in the name\n",
        },
    )
    trial(
        session,
        metrics(1320.0, 240.0) | contract,
        {"task.yml": "model: m\nbatch: 64\n", "run.log": "start\nFAIL:ttft 240 ms\n"},
    )
    torn_trial(session)
    trial(session, None, {"task.yml": "model: m\nbatch: 40\n"})
    (session.trials.path / "notes.txt").write_text("a foreign entry\n")
    os.mkdir(session.trials.path / os.fsdecode(b"bad-\xff\x1b[2J"))
    attempt(session, {"trial": 1, "status": "verified"})
    return session


def big_session(store: Store, trials: int = 1000, session_id: str = "big00001") -> Session:
    """A session of `trials` completed trials, every tenth failed, each with a config."""
    session = store.create(
        id=session_id, name="big", trials=trials, constraints={"max_ttft_ms.mean": 300}, pid=None
    )
    for n in range(1, trials + 1):
        marker = metrics(500.0 + (n * 37) % 900, 100.0 + (n * 13) % 300)
        if n % 10 == 0:
            marker["failed"] = True
        trial(session, marker, {"task.yml": f"model: m\nbatch: {n}\n"})
    return session


def soup(html: str | bytes) -> BeautifulSoup:
    """The document as a browser's HTML parser builds it (html.parser: the standard library)."""
    return BeautifulSoup(html, "html.parser")


def one(node: Tag, selector: str) -> Tag:
    """The first element `selector` matches below `node` (CSS)."""
    found = node.select_one(selector)
    assert isinstance(found, Tag), f"nothing matches {selector!r}"
    return found


def sibling(node: Tag, name: str) -> Tag:
    """The next sibling element of `node` named `name`."""
    found = node.find_next_sibling(name)
    assert isinstance(found, Tag), f"no <{name}> after <{node.name}>"
    return found


def hover(node: Tag) -> str:
    """The hover text of an SVG element: its `<title>`."""
    return one(node, "title").get_text()


def external_refs(doc: BeautifulSoup) -> list[str]:
    """Every attribute value of every element that refers outside the document."""
    found = []
    for tag in doc.find_all(True):
        assert isinstance(tag, Tag)
        for name, value in tag.attrs.items():
            values = value if isinstance(value, list) else [value]
            for item in values:
                if name == "content" and tag.name == "meta":
                    continue  # CSP and viewport values, not references
                if EXTERNAL.match(str(item)) and not str(item).startswith("data:"):
                    found.append(f"<{tag.name} {name}={item!r}>")
    return found


@dataclass
class Viewer:
    """A running `sessionstore view` process and its base URL."""

    proc: subprocess.Popen[bytes]
    url: str
    port: int

    def get(self, path: str, method: str = "GET") -> tuple[int, dict[str, str], bytes]:
        """(status, headers, body) of one request through http.client."""
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=30)
        try:
            conn.request(method, path)
            response = conn.getresponse()
            return response.status, dict(response.getheaders()), response.read()
        finally:
            conn.close()

    def raw(self, request_line: str) -> bytes:
        """The whole response to a request line sent byte for byte (no client normalising)."""
        with socket.create_connection(("127.0.0.1", self.port), timeout=30) as sock:
            sock.sendall(f"{request_line}\r\nHost: 127.0.0.1\r\n\r\n".encode("latin-1"))
            chunks = []
            while chunk := sock.recv(65536):
                chunks.append(chunk)
        return b"".join(chunks)


@contextmanager
def viewer(root: Path | str, *extra: str, log_dir: Path | None = None) -> Iterator[Viewer]:
    """`sessionstore view --store ROOT --port 0` running; stopped (SIGINT, then kill) after.

    Its request log goes to `view.log` in `log_dir` (default: ROOT's parent; an
    `s3://` ROOT needs one): a pipe nobody reads would fill and stall it.
    """
    log_path = (log_dir or Path(root).parent) / "view.log"
    log = log_path.open("ab")
    proc = cli_runner.popen("view", "--store", root, "--port", "0", *extra, stderr=log)
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline().decode()  # the URL, on one line, once it listens
        match = re.fullmatch(r"http://127\.0\.0\.1:(\d+)/\n", line)
        assert match, f"no URL line: {line!r}; log: {log_path.read_text()}"
        yield Viewer(proc, line.strip(), int(match.group(1)))
    finally:
        log.close()
        proc.send_signal(2)
        try:
            proc.communicate(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.communicate()

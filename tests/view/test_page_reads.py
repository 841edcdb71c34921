"""What a record page reads: bytes counted off the server's own /proc/PID/io, never timed."""

from __future__ import annotations

import os
import socket
from collections.abc import Iterator
from pathlib import Path

import pytest
from bs4 import Tag
from inspect_helpers import trial
from view_helpers import Viewer, sibling, soup, viewer

from sessionstore.store.session import Store
from sessionstore.view.files import READ_LIMIT
from sessionstore.view.record_page import MAX_RENDERED, PAGE_LIMIT
from sessionstore.view.render import DIFF_LIMIT

BIG = 64 << 20
PAST = 6  # files past the shown ones, each READ_LIMIT bytes: read whole, were they read


@pytest.fixture
def crowded(tmp_path: Path) -> Iterator[Viewer]:
    store = Store(tmp_path / "store")
    session = store.create(id="crowd001", pid=None)
    shown: dict[str, str | bytes] = {
        f"a{n:03d}.txt": f"file {n}\n" for n in range(MAX_RENDERED - 1)
    }
    trial(session, {"failed": False}, shown)  # with trial.json: MAX_RENDERED files shown
    record = session.trials.get(1).path
    for n in range(PAST):
        with open(record / f"z{n}.bin", "wb") as f:
            f.truncate(READ_LIMIT)  # sparse: costs no disk, but a read of it is counted
    os.mkfifo(record / "zz.pipe")  # past the limit too: listed, never opened for reading
    with viewer(store.root) as running:
        yield running


def _read_bytes(pid: int) -> int:
    """Bytes the process has read by `read(2)` and its kin (`rchar`), sockets included."""
    for line in Path(f"/proc/{pid}/io").read_text().splitlines():
        name, _, value = line.partition(":")
        if name == "rchar":
            return int(value)
    raise AssertionError("no rchar in /proc/PID/io")


def test_files_past_the_shown_ones_are_listed_by_size_never_read(crowded: Viewer) -> None:
    # Every file was read (up to 16 MiB) to label it text or binary, even those whose
    # contents the page does not show: a thousand 16 MiB files took 92 s a view.
    assert crowded.get("/s/crowd001/trials/1")[0] == 200  # warm: imports, first listing
    before = _read_bytes(crowded.proc.pid)
    status, _, body = crowded.get("/s/crowd001/trials/1")
    read = _read_bytes(crowded.proc.pid) - before
    assert status == 200
    assert read < READ_LIMIT, f"the page read {read} bytes"
    doc = soup(body)
    assert len(doc.select("h3")) == MAX_RENDERED
    rows = {}
    for row in doc.select("table.files tbody tr"):
        cells = row.find_all("td")
        assert isinstance(cells[3].a, Tag)
        rows[cells[0].get_text()] = (cells[1].get_text(), cells[2].get_text(), cells[3].a["href"])
    assert rows["a000.txt"] == ("7", "text", "/s/crowd001/trials/1/files/a000.txt")
    for n in range(PAST):
        name = f"z{n}.bin"
        assert rows[name] == (str(READ_LIMIT), "not shown", f"/s/crowd001/trials/1/files/{name}")
    size, kind, _ = rows["zz.pipe"]
    assert (size, kind) == ("unreadable or removed; not read", "not shown")
    # A name links to its section only where the page has one.
    anchors = {a["href"] for a in doc.select("table.files a.mono")}
    assert anchors == {f"#{h3['id']}" for h3 in doc.select("h3")}
    # The raw link still serves the file whole.
    status, headers, raw = crowded.get("/s/crowd001/trials/1/files/z0.bin")
    assert (status, headers["Content-Length"], len(raw)) == (200, str(READ_LIMIT), READ_LIMIT)


def test_a_file_cut_short_while_sent_is_a_short_body_and_one_log_line(tmp_path: Path) -> None:
    # The length announced is the size at opening: a file truncated while it is sent ends
    # the body short of it, so the client knows it is torn, and the server says why.
    store = Store(tmp_path / "store")
    trial(store.create(id="trunc001", pid=None), {"failed": False}, {"a.txt": "a\n"})
    big = store.open("trunc001").trials.get(1).path / "big.bin"
    with open(big, "wb") as f:
        f.truncate(BIG)  # sparse: more than loopback's socket buffers hold
    with viewer(store.root) as view, socket.create_connection(("127.0.0.1", view.port)) as sock:
        sock.settimeout(30)
        sock.sendall(b"GET /s/trunc001/trials/1/files/big.bin HTTP/1.0\r\n\r\n")
        answer = sock.recv(4096)
        for _ in range(100):  # the status line and headers; the body waits in the buffers
            if b"\r\n\r\n" in answer:
                break
            answer += sock.recv(4096)
        os.truncate(big, READ_LIMIT)
        got = len(answer.partition(b"\r\n\r\n")[2])
        while chunk := sock.recv(1 << 20):
            got += len(chunk)
        log = (tmp_path / "view.log").read_text()
    assert f"\r\nContent-Length: {BIG}\r\n".encode() in answer
    assert got < BIG
    assert "trunc001/trials/1/big.bin: changed size while it was sent" in log, log
    assert "Traceback" not in log


def test_a_config_diff_compares_at_most_the_shown_count_one_pair_at_a_time(
    tmp_path: Path,
) -> None:
    # Every config file of both records was read and held, then diffed, however many:
    # two records of 4,000 sparse 64 KiB configs took 2 GiB and over five minutes.
    store = Store(tmp_path / "store")
    session = store.create(id="diffs001", pid=None)
    for n in (1, 2):
        files: dict[str, str | bytes] = {f"a{i:03d}.yml": f"k: {i}\n" for i in range(MAX_RENDERED)}
        files["a000.yml"] = f"k: {n}\n"  # differs: diffed
        files["a001.yml"] = b"\0bin %d" % n  # differs, binary: not diffed, never shown
        trial(session, {"failed": False}, files)
        record = session.trials.get(n).path
        for i in range(PAST * 100):  # past the compared ones: never read
            with open(record / f"z{i:04d}.json", "wb") as f:
                f.truncate(DIFF_LIMIT)
    with viewer(store.root) as view:
        assert view.get("/s/diffs001/trials/2")[0] == 200  # warm, and sizes the z files
        before = _read_bytes(view.proc.pid)
        status, _, body = view.get("/s/diffs001/trials/2?against=1")
        read = _read_bytes(view.proc.pid) - before
    assert status == 200
    assert read < READ_LIMIT, f"the page read {read} bytes"
    doc = soup(body)
    heads = [h.get_text() for h in doc.select("h3")]
    assert heads[:2] == ["a000.yml", "a001.yml"]  # the diffs, then the files' sections
    diff = doc.select_one("h3 + pre.diff")
    assert diff is not None and [s.get_text() for s in diff.select(".d-add")] == ["+k: 2"]
    assert "binary; not diffed" in sibling(doc.select("h3")[1], "p").get_text()
    notes = [p.get_text() for p in doc.select("p.dim")]
    assert f"{PAST * 100} more configuration files not compared" in " ".join(notes)


def test_a_page_holds_a_bounded_share_of_contents_however_they_are_escaped(
    tmp_path: Path,
) -> None:
    # Each file shows at most 256 KiB, but escapes and markup multiply it: a diff of `+`
    # lines 15 times, `"` 6 times. 200 such files made one page of 760 MB (2.7 GB of
    # server memory, 71 s). Past PAGE_LIMIT characters the rest are listed, or counted.
    store = Store(tmp_path / "store")
    session = store.create(id="bulky001", pid=None)
    quotes = "\n".join('"' * 64 for _ in range(999))  # a config just under the diff limits
    for n in (1, 2):
        files: dict[str, str | bytes] = {f"p{i:02d}.diff": "+\n" * (128 << 10) for i in range(12)}
        files |= {f"c{i:02d}.yml": f"{n}\n{quotes}" for i in range(12)}
        trial(session, {"failed": False}, files)
    with viewer(store.root) as view:
        status, _, body = view.get("/s/bulky001/trials/2?against=1")
    assert status == 200
    assert len(body) < 3 * PAGE_LIMIT, f"a page of {len(body) >> 20} MiB"
    doc = soup(body)
    notes = " ".join(p.get_text() for p in doc.select("p.dim"))
    assert "more configuration files not compared" in notes
    kinds = {}
    for row in doc.select("table.files tbody tr"):
        cells = row.find_all("td")
        kinds[cells[0].get_text()] = cells[2].get_text()
    assert kinds["p11.diff"] == "not shown" and len(kinds) == 25  # every file still listed
    assert doc.select("h3")[0].get_text() == "c00.yml"  # the first diff is shown


def _peak_rss(pid: int) -> int:
    """The process's peak resident memory in bytes (`VmHWM`)."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) * 1024
    raise AssertionError("no VmHWM in /proc/PID/status")


def test_slow_clients_of_a_file_under_the_read_limit_hold_a_chunk_each(tmp_path: Path) -> None:
    # A file up to READ_LIMIT was read whole and held until its slowest client had it:
    # 48 clients not reading a 15 MiB file held 720 MB (64: over 1 GB). Sent in chunks,
    # each holds about one; the type is still decided by the whole file.
    store = Store(tmp_path / "store")
    trial(store.create(id="slow0001", pid=None), {"failed": False}, {"a.txt": "a\n"})
    record = store.open("slow0001").trials.get(1).path
    (record / "mid.txt").write_bytes(b"x" * (15 << 20))
    path = "/s/slow0001/trials/1/files/mid.txt"
    with viewer(store.root) as view:
        socks: list[socket.socket] = []
        try:
            for _ in range(48):
                sock = socket.create_connection(("127.0.0.1", view.port), timeout=30)
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
                socks.append(sock)
                sock.sendall(f"GET {path} HTTP/1.0\r\n\r\n".encode())
            for sock in socks:  # each answer begun: its body is being sent, and waits
                head = b""
                for _ in range(100):
                    head += sock.recv(1024)
                    if b"\r\n\r\n" in head:
                        break
                assert head.startswith(b"HTTP/1.0 200 ") and b"text/plain" in head, head
            peak = _peak_rss(view.proc.pid)
        finally:
            for sock in socks:
                sock.close()
    assert peak < 400 << 20, f"{peak >> 20} MB"


@pytest.mark.parametrize(
    ("tail", "kind"),
    [
        (b"\xc3\xa9\n", "text/plain; charset=utf-8"),
        (b"\xff", "application/octet-stream"),
        (b"\xc3", "application/octet-stream"),  # a character cut by the file's end
        (b"\0", "application/octet-stream"),
    ],
)
def test_a_file_of_many_chunks_is_typed_by_all_of_them(
    tmp_path: Path, tail: bytes, kind: str
) -> None:
    # Checked chunk by chunk: an `é` cut between two 1 MiB chunks is text, and a bad
    # byte three chunks in makes the file binary.
    store = Store(tmp_path / "store")
    trial(store.create(id="type0001", pid=None), {"failed": False}, {"a.txt": "a\n"})
    data = b"a" * ((1 << 20) - 1) + b"\xc3\xa9" + b"b" * (2 << 20) + tail
    (store.open("type0001").trials.get(1).path / "f.txt").write_bytes(data)
    with viewer(store.root) as view:
        status, headers, body = view.get("/s/type0001/trials/1/files/f.txt")
    assert (status, headers["Content-Type"], body == data) == (200, kind, True)

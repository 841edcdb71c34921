"""Durable passes (issue 16): fsyncs on a bounded pool, markers linked after their directories.

The order is checked in the system calls of the real CLI (strace, another
process); faults are a full tmpfs (in a private mount namespace) and fsyncs
that fail in a pool thread.
"""

from __future__ import annotations

import errno
import os
import re
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import pytest
from mirror_helpers import converge, in_namespace, settle, temps, tree, write

from sessionstore._fs.pool import Pool
from sessionstore.mirror.mirror import Mirror
from sessionstore.storage import local_tree_sync
from sessionstore.storage.local_tree_jobs import Job

pytestmark = pytest.mark.timeout(120)

SS = [sys.executable, "-m", "sessionstore"]


def _records(src: Path, count: int) -> None:
    for n in range(1, count + 1):
        rec = src / "trials" / str(n)
        write(rec / "log.txt", b"log %d\n" % n * 50)
        write(rec / "patches" / "a.diff", b"+%d\n" % n)
        write(rec / "trial.json", b'{"trial": %d}' % n)
    write(src / "notes.md", b"notes")
    settle()


# -- the order, in the system calls -------------------------------------------------------

_LINE = re.compile(r"^(\d+)\s+(<\.\.\. )?(\w+)(.*)$")
_FD = re.compile(r"\d+<([^>]*)>")
_NAME = re.compile(r'"([^"]*)"')


Change = tuple[int, str, str, str, str]  # (line index, call, directory, temp, name)


def _strace(tmp_path: Path, *args: str | Path) -> tuple[list[tuple[int, str]], list[Change]]:
    """Run the CLI under strace -f -y: (finished fsyncs, renames and links), each with
    the index of its line, in the order the kernel reported them."""
    log = tmp_path / "strace.log"
    cmd = ["strace", "-f", "-y", "-qq", "-o", str(log), "-e", "trace=fsync,renameat,linkat"]
    subprocess.run([*cmd, *SS, *map(str, args)], check=True, capture_output=True, timeout=100)
    fsyncs: list[tuple[int, str]] = []  # (index of the line it returned on, path)
    changes: list[Change] = []
    started: dict[str, str] = {}  # pid -> path of its unfinished fsync
    for i, line in enumerate(log.read_text().splitlines()):
        m = _LINE.match(line)
        if m is None:
            continue
        pid, resumed, call, rest = m.groups()
        if call == "fsync":
            if resumed:
                fsyncs.append((i, started.pop(pid)))
            elif "<unfinished" in rest:
                started[pid] = _FD.findall(rest)[0]
            else:
                fsyncs.append((i, _FD.findall(rest)[0]))
        elif call in ("renameat", "linkat") and not resumed:
            fds, names = _FD.findall(rest), _NAME.findall(rest)
            changes.append((i, call, fds[0], names[0], names[1]))
    return fsyncs, changes


def test_the_syscall_order_is_fsync_rename_directories_then_marker(tmp_path: Path) -> None:
    """Each file is fsynced (returned) before its rename; a marker is linked only after
    every directory from the root down to its record was fsynced after its last change;
    after the link its directory is fsynced again."""
    src, dst = tmp_path / "src", tmp_path / "dst"
    _records(src, 3)
    fsyncs, changes = _strace(tmp_path, "mirror", src, dst, "--once")
    ours = [c for c in changes if c[2].startswith(str(dst))]
    for i, _call, directory, temp, name in ours:
        assert any(j < i and p == f"{directory}/{temp}" for j, p in fsyncs), name
    links = [(i, directory, name) for i, call, directory, _t, name in ours if call == "linkat"]
    assert sorted(name for *_x, name in links) == ["trial.json"] * 3
    for i, record, _name in links:
        for directory in (str(dst), str(dst / "trials"), record, f"{record}/patches"):
            last = max([j for j, _c, d, _t, _n in ours if d == directory and j < i] + [-1])
            assert any(last < j < i and p == directory for j, p in fsyncs), (record, directory)
        assert any(j > i and p == record for j, p in fsyncs), f"{record}: no fsync after"
    assert tree(dst) == tree(src)


def test_files_are_written_in_rounds_and_fsynced_between_them(tmp_path: Path) -> None:
    """A round of MAX_PENDING temps is written before the first of them is fsynced, and
    no temp is created while any fsync of the pass runs: creates beside running fsyncs
    are what made the pipeline slower (docs/benchmarks.md)."""
    src, dst = tmp_path / "src", tmp_path / "dst"
    count = 3 * local_tree_sync.MAX_PENDING + 5
    for n in range(count):
        write(src / f"d{n % 7}" / f"f{n}.txt", b"%d" % n * 100)
    settle()
    log = tmp_path / "strace.log"
    cmd = ["strace", "-f", "-y", "-qq", "-o", str(log), "-e", "trace=fsync,openat"]
    args = ["mirror", str(src), str(dst), "--once"]
    subprocess.run([*cmd, *SS, *args], check=True, capture_output=True, timeout=100)
    running: set[str] = set()  # pids inside fsync
    creates, first_round = 0, None
    for line in log.read_text().splitlines():
        m = _LINE.match(line)
        if m is None:
            continue
        pid, resumed, call, rest = m.groups()
        if call == "fsync" and resumed:
            running.discard(pid)
        elif call == "fsync":
            if first_round is None and ".sstmp-" in rest:
                first_round = creates
            if "<unfinished" in rest:
                running.add(pid)
        elif call == "openat" and not resumed and "O_CREAT" in rest and ".sstmp-" in rest:
            creates += 1
            assert not running, f"a temp created while {len(running)} fsyncs ran: {line}"
    assert first_round == local_tree_sync.MAX_PENDING
    assert creates == count + 1  # and the change cache
    assert tree(dst) == tree(src) and temps(dst) == []


# -- faults -------------------------------------------------------------------------------


def test_a_failing_fsync_in_a_pool_thread_is_reported_for_that_file_only(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The one file whose fsync fails (in a pool thread) is an error for its path; it is
    not under its name, its record's marker is held back, every other record is sealed."""
    src, dst = tmp_path / "src", tmp_path / "dst"
    _records(src, 6)
    write(src / "trials" / "4" / "log.txt", b"x" * 12345)  # the size that fails
    settle()
    real, threads = os.fsync, set()

    def fsync_(fd: int) -> None:
        if os.fstat(fd).st_size == 12345:
            threads.add(threading.current_thread().name)
            raise OSError(errno.EIO, os.strerror(errno.EIO))
        real(fd)

    monkeypatch.setattr(os, "fsync", fsync_)
    report = Mirror(src, dst).run_once()
    monkeypatch.undo()
    assert threads and all(t.startswith("sessionstore-fsync") for t in threads)
    assert report.errors == [{"path": "trials/4/log.txt", "error": "Input/output error (EIO)"}]
    assert report.held_back == [{"path": "trials/4/trial.json", "reason": "waiting for 1 file"}]
    assert "trials/4/log.txt" not in report.copied and "trials/4/trial.json" not in report.copied
    assert not (dst / "trials" / "4" / "log.txt").exists()
    assert not (dst / "trials" / "4" / "trial.json").exists()
    for n in (1, 2, 3, 5, 6):
        assert (dst / "trials" / str(n) / "trial.json").read_bytes() == b'{"trial": %d}' % n
    assert temps(dst) == []
    assert converge(src, dst, durable=True).ok and tree(dst) == tree(src)


def _open_fds() -> int:
    return len(os.listdir("/proc/self/fd"))


def _fsync_threads() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name.startswith("sessionstore-fsync")]


def _nothing_left(dst: Path, fds: int) -> None:
    """After a pass that raised: no temp in `dst`, no descriptor open, no fsync thread."""
    assert temps(dst) == []
    assert _open_fds() == fds
    assert not _fsync_threads()


def test_an_unexpected_exception_in_a_round_ends_the_pass_without_its_marker(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Not an OSError (a bug, MemoryError) in a pool thread: the pass raises it, the
    record of that file is not sealed, the other records are, and nothing is left
    behind (no temp, descriptor or thread); the next pass converges."""
    src, dst = tmp_path / "src", tmp_path / "dst"
    _records(src, 6)
    write(src / "trials" / "4" / "log.txt", b"x" * 12345)  # the size that fails
    settle()
    real = os.fsync
    before_fds = _open_fds()

    def fsync_(fd: int) -> None:
        if os.fstat(fd).st_size == 12345:
            raise RuntimeError("a bug in a pool thread")
        real(fd)

    monkeypatch.setattr(os, "fsync", fsync_)
    with pytest.raises(RuntimeError, match="a bug in a pool thread"):
        Mirror(src, dst).run_once()
    monkeypatch.undo()
    assert not (dst / "trials" / "4" / "trial.json").exists()
    assert not (dst / "trials" / "4" / "log.txt").exists()
    for n in (1, 2, 3, 5, 6):
        assert (dst / "trials" / str(n) / "trial.json").read_bytes() == b'{"trial": %d}' % n
    _nothing_left(dst, before_fds)
    assert converge(src, dst, durable=True).ok and tree(dst) == tree(src)


def _fd_path(fd: int | None) -> str:
    return os.readlink(f"/proc/self/fd/{fd}")


def _logged(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, str]]:
    """Record each fsync (after it returned) and each link, by path, in order."""
    events: list[tuple[str, str]] = []
    fsync, link = os.fsync, os.link

    def fsync_(fd: int) -> None:
        path = _fd_path(fd)
        fsync(fd)
        events.append(("fsync", path))

    def link_(src: str, dst: str, *, src_dir_fd: int, dst_dir_fd: int) -> None:
        link(src, dst, src_dir_fd=src_dir_fd, dst_dir_fd=dst_dir_fd)
        events.append(("link", f"{_fd_path(dst_dir_fd)}/{dst}"))

    monkeypatch.setattr(os, "fsync", fsync_)
    monkeypatch.setattr(os, "link", link_)
    return events


def _durable_before_links(events: list[tuple[str, str]], dst: Path) -> None:
    """Every directory under each linked marker's record was fsynced before the link."""
    for i, (kind, path) in enumerate(events):
        if kind != "link":
            continue
        record = Path(path).parent
        for d in [record, *(p for p in record.rglob("*") if p.is_dir())]:
            assert ("fsync", str(d)) in events[:i], f"{d} not fsynced before {path}"


def test_an_interrupt_while_a_round_is_handed_to_the_pool_loses_no_job(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """KeyboardInterrupt inside the pool's submit, in the round of directory fsyncs that
    the files' round left: the pass raises, and what it links on the way out is durable
    first (no job taken off the round is lost); nothing is left behind."""
    src, dst = tmp_path / "src", tmp_path / "dst"
    record = src / "trials" / "1"
    for i in range(5):
        write(record / f"sub{i}" / "x" / "y" / "f.txt", b"file %d" % i)
    write(record / "trial.json", b'{"trial": 1}')
    settle()
    events = _logged(monkeypatch)
    calls = {"n": 0}
    submit = Pool.submit

    def submit_(self: Pool[Job], task: Job) -> None:
        calls["n"] += 1
        if calls["n"] == 9:  # 6 temps, then the directories' fsyncs
            raise KeyboardInterrupt
        submit(self, task)

    monkeypatch.setattr(Pool, "submit", submit_)
    before_fds = _open_fds()
    with pytest.raises(KeyboardInterrupt):
        Mirror(src, dst).run_once()
    monkeypatch.undo()
    assert calls["n"] > 9  # the round went on after the interrupt
    _durable_before_links(events, dst)
    _nothing_left(dst, before_fds)
    assert converge(src, dst, durable=True).ok and tree(dst) == tree(src)


def test_fsync_threads_that_cannot_start(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A process at its thread limit: the pass goes on with the threads it has; with
    none, it fails with nothing sealed and nothing left behind, and the next converges."""
    src, dst = tmp_path / "src", tmp_path / "dst"
    _records(src, 30)
    start = threading.Thread.start
    started = {"n": 0, "limit": 2}

    def start_(self: threading.Thread) -> None:
        if self.name.startswith("sessionstore-fsync"):
            if started["n"] >= started["limit"]:
                raise RuntimeError("can't start new thread")
            started["n"] += 1
        start(self)

    monkeypatch.setattr(threading.Thread, "start", start_)
    report = Mirror(src, dst).run_once()
    assert report.ok and started["n"] == 2 and tree(dst) == tree(src)
    started.update(n=0, limit=0)
    other = tmp_path / "other"
    before_fds = _open_fds()
    with pytest.raises(RuntimeError, match="can't start new thread"):
        Mirror(src, other).run_once()
    monkeypatch.undo()
    assert not list(other.rglob("trial.json"))
    _nothing_left(other, before_fds)
    assert converge(src, other, durable=True).ok and tree(other) == tree(src)


def test_an_interrupt_inside_a_threads_start_stops_the_pass_not_hangs_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Ctrl-C inside `Thread.start()` once the fsync thread runs (its start waits for it):
    the pass raises KeyboardInterrupt and returns, every pool thread stopped, nothing
    left behind; the next pass converges. (The thread was not listed, took the stop
    meant for another, and the pass waited in `Pool.close` forever.)"""
    src, dst = tmp_path / "src", tmp_path / "dst"
    _records(src, 30)
    start = threading.Thread.start
    started = {"n": 0}

    def start_(self: threading.Thread) -> None:
        start(self)
        if self.name.startswith("sessionstore-fsync"):
            started["n"] += 1
            if started["n"] == 2:
                raise KeyboardInterrupt

    monkeypatch.setattr(threading.Thread, "start", start_)
    before_fds = _open_fds()
    raised: list[BaseException] = []

    def run() -> None:
        try:
            Mirror(src, dst).run_once()
        except BaseException as exc:
            raised.append(exc)

    passing = threading.Thread(target=run, daemon=True)
    passing.start()
    passing.join(timeout=60)  # a hang guard: the pass either returned or hung
    monkeypatch.undo()
    assert not passing.is_alive(), "the pass hung after the interrupt"
    assert started["n"] >= 2 and [type(e) for e in raised] == [KeyboardInterrupt]
    assert not [t for t in threading.enumerate() if t.name.startswith("sessionstore-fsync")]
    _nothing_left(dst, before_fds)
    assert converge(src, dst, durable=True).ok and tree(dst) == tree(src)


def test_a_failure_while_markers_are_linked_leaves_no_marker_temp(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """80 records: linking their markers queues their directories' fsyncs, a round of
    them runs among the links, and one raises (not an OSError). The markers not linked
    yet wait again, and are linked on the way out (their records are durable) or
    dropped: no temp or descriptor is left; the next pass converges."""
    src, dst = tmp_path / "src", tmp_path / "dst"
    _records(src, 80)
    fsync = os.fsync

    def fsync_(fd: int) -> None:
        path = _fd_path(fd)
        if path == str(dst / "trials" / "3") and (dst / "trials" / "3" / "trial.json").exists():
            raise RuntimeError("a bug in a directory's fsync after its link")
        fsync(fd)

    monkeypatch.setattr(os, "fsync", fsync_)
    before_fds = _open_fds()
    with pytest.raises(RuntimeError, match="after its link"):
        Mirror(src, dst).run_once()
    monkeypatch.undo()
    linked = [n for n in range(1, 81) if (dst / "trials" / str(n) / "trial.json").exists()]
    assert 3 in linked
    _nothing_left(dst, before_fds)
    assert Mirror(src, dst).run_once().ok and tree(dst) == tree(src)


def test_a_failure_in_the_flush_that_too_many_held_markers_start(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """400 records: past MAX_HELD waiting markers, handing over the next temp flushes
    first, and a job of that flush raises (not an OSError): the temp being handed over
    is dropped too, nothing is left behind, the next pass converges."""
    src, dst = tmp_path / "src", tmp_path / "dst"
    _records(src, 400)
    defer, fsync = local_tree_sync.LocalSync.defer, os.fsync
    state = {"armed": False, "fired": False}

    def defer_(self: local_tree_sync.LocalSync, *args: Any, **kw: Any) -> None:
        state["armed"] = len(self._orphans) + len(self._links) > local_tree_sync.MAX_HELD
        try:
            defer(self, *args, **kw)
        finally:
            state["armed"] = False

    def fsync_(fd: int) -> None:
        if state["armed"] and not state["fired"]:
            state["fired"] = True
            raise RuntimeError("a bug in a job of the held markers' flush")
        fsync(fd)

    monkeypatch.setattr(local_tree_sync.LocalSync, "defer", defer_)
    monkeypatch.setattr(os, "fsync", fsync_)
    before_fds = _open_fds()
    with pytest.raises(RuntimeError, match="held markers' flush"):
        Mirror(src, dst).run_once()
    monkeypatch.undo()
    assert state["fired"]
    _nothing_left(dst, before_fds)
    assert Mirror(src, dst).run_once().ok and tree(dst) == tree(src)


def test_a_failing_directory_fsync_holds_back_the_markers_below_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    src, dst = tmp_path / "src", tmp_path / "dst"
    _records(src, 2)
    real = os.fsync
    bad = str(dst / "trials" / "2")

    def fsync_(fd: int) -> None:
        if _fd_path(fd) == bad:
            raise OSError(errno.EIO, os.strerror(errno.EIO))
        real(fd)

    monkeypatch.setattr(os, "fsync", fsync_)
    report = Mirror(src, dst).run_once()
    monkeypatch.undo()
    assert {"path": "trials/2", "error": "cannot fsync directory: Input/output error (EIO)"} in (
        report.errors
    )
    assert [h["path"] for h in report.held_back] == ["trials/2/trial.json"]
    assert not (dst / "trials" / "2" / "trial.json").exists()
    assert (dst / "trials" / "1" / "trial.json").exists() and temps(dst) == []
    assert converge(src, dst, durable=True).ok and tree(dst) == tree(src)


_IN_NAMESPACE = r"""
import json, os, subprocess, sys
mnt, src = sys.argv[1], sys.argv[2]
def state():
    found = {}
    for d, _dirs, files in os.walk(mnt):
        for n in files:
            p = os.path.join(d, n)
            found[os.path.relpath(p, mnt)] = open(p, "rb").read().hex()
    return found
subprocess.run(["mount", "-t", "tmpfs", "-o", "size=96k", "tmpfs", mnt], check=True)
first = subprocess.run(sys.argv[3:] + ["mirror", src, mnt, "--once"], capture_output=True)
full = state()
# The type and source given: a user namespace's mount cannot look them up (no mtab entry).
subprocess.run(["mount", "-t", "tmpfs", "-o", "remount,size=16m", "tmpfs", mnt], check=True)
second = subprocess.run(sys.argv[3:] + ["mirror", src, mnt, "--once"], capture_output=True)
print(json.dumps({"first": [first.returncode, first.stderr.decode()], "full": full,
                  "second": [second.returncode, second.stderr.decode()], "after": state()}))
"""


def test_a_full_disk_fails_files_one_by_one_and_leaves_nothing_torn(tmp_path: Path) -> None:
    """A 96 KiB tmpfs (in a private mount namespace: `unshare -rm`, gone with it): the
    pass reports ENOSPC per file, every name in the destination holds its whole source,
    no marker precedes its files, no temp is left; with room, the next pass converges."""
    src, mnt = tmp_path / "src", tmp_path / "mnt"
    mnt.mkdir()
    for n in range(1, 9):
        rec = src / "trials" / str(n)
        write(rec / "log.txt", os.urandom(8 * 1024))
        write(rec / "out.bin", os.urandom(12 * 1024))
        write(rec / "trial.json", b'{"trial": %d}' % n)
    settle()
    result = in_namespace("-rm", _IN_NAMESPACE, str(mnt), str(src), *SS, timeout=100)
    code, err = result["first"]
    assert code == 1 and "No space left on device (ENOSPC)" in err, err
    source = {rel: data.hex() for rel, data in tree(src).items()}
    full = {k: v for k, v in result["full"].items() if not k.startswith(".sessionstore-")}
    assert not [k for k in full if ".sstmp-" in k], "temps left behind"
    assert full and len(full) < len(source)
    for rel, data in full.items():
        assert data == source[rel], f"{rel} is torn"
        if rel.endswith("trial.json"):
            record = rel.rpartition("/")[0]
            assert all(k in full for k in source if k.startswith(f"{record}/")), rel
    assert result["second"][0] == 0, result["second"][1]
    after = {k: v for k, v in result["after"].items() if not k.startswith(".sessionstore-")}
    assert after == source


# -- the pool -----------------------------------------------------------------------------


def test_the_pool_is_bounded_and_gone_after_the_pass(tmp_path: Path) -> None:
    """400 files: never more than POOL_THREADS fsync threads, open descriptors bounded
    by the pending commits and held directories, nothing left open or running after."""
    src, dst = tmp_path / "src", tmp_path / "dst"
    for n in range(400):
        write(src / f"d{n % 40}" / f"f{n}.txt", b"%d" % n)
    settle()
    before_fds = _open_fds()
    seen = {"threads": 0, "fds": 0}

    def sample(_rel: str) -> None:
        seen["threads"] = max(seen["threads"], len(_fsync_threads()))
        seen["fds"] = max(seen["fds"], _open_fds())

    report = Mirror(src, dst, _on_chunk=sample).run_once()
    assert report.ok and len(report.copied) == 400
    assert 1 <= seen["threads"] <= local_tree_sync.POOL_THREADS
    limit = local_tree_sync.MAX_PENDING + local_tree_sync.MAX_HELD + 32
    assert seen["fds"] - before_fds <= limit
    assert not _fsync_threads()
    assert _open_fds() == before_fds
    assert tree(dst) == tree(src)


def test_a_record_sealed_before_its_deferred_link_keeps_the_other_writers_marker(
    tmp_path: Path,
) -> None:
    """Markers are linked at the end of the pass; another process seals trials/1 in the
    destination after the walk committed ours (while report.json, read last, is read):
    theirs stays, ours is held back, and report.json waits for it."""
    src, dst = tmp_path / "src", tmp_path / "dst"
    _records(src, 2)
    write(src / "report.json", b'{"report": 1}')
    settle()
    theirs = dst / "trials" / "1" / "trial.json"
    code = "import sys, pathlib; pathlib.Path(sys.argv[1]).write_bytes(b'{\"theirs\": 1}')"

    def other_writer(rel: str) -> None:
        if rel == "report.json" and not theirs.exists():
            subprocess.run([sys.executable, "-c", code, str(theirs)], check=True)

    report = Mirror(src, dst, _on_chunk=other_writer).run_once()
    assert theirs.read_bytes() == b'{"theirs": 1}'
    assert report.held_back == [
        {"path": "trials/1/trial.json", "reason": local_hold()},
        {"path": "report.json", "reason": "waiting for 1 file"},
    ]
    assert report.ok and "trials/1/trial.json" not in report.copied
    assert (dst / "trials" / "2" / "trial.json").exists() and temps(dst) == []
    assert not (dst / "report.json").exists()


def local_hold() -> str:
    return "sealed meanwhile in the destination; not overwritten"

"""The summary index against what its identities do not see on their own: records
renamed away and back while they are read, a reader who may not read a marker, and
values JSON cannot hold. In each the listing must say what it says with no index.
"""

from __future__ import annotations

import os
import pwd
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import IO, Any

import orjson
import pytest
from test_index import settled, without_index
from test_index_summary import _session, _truth

from sessionstore.format.names import INDEX
from sessionstore.inspect.best import Objective
from sessionstore.inspect.summary import SessionView, session_summary
from sessionstore.storage.local import LocalStorage
from sessionstore.store.session import Session

__all__ = ["settled"]  # the fixture, used by name


def _detail(s: Session) -> dict[str, Any]:
    return SessionView.load(Session.open(s.path)).detail()


def _swap(trials: Path) -> None:
    """Trials 1 and 4 trade numbers: neither marker's ctime moves (only the directories')."""
    os.rename(trials / "1", trials / "x")
    os.rename(trials / "4", trials / "1")
    os.rename(trials / "x", trials / "4")


def test_records_renamed_away_and_back_during_the_read_are_not_cached(
    tmp_path: Path, settled: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Swapped after the listing's `lstat`s and back after the reads: each marker read
    is another's file. Cached under the `lstat`'s identity, it would show as the other
    trial for good once the records are back as they were."""
    s = _session(tmp_path / "store")
    real = LocalStorage.read_each

    def racing(self: LocalStorage, prefix: str, *args: Any) -> Any:
        if not prefix.endswith("/trials"):
            return real(self, prefix, *args)
        _swap(s.trials.path)
        try:
            return real(self, prefix, *args)
        finally:
            _swap(s.trials.path)

    monkeypatch.setattr(LocalStorage, "read_each", racing)
    session_summary(Session.open(s.path), write_index=True)
    monkeypatch.undo()
    truth = without_index(s, lambda: _detail(s))
    assert _detail(s) == truth
    assert session_summary(Session.open(s.path)) == _truth(s)


def test_a_renaming_process_never_leaves_a_wrong_index(tmp_path: Path, settled: None) -> None:
    """The same race from another process: it swaps trials 1 and 4 and back, over and
    over, while listings write the index; every 20 listings it pauses with each record
    where it was, and the listing must then say what the records say. (A wrong entry is
    washed out by a later read while the swaps go on: hence checks at every pause.)"""
    s = _session(tmp_path / "store")
    truth = without_index(s, lambda: _detail(s))
    with subprocess.Popen(
        [sys.executable, "-c", _SWAPPER, str(s.trials.path)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
    ) as swapper:
        assert swapper.stdin is not None and swapper.stdout is not None
        _race(s, swapper.stdin, swapper.stdout, truth)
        swapper.stdin.close()  # end of input: it stops with every record in place
        assert swapper.wait(timeout=30) == 0
    assert _detail(s) == truth
    assert session_summary(Session.open(s.path)) == _truth(s)


def _race(s: Session, command: IO[bytes], answer: IO[bytes], truth: dict[str, Any]) -> None:
    """Listings for at most 3 s, each 20th with the swapper paused and checked."""
    deadline = time.monotonic() + 3
    for k in range(20_000):
        if time.monotonic() > deadline:
            break
        session_summary(Session.open(s.path), write_index=True)
        if k % 20 == 19:
            command.write(b"pause\n")
            command.flush()
            assert answer.readline() == b"paused\n"
            assert _detail(s) == truth, k
            command.write(b"go\n")
            command.flush()


# Swaps trials 1 and 4 and back (`_swap` twice), at most 1,000,000 times; between two
# cycles, with every record in place, a line "pause" on stdin holds it until the next
# line ("go"), and the end of stdin stops it. Lines are read from fd 0 itself: `select`
# sees only the fd, so a "pause" read ahead into `sys.stdin`'s buffer along with the
# "go" before it would go unnoticed, and the test would wait for the million cycles.
_SWAPPER = r"""
import os, select, sys
trials = sys.argv[1]
pending = b""
def command():
    global pending
    while b"\n" not in pending:
        chunk = os.read(0, 64)
        if not chunk:
            return b""
        pending += chunk
    line, _, pending = pending.partition(b"\n")
    return line
def swap():
    os.rename(f"{trials}/1", f"{trials}/x")
    os.rename(f"{trials}/4", f"{trials}/1")
    os.rename(f"{trials}/x", f"{trials}/4")
for _ in range(1_000_000):
    if pending or select.select([0], [], [], 0)[0]:
        if command() != b"pause":
            break
        print("paused", flush=True)
        if command() != b"go":
            break
    swap()
    swap()
"""


def test_a_reader_who_cannot_read_a_marker_is_not_served_it_from_the_index(
    settled: None,
) -> None:
    """Root's listing caches a marker of mode 0000; a reader who may not read it (here
    `nobody`, when root runs the suite) must still find it torn, not read it out of the
    index: the index is its writer's alone (0600)."""
    base = Path(tempfile.mkdtemp(dir="/dev/shm", prefix="index-perm-"))  # others may enter
    try:
        os.chmod(base, 0o755)
        s = _session(base / "store")
        subprocess.run(["chmod", "-R", "a+rX", str(base / "store")], check=True)
        marker = s.trials.path / "4" / "trial.json"  # the best trial
        os.chmod(marker, 0)
        assert session_summary(Session.open(s.path), write_index=True) == _truth(s)
        assert (s.path / INDEX).stat().st_mode & 0o777 == 0o600
        if os.geteuid() != 0:  # a reader who may not read the marker: this user, now
            assert _truth(s)["trial_counts"]["torn"] == 1
            return
        with_index = _as_nobody(lambda: _reading(s))
        os.rename(s.path / INDEX, base / "aside")
        truth = _as_nobody(lambda: _reading(s))
        assert orjson.loads(truth)[0]["trial_counts"]["torn"] == 1
        assert with_index == truth
    finally:
        shutil.rmtree(base, ignore_errors=True)


def test_an_index_the_reader_may_not_read_is_left_to_its_writer(settled: None) -> None:
    """Another user's index (0600) is not replaced, even by a listing that may write the
    session directory: it would lock its writer out in turn, and two users listing one
    store would each rewrite it every time. Here the other user is `nobody` under root;
    run unprivileged, the index is made unreadable to this user instead."""
    base = Path(tempfile.mkdtemp(dir="/dev/shm", prefix="index-owner-"))  # others may enter
    try:
        os.chmod(base, 0o755)
        s = _session(base / "store")
        truth = orjson.loads(orjson.dumps(_truth(s)))
        assert session_summary(Session.open(s.path), write_index=True) == truth
        subprocess.run(["chmod", "-R", "a+rwX", str(base / "store")], check=True)
        index = s.path / INDEX
        os.chmod(index, 0o600 if os.geteuid() == 0 else 0)
        before, names = index.stat(), sorted(os.listdir(s.path))

        def listing() -> dict[str, Any]:
            return session_summary(Session.open(s.path), write_index=True)

        if os.geteuid() == 0:
            assert orjson.loads(_as_nobody(listing)) == truth
        else:
            assert orjson.loads(orjson.dumps(listing())) == truth
        after = index.stat()
        assert (after.st_ino, after.st_uid, after.st_mtime_ns) == (
            before.st_ino,
            before.st_uid,
            before.st_mtime_ns,
        )
        assert sorted(os.listdir(s.path)) == names  # no temp left behind either
    finally:
        shutil.rmtree(base, ignore_errors=True)


def _reading(s: Session) -> list[Any]:
    """What a reader that does not write the index shows: the list row and the detail."""
    return [session_summary(Session.open(s.path)), _detail(s)]


def _as_nobody(read: Callable[[], Any]) -> bytes:
    """`read()` as the user `nobody`, in a forked child (every module it needs is loaded
    already: the package's files need not be readable by `nobody`), as JSON."""
    nobody = pwd.getpwnam("nobody")
    out, into = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: never returns into the test run
        code = 1
        try:
            os.close(out)
            os.setgroups([])
            os.setgid(nobody.pw_gid)
            os.setuid(nobody.pw_uid)
            os.write(into, orjson.dumps(read()))
            code = 0
        finally:
            os._exit(code)
    os.close(into)
    with os.fdopen(out, "rb") as f:
        data = f.read()
    assert os.waitpid(pid, 0)[1] == 0
    return data


def test_an_objective_that_is_no_utf8_lists_as_without_an_index(
    tmp_path: Path, settled: None
) -> None:
    """A command line's undecodable byte is a lone surrogate, which JSON cannot hold:
    no index is written, and the rows are the records'."""
    s = _session(tmp_path / "store")
    objective = Objective("benchmark.metrics.\udcff")
    truth = _truth(s, objective)
    assert session_summary(Session.open(s.path), objective, write_index=True) == truth
    assert not os.path.lexists(s.path / INDEX)
    args = [
        sys.executable,
        "-m",
        "sessionstore",
        "inspect",
        "--json",
        "--store",
        str(s.path.parent),
    ]
    done = subprocess.run(
        [*map(os.fsencode, args), b"--objective", b"benchmark.\xff"], capture_output=True
    )
    assert done.returncode == 0 and done.stderr == b""
    assert orjson.loads(done.stdout)[0]["best"] is None


def test_a_marker_timestamp_past_64_bit_nanoseconds_lists_as_without_an_index(
    settled: None,
) -> None:
    """tmpfs keeps a date such as 1500-01-01, whose nanoseconds JSON (orjson) cannot hold:
    no index is written, and the rows are the records'."""
    base = Path(tempfile.mkdtemp(dir="/dev/shm", prefix="index-mtime-"))
    try:
        s = _session(base / "store")
        marker = s.trials.path / "1" / "trial.json"
        ns = -14_831_769_600 * 10**9
        os.utime(marker, ns=(ns, ns))
        assert os.stat(marker).st_mtime_ns == ns  # tmpfs does not clamp it
        truth = _truth(s)
        assert session_summary(Session.open(s.path), write_index=True) == truth
        assert not os.path.lexists(s.path / INDEX)
    finally:
        shutil.rmtree(base, ignore_errors=True)

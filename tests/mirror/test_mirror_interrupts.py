"""Ctrl-C during a durable pass: it stops the pass, never hangs or crashes it, and
leaves nothing behind.

Python raises KeyboardInterrupt in the main thread at its next check, and the
likeliest moment is just after a system call returns (the kernel delivers the
signal then): a value that call returned (a temp's fd, a task off a queue) is then
lost to the caller. A durable pass's fsync threads must not take the signal either.
Each test makes one such moment happen on purpose; the last one sends real signals.
"""

from __future__ import annotations

import os
import queue
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from cli_runner import finish, popen, reap, wait_for
from mirror_helpers import converge, settle, temps, tree, write

from sessionstore._fs import atomic
from sessionstore._fs.pool import Pool
from sessionstore.mirror.mirror import Mirror

# In a child process: a pool whose thread waits, SIGINT blocked in the main thread
# (as `_orjson` blocks it around orjson's import), then a SIGINT sent to the process.
_POOL_SIGINT = r"""
import os, signal, threading
from sessionstore._fs.pool import Pool
release = threading.Event()
class Task:
    error = None
    def work(self):
        release.wait()
pool = Pool(2, "sessionstore-fsync")
pool.submit(Task())
signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
os.kill(os.getpid(), signal.SIGINT)
pending = signal.SIGINT in signal.sigpending()
release.set()
pool.next()
pool.close()
print("pending" if pending else "taken by another thread")
try:
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})
except KeyboardInterrupt:
    print("raised here")
"""


def test_a_pool_thread_never_takes_a_ctrl_c() -> None:
    """A SIGINT while the caller's thread blocks it stays pending for that thread:
    no fsync thread takes it. (One did: Python then raised KeyboardInterrupt in the
    main thread wherever it was, inside orjson's first import too, which a durable
    pass makes for its first marker, and the interpreter crashed with SIGSEGV.)"""
    done = subprocess.run(
        [sys.executable, "-c", _POOL_SIGINT], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.split("\n")[:2] == ["pending", "raised here"]


class _Task:
    error: Exception | None = None

    def work(self) -> None:
        pass


class _CutQueue(queue.SimpleQueue):  # type: ignore[type-arg]  # any item: as the pool's
    """A SimpleQueue whose first get() in the main thread raises KeyboardInterrupt as
    it returns: what a Ctrl-C does when it arrives while the call hands an item back."""

    cut = False

    def get(self, block: bool = True, timeout: float | None = None) -> Any:
        item = super().get(block, timeout)
        if threading.current_thread() is threading.main_thread() and not _CutQueue.cut:
            _CutQueue.cut = True
            raise KeyboardInterrupt
        return item


def test_a_ctrl_c_as_a_finished_task_is_handed_back_loses_no_task(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Interrupted as its wait returns, `next` loses nothing: the next call hands the
    task back. (The task was taken off the queue and lost, still counted pending, and
    the pass that called `next` again on its way out waited forever.)"""
    monkeypatch.setattr(queue, "SimpleQueue", _CutQueue)
    pool: Pool[_Task] = Pool(2, "sessionstore-fsync")
    task = _Task()
    pool.submit(task)
    with pytest.raises(KeyboardInterrupt):
        pool.next()
    assert pool.pending == 1
    found: list[_Task] = []
    waiter = threading.Thread(target=lambda: found.append(pool.next()), daemon=True)
    waiter.start()
    waiter.join(timeout=30)  # a hang guard: it returns at once, or never
    assert found == [task]
    assert pool.pending == 0
    pool.close()


def _records(src: Path, count: int) -> None:
    for n in range(1, count + 1):
        rec = src / "trials" / str(n)
        for i in range(8):
            write(rec / f"f{i}.txt", b"file %d of %d\n" % (i, n))
        write(rec / "trial.json", b'{"trial": %d}' % n)


def _fsync_threads() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name.startswith("sessionstore-fsync")]


def test_a_ctrl_c_as_a_job_reaches_the_pool_runs_it_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """KeyboardInterrupt just after `Pool.submit` queued a job: the job is the pool's,
    not the round's again. (It was both, ran twice, and its second rename failed an
    assertion in a pool thread: the pass raised AssertionError, not the interrupt.)"""
    src, dst = tmp_path / "src", tmp_path / "dst"
    _records(src, 12)
    settle()
    calls = {"n": 0}
    submit = Pool.submit

    def submit_(self: Pool[Any], task: Any) -> None:
        submit(self, task)
        calls["n"] += 1
        if calls["n"] == 5:
            raise KeyboardInterrupt

    monkeypatch.setattr(Pool, "submit", submit_)
    with pytest.raises(KeyboardInterrupt):
        Mirror(src, dst).run_once()
    monkeypatch.undo()
    assert temps(dst) == []
    assert not _fsync_threads()
    assert converge(src, dst, durable=True).ok and tree(dst) == tree(src)


def test_a_ctrl_c_as_a_temp_is_created_leaves_no_temp(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """KeyboardInterrupt as the open of a temp returns (its fd never reached the
    AtomicFile): the temp is removed all the same. (It was left behind: a Ctrl-C
    lands as a system call returns, and this is the pass's most frequent one.)"""
    src, dst = tmp_path / "src", tmp_path / "dst"
    _records(src, 3)
    settle()
    calls = {"n": 0}
    real_open = os.open

    def open_(path: str, flags: int, mode: int = 0o777, *, dir_fd: int | None = None) -> int:
        fd = real_open(path, flags, mode, dir_fd=dir_fd)
        if os.path.basename(path).startswith(atomic.TEMP_PREFIX):
            calls["n"] += 1
            if calls["n"] == 7:
                raise KeyboardInterrupt
        return fd

    monkeypatch.setattr(os, "open", open_)
    with pytest.raises(KeyboardInterrupt):
        Mirror(src, dst).run_once()
    monkeypatch.undo()
    assert calls["n"] == 7
    assert temps(dst) == []
    assert converge(src, dst, durable=True).ok and tree(dst) == tree(src)


def test_real_ctrl_cs_stop_durable_passes_cleanly(tmp_path: Path) -> None:
    """SIGINT at spread moments of real durable passes (`mirror --once`): each one
    stops or finishes, never hangs or crashes, and leaves no temp; the next pass
    converges."""
    src = tmp_path / "src"
    for n in range(1, 9):
        for i in range(60):
            write(src / "trials" / str(n) / f"f{i}.bin", os.urandom(2000))
        write(src / "trials" / str(n) / "trial.json", b'{"trial": %d}' % n)
    settle()
    for k in range(12):
        dst = tmp_path / f"dst{k}"
        proc = popen("mirror", src, dst, "--once")
        try:
            # Once the pass has begun (the destination made): a Ctrl-C while the interpreter
            # still imports is Python's own traceback, before any code of ours runs, and a
            # loaded machine can take longer than any fixed wait to get here.
            wait_for(lambda: dst.exists() or proc.poll() is not None, "the pass to begin")  # noqa: B023
            # Spread over the pass's life; a pass may be done before its signal.
            time.sleep(0.02 + 0.04 * k)
            proc.send_signal(signal.SIGINT)
            code, _, err = finish(proc)  # a hang fails it (TimeoutExpired)
        finally:
            reap(proc)
        # -SIGINT: after the pass, as the interpreter exits.
        assert code in (0, 130, -signal.SIGINT), err
        assert "Traceback" not in err
        assert temps(dst) == []
        assert converge(src, dst, durable=True).ok and tree(dst) == tree(src)

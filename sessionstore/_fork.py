"""A second process for read-only work: when a fork is safe, and the child's plumbing.

Two callers fork a child that reads while the parent reads too, on the second
CPU: the mirror's verifier (`mirror.split`) and the store listing's second
reader (`store.halves`). Both fork only where `may_fork` and, at the fork
itself, `single_threaded` hold, by `fork_lines`: the child sends its results
up a pipe as lines, which the parent reads without blocking (`drain`), and
ends it (`Child.close`, `reap`). The child writes nothing else to its streams (they are
/dev/null: a program reading the parent's output sees its end when the
parent ends), and on Linux it dies with its parent.
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import threading
import time
from collections.abc import Callable, Iterable

__all__ = ["Child", "drain", "fork_lines", "may_fork", "reap", "single_threaded"]

_PR_SET_PDEATHSIG = 1  # prctl(2)
_GRACE_POLL_S = 0.005


def may_fork() -> bool:
    """Whether a fork can pay and disturbs nobody: more than one CPU to run on (a second
    process on one CPU only adds a fork), and SIGCHLD at its default (else a handler of
    the caller's hears of a child it never made)."""
    return (
        hasattr(os, "fork") and signal.getsignal(signal.SIGCHLD) == signal.SIG_DFL and _cores() > 1
    )


def _cores() -> int:
    """The CPUs this process may run on."""
    if hasattr(os, "sched_getaffinity"):
        return len(os.sched_getaffinity(0))
    return os.cpu_count() or 1


def single_threaded() -> bool:
    """No thread but this one, native ones included; to be asked at the fork itself.

    A fork beside another thread can inherit a lock it holds (and threads start
    late: the mirror's fsync pool with a pass's first durable commit).
    """
    try:
        return len(os.listdir("/proc/self/task")) == 1
    except OSError:  # no /proc: the threads Python knows of
        return threading.active_count() == 1


class Child:
    """In the parent: a child of `fork_lines`, and its pipe's read end (non-blocking)."""

    def __init__(self, pid: int, read: int) -> None:
        self.pid: int | None = pid
        self.read: int | None = read

    def close(self, *, kill: bool = True, grace: float = 0.0) -> None:
        """Close the pipe, then stop (with `kill`, after `grace` seconds: `reap`) and reap
        the child; safe twice. Closed first, a child still writing ends at its next line."""
        if self.read is not None:
            os.close(self.read)
            self.read = None
        pid, self.pid = self.pid, None
        if pid is not None:
            reap(pid, kill=kill, grace=grace)


def fork_lines(produce: Callable[[], Iterable[bytes]]) -> Child:
    """Fork a child that writes each line `produce()` yields up a pipe, then exits (1 if
    it raised); in the parent, the child.

    Raises `OSError` when there is no pipe (EMFILE) or no fork (EAGAIN, ENOMEM). The
    child ends with `os._exit`: no atexit handler, flushed buffer or finalizer of the
    parent's runs twice.
    """
    read, write = os.pipe()
    parent = os.getpid()
    try:
        pid = os.fork()
    except OSError:
        os.close(read)
        os.close(write)
        raise
    if pid == 0:  # the child: never returns
        status = 1
        try:
            os.close(read)
            _quiet()
            _detach(parent)
            for line in produce():
                _write_all(write, line)
            status = 0
        finally:
            os._exit(status)
    os.close(write)
    os.set_blocking(read, False)
    return Child(pid, read)


def _quiet() -> None:
    """In the child: stdout and stderr to /dev/null."""
    null = os.open(os.devnull, os.O_WRONLY)
    os.dup2(null, 1)
    os.dup2(null, 2)
    os.close(null)


def _detach(parent: int) -> None:
    """In the child, on Linux: die with the parent (nobody waits for a child whose
    parent is gone; elsewhere it ends when its next line finds the pipe closed)."""
    if sys.platform == "linux":
        import ctypes  # only the child pays for it

        ctypes.CDLL(None).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
        if os.getppid() != parent:  # it died before the prctl
            os._exit(1)


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


def drain(fd: int, chunks: list[bytes]) -> bool:
    """Read what the non-blocking pipe `fd` holds into `chunks`; whether it has ended."""
    try:
        while chunk := os.read(fd, 1 << 16):
            chunks.append(chunk)
    except BlockingIOError:
        return False
    return True


def reap(pid: int, *, kill: bool, grace: float = 0.0) -> None:
    """Wait for child `pid`'s end, killing it first with `kill` (its status decides
    nothing: each result it sent was whole); with `grace`, only once it has not ended
    by itself within that many seconds (a child whose pipe was closed ends at its next
    line, what it was doing done)."""
    deadline = time.monotonic() + grace
    while kill and time.monotonic() < deadline:
        try:
            if os.waitpid(pid, os.WNOHANG)[0]:
                return
        except ChildProcessError:  # SIGCHLD ignored since: reaped
            return
        time.sleep(_GRACE_POLL_S)
    if kill:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    with contextlib.suppress(ChildProcessError):  # SIGCHLD ignored since: reaped
        os.waitpid(pid, 0)

"""A small pool of threads that wait in system calls (fsync) so the caller does not.

`Pool.submit(task)` queues a task; at most `threads` threads run `task.work()`
(started as the queue needs them), and each finished task comes back, in the
order the tasks finish, from `Pool.next()` (blocking), with any exception it
raised in `task.error`. The caller owns the bookkeeping: the pool keeps no
task once it is handed back.

Not `concurrent.futures`: a future per fsync costs a condition variable and
its wake-ups, and the threads then fight the caller for the GIL (measured:
~40 futex calls per file copied); here a task is two `SimpleQueue`
operations and one GIL hand-back per system call. Only the thread that made
the pool may use it.
"""

from __future__ import annotations

import collections
import contextlib
import queue
import signal
import threading
from typing import Generic, Protocol, TypeVar


class Task(Protocol):
    """What the pool runs: `work()` in a pool thread; what it raised goes to `error`."""

    error: Exception | None

    def work(self) -> None: ...


T = TypeVar("T", bound=Task)

_BLOCKED = {signal.SIGINT}


class Pool(Generic[T]):
    """At most `threads` threads running submitted tasks; see the module docstring."""

    def __init__(self, threads: int, name: str) -> None:
        self._max = threads
        self._name = name
        self._todo: queue.SimpleQueue[T | None] = queue.SimpleQueue()
        # Finished tasks, and one wake-up per task put there (see `next`).
        self._done: collections.deque[T] = collections.deque()
        self._woken: queue.SimpleQueue[None] = queue.SimpleQueue()
        self._threads: list[threading.Thread] = []
        self.pending = 0  # submitted and not handed back yet

    def submit(self, task: T) -> None:
        """Queue `task`; a thread is started first while fewer run than tasks wait.

        Raises with nothing queued (`pending` unchanged), so the caller still
        owns `task`: a thread that cannot start (a process at its limit) is an
        error only when no thread runs (the ones that do will run the queue).
        A task queued is counted in `pending`, also when a Ctrl-C lands as the
        call returns: a caller tells from `pending` what it handed over.
        """
        threads = self._threads
        if len(threads) < self._max and len(threads) <= self.pending:
            thread = threading.Thread(
                target=self._run, name=f"{self._name}-{len(threads)}", daemon=True
            )
            # Listed before it starts: a Ctrl-C can land inside `start()` once the thread
            # runs, and a running thread `close` did not know of took another's stop and
            # left it waiting forever (the pass hung in `close`).
            threads.append(thread)
            # Started with SIGINT blocked, which it inherits: a Ctrl-C is then always the
            # caller's thread's. Taken by a pool thread (the kernel hands it to one when
            # the caller blocks it, as `_orjson` does around orjson's import), it trips
            # Python's flag all the same, and the caller raises KeyboardInterrupt inside
            # that import, which crashes the interpreter (SIGSEGV).
            mask = signal.pthread_sigmask(signal.SIG_BLOCK, _BLOCKED)
            try:
                thread.start()
            except RuntimeError:  # "can't start new thread"
                threads.pop()
                if not threads:
                    raise
            finally:
                signal.pthread_sigmask(signal.SIG_SETMASK, mask)
        # Counted first: a Ctrl-C may land as `put` returns, and nothing in between can
        # raise, so `pending` tells whether the task was queued.
        self.pending += 1
        self._todo.put(task)

    def _run(self) -> None:
        get, done, wake = self._todo.get, self._done.append, self._woken.put
        while (task := get()) is not None:
            try:
                task.work()
            except Exception as exc:  # handed to the caller with the task
                task.error = exc
            done(task)
            wake(None)

    def next(self) -> T:
        """The next task to finish (waiting for it); there must be one pending.

        A Ctrl-C is raised as a call returns, also the wait's. So the wait hands
        back only a wake-up (one lost costs nothing: the finished tasks are looked
        at first), and a task is taken off `_done` and counted out with no call
        in between. Taken off a queue by the wait itself, a task was lost to a
        Ctrl-C and still counted `pending`: the pass hung here on its way out.
        """
        assert self.pending, "nothing was submitted"
        done = self._done
        while not done:
            self._woken.get()
        task = done[0]
        del done[0]
        self.pending -= 1
        return task

    def close(self) -> None:
        """Stop the threads once the queue is empty (tasks still queued are run first)."""
        for _ in self._threads:
            self._todo.put(None)
        for thread in self._threads:
            # A thread whose start a Ctrl-C cut short may not have begun (nothing to
            # join); if it begins, the stop queued for it ends it at once.
            with contextlib.suppress(RuntimeError):
                thread.join()
        self._threads.clear()

"""A local store's sessions read by two processes: a big listing on the second CPU.

Listing a big local store is system calls and Python for each session, in
one thread (threads gain nothing there: the GIL). `halves` gives every other
item to a forked child, which derives its value (JSON: a listing's row) and
sends it up a pipe, one line each, in order; the parent derives the others
and yields every value in order as it is asked for, so a listing streams as
before. The child's values are the parent's: the same function of the same
item, passed through JSON exactly. One JSON cannot carry (an integer past 64
bits, a lone surrogate), or one whose function raised, is sent as an empty
line: the parent derives it itself, and raises what it raises.

A child that fails, is killed or stops costs only time. Every value it has
not sent is derived by the parent, which waits `STALL` seconds at most for a
line (a false alarm, one session slower than that, costs its reading twice,
never a result), then kills it. A reader that stops early (`--limit`) closes
the pipe and lets the child end at its next line, so that no index it was
writing is left half done as a temp. The child writes nothing but its pipe and
what the function writes (the summary indexes of its own sessions); its
stdout and stderr are /dev/null, and on Linux it dies with the parent
(`_fork.fork_lines`).

The fork is made only where it is safe and pays: `_fork.may_fork` and, at
the fork, `_fork.single_threaded`, and at least `MIN_ITEMS` items (a fork and
its end cost a few milliseconds, a session's reading about 0.3 ms).
"""

from __future__ import annotations

import select
import time
from collections.abc import Callable, Iterator, Sequence
from typing import Any, TypeVar

from sessionstore._fork import drain, fork_lines, may_fork, single_threaded
from sessionstore._orjson import orjson

__all__ = ["MIN_ITEMS", "STALL", "halves"]

T = TypeVar("T")

MIN_ITEMS = 200
# Seconds the parent waits for the child's next line before it kills the child.
STALL = 2.0
_POLL_MS = 100
_NOT_SENT = object()


def halves(func: Callable[[T], Any], items: Sequence[T]) -> Iterator[Any]:
    """`func` of each item, in order, as it is asked for; every other one (JSON values
    only) derived by a forked child where that is safe and pays."""
    if len(items) < MIN_ITEMS or not may_fork() or not single_threaded():
        return map(func, items)
    try:
        reader = _Reader(func, items)
    except OSError:  # no fork (EAGAIN, ENOMEM) or no pipe (EMFILE): one process reads all
        return map(func, items)
    return reader.values()


class _Reader:
    """The parent's reading of the odd items' values from the forked child."""

    def __init__(self, func: Callable[[T], Any], items: Sequence[T]) -> None:
        self.func, self.items = func, items
        odd = range(1, len(items), 2)
        self.child = fork_lines(lambda: (_line(func, items[i]) for i in odd))
        self.lines: list[bytes] = []
        self.rest = b""

    def values(self) -> Iterator[Any]:
        try:
            for i, item in enumerate(self.items):
                value = self._next() if i % 2 else _NOT_SENT
                yield self.func(item) if value is _NOT_SENT else value
        finally:  # done, or the reader stopped (--limit, an error, Ctrl-C)
            # A child still running ends at its next line, the session it is reading read
            # whole: a summary index it writes is never left as a temp.
            self.child.close(grace=STALL)

    def _next(self) -> Any:
        """The child's next value, or `_NOT_SENT` (not derived there, or no child now)."""
        if not self.lines and self.child.read is not None:
            self._wait()
        if not self.lines:
            return _NOT_SENT
        line = self.lines.pop(0)
        try:
            return orjson.loads(line) if line else _NOT_SENT
        except orjson.JSONDecodeError:  # not what the child writes: trust it no further
            self.child.close()
            self.lines.clear()
            return _NOT_SENT

    def _wait(self) -> None:
        """Read the pipe until a whole line has come, it ends, or the child has sent
        nothing for `STALL` seconds (then it is killed)."""
        read = self.child.read
        assert read is not None
        poller = select.poll()
        poller.register(read, select.POLLIN)
        since = time.monotonic()
        while not self.lines:
            if poller.poll(_POLL_MS):
                chunks = [self.rest]
                ended = drain(read, chunks)
                *lines, self.rest = b"".join(chunks).split(b"\n")
                self.lines += lines
                if ended:
                    self.child.close(kill=False)
                    return
                since = time.monotonic()
            elif time.monotonic() - since >= STALL:
                self.child.close()  # lines already read are still taken
                return


def _line(func: Callable[[Any], Any], item: Any) -> bytes:
    """`func(item)` as one line of JSON (orjson writes no raw line break), or an empty
    line when it raised or JSON cannot carry its value."""
    try:
        return orjson.dumps(func(item)) + b"\n"
    except Exception:  # the parent derives it again, and raises what it raises
        return b"\n"

"""Half of a big pass's checks in a forked, read-only verifier.

A no-op pass is system calls: listing and stating every file on both sides. On
two cores a second process halves the wall time, as rsync's sender and
receiver do. `plan` picks, from the stored change cache alone, the directory
whose subdirectories split the cached directories in two; when the walk has
entered it, `start` forks a child that runs the same walk over about half of
them while the parent walks the rest.

The child writes nothing, anywhere. It only vouches (`vouch`) for the
directories of its share that are *clean*: every file passed the no-read fast
path, nothing was reported and nothing is pending. The parent walks the rest
of the share itself, adopting on its way each clean directory the child
named (its stored groups kept as they are, its files counted unchanged)
without listing it, so a change deep in a session costs the parent the
directories down to it, not the session. A changed file is always handled by
the process that writes. A child that fails, crashes or is killed costs only
time: its whole share is walked again by the parent. The pipe carries indices
and counts, never a name. On Linux the child is killed when the parent dies,
so nobody waits for it (elsewhere it finishes its reads first).

The fork is only made where it is safe and pays: a full local pass in a
process with no other thread at the fork (the daemon's watcher has threads;
so may a program that uses the Python API, and a durable pass whose fsync
pool has started), SIGCHLD at its default (else the child's status may be
taken by someone else), more than one CPU to run on, a trusted cache, no
sweep pending, and at least `MIN_GROUPS` cached directories (below that the
fork costs more than the half walk saves). The child ends with
`os._exit`: no atexit handler, flushed buffer or finalizer of the parent's
runs twice.
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import threading
from collections.abc import Collection, Iterable, Iterator
from typing import TYPE_CHECKING

from sessionstore._orjson import orjson
from sessionstore.mirror import vouch
from sessionstore.mirror.vouch import WHOLE, ancestors

if TYPE_CHECKING:
    from sessionstore.mirror.frame import Child, Frame
    from sessionstore.mirror.walk import Pass

# Cached directories (groups) a pass must have for the fork to pay: a fork, exit and
# wait cost 3-6 ms at 20-100 MB (measured under load), and the bench tree's 1,000
# directories take about 40 ms to walk in one process (docs/benchmarks.md).
MIN_GROUPS = 1000
# Descend to a subdirectory while it holds more than this share of what is below.
_DOMINANT = 0.75
_MAX_DESCENT = 8
_PR_SET_PDEATHSIG = 1  # prctl(2)


def allowed(run: Pass) -> bool:
    """Whether this pass may fork a verifier at all."""
    m, cache = run.m, run.cache
    return (
        hasattr(os, "fork")
        and m.remote is None
        and not m.dry_run
        and cache is not None
        and cache.trusted
        and not run.sweep
        and signal.getsignal(signal.SIGCHLD) == signal.SIG_DFL
        and _cores() > 1
    )


def _single_threaded() -> bool:
    """No thread but this one, native ones included; asked at the fork itself.

    The fsync pool starts with a pass's first durable commit, so before the walk is
    too early to ask. A fork beside another thread can inherit a lock it holds.
    """
    try:
        return len(os.listdir("/proc/self/task")) == 1
    except OSError:  # no /proc: the threads Python knows of
        return threading.active_count() == 1


def _cores() -> int:
    """The CPUs this process may run on (a second process on one CPU only adds a fork)."""
    if hasattr(os, "sched_getaffinity"):
        return len(os.sched_getaffinity(0))
    return os.cpu_count() or 1


def plan(stored: Collection[str], min_groups: int) -> str | None:
    """The destination rel of the directory to split at, or None (too small to pay).

    From the cache's directory names only: each level's subdirectories are
    weighed by how many cached directories are below them, and a level whose
    heaviest subdirectory holds most of the weight is passed for that one.
    """
    prefix = ""
    rels: Iterable[str] = stored
    for _ in range(_MAX_DESCENT):
        below = _below(rels, prefix)
        total = sum(map(len, below.values()))
        if total < min_groups:
            return None
        top, most = max(below.items(), key=_weight)
        if len(most) <= total * _DOMINANT:
            return prefix
        prefix, rels = f"{prefix}/{top}" if prefix else top, most
    return None


def _weight(item: tuple[str, list[str]]) -> int:
    return len(item[1])


def _below(rels: Iterable[str], rel: str) -> dict[str, list[str]]:
    """The cached directories below `rel`, by the name of its subdirectory they are in."""
    start = len(rel) + 1 if rel else 0
    prefix = f"{rel}/" if rel else ""
    found: dict[str, list[str]] = {}
    for key in rels:
        if len(key) > start and key.startswith(prefix):
            found.setdefault(key[start:].partition("/")[0], []).append(key)
    return found


def start(run: Pass, frame: Frame, subdirs: list[Child]) -> Iterator[Child]:
    """Fork the verifier for about half of `frame`'s subdirectories; the parent's iterator.

    It yields the parent's share, then (after the child is done) every one of
    the child's share that the child could not vouch for.
    """
    if not _single_threaded():
        return iter(subdirs)
    under = _below(run.stored, frame.rel)
    weight = {dname: len(rels) for dname, rels in under.items()}
    mine: list[Child] = []
    theirs: list[Child] = []
    loads = [0, 0]
    side_of: dict[str, int] = {}
    # Heaviest first, each to the lighter side; the parent also has the rest of the pass.
    for child in sorted(subdirs, key=lambda c: weight.get(c[1], 0), reverse=True):
        side = 1 if loads[1] < loads[0] and weight.get(child[1], 0) else 0
        side_of[child[2]] = side
        loads[side] += weight.get(child[1], 0) or 1
    for child in subdirs:  # each share in listing order, as one process walks it
        (theirs if side_of[child[2]] else mine).append(child)
    if not theirs:
        return iter(subdirs)
    try:
        verifier = Verifier(run, frame, theirs, [under.get(c[1], []) for c in theirs])
    except OSError:  # no fork (EAGAIN, ENOMEM) or no pipe (EMFILE): one process walks it all
        return iter(subdirs)
    run.verifier = verifier
    return verifier.subdirs(mine)


class Verifier:
    """The forked child and what the parent needs to adopt its work."""

    def __init__(self, run: Pass, frame: Frame, theirs: list[Child], rels: list[list[str]]):
        self.run, self.theirs, self.rels = run, theirs, rels
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
                _detach(parent)
                result = vouch.vouch_for(run, frame, theirs, rels)
                _write_all(write, orjson.dumps(result))
                status = 0
            finally:
                os._exit(status)
        os.close(write)
        self.pid: int | None = pid
        self.read = read

    def subdirs(self, mine: list[Child]) -> Iterator[Child]:
        yield from mine
        clean = self.result()
        run = self.run
        for i, child in enumerate(self.theirs):
            vouched = clean.get(i)
            if vouched is None:
                yield child
            elif vouched[0][0] == WHOLE:
                _keep(run, self.rels[i], vouched[0][1])
            else:  # the parent walks the rest; `adopt` keeps these when it reaches them
                rels = self.rels[i]
                tops = {rels[j]: n for j, n in vouched}
                below: dict[str, list[str]] = {rel: [] for rel in tops}
                for rel in rels:
                    if (top := _top(rel, tops)) is not None:
                        below[top].append(rel)
                for rel, n in tops.items():
                    run.adopted[rel] = (n, below[rel])
                yield child

    def result(self) -> dict[int, list[tuple[int, int]]]:
        """What the child vouched for, by share index: (index into its stored rels, files)
        pairs, or one `(WHOLE, files)`; {} if it failed."""
        chunks = []
        try:
            while chunk := os.read(self.read, 1 << 16):
                chunks.append(chunk)
        finally:
            os.close(self.read)
            status = self.reap()
        if status != 0:
            return {}
        found: dict[int, list[tuple[int, int]]] = {}
        try:
            for i, j, n in orjson.loads(b"".join(chunks)):
                if not (0 <= i < len(self.rels) and WHOLE <= j < len(self.rels[i])):
                    return {}
                found.setdefault(int(i), []).append((int(j), int(n)))
        except (orjson.JSONDecodeError, TypeError, ValueError):
            return {}
        return found

    def reap(self) -> int:
        pid, self.pid = self.pid, None
        if pid is None:
            return 1
        try:
            _, status = os.waitpid(pid, 0)
        except ChildProcessError:  # reaped by someone else: its outcome is unknown
            return 1
        return status

    def close(self) -> None:
        """After an exception in the parent: stop and reap the child if it still runs."""
        if self.pid is not None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.pid, signal.SIGKILL)
            self.reap()
            os.close(self.read)


def _detach(parent: int) -> None:
    """In the child, on Linux: die with the parent.

    A caller that kills the mirror and then waits for the end of its output (the
    child holds the same streams) must not wait for the child's walk.
    """
    if sys.platform == "linux":
        import ctypes  # only the child pays for it

        ctypes.CDLL(None).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
        if os.getppid() != parent:  # it died before the prctl
            os._exit(1)


def _top(rel: str, tops: Collection[str]) -> str | None:
    """The directory of `tops` that `rel` is, or is below, if any."""
    if rel in tops:
        return rel
    return next((up for up in ancestors(rel) if up in tops), None)


def _keep(run: Pass, rels: Iterable[str], files: int) -> None:
    """In the parent: directories the child vouched for, their stored groups kept as is."""
    stored, groups = run.stored, run.groups
    for rel in rels:
        groups[rel] = stored[rel]  # as stored: the identity `finish` looks for
    run.report.unchanged += files


def adopt(run: Pass, frame: Frame, drel: str) -> bool:
    """In the parent, for a subdirectory of `frame` it is about to enter: whether the
    child vouched for it (then its groups are kept and it counts as entered)."""
    found = run.adopted.pop(drel, None)
    if found is None:
        return False
    _keep(run, found[1], found[0])
    frame.entered += 1  # its rel is a key of the groups: what `finish._Vouched` asks
    return True


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]

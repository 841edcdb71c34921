"""A big pass's checks shared with a forked, read-only verifier.

A no-op pass is system calls: listing and stating every file on both sides. On
two cores a second process halves the wall time, as rsync's sender and
receiver do. `plan` picks, from the stored change cache alone, the directory
whose subdirectories split the cached directories in two; when the walk has
entered it, `start` forks a child that runs the same walk over them from the
last while the parent walks them from the first, each taking one more until
they meet (`Claims`, in shared memory): whichever has more to do (the
parent makes every change; the child pays for its start) takes fewer.

The child writes nothing, anywhere. It only vouches (`vouch`) for the
directories of its subdirectories that are *clean*: every file passed the
no-read fast path, nothing was reported and nothing is pending. Its verdict
on each subdirectory goes up a pipe as soon as it is done; the parent reads
them between its own subdirectories, adopts a clean subdirectory whole (its
stored groups kept as they are, its files counted unchanged), and walks every
other one itself, adopting on its way each clean directory the child named
inside it without listing it: a change deep in a session costs the parent
the directories down to it, not the session. A changed file is always
handled by the process that writes. A verdict is complete when sent, so a
child that fails, crashes or is killed costs only time: every subdirectory
it sent no verdict on is walked by the parent. So does one that stops
(SIGSTOP, or starved of CPU): a parent left waiting while the child walks
no directory for `STALL` seconds kills it. The pipe carries indices and
counts, never a name. On Linux the child is killed when the parent dies, so
nobody waits for it (elsewhere it finishes its reads first).

The fork is only made where it is safe and pays: a full local pass in a
process with no other thread at the fork (the daemon's watcher has threads;
so may a program that uses the Python API, and a durable pass whose fsync
pool has started), SIGCHLD at its default (else a handler of the caller's
hears of a child it never made), more than one CPU to run on, a trusted cache,
and at least `MIN_GROUPS` cached directories (below that the
fork costs more than the half walk saves). The child ends with
`os._exit`: no atexit handler, flushed buffer or finalizer of the parent's
runs twice.
"""

from __future__ import annotations

import select
import time
from collections.abc import Collection, Iterable, Iterator

from sessionstore._fork import drain, fork_lines, may_fork, single_threaded
from sessionstore.mirror import vouch
from sessionstore.mirror.claims import Claims
from sessionstore.mirror.vouch import WHOLE, ancestors

TYPE_CHECKING = False  # typing's, without importing typing (mypy reads it as such)
if TYPE_CHECKING:
    from typing import Any

    from sessionstore.mirror.frame import Child, Frame
    from sessionstore.mirror.walk import Pass

# Cached directories (groups) a pass must have for the fork to pay: a fork, exit and
# wait cost 3-6 ms at 20-100 MB (measured under load), and the bench tree's 1,000
# directories take about 40 ms to walk in one process (docs/benchmarks.md).
MIN_GROUPS = 1000
# Descend to a subdirectory while it holds more than this share of what is below.
_DOMINANT = 0.75
_MAX_DESCENT = 8
# Seconds a waiting parent gives a child that walks no directory and sends nothing
# before it kills the child and walks the rest itself. A false alarm (one directory of
# some 100k files, or a child descheduled that long) costs a walk done twice, never a
# result; waiting for a stopped child would cost the pass.
STALL = 2.0
_POLL_MS = 100


def allowed(run: Pass) -> bool:
    """Whether this pass may fork a verifier at all."""
    m, cache = run.m, run.cache
    return m.remote is None and not m.dry_run and cache is not None and cache.trusted and may_fork()


def plan(stored: Collection[str], min_groups: int) -> tuple[str, dict[str, list[str]]] | None:
    """The destination rel of the directory to split at, and the cached directories
    below it by subdirectory (what `start` shares out); None if too small to pay.

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
            return prefix, below
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


def start(
    run: Pass, frame: Frame, subdirs: list[Child], under: dict[str, list[str]]
) -> Iterator[Child]:
    """Fork the verifier over `frame`'s subdirectories (`under`: `plan`'s cached
    directories below each, by name); the parent's iterator.

    The parent takes subdirectories from the front of the listing and the child
    from the back, each until it meets the other (`Claims`), so the process
    with less to do takes more: the parent also makes every change. As the
    child's verdicts arrive, the iterator adopts what it vouched for and yields
    the rest of its subdirectories for the parent to walk.
    """
    if len(subdirs) < 2 or not single_threaded():
        return iter(subdirs)
    rels = [under.get(child[1], []) for child in subdirs]
    try:
        verifier = Verifier(run, frame, subdirs, rels)
    except OSError:  # no fork (EAGAIN, ENOMEM) or no pipe (EMFILE): one process walks it all
        return iter(subdirs)
    run.verifier = verifier
    return verifier.subdirs()


class Verifier:
    """The forked child and what the parent needs to adopt its work."""

    def __init__(self, run: Pass, frame: Frame, items: list[Child], rels: list[list[str]]):
        self.run, self.items, self.rels = run, items, rels
        self.claims = Claims(len(items))
        try:
            self.child = fork_lines(
                lambda: map(_line, vouch.vouch_for(run, frame, items, rels, self.claims))
            )
        except OSError:
            self.claims.close()
            raise
        self.buffer = b""
        self.handled: set[int] = set()  # the child's subdirectories adopted or yielded
        # The lowest subdirectory the child sent a verdict on: it took all from there on,
        # whatever the parent reads in `claims` (which can lag behind the pipe).
        self.low = len(items)

    def subdirs(self) -> Iterator[Child]:
        claims, items = self.claims, self.items
        taken = 0  # the parent walks items[:taken]
        while taken < self.low and claims.take(taken):
            taken += 1
            yield items[taken - 1]
            yield from self.verdicts(taken, block=False)
        if taken == len(items):  # the parent has walked them all: the child has no use
            self.close()
        else:
            yield from self.verdicts(taken, block=True)
        self.claims.close()
        # What the child did not vouch for (it stopped, failed, or was not there yet).
        for i in range(taken, len(items)):
            if i not in self.handled:
                yield items[i]

    def verdicts(self, taken: int, *, block: bool) -> Iterator[Child]:
        """The child's verdicts read so far (with `block`, all of them): each subdirectory
        it vouched for whole is adopted, every other one yielded for the parent to walk
        (what it vouched for inside it adopted there, `adopt`). A verdict on one the
        parent took meanwhile is dropped: both walked it, and the parent's walk counts."""
        if self.child.read is None:
            return
        for verdict in self._read(block):
            if verdict is None:  # not what the child writes: trust it no further
                self.close()
                return
            i, vouched = verdict
            self.low = min(self.low, i)
            if i < taken or i in self.handled:
                continue
            self.handled.add(i)
            if vouched and vouched[0][0] == WHOLE:
                _keep(self.run, self.rels[i], vouched[0][1])
                continue
            rels = self.rels[i]
            tops = {rels[j]: n for j, n in vouched}
            below: dict[str, list[str]] = {rel: [] for rel in tops}
            for rel in rels:
                if (top := _top(rel, tops)) is not None:
                    below[top].append(rel)
            for rel, n in tops.items():
                self.run.adopted[rel] = (n, below[rel])
            yield self.items[i]

    def _read(self, block: bool) -> list[tuple[int, list[tuple[int, int]]] | None]:
        """The complete verdict lines in the pipe (until its end with `block`), parsed;
        None for one that is not a valid verdict. At the end, the child is reaped; with
        `block`, a child that stalls (`STALL`) is killed after what it sent is read."""
        read = self.child.read
        assert read is not None
        chunks = [self.buffer]
        ended = drain(read, chunks)
        stalled = block and not ended and not self._wait(read, chunks)
        *lines, self.buffer = b"".join(chunks).split(b"\n")
        if ended:  # its end waited for: its status decides nothing, each verdict is whole
            self.child.close(kill=False)
        elif stalled:
            self.close()
        return [self._verdict(line) for line in lines]

    def _wait(self, read: int, chunks: list[bytes]) -> bool:
        """Read the pipe `read` into `chunks` until its end (True), or until the child has
        sent nothing and walked no directory for `STALL` seconds (False)."""
        poller = select.poll()
        poller.register(read, select.POLLIN)
        walked, since = self.claims.walked(), time.monotonic()
        while True:
            if poller.poll(_POLL_MS):
                if drain(read, chunks):
                    return True
                since = time.monotonic()
            elif (now := self.claims.walked()) != walked:
                walked, since = now, time.monotonic()
            elif time.monotonic() - since >= STALL:
                return False

    def _verdict(self, line: bytes) -> tuple[int, list[tuple[int, int]]] | None:
        try:
            head, *rest = line.split(b" ")
            i = int(head)
            rels = self.rels[i] if 0 <= i < len(self.rels) else None
            if rels is None:
                return None
            pairs = [(int(j), int(n)) for j, _, n in (pair.partition(b":") for pair in rest)]
        except ValueError:
            return None
        if not all(WHOLE <= j < len(rels) for j, _ in pairs):
            return None
        if any(j == WHOLE for j, _ in pairs) and len(pairs) != 1:
            return None
        return i, pairs

    def close(self) -> None:
        """Stop and reap the child if it still runs (it has nothing left the parent needs,
        or the parent stopped after an exception); safe twice."""
        self.child.close()
        self.claims.close()


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


def _line(verdict: list[Any]) -> bytes:
    """A verdict (`vouch.vouch_for`'s `[i, [[j, n], ...]]`) as a line of the pipe,
    `i j:n j:n`: integers only, so neither side needs a JSON library."""
    i, vouched = verdict
    return b" ".join([b"%d" % i, *(b"%d:%d" % (j, n) for j, n in vouched)]) + b"\n"

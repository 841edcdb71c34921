"""Durable commits of a local tree, overlapped: the fsyncs of a pass on a bounded pool.

`LocalSync` sits between `LocalDirs` (directories and their checks) and
`LocalTree` (reads and changes). In durable mode a commit's temp file is
created and written by the caller's thread, as before, and its fsync goes to
a pool of at most `POOL_THREADS` threads (fsync releases the GIL, and
concurrent fsyncs share the filesystem's journal commits); at most
`MAX_PENDING` commits are in flight, so memory and descriptors stay bounded
whatever the tree's size. The order that makes a commit durable is kept,
only the waits overlap:

- a file is renamed into place by the caller's thread, after its fsync
  returned and after its directory's chain passed `check` again; until then
  only the temp name exists (swept by the next pass if this one dies);
- a directory the walk leaves while commits below it are pending stays open
  until they are renamed; then it is fsynced (on the pool) and closed. So a
  directory is fsynced once when the walk is done with it, not once per
  record;
- a record's marker is written and fsynced like a file, but linked to its
  name only at the next `flush`: after every pending commit is renamed and
  every directory changed so far is fsynced (one round, on the pool), and
  only if no commit below the record's directory failed; then the
  directories of the markers are fsynced (a second round). `flush` runs when
  the pass asks (before `report.json`, at its end) or when more than
  `MAX_HELD` directories and markers are waiting.

A commit that fails after the caller's thread let it go (fsync, rename, a
directory moved meanwhile) is reported through the error sink for that file
(the directory's own problem is reported by `check`), its temp is removed,
and its path is in `failed`; a marker not linked is in `declined` with the
number of failed commits below it (0: another writer took the name). The
pass reads both after `flush` (mirror/finish.py). Without `durable` nothing
here is used: every commit is whole when it returns.
"""

from __future__ import annotations

import os
from collections import deque
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from typing import TYPE_CHECKING

from sessionstore._fs.atomic import fsync_dir, publish_once
from sessionstore.storage.local_tree_dirs import _UNKNOWN, LocalDir, LocalDirs, describe

if TYPE_CHECKING:
    from sessionstore._fs.atomic import AtomicFile

# Threads that wait in fsync. Measured on ext4 (docs/benchmarks.md): 16 concurrent
# fsyncs of small new files take ~0.3 ms each against ~1 ms one at a time; more
# threads stop paying on a 2-core machine.
POOL_THREADS = 16
MAX_PENDING = 64  # commits in flight: each holds an open temp file
MAX_HELD = 256  # directories kept open past the walk, plus markers waiting for their link

_FILE, _MARKER, _DIR = range(3)


class _Job:
    """One thing on the pool: a temp file's fsync (a file or a marker), or a directory's."""

    __slots__ = ("d", "future", "kind", "name", "out")

    def __init__(
        self, kind: int, d: LocalDir, name: str, out: AtomicFile | None, future: Future[None]
    ) -> None:
        self.kind = kind
        self.d = d
        self.name = name
        self.out = out
        self.future = future

    @property
    def rel(self) -> str:
        return f"{self.d.rel}/{self.name}" if self.d.rel else self.name


def _sync_dir(fd: int, close: bool) -> None:
    """fsync the directory open at `fd` (an `O_PATH` fd is reopened), closing `fd` if asked."""
    try:
        fsync_dir(".", dir_fd=fd)
    finally:
        if close:
            os.close(fd)


class LocalSync(LocalDirs):
    """`LocalDirs` plus the pass's fsyncs: pending commits, held directories, closing."""

    def __init__(
        self, root: LocalDir, error: Callable[[str, str], None], before_change: Callable[[], None],
        durable: bool,
    ) -> None:  # fmt: skip
        super().__init__(root, error, before_change, durable)
        self.failed: set[str] = set()  # commits that never reached their name
        self.declined: dict[str, int] = {}  # markers not linked -> failed commits below
        self._pool: ThreadPoolExecutor | None = None
        self._jobs: deque[_Job] = deque()
        self._holds: dict[LocalDir, int] = {}  # directory -> pending commits at or below it
        self._orphans: set[LocalDir] = set()  # held directories nobody else will close
        self._links: list[_Job] = []  # markers fsynced, waiting for `flush`

    # -- handing work to the pool -------------------------------------------------------

    def _submit(self, fn: Callable[..., None], *args: object) -> Future[None]:
        if self._pool is None:
            self._pool = ThreadPoolExecutor(POOL_THREADS, thread_name_prefix="sessionstore-fsync")
        return self._pool.submit(fn, *args)

    def defer(self, d: LocalDir, name: str, out: AtomicFile, marker: bool) -> None:
        """Hand a written temp in `d` to the pool: fsync, then rename (or, for a marker, link).

        Blocks while `MAX_PENDING` commits are in flight (or too much is held).
        `d` and its parents stay open until the temp is published or dropped.
        """
        jobs = self._jobs
        while len(jobs) >= MAX_PENDING:
            self._reap(jobs.popleft())
        if len(self._orphans) + len(self._links) > MAX_HELD:
            self.flush()
        node: LocalDir | None = d
        holds = self._holds
        while node is not None and node is not self.root:
            holds[node] = holds.get(node, 0) + 1
            node = node.parent
        jobs.append(_Job(_MARKER if marker else _FILE, d, name, out, self._submit(out.sync)))
        while jobs and jobs[0].future.done():  # what is done already: rename it now
            self._reap(jobs.popleft())

    # -- what comes back ------------------------------------------------------------------

    def _reap(self, job: _Job) -> None:
        """Finish one job in the caller's thread (waiting for it if needed)."""
        failure = job.future.exception()
        if failure is not None and not isinstance(failure, OSError):
            raise failure
        exc: OSError | None = failure
        out = job.out
        if job.kind == _DIR:
            if exc is not None:
                self.error(job.d.shown, f"cannot fsync directory: {describe(exc)}")
            return
        assert out is not None
        if exc is not None:
            out.discard()
            self._fail(job, exc)
        elif job.kind == _MARKER:
            self._links.append(job)
            return  # still held, until `flush` links it
        elif not self.check(job.d):
            out.discard()  # its directory moved: reported by `check`
            self.failed.add(job.rel)
        else:
            try:
                out.commit()  # fsynced already: only the rename
            except OSError as failure:
                self._fail(job, failure)
            else:
                self._touch(job.d)
        self._release(job.d)

    def _fail(self, job: _Job, exc: OSError) -> None:
        self.failed.add(job.rel)
        self.error(job.rel, describe(exc))

    def _release(self, d: LocalDir) -> None:
        node: LocalDir | None = d
        holds = self._holds
        while node is not None and node is not self.root:
            left = holds[node] - 1
            if left:
                holds[node] = left
            else:
                del holds[node]
                if node in self._orphans:
                    self._orphans.discard(node)
                    self._leave(node)
            node = node.parent

    def _link(self, job: _Job) -> None:
        """Publish a fsynced marker (everything before it is durable), unless it must wait."""
        out, d = job.out, job.d
        assert out is not None and d.fd is not None
        below = sum(1 for rel in self.failed if rel.startswith(f"{d.rel}/" if d.rel else ""))
        try:
            if below or not self.check(d):
                if below:
                    self.declined[job.rel] = below
                else:
                    self.failed.add(job.rel)  # its directory moved: reported by `check`
            elif publish_once(os.path.basename(out.temp), job.name, d.fd):
                self._touch(d)
            else:
                self.declined[job.rel] = 0  # sealed by another writer meanwhile
        except OSError as exc:
            self._fail(job, exc)
        finally:
            out.discard()  # the temp's name (the marker keeps the inode)
            self._release(d)

    # -- fsync and closing ------------------------------------------------------------

    def flush(self) -> None:
        """Make everything committed so far durable, and link the markers waiting for it.

        Waits for every pending commit and renames it, fsyncs every directory
        changed so far (on the pool), then links the waiting markers and fsyncs
        their directories.
        """
        jobs = self._jobs
        while True:
            while jobs:
                self._reap(jobs.popleft())
            if self._unsynced:
                for d in list(self._unsynced):
                    self._sync(d, close=False)
                continue
            if not self._links:
                return
            links, self._links = self._links, []
            for job in links:
                self._link(job)

    def _sync(self, d: LocalDir, *, close: bool) -> None:
        """fsync `d` on the pool (its fd is then the job's to close, if `close`)."""
        self._unsynced.discard(d)
        d.touched = False
        fd = d.fd
        if fd is None:
            return
        if close:
            d.fd = None
            d.state = _UNKNOWN
        self._jobs.append(_Job(_DIR, d, "", None, self._submit(_sync_dir, fd, close)))

    def _leave(self, d: LocalDir) -> None:
        """Nothing is pending in `d` any more: fsync it if it changed, and close it."""
        if d is self.root:
            if d.touched:
                self._sync(d, close=False)
            return
        fd = d.fd
        if d.touched and fd is not None:
            self._sync(d, close=True)
        elif fd is not None:
            d.fd = None
            d.state = _UNKNOWN
            os.close(fd)

    def close(self, d: LocalDir) -> None:
        """The walk left `d`: fsync it if it changed, close its fd (the root stays open).

        Kept open while commits below it are pending.
        """
        if self._holds and d in self._holds:
            self._orphans.add(d)
            return
        if d.touched:
            self._leave(d)
            return
        fd = d.fd
        if fd is not None and d is not self.root:  # inline: once per directory of a pass
            d.fd = None
            d.state = _UNKNOWN
            os.close(fd)

    def close_all(self) -> None:
        """End of pass: flush what is left, stop the pool, close the root and its ancestors."""
        try:
            self.flush()
        finally:
            self._abandon()
            if self._pool is not None:
                self._pool.shutdown(wait=True)
                self._pool = None
            for d in [*self._orphans, self.root, *reversed(self._chain)]:
                fd = d.fd
                if fd is not None:
                    d.fd = None
                    d.state = _UNKNOWN
                    os.close(fd)
            self._orphans.clear()

    def _abandon(self) -> None:
        """After a failed `flush`: wait for what is on the pool and remove its temps."""
        jobs, self._jobs = [*self._jobs, *self._links], deque()
        self._links = []
        for job in jobs:
            try:
                job.future.exception()
            finally:
                if job.out is not None:
                    job.out.discard()

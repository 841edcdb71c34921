"""Durable commits of a local tree, overlapped: the fsyncs of a pass on a bounded pool.

`LocalSync` sits between `LocalDirs` (directories and their checks) and
`LocalRoot` (the root's own files) and `LocalTree` (reads and changes). In
durable mode a commit's temp file is created and written by the caller's
thread, as before, and its fsync joins a round; a round of `MAX_PENDING`
commits (or whatever is waiting when the pass flushes) goes to a pool of at
most `POOL_THREADS` threads at once (fsync releases the GIL; concurrent
fsyncs share a journal commit, or overlap their cache flushes), and the
caller waits for the whole round before it writes the next. Not a pipeline:
with fsyncs running beside it the caller's own creates and writes slowed
down (strace shows the walk waiting for each fsync to return before its next
create; on an ext4 mounted without a journal, as this VM's is, the fsync of
a new file also writes out its directory), and an initial copy of 8,000 /
50,000 files took 0.88x / 0.83x the pipeline's time in rounds
(docs/benchmarks.md). Memory and descriptors stay bounded by a round
whatever the tree's size. The order that makes a commit durable is kept,
only the waits overlap:

- a file is renamed into place by the pool thread that fsynced it, after
  the fsync returned and after its directory's chain was found in place
  again (`in_place`, read-only; one that moved is left to `check` in the
  caller's thread); until then only the temp name exists (swept by the next
  pass if this one dies);
- a directory the walk leaves while commits below it are pending stays open
  until they are renamed; then it is fsynced (on the pool) and closed. So a
  directory is fsynced once when the walk is done with it, not once per
  record;
- a record's marker is written and fsynced like a file, but linked to its
  name only at the next `flush`: after every pending commit is renamed and
  every directory changed so far is fsynced (one round, on the pool), and
  only if no commit below the record's directory failed and no fsync of a
  directory on its way failed (`blockers`); directories from the root down
  to a marker that this pass did not change are fsynced first too (a killed
  pass may have left their changes unsynced); then the directories of the
  markers are fsynced (a second round). `flush` runs when
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
from collections.abc import Callable

from sessionstore._fs.atomic import publish_once
from sessionstore.storage.local_tree_dirs import _UNKNOWN, LocalDir, LocalDirs, describe
from sessionstore.storage.local_tree_jobs import DIR, FILE, MARKER, Job

TYPE_CHECKING = False  # typing's, without importing typing (mypy reads it as such)
if TYPE_CHECKING:
    from sessionstore._fs.atomic import AtomicFile
    from sessionstore._fs.pool import Pool
    from sessionstore.storage.local_tree_jobs import Guards

# Threads that wait in fsync. Measured on ext4 (docs/benchmarks.md): 16 concurrent
# fsyncs of small new files take ~0.3 ms each against ~1 ms one at a time; more
# threads stop paying on a 2-core machine.
POOL_THREADS = 16
MAX_PENDING = 64  # commits in a round: each holds an open temp file until it is renamed
MAX_HELD = 256  # directories kept open past the walk, plus markers waiting for their link


class LocalSync(LocalDirs):
    """`LocalDirs` plus the pass's fsyncs: pending commits, held directories, closing."""

    def __init__(
        self, root: LocalDir, error: Callable[[str, str], None], before_change: Callable[[], None],
        durable: bool,
    ) -> None:  # fmt: skip
        super().__init__(root, error, before_change, durable)
        # Commits that never reached their name, and directories whose fsync failed.
        self.failed: set[str] = set()
        self.declined: dict[str, int] = {}  # markers not linked -> `blockers` (0: name taken)
        self.withheld: dict[str, str] = {}  # files not renamed -> the record sealed meanwhile
        self._lost: set[str] = set()  # the directories in `failed`
        self._synced: set[str] = set()  # directories fsynced in this pass (and unchanged since)
        self._pool: Pool[Job] | None = None
        self._holds: dict[LocalDir, int] = {}  # directory -> pending commits at or below it
        self._orphans: set[LocalDir] = set()  # held directories nobody else will close
        self._links: list[Job] = []  # markers fsynced, waiting for `flush`
        self._round: list[Job] = []  # jobs for the next round, not on the pool yet
        self._in_round = False
        self._raised = False  # a round raised: the pass unwinds

    # -- handing work to the pool -------------------------------------------------------

    def _submit(self, job: Job) -> None:
        """Add `job` to the round; a full round runs now (unless one is running).

        Not after a round raised: the pass is unwinding, closing directories
        (which adds their fsyncs here); `flush` (from `close_all`) tries again.
        """
        self._round.append(job)
        if len(self._round) >= MAX_PENDING and not self._in_round and not self._raised:
            self._run_round()

    def _run_round(self) -> None:
        """Run the waiting jobs on the pool and finish each; again for what that adds.

        Finishing a file can leave its directory with nothing pending, whose
        fsync then joins the next round, run before this returns.
        """
        self._in_round = True
        try:
            while True:
                pool = self._pool
                if self._round:
                    if pool is None:
                        # On first use: a pass that syncs nothing imports no pool (nor typing).
                        from sessionstore._fs.pool import Pool

                        pool = self._pool = Pool(POOL_THREADS, "sessionstore-fsync")
                    jobs, self._round = self._round, []
                    before = pool.pending
                    try:
                        for job in jobs:
                            pool.submit(job)  # queues it, or raises with nothing queued
                    finally:  # what did not reach the pool is the round's again, never lost
                        # Counted by the pool, not here: a Ctrl-C as `submit` returns
                        # made a job both queued and the round's, and it ran twice.
                        self._round[:0] = jobs[pool.pending - before :]
                elif pool is None or not pool.pending:  # (pending: a round cut short)
                    return
                while pool.pending:
                    self._reap(pool.next())
        except BaseException:
            self._raised = True
            raise
        finally:
            self._in_round = False

    def defer(
        self, d: LocalDir, name: str, out: AtomicFile, marker: bool, guards: Guards = ()
    ) -> None:
        """Hand a written temp in `d` to the round: fsync, then rename (or, for a marker, link).

        Runs the round when it is full (or flushes when too much is held).
        `d` and its parents stay open until the temp is published or dropped.
        """
        if len(self._orphans) + len(self._links) > MAX_HELD:
            try:
                self.flush()
            except BaseException:
                out.discard()  # not the round's yet: nobody else would
                raise
        node: LocalDir | None = d
        holds = self._holds
        while node is not None and node is not self.root:
            holds[node] = holds.get(node, 0) + 1
            node = node.parent
        job = Job(MARKER if marker else FILE, d, name, out)
        if not marker:
            job.root = self.root
            job.guards = guards
        self._submit(job)

    # -- what comes back ------------------------------------------------------------------

    def _reap(self, job: Job) -> None:
        """Finish one job in the caller's thread (waiting for it if needed)."""
        failure = job.error
        out = job.out
        if failure is not None and not isinstance(failure, OSError):
            # Not a file's failure but the pass's (a bug, MemoryError): it ends the pass,
            # and the job still counts as failed, so no marker above it is linked on the
            # way out (`close_all` flushes what is whole).
            if out is None:
                self.failed.add(job.d.rel)
                self._lost.add(job.d.rel)
            else:
                out.discard()
                self.failed.add(job.rel)
                self._release(job.d)
            raise failure
        exc: OSError | None = failure
        if job.kind == DIR:
            if exc is None:
                self._synced.add(job.d.rel)
            else:
                self.error(job.d.shown, f"cannot fsync directory: {describe(exc)}")
                self.failed.add(job.d.rel)
                self._lost.add(job.d.rel)
            return
        assert out is not None
        if exc is not None:
            out.discard()
            self._fail(job, exc)
        elif job.kind == MARKER:
            self._links.append(job)
            return  # still held, until `flush` links it
        elif job.moved and not self.check(job.d):  # reports and marks the one that moved
            out.discard()
            self.failed.add(job.rel)
        else:
            try:
                if job.moved:  # in place after all (`in_place` saw it mid-change)
                    job.rename()
            except OSError as failure:
                out.discard()  # `commit` removed its temp; a failed look did not
                self._fail(job, failure)
            else:
                if job.sealed is not None:
                    out.discard()
                    self.withheld[job.rel] = job.sealed
                else:
                    self._touch(job.d)  # renamed
        self._release(job.d)

    def _fail(self, job: Job, exc: OSError) -> None:
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

    def blockers(self, d: LocalDir) -> int:
        """Failures that keep a marker in `d` from being published.

        A commit below `d` that failed, or a directory whose fsync failed below
        `d`, at `d` or above it (whatever that directory holds may not survive a
        crash, the record's own entry included).
        """
        if not self.failed:
            return 0
        top = d.rel
        inside = f"{top}/" if top else ""
        count = 0
        for rel in self.failed:
            if rel.startswith(inside) or (
                rel in self._lost and (rel in ("", ".", top) or top.startswith(f"{rel}/"))
            ):
                count += 1
        return count

    def _link(self, job: Job) -> None:
        """Publish a fsynced marker (everything before it is durable), unless it must wait."""
        out, d = job.out, job.d
        assert out is not None and d.fd is not None
        below = self.blockers(d)
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

        Runs the round (every pending commit fsynced and renamed), fsyncs every
        directory changed so far (a round), then links the waiting markers and
        fsyncs their directories (another).
        """
        while True:
            self._run_round()
            if self._unsynced:
                for d in list(self._unsynced):
                    self._sync(d, close=False)
                continue
            if not self._links:
                return
            # A marker's directories this pass did not change may hold the changes of
            # a pass killed before its fsyncs: fsync them too, once per pass.
            chain = self._not_synced(self._links)
            if chain:
                for d in chain:
                    self._sync(d, close=False)
                continue
            links, self._links = self._links, []
            taken = 0
            try:
                for job in links:
                    taken += 1  # first: `_link` drops its temp whatever happens
                    self._link(job)
            except BaseException:  # a link that raised (a round it ran): the rest wait again
                for job in links[:taken]:
                    assert job.out is not None
                    job.out.discard()  # (again: safe) also if `_link` never began
                self._links[:0] = links[taken:]
                raise

    def _not_synced(self, links: list[Job]) -> set[LocalDir]:
        """The directories from the root down to each marker not fsynced in this pass."""
        found: set[LocalDir] = set()
        done = self._synced
        for job in links:
            node: LocalDir | None = job.d
            while node is not None and node.rel != "." and node not in found:
                if node.fd is not None and node.rel not in done and node.rel not in self._lost:
                    found.add(node)
                node = node.parent
        return found

    def _sync(self, d: LocalDir, *, close: bool) -> None:
        """fsync `d` on the pool (its fd is then the job's to close, if `close`)."""
        self._unsynced.discard(d)
        d.touched = False
        fd = d.fd
        if fd is None:
            return
        job = Job(DIR, d, "", None, fd)
        if close:
            d.fd = None
            d.state = _UNKNOWN
            job.close = True
        self._submit(job)

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
                self._pool.close()
                self._pool = None
            for d in [*self._orphans, self.root, *reversed(self._chain)]:
                fd = d.fd
                if fd is not None:
                    d.fd = None
                    d.state = _UNKNOWN
                    os.close(fd)
            self._orphans.clear()

    def _abandon(self) -> None:
        """After a failed `flush`: wait for what is on the pool, remove the temps, close."""
        jobs, self._links, self._round = [*self._links, *self._round], [], []
        pool = self._pool
        while pool is not None and pool.pending:
            job = pool.next()
            job.close = False  # it ran: a directory job closed its own fd
            jobs.append(job)
        for job in jobs:
            if job.out is not None:
                job.out.discard()
            elif job.close:  # a directory's fsync that never ran, its fd the job's
                os.close(job.fd)

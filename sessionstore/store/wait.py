"""Waiting for a record to complete: filesystem events first, a periodic re-check always.

Results are push-free: a worker writes files and the waiter watches for the
marker. Events only wake the waiter early; the state is always re-derived
from the disk (`read_record`), and the disk is re-read every `poll_interval`
seconds regardless, because events get lost (inotify queue overflow, a watch
that could not be added, remote writers on NFS that raise no local event).

What is watched, each non-recursively, as soon as it exists: the session
directory (so a late `trials/` is noticed), the collection directory (a late
`trials/<n>/`) and the record directory (its marker). Watching only these
keeps the cost at three watches however large the session is.

A torn marker is final unless it may still be being written: a writer that
writes the marker in place (not temp + rename, breaking the format's rule)
shows a torn prefix for a moment. So a torn marker is returned as torn only
once it is `settle` seconds old by its mtime, or has kept the same size and
mtime for `settle` seconds by the waiter's clock (which also covers a writer
whose clock runs ahead). At the deadline a torn marker is returned as torn.

The session is the one the wait started on: once its directory has been seen,
each poll checks it is still there and still the same one (`SessionIdentity`),
and a wait on a session removed or replaced (a new session made under the
same id) raises `SessionNotFound`. A record of the replacement never answers
a wait on the original: nothing will complete the original's record.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from sessionstore._json import MAX_MARKER_BYTES
from sessionstore._watch import READ_ONLY_KINDS, Change, Watcher
from sessionstore.errors import (
    InvalidInput,
    SessionNotFound,
    StorageError,
    TooLarge,
    Unavailable,
    WaitTimedOut,
)
from sessionstore.format.names import MANIFEST, MAX_RECORD, REPORT
from sessionstore.storage.s3_path import S3Path
from sessionstore.store.files import locate, object_of, read_object
from sessionstore.store.records import Record, RecordState, read_record

if TYPE_CHECKING:
    from sessionstore.store.session import Session

__all__ = ["SessionIdentity", "identify", "wait_record", "wait_report"]

POLL_INTERVAL = 1.0
SETTLE = 1.0
REMOTE_FIRST_POLL = 0.1
REMOTE_MAX_POLL = 5.0


class _Wakeup:
    """Wakes the waiter when a change touches `paths` (called on the watcher's thread)."""

    def __init__(self, paths: set[str]) -> None:
        self.paths = paths
        self.event = threading.Event()

    def __call__(self, change: Change) -> None:
        # A log appended to inside the record raises many events; only the marker and
        # the directories on the way to it matter, and only changes: the waiter's own
        # read of a torn marker opens and closes it, and waking on that would spin.
        if change.kind in READ_ONLY_KINDS:
            return
        if any(os.path.normpath(path) in self.paths for path in change.paths):
            self.event.set()


# watchdog logs these although nothing is lost for a waiter, which would print them
# on stderr of every CLI call that meets them: the stop race (ERROR), an event that
# arrives while an emitter stops, i.e. every wait that ends while its directories
# are busy; a queue overflow (WARNING), lost events being what the re-check is for.
_STOP_RACE = "InotifyEmitter.queue_events() called when the thread is inactive"
_OVERFLOW = "Inotify queue overflowed; filesystem events were lost"
_HARMLESS = {"watchdog.observers.inotify": _STOP_RACE, "watchdog.observers.inotify_c": _OVERFLOW}


def _drop_harmless(record: logging.LogRecord) -> bool:
    return _HARMLESS.get(record.name) != record.msg


def _new_observer(on_change: _Wakeup) -> Watcher | None:
    """A started watcher, or None when none can run here (then only polling)."""
    for name in _HARMLESS:
        log = logging.getLogger(name)
        if _drop_harmless not in log.filters:
            log.addFilter(_drop_harmless)
    try:
        watcher = Watcher(on_change)
        watcher.start()
    except (ImportError, OSError, RuntimeError):
        return None
    return watcher


class _Watches:
    """Watches on the chain session dir -> collection dir -> record dir, added as they appear."""

    def __init__(self, chain: list[str], handler: _Wakeup) -> None:
        self.chain = chain
        self.handler = handler
        self.armed: set[str] = set()
        self.observer = _new_observer(handler)

    def arm(self) -> None:
        """Watch every directory of the chain that exists now; failures leave polling to cope."""
        if self.observer is None:
            return
        for directory in self.chain:
            if directory in self.armed:
                continue
            try:
                self.observer.watch(directory, recursive=False)
            except OSError:
                # Missing (not created yet) or out of inotify watches: the periodic
                # re-check still sees it, and the next pass tries again.
                return
            self.armed.add(directory)

    def close(self) -> None:
        if self.observer is not None:
            self.observer.stop()


def _marker_signature(path: str) -> tuple[int, int] | None:
    try:
        st = os.stat(path, follow_symlinks=False)  # a symlinked marker is torn, never followed
    except OSError:
        return None
    return st.st_size, st.st_mtime_ns


@dataclass(frozen=True)
class SessionIdentity:
    """Which session directory a wait is on, so that a new one under the same name is not it.

    The directory's device and inode tell a removed-and-recreated directory
    apart until the filesystem reuses the inode; the manifest's `created_at`
    (None for a raw workspace, or a manifest that cannot be read) covers that
    reuse. Only two known, different `created_at` differ: a manifest that
    appears during the wait (a mirror copying the session in) is the same
    session.
    """

    device: int
    inode: int
    created_at: str | None

    @classmethod
    def of(cls, session_dir: str | os.PathLike[str]) -> SessionIdentity | None:
        """The identity of the session directory there now; None when there is none.

        In an `s3://` store a session is its manifest (`rm` deletes it first): the
        identity is its `created_at` alone, None once it is absent. A manifest the
        server fails to send (a 5xx) is still there, of unknown date: the same session.
        """
        if isinstance(session_dir, S3Path):
            storage, key = locate(session_dir, 1)
            there, manifest, _ = read_object(storage, f"{key}/{MANIFEST}", key)
            created = (manifest or {}).get("created_at")
            return cls(0, 0, created if isinstance(created, str) else None) if there else None
        try:
            # Not followed: a session directory swapped for a symlink is another thing.
            st = os.stat(session_dir, follow_symlinks=False)
        except OSError:
            return None
        storage, key = locate(Path(session_dir), 1)
        _, manifest, _ = read_object(storage, f"{key}/{MANIFEST}", key)
        created = (manifest or {}).get("created_at")
        return cls(st.st_dev, st.st_ino, created if isinstance(created, str) else None)

    def same_as(self, now: SessionIdentity | None) -> bool:
        """Whether `now` (this directory as read again) is still this session."""
        if now is None or (now.device, now.inode) != (self.device, self.inode):
            return False
        return None in (self.created_at, now.created_at) or now.created_at == self.created_at


def identify(session: Session) -> SessionIdentity | None:
    """The identity to hold a wait on `session` to, taken now.

    Raises `SessionNotFound` if the session directory is gone already: a wait
    given no identity would take the first session to appear there instead.
    """
    identity = SessionIdentity.of(session.path)
    if identity is None:
        raise SessionNotFound(str(session.path))
    return identity


def wait_record(
    path: str | os.PathLike[str],
    marker: str,
    n: int,
    timeout: float | None = None,
    *,
    poll_interval: float = POLL_INTERVAL,
    settle: float = SETTLE,
    identity: SessionIdentity | None = None,
) -> Record:
    """Block until the record at `path` (marker `marker`) is completed or torn; return it.

    `path` is `<session>/<collection>/<n>`; it need not exist yet, nor its parent: the
    session directory is watched until they appear. `n` 0 means the session's report
    (`store.Session.report()`): `path` is then the session directory and `marker` is
    `report.json`. `timeout` None waits forever; otherwise `WaitTimedOut` is raised once
    `timeout` seconds pass with the record still in flight. A torn record is returned, not
    raised (see the module docstring for the settle rule). Thread-safe: each call uses its
    own observer. Raises `InvalidInput` (a ValueError) for a negative or NaN `timeout` or a
    record number that does not fit `marker` or is past `MAX_RECORD`; `SessionNotFound`
    once the session is not `identity` (default: the one first seen; `identify`).
    """
    _check_arguments(n, marker, timeout)
    if isinstance(path, S3Path):
        return _poll_remote(path, marker, n, timeout, identity)
    record_dir = os.path.abspath(path)
    marker_path = os.path.join(record_dir, marker)
    chain = _watch_chain(record_dir, n)
    deadline = None if timeout is None else time.monotonic() + timeout
    handler = _Wakeup({marker_path, *chain})
    watches = _Watches(chain, handler)
    torn = _TornClock(marker_path, settle)
    try:
        while True:
            # Arm before reading: whatever happened before a watch existed is seen
            # by this read, whatever happens after it raises an event.
            watches.arm()
            handler.event.clear()
            record = read_record(n, Path(record_dir), marker)
            identity = _still_there(chain[0], identity)  # after the read: see its docstring
            now = time.monotonic()
            expired = deadline is not None and now >= deadline
            sleep = poll_interval
            if record.state is RecordState.COMPLETED:
                return record
            if record.state is RecordState.TORN:
                left = torn.left(now)
                if expired or left <= 0:
                    return record
                sleep = min(sleep, left)
            else:
                torn.reset()
            if expired:
                assert timeout is not None
                raise WaitTimedOut(Path(record_dir), timeout)
            if deadline is not None:
                sleep = min(sleep, deadline - now)
            handler.event.wait(max(sleep, 0.0))
    finally:
        watches.close()


def _still_there(
    session_dir: str | os.PathLike[str], seen: SessionIdentity | None
) -> SessionIdentity | None:
    """The identity to hold the session to from now on; `SessionNotFound` once it is gone.

    Called after each read of the record, so that a record read from a
    replacement is never returned. `seen` None: the directory was not there
    yet (a wait may start before it).
    """
    now = SessionIdentity.of(session_dir)
    if seen is None:
        return now
    if not seen.same_as(now):
        raise SessionNotFound(
            str(session_dir), hint="it was removed (or replaced by another) during the wait"
        )
    # A manifest first read now (copied in by a mirror) dates the session from here on.
    return seen if seen.created_at is not None else now


def _poll_remote(
    path: S3Path, marker: str, n: int, timeout: float | None, identity: SessionIdentity | None
) -> Record:
    """`wait_record` in an `s3://` store: no events there, so polling with backoff.

    The first re-read comes after `REMOTE_FIRST_POLL` seconds, each next one
    twice as late up to `REMOTE_MAX_POLL`: a quick record is seen quickly,
    and a long wait costs a request every few seconds. A torn marker is
    final at once (an object is written whole: it will not settle). After
    each read the manifest is read too, as locally the directory is: a
    session removed or replaced meanwhile ends the wait (`SessionNotFound`).
    """
    deadline = None if timeout is None else time.monotonic() + timeout
    delay = REMOTE_FIRST_POLL
    session_dir = path if n == 0 else path.parent.parent
    while True:
        record = _read_remote(n, path, marker)
        identity = _still_there(session_dir, identity)
        if record is not None and record.state is not RecordState.IN_FLIGHT:
            return record
        now = time.monotonic()
        if deadline is not None and now >= deadline:
            assert timeout is not None
            raise WaitTimedOut(path, timeout)
        time.sleep(delay if deadline is None else min(delay, deadline - now))
        delay = min(delay * 2, REMOTE_MAX_POLL)


def _read_remote(n: int, path: S3Path, marker: str) -> Record | None:
    """The record at `path` in a bucket; None while its server is unavailable (a 5xx, no
    answer: read again at the next poll). Another failure (access denied) raises: neither
    is an answer about the marker, so neither is read as a torn record."""
    storage, key = locate(path, 1 if n == 0 else 3)
    try:
        got: bytes | StorageError | None = storage.get(f"{key}/{marker}", MAX_MARKER_BYTES)
    except TooLarge as exc:
        got = exc
    except Unavailable:
        return None
    there, data, error = object_of(f"{key}/{marker}", got)
    state = (
        RecordState.IN_FLIGHT if not there else RecordState.TORN if error else RecordState.COMPLETED
    )
    return Record(n, path, state, data, error and f"{marker}: {error}")


def _check_arguments(n: int, marker: str, timeout: float | None) -> None:
    # `not >= 0` also refuses NaN, which no comparison is true with: its deadline would
    # never be reached, and the wait would hang whatever the caller meant.
    if timeout is not None and not timeout >= 0:
        raise InvalidInput("wait", f"timeout must be >= 0 or None, not {timeout!r}")
    if isinstance(n, bool) or not isinstance(n, int):
        # 1.5 (a number read from JSON, which mypy cannot check) names no record that can
        # ever exist: without a timeout the wait never ended.
        raise InvalidInput("wait", f"a record number is an integer, not {n!r}")
    if n < 0 or (n == 0) != (marker == REPORT):
        raise InvalidInput("wait", f"record numbers start at 1 (n=0 is the report only), not {n}")
    if n > MAX_RECORD:
        # Its directory's name is foreign (`record_number`): no record, ever, whatever it holds.
        raise InvalidInput("wait", f"record numbers end at {MAX_RECORD}, not {n}")


def _watch_chain(record_dir: str, n: int) -> list[str]:
    """The directories to watch, top down: session, collection, record (or the session)."""
    if n == 0:
        return [record_dir]  # the report: `record_dir` is the session directory itself
    collection = os.path.dirname(record_dir)
    return [os.path.dirname(collection), collection, record_dir]


class _TornClock:
    """How long a torn marker still has to settle (the module docstring's rule).

    A torn marker is returned once its mtime is `settle` old, or once it has
    looked the same (size, mtime) for `settle` seconds of this wait.
    """

    def __init__(self, marker_path: str, settle: float) -> None:
        self.marker_path = marker_path
        self.settle = settle
        self.seen: tuple[tuple[int, int] | None, float] | None = None

    def reset(self) -> None:
        self.seen = None

    def left(self, now: float) -> float:
        signature = _marker_signature(self.marker_path)
        if self.seen is None or self.seen[0] != signature:
            self.seen = (signature, now)
        age = time.time() - signature[1] / 1e9 if signature else self.settle
        if age >= self.settle:
            return 0.0
        return self.settle - (now - self.seen[1])


def wait_report(
    session: Session,
    timeout: float | None = None,
    *,
    poll_interval: float = POLL_INTERVAL,
    settle: float = SETTLE,
    identity: SessionIdentity | None = None,
) -> Record:
    """Block until the session's `report.json` is completed (or torn); see `wait_record`."""
    return wait_record(
        session.path,
        REPORT,
        0,
        timeout,
        poll_interval=poll_interval,
        settle=settle,
        identity=identity,
    )

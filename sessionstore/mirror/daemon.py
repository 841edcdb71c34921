"""The mirror daemon: watchdog events are hints, periodic full passes are the truth.

Events only mark source directories dirty. A pass over the dirty directories
runs once they have been quiet for `debounce` seconds, but never later than
`max_wait` after the first event, so a file that keeps changing is still
retried on schedule (watchdog's own debouncer has no maximum wait). Files a
pass reports unstable or held back are retried with a backoff.

Events are lost in ways nobody reports: inotify queue overflow, a new
directory that could not be watched (max_user_watches), an observer thread
that died. So a full pass runs every `full_every` seconds regardless, and at
once on any sign of trouble: a warning or error logged by watchdog, or a
watchdog thread that is no longer alive (`Watcher.healthy`). A watcher that
cannot start at all (no inotify instance or watch left) leaves the daemon
polling, and is tried again with a backoff (from `unwatched_every` up to 32 s):
the limit that stopped it is often another program's, and frees up. A failed
try walks the directories as far as it got, less than the polling pass reads.

One daemon per destination (`sessionstore.mirror.lock`). Stopping (the stop
event, SIGINT, SIGTERM or SIGHUP in the CLI) ends watching and runs one final full
pass, so nothing written before the stop is lost. A destination removed or
replaced under the daemon (its lock file gone) stops it with
`DestinationLost` and no final pass: re-creating it would bring back a removed
session without its `session.json`, in a directory another daemon may lock.
"""

from __future__ import annotations

import contextlib
import errno
import logging
import math
import os
import stat
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, fields
from typing import TYPE_CHECKING

from sessionstore._watch import Watcher, preload
from sessionstore.errors import InvalidInput
from sessionstore.mirror.hints import Hints, TroubleHandler
from sessionstore.mirror.lock import DestLock, acquire_lock
from sessionstore.mirror.report import PassReport

if TYPE_CHECKING:
    from sessionstore.mirror.mirror import Mirror

_log = logging.getLogger(__name__)


@dataclass(frozen=True)
class WatchConfig:
    """Timing of the daemon, in seconds."""

    debounce: float = 0.02
    max_wait: float = 0.25
    full_every: float = 30.0
    retry_min: float = 0.02
    retry_max: float = 1.0
    source_poll: float = 0.2
    final_grace: float = 5.0
    health_every: float = 1.0
    unwatched_every: float = 2.0

    def __post_init__(self) -> None:
        # No comparison with NaN is true: a NaN interval never elapses, and the loop,
        # timed by the earliest of them, spun on a CPU or never passed over a change.
        # A period of 0 (or less) elapses at once, every turn: the loop spun as well,
        # on full passes (`full_every`) or health checks (`health_every`).
        for field in fields(self):
            value = getattr(self, field.name)
            if math.isnan(value):
                raise InvalidInput("WatchConfig", f"{field.name}: nan is not a number of seconds")
            floor = 0.0 if field.name in _WAITS else _PERIOD_MIN
            if value < floor:
                raise InvalidInput(
                    "WatchConfig", f"{field.name}: must be at least {floor} seconds, not {value}"
                )


# Waits after an event, which may be 0; every other field is a period of the loop.
_WAITS = frozenset({"debounce", "max_wait", "final_grace"})
_PERIOD_MIN = 0.01
# The longest wait between two tries to start a watcher while polling (see the docstring).
_WATCH_RETRY_MAX = 32.0


PassCallback = Callable[[PassReport, str], None]


class Daemon:
    """Runs passes of one `Mirror` driven by filesystem events. See the module docstring."""

    def __init__(
        self,
        mirror: Mirror,
        config: WatchConfig | None = None,
        on_pass: PassCallback | None = None,
    ) -> None:
        self.mirror = mirror
        self.config = config or WatchConfig()
        self.on_pass = on_pass
        self.wake = threading.Event()
        self.hints = Hints(str(mirror.source), self.wake)
        self.observer: Watcher | None = None
        self._watched: tuple[int, int] | None = None  # the source the observer was started on
        # While polling (no observer could start): when to try again, and the next wait.
        self._watch_retry_at: float | None = None
        self._watch_backoff = self.config.unwatched_every
        self.passes = 0
        self.last_report: PassReport | None = None
        # Directories to pass over again (None: only a full pass will do), and when.
        self._retry_dirs: set[str] | None = set()
        self._retry_at: float | None = None
        self._backoff = self.config.retry_min

    def run(self, stop: threading.Event, lock: DestLock | None = None) -> PassReport:
        """Watch until `stop` is set, then run the final full pass and return its report.

        Takes the destination lock unless the caller passes it already held;
        raises `LockHeld` if another daemon mirrors into the same destination.
        Raises `DestinationLost`, with no final pass, once the destination was
        removed or replaced under it (`mirror.lock`): nothing is written there.
        """
        lock = lock or acquire_lock(self.mirror)
        trouble = TroubleHandler(self.hints)
        watchdog_log = logging.getLogger("watchdog")
        watchdog_log.addHandler(trouble)
        self.mirror.held_lock = lock
        try:
            try:
                self._loop(stop)
            finally:
                self._stop_observer()
                watchdog_log.removeHandler(trouble)
            return self._final_pass()  # not after DestinationLost: there is nothing to pass
        finally:
            self.mirror.held_lock = None
            lock.release()

    def _final_pass(self) -> PassReport:
        """Full passes until nothing is unstable, or `final_grace` runs out.

        A file written just before the stop is usually too recent to trust
        (the racy rule); waiting a few milliseconds for it to settle is what
        makes "nothing written before the stop is lost" true. A record's marker
        is such a file too: held back as unstable while its files are settled,
        it is waited for the same way (`PassReport.settling`). A file that
        keeps changing is reported unstable in the last report.
        """
        deadline = time.monotonic() + self.config.final_grace
        delay = self.config.retry_min
        report = self._pass(None, "final")
        while report.settling and time.monotonic() + delay < deadline:
            time.sleep(delay)
            delay = min(delay * 2, self.config.retry_max)
            report = self._pass(None, "final")
        return report

    # -- the loop --------------------------------------------------------------

    def _loop(self, stop: threading.Event) -> None:
        config = self.config
        cancel_relay = _forward(stop, self.wake)
        try:
            if not self._wait_for_source(stop):
                return
            self._start_observer()
            self._pass(None, "initial")
            next_full = time.monotonic() + self._full_interval()
            while True:
                now = time.monotonic()
                # The health check bounds the sleep: a dead observer thread sends no
                # event, so only a timer notices it.
                health = now + config.health_every
                due = [next_full, health, self.hints.due(config), self._retry_at]
                self.wake.wait(max(0.0, min(t for t in due if t is not None) - now))
                self.wake.clear()
                if stop.is_set():
                    return
                if not self._ensure_watching(stop):
                    return
                now = time.monotonic()
                dirs: set[str] | None = set()
                hinted_due = self.hints.due(config)
                if self.hints.lost or (hinted_due is not None and hinted_due <= now):
                    hinted, lost = self.hints.take()
                    dirs = None if lost else hinted
                if self._retry_at is not None and self._retry_at <= now:
                    retry = self._retry_dirs
                    dirs = None if dirs is None or retry is None else dirs | retry
                    self._retry_dirs, self._retry_at = set(), None
                if now >= next_full or dirs is None:
                    self._pass(None, "full")
                    next_full = time.monotonic() + self._full_interval()
                elif dirs:
                    self._pass(dirs, "events")
        finally:
            cancel_relay()

    def _full_interval(self) -> float:
        """Seconds to the next full pass: sooner while no observer watches (polling only)."""
        if self.observer is None:
            return min(self.config.full_every, self.config.unwatched_every)
        return self.config.full_every

    def _ensure_watching(self, stop: threading.Event) -> bool:
        """Recover from a vanished source or a dead observer; False if stopped meanwhile.

        A destination whose lock file was deleted (`rm --force` of the session) gets a
        pass at once, which raises `DestinationLost`, rather than at the next full pass.
        """
        lock = self.mirror.held_lock
        if lock is not None and lock.gone():
            self._pass(None, "full")
        now_watching = _dir_identity(self.mirror.source)
        if now_watching is None:
            self._stop_observer()
            if not self._wait_for_source(stop):
                return False
            self._start_observer()
            self.hints.lose()
        elif now_watching != self._watched or not self._observer_healthy():
            # A source moved away and another directory put at its name (or a symlink
            # retargeted) is still watched in the old inode, which sends nothing of the new.
            self._stop_observer()
            self._start_observer()
            self.hints.lose()
        elif self._watch_retry_at is not None and time.monotonic() >= self._watch_retry_at:
            self._start_observer()  # polling: the limit may have been raised or freed
            if self.observer is not None:
                self.hints.lose()  # what changed since the last poll: a full pass at once
        return True

    def _schedule_retry(self, report: PassReport, full: bool) -> None:
        """Retry the directories of unstable and held-back files, with backoff."""
        problems = [item["path"] for item in (*report.unstable, *report.held_back)]
        if full:
            self._retry_dirs, self._retry_at = set(), None
        if not problems:
            self._backoff = self.config.retry_min
            return
        for path in problems:
            parent = os.path.dirname(path)
            # Report paths are destination names; with name redaction a destination
            # directory may have no source twin, and only a full pass can find it.
            if self._retry_dirs is not None and _dir_identity(self.mirror.source / parent):
                self._retry_dirs.add(parent)
            else:
                self._retry_dirs = None
        when = time.monotonic() + self._backoff
        self._retry_at = when if self._retry_at is None else min(self._retry_at, when)
        self._backoff = min(self._backoff * 2, self.config.retry_max)

    def _pass(self, dirs: set[str] | None, kind: str) -> PassReport:
        report = self.mirror.run_once() if dirs is None else self.mirror.run_dirs(sorted(dirs))
        self._schedule_retry(report, full=dirs is None)
        self.passes += 1
        self.last_report = report
        if self.on_pass is not None:
            self.on_pass(report, kind)
        return report

    def _wait_for_source(self, stop: threading.Event) -> bool:
        """Poll until the source directory exists; False if stopped first."""
        while not self.mirror.source.is_dir():
            if stop.wait(self.config.source_poll):
                return False
        return True

    # -- the observer ----------------------------------------------------------

    def _start_observer(self) -> None:
        # Taken before the watch: a source replaced after this is told by the next check.
        self._watched = _dir_identity(self.mirror.source)
        # The directory, not a symlink naming it: watchdog watches a symlink at the root
        # itself (IN_DONT_FOLLOW), and files right in the source sent no event at all.
        # Events then name paths below the directory: the hints count from there.
        self.hints.root = os.path.realpath(self.mirror.source)
        try:
            # watchdog takes its inotify instance when the observer is made, not started.
            observer = Watcher(self.hints.changed)
            # Content events only: each pass's own opens would otherwise flood the queue.
            observer.watch(self.hints.root, recursive=True, content_only=True)
            observer.start()
        except (OSError, RecursionError) as exc:
            # Cannot watch: no inotify instances left (OSError), or a tree deeper
            # than watchdog's recursive os.walk can follow (RecursionError). The
            # periodic full passes still converge, only latency suffers. Said without
            # the source's path, which may hold a secret, nor the exception's text,
            # which may hold any path below it: only the error's name and the C library's text.
            why = _watch_error(exc)
            if self._watch_retry_at is None:  # said once, not on every retry
                _log.warning("cannot watch the source (%s); polling only", why)
            else:
                cap = max(self.config.unwatched_every, _WATCH_RETRY_MAX)
                self._watch_backoff = min(self._watch_backoff * 2, cap)
            self._watch_retry_at = time.monotonic() + self._watch_backoff
            return
        self.observer = observer
        if self._watch_retry_at is not None:
            _log.info("watching the source again")
            self._watch_retry_at, self._watch_backoff = None, self.config.unwatched_every

    def _observer_healthy(self) -> bool:
        observer = self.observer
        if observer is None:
            return True  # polling only, by necessity
        return observer.healthy()

    def _stop_observer(self) -> None:
        observer, self.observer = self.observer, None
        if observer is not None:
            observer.stop(timeout=5)


def _watch_error(exc: OSError | RecursionError) -> str:
    """Why a watcher could not start, for `cannot watch the source (...)`."""
    if isinstance(exc, RecursionError):
        return "the tree is too deep"
    if exc.errno == errno.ENOSPC:  # inotify_add_watch's: never a full disk, as its text says
        return "ENOSPC: the inotify watch limit is reached, fs.inotify.max_user_watches"
    return _errno_text(exc)


def _errno_text(exc: OSError) -> str:
    """`EMFILE: Too many open files`: what an OSError is, in no words of whoever raised it."""
    if exc.errno is None:
        return type(exc).__name__
    return f"{errno.errorcode.get(exc.errno, exc.errno)}: {os.strerror(exc.errno)}"


def _dir_identity(path: os.PathLike[str]) -> tuple[int, int] | None:
    """(st_dev, st_ino) of the directory at `path`, symlinks followed; None if it is no
    directory, or cannot be named (ENAMETOOLONG)."""
    try:
        found = os.stat(path)
    except OSError:
        return None
    return (found.st_dev, found.st_ino) if stat.S_ISDIR(found.st_mode) else None


def _forward(source: threading.Event, target: threading.Event) -> Callable[[], None]:
    """Set `target` when `source` is set (threading.Event has no wait-any); returns a canceller."""
    done = threading.Event()

    def relay() -> None:
        while not done.is_set():
            # Wakes at once when `source` is set; the timeout only bounds how long the
            # relay outlives a daemon that stopped for another reason.
            if source.wait(1.0):
                target.set()
                return

    thread = threading.Thread(target=relay, name="sessionstore-stop-relay", daemon=True)
    thread.start()

    def cancel() -> None:
        done.set()

    return cancel


@contextlib.contextmanager
def running(
    mirror: Mirror, config: WatchConfig | None = None, on_pass: PassCallback | None = None
) -> Iterator[Daemon]:
    """Run a daemon in a background thread for the body; the final full pass runs on exit.

    The final pass runs even when the body raises. The lock is taken before
    the body starts, so `LockHeld` surfaces here, not in the thread.
    """
    daemon = Daemon(mirror, config, on_pass)
    stop = threading.Event()
    result: dict[str, BaseException] = {}
    # Everything the thread would import first, imported here: see `_watch.preload`.
    preload()
    import base64  # noqa: F401  (the change cache: non-UTF-8 names)
    import hashlib  # noqa: F401  (the change cache: the fingerprint of the secrets)

    lock = acquire_lock(mirror)  # fail fast, in the caller's thread

    def target() -> None:
        try:
            daemon.run(stop, lock)
        except BaseException as exc:
            result["error"] = exc

    thread = threading.Thread(target=target, name="sessionstore-mirror", daemon=True)
    thread.start()
    try:
        yield daemon
    finally:
        stop.set()
        daemon.wake.set()
        thread.join()
        if "error" in result:
            raise result["error"]

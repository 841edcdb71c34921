"""watchdog behind one small face: the mirror daemon and `wait` both watch through `Watcher`.

Events are hints for both users (each re-reads the disk), so a watcher that
cannot start, or a directory that cannot be watched, is never an error here:
`start` and `watch` raise `OSError` (or `RecursionError` for a tree deeper
than watchdog's recursive walk) and the caller falls back to polling.

watchdog is imported only when a watcher starts: `mirror --once` and every
command that never waits pay nothing for it (it pulls in threading and
its observer modules). The handler is duck-typed (`dispatch`) for the same
reason: subclassing watchdog's would import it at module load.
"""

from __future__ import annotations

import contextlib
import os
import threading
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from watchdog.events import FileSystemEvent
    from watchdog.observers.api import BaseObserver

# Events that only say a file was read: a watcher's own reads raise them.
READ_ONLY_KINDS = frozenset({"opened", "closed_no_write"})


@dataclass(frozen=True)
class Change:
    """One filesystem event: its kind (watchdog's event_type) and the paths it names.

    `paths` is the source path, plus the destination of a move; decoded to str.
    """

    kind: str
    paths: tuple[str, ...]
    is_directory: bool


def preload() -> None:
    """Import what a `Watcher` imports, now, in the calling thread.

    For a watcher started in another thread: a KeyboardInterrupt that lands
    in the main thread while it imports can leave CPython's import lock held
    for good, and any other thread's first import then blocks forever (a
    harness's Ctrl-C hung in `mirror.running()`, joining a daemon thread that
    waited for the lock to import watchdog).
    """
    import watchdog.events
    import watchdog.observers  # noqa: F401


class _Handler:
    """A watchdog event handler that passes every event on as a `Change`."""

    def __init__(self, on_change: Callable[[Change], None]) -> None:
        self.on_change = on_change

    def dispatch(self, event: Any) -> None:
        paths = [event.src_path, getattr(event, "dest_path", "")]
        decoded = tuple(os.fsdecode(p) for p in paths if p)
        self.on_change(Change(event.event_type, decoded, bool(event.is_directory)))


class Watcher:
    """One watchdog observer thread (a daemon thread) feeding `on_change`.

    Not thread-safe itself: one owner schedules, checks and stops it; only
    `on_change` runs on the observer's threads.
    """

    def __init__(self, on_change: Callable[[Change], None]) -> None:
        from watchdog.observers import Observer  # only when watching: see the module docstring

        # watchdog warns when a recursive watch adds a watch it holds already (a new
        # directory is watched by its parent's walk, then again on its own event) or
        # removes one already gone: bookkeeping that loses no event. Its text is the
        # watch's repr, every watched path in it, so a secret in a name went to stderr
        # raw, many lines per warning. Ignored for the process: one filter, added once.
        warnings.filterwarnings("ignore", "Callback with id ", RuntimeWarning)
        self._handler = _Handler(on_change)
        # Public for tests, which stop its emitter threads to play a dead watcher.
        self.observer: BaseObserver = Observer()
        self.observer.daemon = True

    def watch(self, path: str, *, recursive: bool, content_only: bool = False) -> None:
        """Watch `path` (before or after `start`); `OSError` if it cannot be watched.

        `content_only`: only events that say content or metadata may have changed
        (no opens, no close-without-write).
        """
        kinds = _content_events() if content_only else None
        self.observer.schedule(
            self._handler,  # type: ignore[arg-type]
            path,
            recursive=recursive,
            event_filter=kinds,
        )

    def start(self) -> None:
        """Start the observer thread; `OSError` (no inotify instance) or `RecursionError`.

        A start that fails stops what watchdog had started already: its inotify
        reader runs from the observer's creation, and the watches added before a
        recursive walk failed stay on the instance until it is closed.
        """
        try:
            self.observer.start()
        except BaseException:
            self.stop()
            raise

    def healthy(self) -> bool:
        """Whether the observer thread and every thread of watchdog's it relies on are alive.

        Not only the observer's and the emitters': watchdog reads inotify in a
        thread of its own, and an exception there (a RecursionError walking a
        directory chain ~1000 deep that was moved in) ends that thread alone,
        while the others wait on for events that will never come.
        """
        return self.observer.is_alive() and all(t.is_alive() for t in self._started_threads())

    def _started_threads(self) -> list[threading.Thread]:
        """The observer, its emitters, and every thread either holds, once started.

        Found by type, not by name: watchdog keeps its inotify reader in a private
        attribute whose name and owner change between releases (each emitter's
        `_inotify` up to 6.x, the observer's `_inotify_fd` in 7.x). Copied with
        `list` before iterating: the observer's threads may change them meanwhile.
        """
        owners: list[Any] = [self.observer, *list(self.observer.emitters)]
        held = [value for owner in owners for value in list(vars(owner).values())]
        threads = [t for t in (*owners, *held) if isinstance(t, threading.Thread)]
        return [t for t in threads if t.ident is not None]  # never started: not dead either

    def stop(self, timeout: float | None = None) -> None:
        """Stop watching and join the thread (never started: nothing to join). Never raises.

        watchdog's stop can fail half-way in its own bookkeeping: a directory moved
        out of the tree keeps its watch under its old path, another directory made
        and removed at that path takes the path away, and removing the first watch
        raised KeyError (the daemon died, a source path in its traceback, without its
        final pass). What its stop had left to do is done here (`_finish_stop`).
        """
        try:
            self.observer.stop()
        except Exception:
            self._finish_stop()
        with contextlib.suppress(RuntimeError):  # joined before it was started
            self.observer.join(timeout)

    def _finish_stop(self) -> None:
        """After watchdog's stop failed in an emitter: stop the inotify reader, whose
        instance would stay open (each restart of the watcher leaked one, up to the
        limit of 128), and wake the observer thread, which waits for its stop event.

        Not the emitter again: it waits for events of a queue that only its failed
        stop closes, and a second stop of the observer joined it forever. That
        thread (a daemon thread) stays asleep: one per such failure, never a hang.
        """
        import queue

        from watchdog.observers.api import EventDispatcher

        emitters = set(self.observer.emitters)
        for thread in self._started_threads():
            stop = getattr(thread, "stop", None)
            if thread is not self.observer and thread not in emitters and stop is not None:
                with contextlib.suppress(Exception):
                    stop()
        with contextlib.suppress(queue.Full):
            self.observer.event_queue.put_nowait(EventDispatcher.stop_event)


def _content_events() -> list[type[FileSystemEvent]]:
    """Every event class except opens and close-without-write.

    The kernel queues those for every directory a pass opens (a no-op pass over
    10,000 files raised ~14,000 of them), and handling them cost more than the
    pass itself.
    """
    from watchdog import events as ev

    return [
        ev.DirAttribEvent,
        ev.DirCreatedEvent,
        ev.DirDeletedEvent,
        ev.DirModifiedEvent,
        ev.DirMovedEvent,
        ev.FileAttribEvent,
        ev.FileClosedEvent,
        ev.FileCreatedEvent,
        ev.FileDeletedEvent,
        ev.FileModifiedEvent,
        ev.FileMovedEvent,
    ]

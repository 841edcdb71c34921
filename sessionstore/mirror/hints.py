"""What the daemon's watcher tells it: directories made dirty by events, and lost events.

Events are hints (`sessionstore.mirror.daemon`): each marks the directory it
names, or a directory and its parent, dirty for the next pass; anything that
says events were lost (watchdog logs a warning) asks for a full pass instead.
Both are fed on watchdog's threads and read on the daemon's.
"""

from __future__ import annotations

import logging
import os
import threading
import time

TYPE_CHECKING = False  # typing's, without importing typing (mypy reads it as such)
if TYPE_CHECKING:
    from sessionstore._watch import Change
    from sessionstore.mirror.daemon import WatchConfig


class Hints:
    """Dirty source directories collected from events (thread-safe), plus a lost-events flag."""

    def __init__(self, root: str, wake: threading.Event) -> None:
        self.root = root
        self.wake = wake
        self._lock = threading.Lock()
        self.dirty: set[str] = set()
        self.first_at = 0.0
        self.last_at = 0.0
        self.lost = False

    def mark(self, path: str, is_directory: bool) -> None:
        rel = os.path.relpath(path, self.root)
        if rel == ".." or rel.startswith("../"):
            return  # outside the source (a move out of it); "..notes" is a name inside
        dirs = {rel, os.path.dirname(rel)} if is_directory else {os.path.dirname(rel)}
        now = time.monotonic()
        with self._lock:
            if not self.dirty:
                self.first_at = now
            self.dirty.update(d if d not in ("", ".") else "" for d in dirs)
            self.last_at = now
        self.wake.set()

    def lose(self) -> None:
        with self._lock:
            self.lost = True
        self.wake.set()

    def due(self, config: WatchConfig) -> float | None:
        """When the dirty set should be passed over (None: nothing dirty)."""
        with self._lock:
            if not self.dirty:
                return None
            return min(self.last_at + config.debounce, self.first_at + config.max_wait)

    def take(self) -> tuple[set[str], bool]:
        with self._lock:
            dirty, lost = self.dirty, self.lost
            self.dirty, self.lost = set(), False
        return dirty, lost

    def changed(self, change: Change) -> None:
        """Every event is a dirty-directory hint (called on the watcher's threads)."""
        for path in change.paths:
            self.mark(path, change.is_directory)


class TroubleHandler(logging.Handler):
    """watchdog logs overflows as warnings: treat any warning as lost events.

    (A directory below the root that it cannot watch, past max_user_watches,
    watchdog 7 skips without a word: only the periodic full pass finds it.)
    """

    def __init__(self, hints: Hints) -> None:
        super().__init__(logging.WARNING)
        self.hints = hints

    def emit(self, record: logging.LogRecord) -> None:
        self.hints.lose()

"""Read-ahead of one session's top in a bucket: what a reader of it will ask, asked at once.

A reader of a session (`inspect`'s view of it) asks one after another for its
report, its constraints and the listings of its two collections: five round
trips, each sent even when the thing is absent. `ReadAhead.holding` sends one
delimiter LIST of the session's top instead, which tells which of them exist,
then the GETs and LISTs of those that do, at once (on threads of its own).
Their answers are kept for the thread that asked (a `threading.local`): each
is handed out once, to the first `get` or `list` of its key, then dropped, so
a second read of a key goes to the server as before. An absent one is
answered without a request: absent (a GET) or empty (a LIST), as the server
would have answered it a moment earlier.

The answers are the requests' own: the bytes, or the `StorageError` a GET
raised (a `TooLarge` beyond the limit asked, `MAX_BYTES`; a `get` asking for
more is not answered here). A name that is both an object and a prefix, or a
top LIST that failed, is left to the ordinary requests.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, Any

from sessionstore.errors import StorageError, TooLarge
from sessionstore.storage.base import Listed, check_key, check_names

if TYPE_CHECKING:
    from sessionstore.storage.s3 import S3Storage

__all__ = ["MAX_BYTES", "ReadAhead"]

# The limit of the GETs sent ahead: a marker's (`_json.MAX_MARKER_BYTES`), which every
# reader of a session's top-level JSON asks for.
MAX_BYTES = 64 << 20

_ABSENT = object()
# Threads of the requests sent ahead: a session sends at most three besides its own.
_THREADS = 8


class ReadAhead:
    """The answers sent ahead for each thread (module docstring), by key."""

    def __init__(self, storage: S3Storage) -> None:
        self._storage = storage
        self._local = threading.local()
        self._pool: ThreadPoolExecutor | None = None
        self._lock = threading.Lock()

    def _threads(self) -> ThreadPoolExecutor:
        with self._lock:
            if self._pool is None:
                self._pool = ThreadPoolExecutor(_THREADS, thread_name_prefix="s3-ahead")
            return self._pool

    def get(self, key: str, limit: int) -> tuple[bool, bytes | None]:
        """(held, the bytes or None if absent) of a GET of `key`; raises what the GET
        raised. Not held: `(False, None)`, for the server to answer."""
        table = getattr(self._local, "table", None)
        if not table or limit > MAX_BYTES or ("get", key) not in table:
            return False, None
        got = table.pop(("get", key))
        if got is _ABSENT:
            return True, None
        if isinstance(got, StorageError):
            raise got
        if len(got) > limit:
            raise TooLarge(key, limit)
        return True, got

    def list(self, prefix: str) -> list[Listed] | None:
        """The delimiter listing of `prefix` if held (raising what it raised), else None."""
        table = getattr(self._local, "table", None)
        if not table or ("list", prefix) not in table:
            return None
        got = table.pop(("list", prefix))
        if isinstance(got, StorageError):
            raise got
        return list(got)

    @contextlib.contextmanager
    def holding(
        self,
        top: str,
        files: Sequence[str],
        collections: Sequence[str],
    ) -> Iterator[None]:
        """Send ahead, for this thread, the GETs of `files` and the LISTs of `collections`
        below `top` (those that exist); the answers not asked for are dropped at the end."""
        check_key(top, "storage prefix")
        check_names([*files, *collections])
        storage = self._storage
        try:
            listed = list(storage.list(top))
        except StorageError:
            listed = None  # the reads themselves will say what is wrong, as ever
        table: dict[tuple[str, str], Any] = {}
        if listed is not None:
            objects = {item.name for item in listed if not item.is_prefix}
            prefixes = {item.name for item in listed if item.is_prefix}
            asks = [("get", n) for n in files if n not in prefixes]
            asks += [("list", n) for n in collections if n not in objects]
            present = [
                (kind, n) for kind, n in asks if n in (objects if kind == "get" else prefixes)
            ]
            for kind, name in asks:
                table[(kind, f"{top}/{name}")] = _ABSENT if kind == "get" else ()
            # All but the last on the read-ahead's own threads, never the storage's: those
            # run the marker GETs of other sessions, which these would queue behind.
            sent = [self._threads().submit(_send, storage, top, *ask) for ask in present[:-1]]
            last = [_send(storage, top, *present[-1])] if present else []
            for (kind, name), got in zip(present, [f.result() for f in sent] + last, strict=True):
                table[(kind, f"{top}/{name}")] = got
        self._local.table = table
        try:
            yield
        finally:
            self._local.table = None


def _send(storage: S3Storage, top: str, kind: str, name: str) -> Any:
    key = f"{top}/{name}"
    try:
        if kind == "get":
            got = storage._get(key, MAX_BYTES)
            return _ABSENT if got is None else got
        return tuple(storage.list(key))
    except StorageError as exc:
        return exc

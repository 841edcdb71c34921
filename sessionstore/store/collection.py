"""A numbered collection of one session (`trials/` or `service/`), through the storage seam.

Records are listed by `Storage.list` (a record is a prefix whose name is a
record number; anything else is foreign), read by `read_records` (one
`Storage.get_each` of their markers), and numbers are allocated by
`Storage.claim`: `mkdir(2)` locally, atomic across processes and NFS
clients, so numbers are unique and gap-free without a lock.
A collection that cannot be listed (missing, a symlink, not a directory,
unreadable) holds no records: one session's odd collection must not break a
listing. Unless it is missing, its last listing says why (`problem`), which
`inspect` shows: a session whose records cannot be read must not look empty
and healthy. In an `s3://` store a listing the server fails is that error,
never "no records".
"""

from __future__ import annotations

from pathlib import Path

from sessionstore.errors import CollectionFull, RecordNotFound, StorageError
from sessionstore.format.names import MARKERS, MAX_RECORD, record_number
from sessionstore.storage.base import Storage
from sessionstore.storage.local import LocalStorage
from sessionstore.store.files import locate
from sessionstore.store.records import Record, RecordWriter, read_record, read_records

TYPE_CHECKING = False  # typing's, without importing typing (mypy reads it as such)
if TYPE_CHECKING:
    from sessionstore.store.wait import SessionIdentity

__all__ = ["Collection"]


class Collection:
    """A numbered collection (`trials/` or `service/`) of one session.

    `storage` and `session_key` say where the session is stored; without
    them the session directory `session_path` is located locally.
    """

    def __init__(
        self,
        session_path: Path,
        name: str,
        *,
        storage: Storage | None = None,
        session_key: str | None = None,
    ) -> None:
        self.name = name
        self.marker = MARKERS[name]
        self.session_path = session_path
        self.path = session_path / name
        if storage is None or session_key is None:
            storage, session_key = locate(session_path, 1)
        self.storage = storage
        self.key = f"{session_key}/{name}"
        # Where this instance's next begin() tries first, to avoid rescanning a large
        # collection on every record; a stale hint only costs extra claim attempts.
        self._next: int | None = None
        # Why the last listing read no records though something is there (a symlink, not
        # a directory, unreadable), else None.
        self.problem: str | None = None

    def listing(self) -> tuple[list[int], list[str]]:
        """The record numbers, in numeric order, and the foreign names, sorted: one listing."""
        numbers: list[int] = []
        foreign: list[str] = []
        try:
            listed = list(self.storage.list(self.key))
        except StorageError as exc:
            # A bucket has no symlinks or files in a collection's place: its listing
            # fails only when the server does (a 5xx, a refusal), which says nothing
            # about the records; read as none, a session would look empty and healthy.
            if not isinstance(self.storage, LocalStorage):
                raise
            self.problem = exc.problem
            return numbers, foreign
        self.problem = None
        for item in listed:
            n = record_number(item.name)
            if n is not None and item.is_prefix:
                numbers.append(n)
            else:
                foreign.append(item.name)
        return sorted(numbers), sorted(foreign)

    def _read(self, n: int) -> Record:
        return read_record(
            n, self.path / str(n), self.marker, storage=self.storage, key=f"{self.key}/{n}"
        )

    def numbers(self) -> list[int]:
        """Record numbers present, in numeric order (10 after 9)."""
        return self.listing()[0]

    def foreign(self) -> list[str]:
        """Entry names that are not records (ignored by the engine, shown by `inspect`)."""
        return self.listing()[1]

    def scan(self) -> tuple[list[Record], list[str]]:
        """Every record in numeric order with its derived state, and the foreign names,
        from one listing of the collection."""
        numbers, foreign = self.listing()
        return read_records(numbers, self.path, self.marker, self.storage, self.key), foreign

    def records(self) -> list[Record]:
        """Every record in numeric order, each with its derived state."""
        return self.scan()[0]

    def get(self, n: int) -> Record:
        """Record `n`; raises `RecordNotFound` if the collection lists no record `n`
        (saying what the entry of that name is, when it is there but no directory).

        A collection that cannot be listed (it, or the session directory, is
        a symlink or not a directory) cannot say the record is absent: the
        record is read, and reads as torn, naming the entry at fault.
        """
        if not 1 <= n <= MAX_RECORD:
            raise RecordNotFound(self.path, n)
        try:
            listed = {item.name: item.is_prefix for item in self.storage.list(self.key)}
        except StorageError:
            return self._read(n)
        if str(n) not in listed:
            raise RecordNotFound(self.path, n)
        if not listed[str(n)]:
            raise RecordNotFound(self.path, n, self._foreign(n))
        return self._read(n)

    def _foreign(self, n: int) -> str:
        """What the entry named `n` is, listed but not a prefix (a symlink, a FIFO, a file):
        the reason its marker cannot be read through it."""
        key = f"{self.key}/{n}"
        try:
            self.storage.get(f"{key}/{self.marker}", 0)
        except StorageError as exc:
            if exc.key == key:
                return exc.problem
        return "is not a directory"

    def latest(self) -> Record | None:
        """The highest-numbered record, whatever its state, or None if there is none."""
        numbers = self.numbers()
        return self._read(numbers[-1]) if numbers else None

    def begin(self) -> RecordWriter:
        """Allocate the next number with an atomic `Storage.claim` and return its writer.

        Safe across processes and hosts sharing the storage: a lost race
        moves on to the next number, so numbers are unique and gap-free.
        Raises `CollectionFull` past `MAX_RECORD`: a bigger number would name
        a directory no reader lists as a record; `StorageError` when the
        collection cannot hold records (a symlink, a file).
        """
        n = self._next or max(self.numbers(), default=0) + 1
        while True:
            if n > MAX_RECORD:
                raise CollectionFull(self.path, MAX_RECORD)
            if not self.storage.claim(f"{self.key}/{n}"):
                n += 1
                continue
            self._next = n + 1
            return RecordWriter(
                n, self.path / str(n), self.marker, storage=self.storage, key=f"{self.key}/{n}"
            )

    def wait(
        self, n: int, timeout: float | None = None, *, identity: SessionIdentity | None = None
    ) -> Record:
        """Block until record `n` is completed or torn, and return it.

        The record (and the collection directory) need not exist yet. Event
        driven with a 1 s re-check; `timeout` None waits forever, else
        `WaitTimedOut` is raised; `SessionNotFound` once the session is not
        `identity` (default: the one first seen; a caller that waits in several
        calls takes it once, `store.wait.identify`). Rules in `sessionstore.store.wait`.
        """
        # Imported on use, to keep start-up light: waiting imports watchdog.
        from sessionstore.store.wait import wait_record

        return wait_record(self.path / str(n), self.marker, n, timeout, identity=identity)

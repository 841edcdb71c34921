"""Records: one numbered record's derived state, and the writer that completes it.

A record's state is derived from its marker on every read, never stored:
`completed` when the marker parses as a JSON object, `in_flight` without a
marker, `torn` when the marker exists but is not a usable object (or cannot
be read: a FIFO, a symlink, a directory on the way swapped for one). Reading
never raises because of one bad record; the bad record reports it.

Every read and write goes through the storage seam (`sessionstore.storage`):
the marker is a bounded `get`, a record's files are `put`, and the marker is
`create`d last, so a record is written exactly once (a second writer loses
with `RecordCompleted`). Durability: `put` makes each file durable before it
returns, and `create` makes everything put before it durable before the
marker appears, so after a crash a marker never points at missing files.
`Record.walk` (the listing of a record's files for export and lineage) is
local: it walks the record directory by fd.
"""

from __future__ import annotations

import errno
import functools
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path, PurePosixPath
from typing import TYPE_CHECKING, Any

from sessionstore import _json as jsonio
from sessionstore._fs import read as fsread
from sessionstore._fs.atomic import FILE_MODE, is_temp_name
from sessionstore.errors import InvalidInput, RecordCompleted, StorageError
from sessionstore.storage.base import Storage
from sessionstore.storage.s3_path import S3Path
from sessionstore.store.files import exists, locate, object_of, read_object
from sessionstore.store.sealed import sealed_object

__all__ = [
    "MAX_RECORD_DEPTH",
    "Record",
    "RecordState",
    "RecordWriter",
    "read_record",
    "read_records",
    "record_dir_fd",
    "record_relpath",
]

# Levels below a record directory that `Record.walk` enters (lineage's patches walk agrees).
MAX_RECORD_DEPTH = 256


class RecordState(StrEnum):
    """How far a record got; derived from its marker on every read."""

    COMPLETED = "completed"
    IN_FLIGHT = "in_flight"
    TORN = "torn"


@dataclass(frozen=True)
class Record:
    """One numbered record as found on disk. `data` is the marker object when completed."""

    n: int
    path: Path
    state: RecordState
    data: dict[str, Any] | None
    error: str | None

    @classmethod
    def below(
        cls,
        n: int,
        collection: Path,
        state: RecordState,
        data: dict[str, Any] | None,
        error: str | None,
    ) -> Record:
        """Record `n` of the collection directory `collection`, equal to `Record(n,
        collection / str(n), ...)`, whose `path` is made when first asked for: a listing
        makes one record per marker and asks few of them, and pathlib's join cost
        14 k instructions each, an eighth of `inspect --json` per record (issue 16)."""
        record = object.__new__(cls)
        record.__dict__.update(n=n, state=state, data=data, error=error, _collection=collection)
        return record

    # Hidden from type checkers: a `__getattr__` typed `-> Any` made every misspelt
    # attribute of a Record (`record.marker`) pass mypy, to fail only when run.
    if not TYPE_CHECKING:

        def __getattr__(self, name: str) -> Any:
            # Reached only for an attribute not set: the path of a record made by `below`.
            collection = self.__dict__.get("_collection") if name == "path" else None
            if collection is None:
                raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")
            path = collection / str(self.n)
            object.__setattr__(self, "path", path)
            return path

    def files(self) -> list[str]:
        """Relative paths of the record's files (marker included, temps excluded), sorted.

        `walk()`'s files; a record directory that cannot be opened has none.
        """
        try:
            return self.walk()[0]
        except OSError:
            return []

    def walk(self, dir_fd: int | None = None) -> tuple[list[str], list[tuple[str, str]]]:
        """The record's files, sorted, and the directories not entered, each with why.

        Walked iteratively through directory fds, from `dir_fd` (the record's
        directory, else opened by `record_dir_fd`), each level opened with
        `O_NOFOLLOW`: a directory swapped for a symlink is never entered, and
        nothing outside is ever listed. A symlink is listed as a file of its
        own, whatever it points to. Directories more than `MAX_RECORD_DEPTH`
        levels down are not entered (a runaway `mkdir -p` is no RecursionError
        and holds at most that many fds). Raises `OSError` if `dir_fd` is None
        and the record directory cannot be opened. In an `s3://` store, the
        objects below the record's prefix (`S3Storage.files_below`).
        """
        if isinstance(self.path, S3Path):
            from sessionstore.storage.s3_open import storage_at  # imports obstore: on use

            storage, key = storage_at(self.path, 1 if self.n == 0 else 3)
            return storage.files_below(key), []
        top = record_dir_fd(self.n, self.path) if dir_fd is None else dir_fd
        files: list[str] = []
        skipped: list[tuple[str, str]] = []
        # Frames: a directory's fd, its path prefix, its entries still to visit (last first).
        stack: list[tuple[int, str, list[os.DirEntry[str]]]] = []
        try:
            stack.append((top, "", _listing(top)))
            while stack:
                fd, prefix, entries = stack[-1]
                if not entries:
                    stack.pop()
                    if fd != top:
                        os.close(fd)
                    continue
                entry = entries.pop()
                rel = prefix + entry.name
                if not entry.is_dir(follow_symlinks=False):
                    files.append(rel)
                elif len(stack) > MAX_RECORD_DEPTH:
                    skipped.append((rel, f"is deeper than {MAX_RECORD_DEPTH} levels"))
                else:
                    try:
                        sub = fsread.open_dir(entry.name, fd)
                    except FileNotFoundError:  # removed since the listing
                        continue
                    except OSError as exc:  # swapped for a symlink or a file since the listing
                        skipped.append((rel, fsread.problem(exc)))
                        continue
                    try:
                        stack.append((sub, rel + "/", _listing(sub)))
                    except BaseException:
                        os.close(sub)
                        raise
        finally:
            for fd, _, _ in stack:
                if fd != top:
                    os.close(fd)
            if dir_fd is None:
                os.close(top)
        return sorted(files), skipped

    def to_dict(self) -> dict[str, Any]:
        """The JSON shape `inspect --json` uses: n, state, record, error."""
        return {"n": self.n, "state": str(self.state), "record": self.data, "error": self.error}


def _listing(dir_fd: int) -> list[os.DirEntry[str]]:
    """The entries of a directory fd, temps left out, in reverse name order (popped last first)."""
    with os.scandir(dir_fd) as it:
        return sorted((e for e in it if not is_temp_name(e.name)), key=lambda e: e.name)[::-1]


def read_record(
    n: int, path: Path, marker: str, *, storage: Storage | None = None, key: str | None = None
) -> Record:
    """Derive one record's state from its marker, read through the storage seam.

    `key` is the record's key in `storage` (`<session>/trials/<n>`; for the
    report, n=0, the session's own key); without them the record directory
    `path` is located locally (`files.locate`). A record directory (or a
    collection, or the session directory) that is a symlink or not a
    directory is torn, naming the entry at fault.
    """
    if storage is None or key is None:
        storage, key = locate(path, 1 if n == 0 else 3)
    there, data, error = read_object(storage, f"{key}/{marker}")
    return Record(n, path, _state(there, error), data, error and f"{marker}: {error}")


def read_records(
    numbers: Sequence[int], path: Path, marker: str, storage: Storage, key: str
) -> list[Record]:
    """`read_record` of each record `n` of the collection at `path` (`key` in `storage`),
    all markers read by one `Storage.get_each`."""
    names = [str(n) for n in numbers]
    answers = storage.get_each(key, names, marker, jsonio.MAX_MARKER_BYTES)
    return records_of(numbers, names, path, marker, key, answers)


def records_of(
    numbers: Sequence[int],
    names: Sequence[str],
    path: Path,
    marker: str,
    key: str,
    answers: Sequence[bytes | StorageError | None],
) -> list[Record]:
    """Each record `n` (named `names[i]`) of the collection at `path` (`key`) as its
    marker's read derives it: `answers` holds one `Storage.get` answer per record."""
    # zip without strict=True (equal by construction): its keyword parse is per record.
    below = Record.below
    found: list[Record] = []
    for n, name, got in zip(numbers, names, answers):  # noqa: B905
        there, data, error = object_of((key, name, marker), got)
        state = _state(there, error)
        found.append(below(n, path, state, data, error and f"{marker}: {error}"))
    return found


def _state(there: bool, error: str | None) -> RecordState:
    """The state a marker read (`files.read_object`'s answer) derives."""
    if not there:
        return RecordState.IN_FLIGHT
    return RecordState.TORN if error is not None else RecordState.COMPLETED


def record_dir_fd(n: int, path: Path, collection_fd: int | None = None) -> int:
    """A directory fd of record `n` at `path`, opened by `fsread.open_record_dir`
    (below `collection_fd`, the collection's, when the caller holds it).

    n=0 is the report, whose "record directory" is the session directory
    (opened with `O_NOFOLLOW` like every open of a session directory).
    """
    return fsread.open_dir(path) if n == 0 else fsread.open_record_dir(path, collection_fd)


def record_relpath(relpath: str | os.PathLike[str], source: str) -> PurePosixPath:
    """A path inside a record directory: relative, no NUL, no `..`, no temp names,
    and naming something below the directory (`.` or `./` names the directory itself).

    Shared by record writers and output-contract logs; raises `InvalidInput`
    naming `source` (what the path came from).
    """
    return _relpath(os.fspath(relpath), source)


# Cached: a listing judges every trial by the same declared log name, and parsing it
# into a PurePosixPath each time was a fifth of the `view` session page (issue 14).
@functools.lru_cache(maxsize=256)
def _relpath(text: str, source: str) -> PurePosixPath:
    parts = PurePosixPath(text).parts
    problem = None
    if not text or "\0" in text:
        problem = "empty or contains NUL"
    elif PurePosixPath(text).is_absolute():
        problem = "must be a path relative to the record directory"
    elif ".." in text.split("/"):
        problem = "must not contain '..'"
    elif not parts:
        problem = "names the record directory itself, not a file in it"
    elif any(is_temp_name(p) for p in parts):
        problem = "names a temp file, which is never part of a record"
    if problem is not None:
        raise InvalidInput(source, problem)
    return PurePosixPath(*parts)


def _writer_relpath(relpath: str | os.PathLike[str], marker: str) -> PurePosixPath:
    """`record_relpath`, plus what a writer must not do: `.` components, the marker."""
    text = os.fspath(relpath)
    source = f"record path {text!r}"
    rel = record_relpath(text, source)
    if "." in text.split("/"):
        raise InvalidInput(source, "must not contain '.' components")
    if rel.parts == (marker,):
        raise InvalidInput(source, f"{marker} is the completion marker; write it with complete()")
    return rel


def _wrong_kind(cause: BaseException | None) -> bool:
    """Whether a directory of a record path failed to open because it is something else."""
    if isinstance(cause, fsread.WrongKind):
        return True
    return isinstance(cause, OSError) and cause.errno in (errno.ENOTDIR, errno.ELOOP)


class RecordWriter:
    """Writes the files of one in-flight record, then completes it. Not thread-safe.

    `storage` and `key` (`<session>/<collection>/<n>`) say where the record is
    stored; without them `path` is located locally.
    """

    def __init__(
        self,
        n: int,
        path: Path,
        marker: str,
        *,
        storage: Storage | None = None,
        key: str | None = None,
    ) -> None:
        self.n = n
        self.path = path
        self.marker = marker
        if storage is None or key is None:
            storage, key = locate(path, 3)
        self.storage = storage
        self.key = key

    def _check_open(self) -> None:
        # Another process (or an earlier complete()) may have completed it.
        if exists(self.storage, f"{self.key}/{self.marker}"):
            raise RecordCompleted(self.path)

    def write_bytes(
        self, relpath: str | os.PathLike[str], data: bytes, mode: int = FILE_MODE
    ) -> Path:
        """Write one file of the record atomically and durably (`Storage.put`).

        Raises `InvalidInput` for a path a writer may not use, or one whose
        directory in the record exists and is not a directory (a planted
        symlink is never written through), `RecordCompleted` once completed,
        `StorageError` (or the `OSError`) when a directory or the file cannot be made.
        """
        rel = _writer_relpath(relpath, self.marker)
        self._check_open()
        key = "/".join((self.key, *rel.parts))
        try:
            self.storage.put(key, data, mode=mode)
        except StorageError as exc:
            inside = exc.key.startswith(self.key + "/") and exc.key != key
            # Only an entry of the wrong kind is "not a directory": a name too long, a
            # full disk or an I/O error making one is that error, as the storage said it.
            if not inside or not _wrong_kind(exc.__cause__):
                raise
            where = self.path.joinpath(*exc.key[len(self.key) + 1 :].split("/"))
            raise InvalidInput(f"{where}", "exists and is not a directory") from None
        return self.path.joinpath(*rel.parts)

    def write_text(
        self, relpath: str | os.PathLike[str], text: str, encoding: str = "utf-8"
    ) -> Path:
        """Write text exactly as given (no newline translation).

        Raises `InvalidInput`, before anything is written, for text `encoding`
        cannot encode (a lone surrogate in UTF-8) or an unknown `encoding`.
        """
        try:
            data = text.encode(encoding)
        except (UnicodeEncodeError, LookupError) as exc:
            where = self.path / relpath
            problem = (
                f"{exc.reason} at character {exc.start}"
                if isinstance(exc, UnicodeEncodeError)
                else str(exc)
            )
            raise InvalidInput(str(where), f"text not written as {encoding}: {problem}") from None
        return self.write_bytes(relpath, data)

    def write_json(self, relpath: str | os.PathLike[str], obj: Any) -> Path:
        """Write a JSON document (a Mapping, list, scalar or pydantic model).

        Raises `InvalidInput`, before anything is written, for a value JSON cannot
        hold as given: a NaN or an infinity anywhere (it would read back as null),
        or an object that is not JSON.
        """
        dump = getattr(obj, "model_dump", None)
        value = dump(mode="json") if callable(dump) else obj
        return self.write_bytes(relpath, jsonio.dumps_checked(value, str(self.path / relpath)))

    def complete(self, record: Mapping[str, Any] | Any) -> Record:
        """Write the marker last, atomically and exactly once; the record is immutable afterwards.

        Raises `InvalidInput` if `record` is not a JSON object (a Mapping or
        a pydantic model), or one readers would read as torn or that the
        published schema rejects (`store.sealed`), and `RecordCompleted` if
        the record was already completed, by this writer or another one
        racing it (`Storage.create`: exactly one wins).
        """
        obj = sealed_object(record, f"{self.path / self.marker}", self.marker)
        self._check_open()
        if not self.storage.create(f"{self.key}/{self.marker}", jsonio.dumps(obj)):
            raise RecordCompleted(self.path)
        return Record(self.n, self.path, RecordState.COMPLETED, obj, None)

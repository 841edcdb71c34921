"""The store engine: sessions, their record collections, and crash-safe writers.

A record's state is derived from the disk on every read, never stored:
`completed` when its marker parses as a JSON object, `in_flight` without a
marker, `torn` when the marker exists but does not parse. Reading never
raises because of one bad record; the bad record is reported in its state.

Durability: files of a record are renamed into place atomically as they are
written; `complete()` fsyncs the record directory before the marker's rename,
so after a crash a marker never points at missing files. Numbers are
allocated by `mkdir`, which is atomic across processes and NFS clients.
"""

from __future__ import annotations

import contextlib
import os
import secrets
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from enum import StrEnum
from pathlib import Path, PurePosixPath
from typing import Any, Literal

from sessionstore import _json as jsonio
from sessionstore._fs import read as fsread
from sessionstore._fs.atomic import AtomicFile, fsync_dir, is_temp_name, temp_name, write_atomic
from sessionstore._proc import process_start_time
from sessionstore.errors import (
    CollectionFull,
    CorruptFile,
    InvalidInput,
    RecordCompleted,
    RecordNotFound,
    SessionExists,
    SessionNotFound,
)
from sessionstore.format.names import (
    CONSTRAINTS,
    FORMAT_VERSION,
    MANIFEST,
    MARKERS,
    MAX_RECORD,
    REPORT,
    SERVICE,
    TRIALS,
    record_number,
    validate_id,
)

DIR_MODE = 0o700
FILE_MODE = 0o644
# Levels below a record directory that `Record.walk` enters (lineage's patches walk agrees).
MAX_RECORD_DEPTH = 256
# Generated ids collide with probability ~n/2^32; retry a few times, then give up loudly.
_ID_ATTEMPTS = 16


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
        and the record directory cannot be opened.
        """
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


def read_record(n: int, path: Path, marker: str) -> Record:
    """Derive one record's state from its marker, read by the readers' recipe (`fsread`).

    The session and record directories are opened without following a
    symlink (the report, n=0, lives in the session directory itself). A
    session or record directory that is a symlink or not a directory is torn.
    """
    try:
        dir_fd = record_dir_fd(n, path)
    except FileNotFoundError:
        return Record(n, path, RecordState.IN_FLIGHT, None, None)
    except OSError as exc:
        return _unreadable_dir(n, path, marker, exc)
    try:
        return _read_marker(n, path, marker, dir_fd)
    finally:
        os.close(dir_fd)


def record_dir_fd(n: int, path: Path) -> int:
    """A directory fd of record `n` at `path`, opened by `fsread.open_record_dir`.

    n=0 is the report, whose "record directory" is the session directory
    (opened with `O_NOFOLLOW` like every open of a session directory).
    """
    return fsread.open_dir(path) if n == 0 else fsread.open_record_dir(path)


def _unreadable_dir(n: int, path: Path, marker: str, exc: OSError) -> Record:
    """A record whose directory cannot be opened safely: torn, the marker never read.

    The error names the entry at fault: the record directory or the collection.
    """
    name = exc.filename if isinstance(exc.filename, str) else path.name
    error = f"{marker}: not read: {Path(name).name!r} {fsread.problem(exc)}"
    return Record(n, path, RecordState.TORN, None, error)


def _read_marker(n: int, path: Path, marker: str, dir_fd: int) -> Record:
    """The record whose directory is open as `dir_fd` (one `open` of the marker, no stat)."""
    exists, data, error = jsonio.read_object(marker, dir_fd)
    if not exists:
        return Record(n, path, RecordState.IN_FLIGHT, None, None)
    if error is not None:
        return Record(n, path, RecordState.TORN, None, f"{marker}: {error}")
    return Record(n, path, RecordState.COMPLETED, data, None)


def record_relpath(relpath: str | os.PathLike[str], source: str) -> PurePosixPath:
    """A path inside a record directory: relative, no NUL, no `..`, no temp names,
    and naming something below the directory (`.` or `./` names the directory itself).

    Shared by record writers and output-contract logs; raises `InvalidInput`
    naming `source` (what the path came from).
    """
    text = os.fspath(relpath)
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


class RecordWriter:
    """Writes the files of one in-flight record, then completes it. Not thread-safe."""

    def __init__(self, n: int, path: Path, marker: str) -> None:
        self.n = n
        self.path = path
        self.marker = marker

    def _check_open(self) -> None:
        # Another process (or an earlier complete()) may have completed it.
        if os.path.lexists(self.path / self.marker):
            raise RecordCompleted(self.path)

    def write_bytes(
        self, relpath: str | os.PathLike[str], data: bytes, mode: int = FILE_MODE
    ) -> Path:
        """Write one file of the record atomically; it becomes durable at `complete()`."""
        rel = _writer_relpath(relpath, self.marker)
        self._check_open()
        target = self.path.joinpath(*rel.parts)
        self._make_parents(rel)
        with AtomicFile(target, mode, sync_dir=False) as f:
            f.write(data)
        return target

    def write_text(
        self, relpath: str | os.PathLike[str], text: str, encoding: str = "utf-8"
    ) -> Path:
        """Write text exactly as given (no newline translation)."""
        return self.write_bytes(relpath, text.encode(encoding))

    def write_json(self, relpath: str | os.PathLike[str], obj: Any) -> Path:
        """Write a JSON document (a Mapping, list, scalar or pydantic model)."""
        dump = getattr(obj, "model_dump", None)
        return self.write_bytes(relpath, jsonio.dumps(dump(mode="json") if callable(dump) else obj))

    def complete(self, record: Mapping[str, Any] | Any) -> Record:
        """Write the marker last and atomically; the record is immutable afterwards.

        Raises `InvalidInput` if `record` is not a JSON object and
        `RecordCompleted` if the record was already completed.
        """
        obj = jsonio.to_object(record, f"{self.path / self.marker}")
        self._check_open()
        with AtomicFile(self.path / self.marker) as marker:
            marker.write(jsonio.dumps(obj))
            # Syncing the marker's data first lets journaling filesystems commit the
            # earlier renames with it, which makes the directory fsync below cheap.
            marker.sync()
            # Every file's rename must be on disk before the marker's can be.
            fsync_dir(self.path)
        # The record directory's own entry (from begin()'s mkdir) must be durable too.
        fsync_dir(self.path.parent)
        return Record(self.n, self.path, RecordState.COMPLETED, obj, None)

    def _make_parents(self, rel: PurePosixPath) -> None:
        current = self.path
        for part in rel.parts[:-1]:
            current = current / part
            with contextlib.suppress(FileExistsError):
                os.mkdir(current, DIR_MODE)
            # Never write through a symlink planted inside the record.
            if current.is_symlink() or not current.is_dir():
                raise InvalidInput(f"{current}", "exists and is not a directory")


class Collection:
    """A numbered collection (`trials/` or `service/`) of one session."""

    def __init__(self, session_path: Path, name: str) -> None:
        self.name = name
        self.marker = MARKERS[name]
        self.session_path = session_path
        self.path = session_path / name
        # Where this instance's next begin() tries first, to avoid rescanning a large
        # collection on every record; a stale hint only costs extra mkdir attempts.
        self._next: int | None = None

    def _entries(self) -> tuple[list[int], list[str]]:
        with self._open() as fd:
            return self._list(fd)

    @contextlib.contextmanager
    def _open(self) -> Iterator[int | None]:
        """The collection's directory fd (`O_NOFOLLOW`), or None when there is no usable one.

        The session directory is opened with `O_NOFOLLOW`, then the collection
        relative to it, also `O_NOFOLLOW`. A `trials/` (or a session directory)
        that is missing, unreadable, a symlink or not a directory holds no
        records: reading through a symlink could reach anything, and one
        session's odd collection must not break a listing of the store.
        """
        try:
            session_fd = fsread.open_dir(self.session_path)
        except OSError:
            yield None
            return
        try:
            fd = fsread.open_dir(self.name, session_fd)
        except OSError:
            yield None
            return
        finally:
            os.close(session_fd)
        try:
            yield fd
        finally:
            os.close(fd)

    @staticmethod
    def _list(fd: int | None) -> tuple[list[int], list[str]]:
        numbers: list[int] = []
        foreign: list[str] = []
        if fd is None:
            return numbers, foreign
        with os.scandir(fd) as it:
            for entry in it:
                if is_temp_name(entry.name):
                    continue
                n = record_number(entry.name)
                if n is not None and entry.is_dir(follow_symlinks=False):
                    numbers.append(n)
                else:
                    foreign.append(entry.name)
        return sorted(numbers), sorted(foreign)

    def numbers(self) -> list[int]:
        """Record numbers present, in numeric order (10 after 9)."""
        return self._entries()[0]

    def foreign(self) -> list[str]:
        """Entry names that are not records (ignored by the engine, shown by `inspect`)."""
        return self._entries()[1]

    def scan(self) -> tuple[list[Record], list[str]]:
        """Every record in numeric order with its derived state, and the foreign names,
        from one directory listing (each record opened relative to the collection's fd)."""
        with self._open() as fd:
            if fd is None:
                return [], []
            numbers, foreign = self._list(fd)
            return [self._read(fd, n) for n in numbers], foreign

    def _read(self, collection_fd: int, n: int) -> Record:
        path = self.path / str(n)
        try:
            dir_fd = fsread.open_dir(str(n), collection_fd)
        except FileNotFoundError:  # deleted since the listing
            return Record(n, path, RecordState.IN_FLIGHT, None, None)
        except OSError as exc:  # swapped for a symlink or a file since the listing
            return _unreadable_dir(n, path, self.marker, exc)
        try:
            return _read_marker(n, path, self.marker, dir_fd)
        finally:
            os.close(dir_fd)

    def records(self) -> list[Record]:
        """Every record in numeric order, each with its derived state."""
        return self.scan()[0]

    def get(self, n: int) -> Record:
        """Record `n`; raises `RecordNotFound` if its directory does not exist."""
        path = self.path / str(n)
        if not 1 <= n <= MAX_RECORD or not path.is_dir() or path.is_symlink():
            raise RecordNotFound(self.path, n)
        return read_record(n, path, self.marker)

    def latest(self) -> Record | None:
        """The highest-numbered record, whatever its state, or None if there is none."""
        numbers = self.numbers()
        return (
            read_record(numbers[-1], self.path / str(numbers[-1]), self.marker) if numbers else None
        )

    def begin(self) -> RecordWriter:
        """Allocate the next number with an atomic `mkdir` and return its writer.

        Safe across processes and hosts sharing the filesystem: a lost race
        moves on to the next number, so numbers are unique and gap-free.
        Raises `CollectionFull` past `MAX_RECORD`: a bigger number would name
        a directory no reader lists as a record.
        """
        os.makedirs(self.path, DIR_MODE, exist_ok=True)
        n = self._next or max(self.numbers(), default=0) + 1
        while True:
            if n > MAX_RECORD:
                raise CollectionFull(self.path, MAX_RECORD)
            path = self.path / str(n)
            try:
                os.mkdir(path, DIR_MODE)
            except FileExistsError:
                n += 1
                continue
            self._next = n + 1
            return RecordWriter(n, path, self.marker)

    def wait(self, n: int, timeout: float | None = None) -> Record:
        """Block until record `n` is completed or torn, and return it.

        The record (and the collection directory) need not exist yet. Event
        driven with a 1 s re-check; `timeout` None waits forever, else
        `WaitTimedOut` is raised. Rules in `sessionstore.store.wait`.
        """
        from sessionstore.store.wait import wait_record

        return wait_record(self.path / str(n), self.marker, n, timeout)


def read_session_object(
    session_path: Path, name: str
) -> tuple[bool, dict[str, Any] | None, str | None]:
    """`jsonio.read_object` of the file `name` of a session, relative to its directory fd.

    The session directory is opened with `O_NOFOLLOW` (its parent followed):
    one swapped for a symlink is an error, its target never read; one that
    is gone has no such file.
    """
    try:
        fd = fsread.open_dir(session_path)
    except FileNotFoundError:
        return False, None, None
    except OSError as exc:
        return True, None, f"not read: session directory {fsread.problem(exc)}"
    try:
        return jsonio.read_object(name, fd)
    finally:
        os.close(fd)


class Session:
    """A session directory. Readable with or without `session.json` (a raw workspace)."""

    def __init__(
        self, path: Path, manifest: dict[str, Any] | None, manifest_error: str | None
    ) -> None:
        self.path = path
        self.manifest = manifest
        self.manifest_error = manifest_error
        self.trials = Collection(path, TRIALS)
        self.service = Collection(path, SERVICE)

    @classmethod
    def open(cls, path: str | os.PathLike[str], *, follow: bool = True) -> Session:
        """Read the session at `path`; a missing or torn manifest is reported, not raised.

        `path` named by the user may be a symlink (`follow`): it is resolved
        once, here, and `path` becomes its target. A session found in the
        store is opened with `follow=False`: a symlink there is no session.
        Every later open of the session directory uses `O_NOFOLLOW` on its
        final component, so a directory swapped for a symlink afterwards is
        refused (torn, unknown or an error), never read through.
        """
        p = Path(path)
        if follow and os.path.islink(p):
            p = Path(os.path.realpath(p))
        try:
            fd = fsread.open_dir(p)
        except (FileNotFoundError, NotADirectoryError, fsread.WrongKind):
            raise SessionNotFound(str(path)) from None
        except OSError as exc:  # a directory we may not list: its manifest is unread
            problem = f"not read: session directory {fsread.problem(exc)}"
            return cls(p, None, f"{MANIFEST}: {problem}")
        try:
            _, data, error = jsonio.read_object(MANIFEST, fd)
        finally:
            os.close(fd)
        return cls(p, data, f"{MANIFEST}: {error}" if error else None)

    @property
    def id(self) -> str | None:
        """The manifest's id, or None for a directory without a (valid) manifest."""
        value = (self.manifest or {}).get("id")
        return value if isinstance(value, str) else None

    def constraints(self) -> dict[str, Any]:
        """The requested constraints (`{}` when absent); raises `CorruptFile` if torn."""
        _, data, error = read_session_object(self.path, CONSTRAINTS)
        if error is not None:
            raise CorruptFile(self.path / CONSTRAINTS, error)
        return data or {}

    def report(self) -> Record:
        """`report.json` as a record (n=0): completed, in flight (absent) or torn."""
        return read_record(0, self.path, REPORT)

    def finish(
        self, report: Mapping[str, Any] | Any, status: Literal["done", "failed"] | None = None
    ) -> None:
        """Write `report.json`, ending the session, then record the status in the manifest.

        The status is `status`, else the report's own `status` field, else
        "done". Raises `RecordCompleted` if the session already has a report.
        """
        obj = jsonio.to_object(report, str(self.path / REPORT))
        final = status or obj.get("status") or "done"
        if final not in ("done", "failed"):
            raise InvalidInput(
                str(self.path / REPORT), f"status must be done or failed, not {final!r}"
            )
        obj["status"] = final
        if os.path.lexists(self.path / REPORT):
            raise RecordCompleted(self.path / REPORT)
        write_atomic(self.path / REPORT, jsonio.dumps(obj))
        # The report is what ends the session; the manifest status follows it, so
        # a crash between the two still reads as ended (readers trust report.json).
        if self.manifest is not None:
            self.manifest = {**self.manifest, "status": final}
            write_atomic(self.path / MANIFEST, jsonio.dumps(self.manifest))

    def export(self, n: int, dest: str | os.PathLike[str]) -> Path:
        """Write a self-contained copy of completed trial `n` to the new directory `dest`.

        File references in the record's marker and configs are rewritten to
        the copies (rules in `sessionstore.store.export`), so the copy reproduces
        after this session and its workspace are deleted. Raises
        `RecordNotFound`, `InvalidInput` (not completed, or `dest` exists).
        """
        from sessionstore.store.export import export_record

        return export_record(self, n, Path(dest))

    def contract(
        self,
        template: str | os.PathLike[str] | None = None,
        *,
        workspace: str | os.PathLike[str] | None = None,
    ) -> str:
        """The trial contract an agent is given, rendered for this session.

        `template` is the path of a template file (None: the shipped default);
        raises `TemplateError` naming that file. `workspace` is the agent's own
        directory that a mirror copies into this session: paths are rendered
        under it (None: under the session directory). Variables: docs/harness.md.
        """
        from sessionstore.store.contract import render_contract

        return render_contract(self, template, workspace)


def _generated_id() -> str:
    return secrets.token_hex(4)


class Store:
    """A directory of sessions (default `$SESSIONSTORE_HOME`, else `~/.sessionstore`)."""

    def __init__(self, root: str | os.PathLike[str]) -> None:
        self.root = Path(root).expanduser()

    def create(
        self,
        id: str | None = None,
        name: str | None = None,
        trials: int | None = None,
        constraints: Mapping[str, Any] | None = None,
        previous: Iterable[str] = (),
        labels: Mapping[str, str] | None = None,
        *,
        pid: int | Literal["self"] | None = "self",
    ) -> Session:
        """Create a session atomically: it appears complete (manifest, constraints) or not at all.

        `pid` is the writing process recorded for liveness: the caller by
        default, None to track none (a CLI invocation that exits at once).
        Raises `InvalidId`, `SessionExists`, `SessionNotFound` (a previous id).
        """
        from pydantic import ValidationError

        from sessionstore.format.models import Manifest

        if id is not None:
            validate_id(id)
        # Each previous id once, in first-seen order (as dstack pins them).
        previous_ids = list(dict.fromkeys(validate_id(p, "previous session id") for p in previous))
        for pid_ in previous_ids:
            if not (self.root / pid_).is_dir():
                raise SessionNotFound(pid_, self.root)
        if previous_ids:
            from sessionstore.store.lineage import check_previous

            # Refuses a running previous session; warns (LineageWarning) about chain gaps.
            check_previous(self, previous_ids)
        writer = os.getpid() if pid == "self" else pid
        try:
            manifest = Manifest(
                format=FORMAT_VERSION,
                id=id or "00000000",
                name=name,
                trials=trials,
                pid=writer,
                pid_started_at=process_start_time(writer) if writer else None,
                previous=previous_ids,
                labels=dict(labels or {}),
            )
        except ValidationError as exc:
            # The first problem, as `field: message`; pydantic's own text ends in a URL.
            first = exc.errors()[0]
            where = ".".join(map(str, first["loc"]))
            raise InvalidInput("session manifest", f"{where}: {first['msg']}") from None
        constraints_obj = jsonio.to_object(constraints or {}, "constraints")

        os.makedirs(self.root, DIR_MODE, exist_ok=True)
        for _ in range(_ID_ATTEMPTS if id is None else 1):
            session_id = id or _generated_id()
            manifest.id = session_id
            target = self.root / session_id
            if os.path.lexists(target):
                if id is not None:
                    raise SessionExists(target)
                continue
            if self._publish(
                target, manifest.model_dump(mode="json"), constraints_obj, previous_ids
            ):
                return Session.open(target, follow=False)
            if id is not None:
                raise SessionExists(target)
        raise SessionExists(self.root / "<generated>")

    def _publish(
        self,
        target: Path,
        manifest: dict[str, Any],
        constraints: dict[str, Any],
        previous: list[str] | None = None,
    ) -> bool:
        """Build the session under a temp name, then rename it into place (False if taken).

        The lineage copies of `previous` sessions are built inside the staging
        directory too, so a session never appears with a partial `previous/`.
        """
        staging = self.root / temp_name()
        os.mkdir(staging, DIR_MODE)
        try:
            os.chmod(staging, DIR_MODE)  # mkdir honours the umask; the mode is part of the format
            for sub in (TRIALS, SERVICE):
                os.mkdir(staging / sub, DIR_MODE)
            if previous:
                from sessionstore.store.lineage import copy_previous

                copy_previous(self, staging, previous)
            write_atomic(staging / CONSTRAINTS, jsonio.dumps(constraints))
            write_atomic(staging / MANIFEST, jsonio.dumps(manifest))
            try:
                # rename(2) onto an existing non-empty directory fails: no clobbering.
                os.rename(staging, target)
            except OSError as exc:
                if os.path.lexists(target):
                    return False
                raise exc
        except BaseException:
            import shutil

            shutil.rmtree(staging, ignore_errors=True)
            raise
        fsync_dir(self.root)
        return True

    def open(self, id: str) -> Session:
        """The session with this id; raises `InvalidId` or `SessionNotFound`."""
        validate_id(id)
        path = self.root / id
        if not path.is_dir() or path.is_symlink():
            raise SessionNotFound(id, self.root)
        try:
            return Session.open(path, follow=False)
        except SessionNotFound:
            raise SessionNotFound(id, self.root) from None

    def sessions(self) -> list[Session]:
        """Every session in the store, newest first (by `created_at`, else directory mtime)."""
        found: list[tuple[float, str, Session]] = []
        try:
            entries = list(os.scandir(self.root))
        except FileNotFoundError:
            return []
        for entry in entries:
            if is_temp_name(entry.name) or not entry.is_dir(follow_symlinks=False):
                continue
            try:
                validate_id(entry.name)
            except ValueError:
                continue
            try:
                session = Session.open(entry.path, follow=False)
                key = _created_key(session, entry)
            except (SessionNotFound, FileNotFoundError):
                continue  # removed since the listing: it was not there
            found.append((key, entry.name, session))
        found.sort(key=lambda item: (item[0], item[1]), reverse=True)
        return [session for _, _, session in found]


def _created_key(session: Session, entry: os.DirEntry[str]) -> float:
    created = (session.manifest or {}).get("created_at")
    if isinstance(created, str):
        try:
            moment = datetime.fromisoformat(created)
            if moment.tzinfo is None:
                moment = moment.replace(tzinfo=UTC)
            return moment.timestamp()
        except (ValueError, OverflowError):  # not ISO 8601, or a date beyond the epoch's range
            pass
    return entry.stat(follow_symlinks=False).st_mtime

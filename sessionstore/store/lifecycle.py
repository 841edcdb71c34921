"""A session's lifecycle from outside the harness process: begin and complete a record,
and who may still be writing (the harness recorded in `session.json`, a mirror daemon).

`begin_record` and `complete_record` are what a harness that is not Python
(a shell script, a job runner) calls through `sessionstore begin` and
`sessionstore complete`: the engine's own `Collection.begin` and
`RecordWriter.complete`, plus the refusals a person expects (no record
begun in a finished session, no marker for a record that does not exist or
already has one). Removal, pruning and the resume plan are in
`lifecycle_remove` and `lifecycle_resume`.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import stat
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from sessionstore import _json as jsonio
from sessionstore._fs import read as fsread
from sessionstore._proc import PID_MAX, process_alive
from sessionstore.errors import (
    InvalidInput,
    RecordCompleted,
    SessionFinished,
    StorageError,
    TooLarge,
)
from sessionstore.format.names import MIRROR_LOCK, MIRROR_PID, REPORT, SERVICE, TRIALS
from sessionstore.storage.s3_path import S3Path
from sessionstore.store.records import MAX_RECORD_DEPTH, Record, RecordState, RecordWriter
from sessionstore.store.sealed import sealed_object

if TYPE_CHECKING:
    from sessionstore.store.collection import Collection
    from sessionstore.store.session import Session

__all__ = [
    "Writer",
    "begin_record",
    "collection_of",
    "complete_record",
    "live_writer",
    "recorded_writer",
]


@dataclass(frozen=True)
class Writer:
    """A process that may write into a session: `kind` is "writer" (the harness recorded
    in `session.json`) or "mirror daemon"; `alive` None when it cannot be told."""

    kind: str
    pid: int | None
    alive: bool | None

    def to_dict(self) -> dict[str, Any]:
        return {"kind": self.kind, "pid": self.pid, "alive": self.alive}


def collection_of(session: Session, name: str) -> Collection:
    """The session's `trials` or `service` collection; `InvalidInput` for another name."""
    if name == TRIALS:
        return session.trials
    if name == SERVICE:
        return session.service
    raise InvalidInput("collection", f"must be {TRIALS} or {SERVICE}, not {name!r}")


def recorded_writer(session: Session) -> Writer | None:
    """The writer `session.json` records (pid and start time), alive or not; None if none.

    A pid of the wrong type or range is no writer that can be checked: alive None.
    """
    manifest = session.manifest or {}
    pid = manifest.get("pid")
    if pid is None:
        return None
    if not isinstance(pid, int) or isinstance(pid, bool) or not 1 <= pid <= PID_MAX:
        return Writer("writer", None, None)
    started = manifest.get("pid_started_at")
    if not isinstance(started, int | float) or isinstance(started, bool):
        started = None
    return Writer("writer", pid, process_alive(pid, None if started is None else float(started)))


def mirror_daemon(session: Session) -> Writer | None:
    """A mirror daemon holding the session's lock, or None when none does.

    The lock file is opened relative to the session directory's fd, nothing
    followed; a shared `flock` that would block means a daemon holds it.
    """
    try:
        top = fsread.open_dir(session.path)
    except OSError:
        return None
    try:
        try:
            fd = os.open(MIRROR_LOCK, fsread.FILE_FLAGS, dir_fd=top)
        except OSError:
            return None
        try:
            if not stat.S_ISREG(os.fstat(fd).st_mode):
                return None
            try:
                fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
            except BlockingIOError:
                return Writer("mirror daemon", fsread.read_pid(MIRROR_PID, top), True)
            return None
        finally:
            os.close(fd)  # drops the shared lock taken just now
    finally:
        os.close(top)


def live_writer(session: Session) -> Writer | None:
    """A process known to be alive that may write into the session (the recorded writer,
    else a mirror daemon), or None: none is known to be."""
    writer = recorded_writer(session)
    if writer is not None and writer.alive:
        return writer
    return mirror_daemon(session)


def begin_record(session: Session, collection: str) -> RecordWriter:
    """Allocate the next record of `collection` (`trials` or `service`); it stays in flight.

    Refuses (`SessionFinished`) a session that has its report: nothing is
    recorded after a session ended; `InvalidInput` names the path when the
    collection cannot hold records (a symlink, a file). A torn report does not
    end a session (docs/inspect.md, "Status": it reads as running), so it is
    no refusal either. Numbers come from `Collection.begin` (atomic `mkdir`,
    so two harnesses never get the same one).
    """
    report = session.report()
    if report.state is RecordState.TORN:
        _unanswered(session, f"{session.key}/{REPORT}")
        _refused_report(session)
    if report.state is RecordState.COMPLETED:
        raise SessionFinished(session.path / REPORT)
    writer = _claim(session, collection_of(session, collection))
    # A `finish` between the check above and the claim ended the session first: the
    # record would be begun after the report. Asked again now that the number is
    # claimed, so every record a begin hands out was claimed before the report was
    # written; the refused one (empty: nobody else knows its number) is taken back.
    if session.report().state is RecordState.COMPLETED:
        with contextlib.suppress(StorageError):
            session.storage.remove_tree(writer.key)
        raise SessionFinished(session.path / REPORT)
    return writer


def _claim(session: Session, coll: Collection) -> RecordWriter:
    """`coll.begin()`, its storage errors as the one-line errors `begin_record` raises."""
    try:
        return coll.begin()
    except StorageError as exc:
        if isinstance(session.path, S3Path):
            raise  # a bucket's server failed or refused: nothing in the session is at fault
        # The key at fault (`<id>/trials`, a symlink) as the path a person knows.
        inside = exc.key.startswith(f"{session.key}/")
        where = session.path.parent / exc.key if inside else coll.path
        _raise_refused(exc, where, write=True)
        raise InvalidInput(str(where), f"cannot hold records: {exc.problem}") from None


def _refused_report(session: Session) -> None:
    """Raise the `PermissionError` that made report.json read as torn, if one did: a
    session this process may not read is not a finished session."""
    try:
        session.storage.get(f"{session.key}/{REPORT}", jsonio.MAX_MARKER_BYTES)
    except StorageError as exc:
        inside = exc.key == session.key or exc.key.startswith(f"{session.key}/")
        _raise_refused(exc, session.path.parent / exc.key if inside else session.path)


def _unanswered(session: Session, key: str) -> None:
    """In a bucket, raise the server's one-line error if it fails (a 5xx, no answer) or
    refuses (a 403) to send `key`, a marker or the report that read as torn: that says
    nothing about the object, and acting on it would refuse a record that may have no
    marker as torn for good, or a session with no report as finished."""
    if isinstance(session.path, S3Path):
        with contextlib.suppress(TooLarge):  # torn by its own size: as read
            session.storage.get(key, jsonio.MAX_MARKER_BYTES)


def _raise_refused(exc: StorageError, where: Path, *, write: bool = False) -> None:
    """Raise a storage error that is a refused permission (EACCES, EPERM: an unwritable or
    unreadable directory) as the `PermissionError` it is, naming `where`.

    `write`: `exc` stopped a write (the mkdir of a record), so any failure of the
    write itself (a read-only file system, a full disk, an I/O error) is raised so
    too: only an entry in the way (a symlink, a file) says the collection cannot
    hold records, and "unreadable: Read-only file system" said neither."""
    cause = exc.__cause__
    if not isinstance(cause, OSError) or isinstance(cause, fsread.WrongKind):
        return
    in_the_way = cause.errno in (errno.ELOOP, errno.ENOTDIR, errno.EEXIST)
    if isinstance(cause, PermissionError) or (write and not in_the_way):
        raise OSError(cause.errno, cause.strerror, str(where)) from None


def complete_record(session: Session, collection: str, n: int, marker: dict[str, Any]) -> Record:
    """Write record `n`'s marker last, atomically and exactly once, after its files are durable.

    Raises `RecordNotFound` if the record does not exist (it is begun
    first), `RecordCompleted` if it has its marker, `InvalidInput` if its
    marker is there but torn (it is written once, so it cannot be mended)
    or `marker` is not a JSON object. Files written into the record by
    other programs (a shell's `echo >`) are fsynced first, so after a crash
    the marker never names a file that was lost.
    """
    coll = collection_of(session, collection)
    record = coll.get(n)
    # Refused before the record's state is asked: a bad marker is the caller's to fix.
    obj = sealed_object(marker, str(record.path / coll.marker), coll.marker)
    if record.state is RecordState.COMPLETED:
        raise RecordCompleted(record.path)
    if record.state is RecordState.TORN:
        _unanswered(session, f"{coll.key}/{n}/{coll.marker}")
        coll.listing()  # says why when the collection itself cannot be listed
        if coll.problem is not None:
            # Not this record's marker: the collection (a symlink, a file) holds no records,
            # and `begin` refuses it as well, so "begin a new one" would send the user round.
            raise InvalidInput(str(coll.path), f"cannot hold records: {coll.problem}")
        raise InvalidInput(
            str(record.path),
            f"reads as torn ({record.error}); a marker is written once, so this record "
            "cannot be completed: begin a new one",
        )
    sync_record(record)
    writer = RecordWriter(n, record.path, coll.marker, storage=coll.storage, key=f"{coll.key}/{n}")
    return writer.complete(obj)


def sync_record(record: Record) -> None:
    """fsync every regular file and directory of an in-flight record, by directory fd.

    Nothing is followed (each level opened `O_NOFOLLOW`), nothing is read;
    levels deeper than `MAX_RECORD_DEPTH` are left alone, so at most that
    many directory fds are open at once. In an `s3://` store there is
    nothing to sync: an object is durable when its PUT returns.
    """
    if isinstance(record.path, S3Path):
        return
    # Frames: a directory's fd and its entries still to visit; a directory is fsynced
    # when its last entry was, on the way back up.
    stack: list[tuple[int, list[os.DirEntry[str]]]] = []
    top = fsread.open_record_dir(record.path)
    try:
        stack.append((top, _entries(top)))
    except BaseException:  # not on the stack yet: the finally below would miss it
        os.close(top)
        raise
    try:
        while stack:
            fd, entries = stack[-1]
            if not entries:
                os.fsync(fd)
                os.close(stack.pop()[0])
                continue
            sub = _sync_entry(fd, entries.pop(), len(stack))
            if sub is not None:
                try:
                    stack.append((sub, _entries(sub)))
                except BaseException:
                    os.close(sub)
                    raise
    finally:
        for fd, _ in stack:
            os.close(fd)


def _entries(fd: int) -> list[os.DirEntry[str]]:
    with os.scandir(fd) as it:
        return list(it)


def _sync_entry(fd: int, entry: os.DirEntry[str], depth: int) -> int | None:
    """fsync one regular file of a record; for a directory to enter, return its fd."""
    try:
        if entry.is_dir(follow_symlinks=False):
            return fsread.open_dir(entry.name, fd) if depth <= MAX_RECORD_DEPTH else None
        if entry.is_file(follow_symlinks=False):
            file_fd, _ = fsread.open_file(entry.name, fd)
            try:
                os.fsync(file_fd)
            finally:
                os.close(file_fd)
    except (FileNotFoundError, fsread.WrongKind):
        pass  # removed, or swapped for a symlink or a FIFO since the listing: not a file
    return None

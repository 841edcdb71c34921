"""Every error sessionstore raises, under one root.

Each error also subclasses the built-in a caller would naturally catch, keeps
its facts as attributes, and says in its message what to do next. Messages
never contain a secret value: they name where a value came from instead.

    SessionStoreError
    ├── InvalidId              (ValueError)        an id or name fails validation
    ├── InvalidInput           (ValueError)        malformed user input (JSON, options)
    ├── RedactionUnsafe        (ValueError)        content cannot be redacted safely
    ├── StreamFinished         (ValueError)        a redaction stream was used after finish()
    ├── CorruptFile            (ValueError)        a file on disk does not parse
    ├── SecretRefused          (ValueError)        a secret cannot be registered safely
    ├── TemplateError          (ValueError)        a prompt template is malformed
    ├── StorageError           (OSError)           a storage backend failed on a key
    │   ├── TooLarge                               an object exceeds the reader's limit
    │   └── Unavailable                            the server failed or did not answer: retry
    ├── SessionNotFound        (LookupError)       no session with that id or path
    ├── AmbiguousTarget        (LookupError)       an id prefix names several sessions
    ├── RecordNotFound         (LookupError)       no record with that number
    ├── NoBestTrial            (LookupError)       no trial of the session can be ranked
    ├── SessionExists          (FileExistsError)   the id is taken
    ├── RecordCompleted        (PermissionError)   a completed record is immutable
    │   └── SessionFinished                        the report is written once
    ├── SessionBusy            (PermissionError)   the session's writer is alive
    ├── CollectionFull         (OverflowError)     no record number is left to allocate
    ├── PreviousRunning        (RuntimeError)      lineage asks for a running session
    │   └── PreviousUnknown                        ... or one whose status is unknown
    ├── LockHeld               (TimeoutError)      another daemon holds the destination
    ├── DestinationLost        (FileNotFoundError) a daemon's destination was removed
    └── WaitTimedOut           (TimeoutError)      a record did not complete in time

Warnings (`warnings.warn`, not raised):

    LineageWarning             (UserWarning)       lineage skipped or could not check something
"""

from __future__ import annotations

from pathlib import Path

TYPE_CHECKING = False  # typing's, without importing typing (mypy reads it as such)
if TYPE_CHECKING:
    from typing import Any


class SessionStoreError(Exception):
    """Root of every error this library raises on purpose.

    Every error pickles with its attributes, so it crosses a multiprocessing pool.
    """

    def __reduce__(self) -> tuple[Any, ...]:
        # Subclasses take their facts, not the message, so Exception's default
        # (`cls(*self.args)`) cannot rebuild them: restore message and attributes as they are.
        return (_rebuild, (type(self), self.args, self.__dict__))


def _rebuild(
    cls: type[SessionStoreError], args: tuple[Any, ...], state: dict[str, Any]
) -> SessionStoreError:
    error = cls.__new__(cls)
    error.args = args
    error.__dict__.update(state)
    return error


class InvalidId(SessionStoreError, ValueError):
    """An id or name does not match the allowed pattern."""

    def __init__(self, value: str, what: str, pattern: str) -> None:
        self.value = value
        self.what = what
        self.pattern = pattern
        # Quoted, not repr'd: the CLI escapes a message once where it prints it
        # (`_display.escape`), which would double repr's own backslashes.
        super().__init__(
            f"invalid {what} '{value}': must match {pattern} "
            "(lowercase letters, digits and '-', no separators or '..')"
        )


class InvalidInput(SessionStoreError, ValueError):
    """User input (an option value, a JSON document) is malformed."""

    def __init__(self, source: str, problem: str) -> None:
        self.source = source
        self.problem = problem
        super().__init__(f"{source}: {problem}")


class RedactionUnsafe(SessionStoreError, ValueError):
    """Content the redactor cannot redact safely: it refuses to write it rather than leak.

    `problem` names no secret (only lengths and the marker). Raised while
    redacting a file's bytes or a name; the mirror reports that file or name
    and copies nothing of it.
    """

    def __init__(self, problem: str) -> None:
        self.problem = problem
        super().__init__(f"cannot redact safely: {problem}")


class StreamFinished(SessionStoreError, ValueError):
    """A `StreamRedactor` was fed or finished after `finish()`: one stream redacts one file.

    A ValueError, as Python's own I/O on a closed file is. `call` names the
    method that was called (`feed` or `finish`).
    """

    def __init__(self, call: str) -> None:
        self.call = call
        super().__init__(
            f"{call}() after finish(): the stream is finished; "
            "call Redactor.stream() for the next file"
        )


class CorruptFile(SessionStoreError, ValueError):
    """A file the store needs exists but does not parse; fix or remove it."""

    def __init__(self, path: Path, problem: str) -> None:
        self.path = path
        self.problem = problem
        super().__init__(f"{path}: {problem}")


class SecretRefused(SessionStoreError, ValueError):
    """A secret cannot be registered safely; the message names its origin, never its value."""

    def __init__(self, origin: str, problem: str) -> None:
        self.origin = origin
        self.problem = problem
        super().__init__(f"{origin}: {problem}")


class TemplateError(SessionStoreError, ValueError):
    """A prompt template is malformed; `line` and `column` are 1-based."""

    def __init__(self, problem: str, line: int, column: int, source: str = "<template>") -> None:
        self.problem = problem
        self.line = line
        self.column = column
        self.source = source
        super().__init__(f"{source}:{line}:{column}: {problem}")


class StorageError(SessionStoreError, OSError):
    """A storage backend could not carry out an operation on `key`; the cause says why.

    Raised by `sessionstore.storage` backends for what is neither absent nor
    refused by a rule: a symlink or a non-regular file where a key is, a
    component that is not a directory, an I/O error.
    """

    def __init__(self, key: str, problem: str) -> None:
        self.key = key
        self.problem = problem
        super().__init__(f"{key}: {problem}")


class TooLarge(StorageError):
    """A stored object is larger than the reader's limit; it was not read."""

    def __init__(self, key: str, limit: int) -> None:
        self.limit = limit
        super().__init__(key, f"larger than the {limit}-byte limit; not read")


class Unavailable(StorageError):
    """The server did not answer, or failed (an HTTP 5xx, a timeout, no connection): the
    same request may succeed later, unlike a refusal (a 4xx). `wait` polls on."""


class SessionNotFound(SessionStoreError, LookupError):
    """No session exists with this id (or at this path).

    `hint` is what to do next; by default, to list the sessions there are.
    """

    def __init__(self, target: str, store: Path | None = None, hint: str | None = None) -> None:
        self.target = target
        self.store = store
        self.hint = hint
        where = f" in store {store}" if store is not None else ""
        what_next = hint or "list sessions with `sessionstore inspect`"
        super().__init__(f"no session '{target}'{where}; {what_next}")  # quoted: InvalidId


class AmbiguousTarget(SessionStoreError, LookupError):
    """A session id prefix matches more than one session of the store; give more of it.

    `candidates` are the matching ids, sorted.
    """

    def __init__(self, target: str, store: Path, candidates: list[str]) -> None:
        self.target = target
        self.store = store
        self.candidates = candidates
        shown = ", ".join(candidates[:_CANDIDATES_SHOWN])
        more = len(candidates) - _CANDIDATES_SHOWN
        if more > 0:
            shown += f" and {more} more"
        super().__init__(
            f"session prefix {target!r} is ambiguous in store {store}: it matches {shown}; "
            "give more characters of the id"
        )


_CANDIDATES_SHOWN = 10


class RecordNotFound(SessionStoreError, LookupError):
    """No record with this number exists in the collection.

    `problem`: why an entry of that name is no record (it is a symlink, a FIFO), or None
    when there is no such entry.
    """

    def __init__(self, collection: Path, n: int, problem: str | None = None) -> None:
        self.collection = collection
        self.n = n
        self.problem = problem
        if problem is None:
            super().__init__(f"{collection}: no record {n}")
        else:
            super().__init__(f"{collection / str(n)}: {problem}, so it is no record")


class NoBestTrial(SessionStoreError, LookupError):
    """No trial of the session at `path` can be ranked by `objective`: none is completed
    with a finite number there (a benchmark), so there is no best trial; name one instead."""

    def __init__(self, path: Path, objective: str) -> None:
        self.path = path
        self.objective = objective
        super().__init__(f"{path}: no completed trial has a benchmark to rank")


class SessionExists(SessionStoreError, FileExistsError):
    """A session with this id already exists; pick another id or open it."""

    def __init__(self, path: Path) -> None:
        self.path = path
        super().__init__(f"{path}: session already exists; choose another --id or open it")


class RecordCompleted(SessionStoreError, PermissionError):
    """The record is completed and therefore immutable; begin a new record instead."""

    def __init__(self, path: Path) -> None:
        self.path = path
        super().__init__(f"{path}: record is completed and immutable; begin a new record")


class SessionFinished(RecordCompleted):
    """The session has its report already: `report.json` is written once.

    A `RecordCompleted`, so callers that catch that catch this too. `path`
    is the report's path.
    """

    def __init__(self, path: Path) -> None:
        super().__init__(path)
        self.args = (
            f"{path}: the session is finished already (its report is written once); "
            "start a new session to record more",
        )


class SessionBusy(SessionStoreError, PermissionError):
    """The session's writer (`pid`) is alive: it may still write; stop it, or force.

    `writer` says which one: the harness recorded in `session.json`, or a mirror daemon.
    """

    def __init__(self, path: Path, writer: str, pid: int | None) -> None:
        self.path = path
        self.writer = writer
        self.pid = pid
        holder = f"{writer} (pid {pid})" if pid is not None else writer
        super().__init__(
            f"{path}: its {holder} is alive and may still write; stop it first, or use --force"
        )


class CollectionFull(SessionStoreError, OverflowError):
    """Every record number of the collection is taken; start a new session."""

    def __init__(self, collection: Path, maximum: int) -> None:
        self.collection = collection
        self.maximum = maximum
        super().__init__(
            f"{collection}: no record number left (the highest allowed is {maximum}); "
            "start a new session"
        )


class PreviousRunning(SessionStoreError, RuntimeError):
    """A session named as previous is still running (or still written into); finish it first.

    `why` says what still runs, and what to do about it.
    """

    def __init__(self, session_id: str, why: str = "is still running; finish it") -> None:
        self.session_id = session_id
        super().__init__(f"previous session {session_id!r} {why} before using it")


class PreviousUnknown(PreviousRunning):
    """A session named as previous has status `unknown`: whether it still runs cannot be told.

    A `PreviousRunning`, so callers that refuse a running session refuse this too.
    """

    def __init__(self, session_id: str, reason: str) -> None:
        super().__init__(session_id)
        self.reason = reason
        self.args = (
            f"previous session {session_id!r} has status unknown ({reason}), so whether it "
            "still runs cannot be told; fix its session.json, or give it a completed "
            "report.json (Session.finish), then try again",
        )


class LockHeld(SessionStoreError, TimeoutError):
    """Another process holds the lock; stop it or use another destination."""

    def __init__(self, path: Path | str, pid: int | None) -> None:
        self.path = path
        self.pid = pid
        holder = f"process {pid}" if pid is not None else "another process"
        super().__init__(f"{path}: already locked by {holder}; stop it or mirror elsewhere")


class DestinationLost(SessionStoreError, FileNotFoundError):
    """A running daemon's destination was removed or replaced (its lock is gone); it stopped.

    Raised by a pass of a daemon before it writes anything: mirroring on would
    re-create a removed session (without its `session.json`), or write into a
    directory that another daemon may lock.
    """

    def __init__(self, path: Path | str) -> None:
        self.path = path
        super().__init__(
            f"{path}: the destination was removed or replaced while the daemon mirrored into "
            "it (the lock it holds is no longer there); stopped, nothing written there since"
        )


class WaitTimedOut(SessionStoreError, TimeoutError):
    """The awaited record did not complete in time; wait longer or check the writer."""

    def __init__(self, path: Path, timeout: float) -> None:
        self.path = path
        self.timeout = timeout
        super().__init__(
            f"{path}: not completed after {timeout:g} s; wait longer or check that its writer runs"
        )


# -- warnings: the operation went ahead; the caller may want to know ------------------


class LineageWarning(UserWarning):
    """A previous session builds on one not included, has no records, or holds an entry
    that is skipped (a symlink, FIFO, socket or device where lineage copies a file)."""

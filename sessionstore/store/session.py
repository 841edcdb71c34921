"""Sessions and the store: the engine's entry points, through the storage seam.

A session is a prefix of the store's storage (`<id>`); its manifest,
constraints and report are read by bounded `Storage.get`s (`store.files`),
the report is `create`d exactly once and the manifest `put` after it. A
session directory that cannot be read reports why (`manifest_error`, a torn
report) rather than raising, so one bad session never breaks a listing.

Two steps stay local, each in one place: telling whether a session
directory named by a path exists (`Session.open` takes a path), and
publishing a new session whole (`LocalStorage.publish_dir`: a staging
directory renamed into place, so a reader never sees a session without its
manifest). An object store would tell a session by its manifest, and make
one visible by `create`-ing the manifest last.

`Record`, `RecordState`, `RecordWriter` (`store.records`) and `Collection`
(`store.collection`) are re-exported here, where `sessionstore` finds them.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any, Literal

from sessionstore import _json as jsonio
from sessionstore._fs import read as fsread
from sessionstore._fs.atomic import DIR_MODE, FILE_MODE
from sessionstore._proc import process_start_time
from sessionstore.errors import (
    CorruptFile,
    InvalidInput,
    SessionExists,
    SessionFinished,
    SessionNotFound,
    StorageError,
)
from sessionstore.format.names import (
    CONSTRAINTS,
    MANIFEST,
    REPORT,
    SERVICE,
    TRIALS,
    is_id,
    validate_id,
)
from sessionstore.storage.base import Storage
from sessionstore.storage.local import LocalStorage
from sessionstore.storage.s3_path import S3Path, s3_root, split_session_url
from sessionstore.store.collection import Collection
from sessionstore.store.created import created_key
from sessionstore.store.export import export_record
from sessionstore.store.files import constraints_of, exists, locate, read_object
from sessionstore.store.manifest import follow_report, new_constraints, new_manifest
from sessionstore.store.records import (
    MAX_RECORD_DEPTH,
    Record,
    RecordState,
    RecordWriter,
    read_record,
    record_dir_fd,
    record_relpath,
)
from sessionstore.store.remote import create_session, each
from sessionstore.store.sealed import check_best_trial, check_sealed

__all__ = [
    "DIR_MODE",
    "FILE_MODE",
    "MAX_RECORD_DEPTH",
    "Collection",
    "Record",
    "RecordState",
    "RecordWriter",
    "Session",
    "Store",
    "read_record",
    "record_dir_fd",
    "record_relpath",
]

# Generated ids collide with probability ~n/2^32; retry a few times, then give up loudly.
_ID_ATTEMPTS = 16


class Session:
    """A session directory. Readable with or without `session.json` (a raw workspace).

    `storage` and `key` say where it is stored (the store's storage and the
    id); without them the directory `path` is located locally.
    """

    def __init__(
        self,
        path: Path,
        manifest: dict[str, Any] | None,
        manifest_error: str | None,
        *,
        storage: Storage | None = None,
        key: str | None = None,
    ) -> None:
        self.path = path
        self.manifest = manifest
        self.manifest_error = manifest_error
        if storage is None or key is None:
            storage, key = locate(path, 1)
        self.storage = storage
        self.key = key
        self.trials = Collection(path, TRIALS, storage=storage, session_key=key)
        self.service = Collection(path, SERVICE, storage=storage, session_key=key)

    @classmethod
    def open(cls, path: str | os.PathLike[str], *, follow: bool = True) -> Session:
        """Read the session at `path`; a missing or torn manifest is reported, not raised.

        `path` named by the user may be a symlink (`follow`): it is resolved
        once, here, and `path` becomes its target. A session found in the
        store is opened with `follow=False`: a symlink there is no session.
        Every later open of the session directory uses `O_NOFOLLOW` on its
        final component, so a directory swapped for a symlink afterwards is
        refused (torn, unknown or an error), never read through. A string
        `s3://BUCKET/PREFIX/ID` is the session ID of that store.
        """
        if isinstance(path, str) and s3_root(path) is not None:
            return Store(split_session_url(path)[0]).open(split_session_url(path)[1])
        p = path if isinstance(path, S3Path) else Path(fsread.user_path(path, "session"))
        if isinstance(p, S3Path):
            storage, key = locate(p, 1)
            return cls._load(p, storage, key, str(path))
        if follow and os.path.islink(p):
            p = Path(os.path.realpath(p))
        try:
            storage, key = locate(p, 1)
        except StorageError:
            raise SessionNotFound(str(path)) from None
        return cls._load(p, storage, key, str(path))

    @classmethod
    def _load(cls, path: Path, storage: Storage, key: str, target: str) -> Session:
        """The session `key` of `storage`, whose directory is `path`; `SessionNotFound` if none.

        Whether the directory exists is asked locally, with `O_NOFOLLOW` (a
        prefix without a manifest is a raw workspace, so the manifest cannot
        tell); everything read from it goes through `storage`. In an `s3://`
        store a prefix is a session only with its manifest (`store.remote`).
        """
        if isinstance(path, S3Path):
            there, data, error = read_object(storage, f"{key}/{MANIFEST}", key)
            if not there:
                raise SessionNotFound(target)
            return cls(path, data, error and f"{MANIFEST}: {error}", storage=storage, key=key)
        try:
            os.close(fsread.open_dir(path))
        except (FileNotFoundError, NotADirectoryError, fsread.WrongKind):
            raise SessionNotFound(target) from None
        except OSError as exc:  # a directory we may not list: its manifest is unread
            problem = f"not read: session directory {fsread.problem(exc)}"
            return cls(path, None, f"{MANIFEST}: {problem}", storage=storage, key=key)
        _, data, error = read_object(storage, f"{key}/{MANIFEST}", key)
        error = f"{MANIFEST}: {error}" if error else None
        return cls(path, data, error, storage=storage, key=key)

    @property
    def id(self) -> str | None:
        """The manifest's id, or None for a directory without a (valid) manifest."""
        value = (self.manifest or {}).get("id")
        return value if isinstance(value, str) else None

    def constraints(self) -> dict[str, Any]:
        """The requested constraints (`{}` when absent); raises `CorruptFile` if torn.

        The one reading of `constraints.json` is `store.files.constraints_of`.
        """
        data, error = constraints_of(self.storage, self.key)
        if error is not None:
            raise CorruptFile(self.path / CONSTRAINTS, error)
        return data

    def report(self) -> Record:
        """`report.json` as a record (n=0): completed, in flight (absent) or torn."""
        return read_record(0, self.path, REPORT, storage=self.storage, key=self.key)

    def finish(
        self, report: Mapping[str, Any] | Any, status: Literal["done", "failed"] | None = None
    ) -> bool:
        """Write `report.json`, ending the session, then record the status in the manifest.

        The status is `status`, else the report's own `status` field, else "done".
        Raises `SessionFinished` (a `RecordCompleted`) if the session already has a
        report (written exactly once: of two racing writers one wins, `Storage.create`),
        and `InvalidInput` if a torn one is in its place: that does not end the session,
        and cannot be replaced either. `InvalidInput` too, before anything is written,
        for a report readers would read as torn, one the published schema rejects, or a
        `best_trial` that names no completed trial (`store.sealed`). A finish cut short
        after its report (a kill) is completed by the next: the manifest follows the report
        there, and a finish asking for that same report returns False (True: it wrote it).
        """
        source = str(self.path / REPORT)
        obj = jsonio.to_object(report, source)
        own = obj.get("status")
        final = status or ("done" if own is None else own)
        if final not in ("done", "failed"):
            shown = f"'{final}'" if isinstance(final, str) else repr(final)  # escaped once
            raise InvalidInput(source, f"status must be done or failed, not {shown}")
        obj["status"] = final
        check_sealed(obj, source, REPORT)
        check_best_trial(obj, self.trials, source)
        if not self.storage.create(f"{self.key}/{REPORT}", jsonio.dumps(obj)):
            there = self.report()
            if there.state is RecordState.TORN:
                raise InvalidInput(
                    str(self.path / REPORT),
                    f"reads as torn ({there.error}); a report is written once, so it is "
                    "not replaced and this session cannot be finished",
                )
            # A finish cut short after its report (a kill) left the manifest behind.
            if there.data is not None and self._follow(there.data) and there.data == obj:
                return False
            raise SessionFinished(self.path / REPORT)
        # The report is what ends the session; the manifest status follows it, so
        # a crash between the two still reads as ended (readers trust report.json).
        self._follow(obj)
        return True

    def _follow(self, report: dict[str, Any]) -> bool:
        """Bring the manifest's status to the report's (`follow_report`); whether it was."""
        manifest = follow_report(self.storage, self.key, report)
        if manifest is not None:
            self.manifest = manifest
        return manifest is not None

    def export(self, n: int, dest: str | os.PathLike[str]) -> Path:
        """Write a self-contained copy of completed trial `n` to the new directory `dest`.

        File references in the record's marker and configs are rewritten to
        the copies (rules in `sessionstore.store.export`), so the copy reproduces
        after this session and its workspace are deleted. Raises
        `RecordNotFound`, `InvalidInput` (not completed, or `dest` exists).
        """
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
        # Imported on use, to keep start-up light (templates); contract.py does not
        # import this module.
        from sessionstore.store.contract import render_contract

        return render_contract(self, template, workspace)


def _previous_ids(previous: Iterable[str]) -> list[str]:
    """Each previous id once, in first-seen order (as dstack pins them), validated."""
    if isinstance(previous, str):  # iterated, "ab12" would name the sessions a, b, 1, 2
        raise InvalidInput("previous", f"a list of session ids, not one string {previous!r}")
    return list(dict.fromkeys(validate_id(p, "previous session id") for p in previous))


def _generated_id() -> str:
    import secrets  # here: it loads hashlib and OpenSSL, a tenth of `inspect`'s start-up

    return secrets.token_hex(4)


class Store:
    """A directory of sessions (default `$SESSIONSTORE_HOME`, else `~/.sessionstore`).

    Its sessions are reached through `storage`: a `LocalStorage` over the
    directory `root`, or for `s3://BUCKET/PREFIX` (a string or an `S3Path`)
    an `S3Storage` (docs/object-storage.md), whose server is probed for
    conditional creates on open: one that ignores them is refused unless
    `single_writer` (None: `$SESSIONSTORE_S3_SINGLE_WRITER`) says there is
    one writer at a time.
    """

    storage: Storage

    def __init__(self, root: str | os.PathLike[str], *, single_writer: bool | None = None) -> None:
        remote = s3_root(root)
        if remote is not None:
            from sessionstore.storage.s3_open import open_store  # imports obstore: on use

            self.root: Path = remote.path()
            self.storage = open_store(remote, single_writer=single_writer)
            return
        self.root = Path(fsread.user_path(root, "store")).expanduser()
        self.storage = LocalStorage(self.root, dir_mode=DIR_MODE, file_mode=FILE_MODE, store=True)

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
        Raises `InvalidId`, `SessionExists`, `SessionNotFound` (a previous id),
        `InvalidInput` for constraints (or a manifest) every reader would read
        as torn (nested over 246 levels, over 64 MiB), or one string `previous`.
        """
        if id is not None:
            validate_id(id)
        previous_ids = _previous_ids(previous)
        for pid_ in previous_ids:
            self.open(pid_)  # SessionNotFound naming the store
        if previous_ids:
            # Imported on use: only a session with previous ones needs lineage (which
            # does not import this module).
            from sessionstore.store.lineage import check_previous

            # Refuses a running previous session; warns (LineageWarning) about chain gaps.
            check_previous(self, previous_ids)
        writer = os.getpid() if pid == "self" else pid
        data = new_manifest(
            id=id or "00000000",
            name=name,
            trials=trials,
            pid=writer,
            pid_started_at=process_start_time(writer) if writer else None,
            previous=previous_ids,
            labels=dict(labels or {}),
        )
        constraints_obj = new_constraints(constraints or {}, data)
        for _ in range(_ID_ATTEMPTS if id is None else 1):
            session_id = id or _generated_id()
            data["id"] = session_id
            target = self.root / session_id
            if isinstance(self.storage, LocalStorage):
                made = not exists(self.storage, session_id) and self.storage.publish_dir(
                    session_id,
                    lambda temp: self._build(temp, data, constraints_obj, previous_ids),
                )
            else:
                made = create_session(self.storage, session_id, data, constraints_obj, previous_ids)
            if made:
                return Session.open(target, follow=False)
            if id is not None:
                raise SessionExists(target)
        raise SessionExists(self.root / "<generated>")

    def _build(
        self, temp: str, manifest: dict[str, Any], constraints: dict[str, Any], previous: list[str]
    ) -> None:
        """Write a new session below the key `temp`, the manifest last (`publish_dir` builds).

        The lineage copies of `previous` sessions are built inside it too, so
        a session never appears with a partial `previous/` (lineage copies by
        directory fd: a local tree copy, see `store.lineage`).
        """
        for sub in (TRIALS, SERVICE):
            self.storage.claim(f"{temp}/{sub}")
        if previous:
            from sessionstore.store.lineage import copy_previous  # on use, as in create()

            copy_previous(self, self.root / temp, previous)
        self.storage.put(f"{temp}/{CONSTRAINTS}", jsonio.dumps(constraints))
        self.storage.put(f"{temp}/{MANIFEST}", jsonio.dumps(manifest))

    def open(self, id: str) -> Session:
        """The session with this id; raises `InvalidId` or `SessionNotFound`."""
        validate_id(id)
        try:
            return Session._load(self.root / id, self.storage, id, id)
        except SessionNotFound:
            raise SessionNotFound(id, self.root) from None

    def sessions(self) -> list[Session]:
        """Every session in the store, newest first (`created_key`).

        In an `s3://` store the manifests are read concurrently (`remote.each`)."""

        def load(name: str) -> tuple[float, str, Session] | None:
            try:
                session = Session._load(self.root / name, self.storage, name, name)
                return created_key(session), name, session
            except (SessionNotFound, FileNotFoundError):
                return None  # removed since the listing: it was not there

        names = [i.name for i in self.storage.list("") if i.is_prefix and is_id(i.name)]
        found = [f for f in each(self.storage, load, names) if f]
        found.sort(key=lambda item: (item[0], item[1]), reverse=True)
        return [session for _, _, session in found]

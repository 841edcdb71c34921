"""Removing sessions whole: `rm` of named sessions, `prune` of ended ones.

A session is removed in two steps, both relative to its parent's
directory fd: `rename(2)` of the session directory to a temp entry name
(`.sstmp-<pid>-<random>`, which no reader lists), fsynced, then removal of
that tree by `remove_tree_at` (nothing followed). A reader therefore sees
the whole session or none of it, and a removal killed half-way leaves only
a temp entry of a dead process, which the next `rm` or `prune` of the store
sweeps (`sweep_removed`; docs/format.md, "Temp entries").

Only sessions are removed: a directory whose name is a session id and that
holds a `session.json`, never a symlink (a symlink in the store is no
session, and one swapped in at the last moment is put back, not followed).
A session whose writer is alive (the harness recorded in `session.json`, or
a mirror daemon) is refused unless forced; `prune` never removes a running
session, forced or not.
"""

from __future__ import annotations

import errno
import os
import stat
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from sessionstore._fs import read as fsread
from sessionstore._fs.atomic import is_temp_name, temp_name, temp_writer_alive
from sessionstore._fs.tree import remove_tree_at
from sessionstore.errors import (
    InvalidId,
    InvalidInput,
    SessionBusy,
    SessionNotFound,
    SessionStoreError,
    StorageError,
)
from sessionstore.format.names import MANIFEST, validate_id
from sessionstore.storage.s3_path import S3Path, absolute
from sessionstore.store.created import created_key
from sessionstore.store.lifecycle import live_writer
from sessionstore.store.status import session_status

if TYPE_CHECKING:
    from sessionstore.store.session import Session, Store

__all__ = [
    "PRUNABLE",
    "Prunable",
    "each_prunable",
    "prunable",
    "prune",
    "remove_session",
    "sweep_removed",
]

# What prune may remove: ended sessions, and those whose writer died. Never running
# or unknown ones (an unknown status cannot tell whether the session still runs).
PRUNABLE = ("done", "failed", "interrupted")
# A temp entry of a pid still alive is left alone this long (ctime: the rename sets it),
# after which its pid is surely recycled (docs/format.md, "Temp entries").
_DEBRIS_AGE_S = 3600.0


def _open_parent(path: Path) -> int:
    # The store root or the user's own directory: followed, as every reader follows it.
    return os.open(path.parent, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)


def _identity(st: os.stat_result) -> tuple[int, int]:
    return st.st_dev, st.st_ino


def check_removable(session: Session, *, force: bool = False, name: str | None = None) -> None:
    """Refuse what `remove_session` must not remove; see there. `name`: the session's
    name in its parent, when its directory is read under another one."""
    path = absolute(session.path)
    if name is not None:
        path = path.with_name(name)
    try:
        validate_id(path.name)
    except InvalidId:
        raise InvalidInput(
            str(path), "is not a session directory (its name is not a session id); not removed"
        ) from None
    if not _has_manifest(session):
        raise InvalidInput(str(path), "has no session.json, so it is not a session; not removed")
    if not force:
        writer = live_writer(session)
        if writer is not None:
            raise SessionBusy(path, writer.kind, writer.pid)


def _has_manifest(session: Session) -> bool:
    """Whether the session directory holds a `session.json` (read or not): only such a
    directory is removed; one without (a raw workspace, a stray directory named like an
    id) is not, though the store lists it."""
    return session.manifest is not None or session.manifest_error is not None


def remove_session(session: Session, *, force: bool = False) -> Path:
    """Remove a session whole: renamed away first, then deleted. Returns its path.

    Refuses (`InvalidInput`) a directory that is not a session (its name is
    not an id, or it has no `session.json`), and (`SessionBusy`) one whose
    writer is alive unless `force`. The directory must still be the one
    checked: a symlink or another directory swapped in is put back, and
    `InvalidInput` says so. Raises `SessionNotFound` if it is gone already,
    and `StorageError` naming the session for what stops the removal (a
    read-only file system, a refused permission).
    """
    check_removable(session, force=force)
    if isinstance(session.path, S3Path):
        return _remove_remote(session)
    path = Path(os.path.abspath(session.path))  # a path given as `.` names its directory
    parent = _open_parent(path)
    try:
        _remove_at(parent, path, force)
    except OSError as exc:
        if isinstance(exc, SessionStoreError):
            raise
        # The session, not the bare name or the temp it was renaming to (`r2 -> .sstmp-..`):
        # the one line `rm` and `prune` print names what the user asked to remove.
        raise StorageError(str(path), exc.strerror or str(exc)) from exc
    finally:
        os.close(parent)
    return path


def _remove_at(parent: int, path: Path, force: bool) -> None:
    """`remove_session` of `path`, whose parent directory is open at `parent`."""
    try:
        fd = fsread.open_dir(path.name, parent)
    except FileNotFoundError:
        raise SessionNotFound(str(path)) from None
    except fsread.WrongKind as exc:
        raise InvalidInput(str(path), f"{exc.strerror}; not removed") from None
    try:
        checked = _identity(os.fstat(fd))
    finally:
        os.close(fd)
    away = temp_name()
    try:
        os.rename(path.name, away, src_dir_fd=parent, dst_dir_fd=parent)
    except FileNotFoundError:
        raise SessionNotFound(str(path)) from None
    if _identity(os.stat(away, dir_fd=parent, follow_symlinks=False)) != checked:
        os.rename(away, path.name, src_dir_fd=parent, dst_dir_fd=parent)
        raise InvalidInput(str(path), "was replaced while it was removed; not removed")
    try:
        _check_moved(path, away, parent, checked, force)
    except (SessionStoreError, OSError) as exc:
        try:
            os.rename(away, path.name, src_dir_fd=parent, dst_dir_fd=parent)
        except OSError as again:
            raise StorageError(
                str(path), f"{exc}; and putting it back from {away} failed: {again}"
            ) from exc
        raise
    # Durable before anything is deleted: after a crash the session is whole or gone.
    os.fsync(parent)
    try:
        remove_tree_at(parent, away)
    except OSError as exc:
        raise StorageError(
            str(path),
            f"removed from view, but deleting {away} stopped: {exc.strerror or exc}; "
            "the next rm or prune of its store finishes it",
        ) from exc
    os.fsync(parent)


def _remove_remote(session: Session) -> Path:
    """`remove_session` in an `s3://` store, which has no rename: the manifest goes first,
    so the prefix is no session from then on (`store.remote`), then every object below."""
    session.storage.remove_tree(f"{session.key}/{MANIFEST}")
    session.storage.remove_tree(session.key)
    return session.path


def _check_moved(path: Path, away: str, parent: int, checked: tuple[int, int], force: bool) -> None:
    """`check_removable` again, on the directory now under `away` (`checked` its identity).

    The first check read a manifest before `checked` was taken: a directory
    swapped in between (another session, whose writer is alive) would go
    unchecked. Read under a name only this removal gave, and the same
    directory before and after the read, it is the one to be deleted.
    """
    from sessionstore.store.session import Session  # session.py imports the whole engine

    moved = Session.open(path.parent / away, follow=False)
    check_removable(moved, force=force, name=path.name)
    if _identity(os.stat(away, dir_fd=parent, follow_symlinks=False)) != checked:
        raise InvalidInput(str(path), "was replaced while it was removed; not removed")


def sweep_removed(directory: Path) -> tuple[list[str], list[str]]:
    """Remove the temp entries of `directory` (a store) left by dead writers.

    A removal killed half-way, or a session creation killed before its
    rename, leaves one; one whose pid is alive is left alone unless its
    ctime is over an hour old (its pid was recycled). Returns the names
    removed and one problem per entry that could not be (each with why);
    an entry removed meanwhile by someone else is neither.
    """
    removed: list[str] = []
    problems: list[str] = []
    if isinstance(directory, S3Path):
        return removed, problems  # a bucket has no temp entries: every PUT is whole
    try:
        fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    except OSError:
        return removed, problems
    try:
        with os.scandir(fd) as it:
            names = [e.name for e in it if is_temp_name(e.name)]
        cutoff = time.time() - _DEBRIS_AGE_S
        for name in names:
            try:
                st = os.stat(name, dir_fd=fd, follow_symlinks=False)
                if temp_writer_alive(name) and st.st_ctime >= cutoff:
                    continue
                if stat.S_ISDIR(st.st_mode):
                    remove_tree_at(fd, name)
                else:
                    os.unlink(name, dir_fd=fd)
                removed.append(name)
            except OSError as exc:
                if exc.errno == errno.ENOENT or not _lexists(name, fd):
                    continue  # someone else swept it first
                problems.append(f"{directory / name}: {exc.strerror or exc}")
    finally:
        os.close(fd)
    return removed, problems


def _lexists(name: str, dir_fd: int) -> bool:
    try:
        os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
    except OSError:
        return False
    return True


@dataclass(frozen=True)
class Prunable:
    """A session `prune` would remove: its id, path, status, and age in seconds."""

    id: str
    path: Path
    status: str
    created_at: str | None
    age_s: float

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "path": str(self.path),
            "status": self.status,
            "created_at": self.created_at,
            "age_s": self.age_s,
        }


def prunable(
    store: Store, older_than: float | None = None, statuses: Iterable[str] = PRUNABLE
) -> list[Prunable]:
    """The sessions of `store` that `prune` removes, newest first (`each_prunable`, listed)."""
    return list(each_prunable(store, older_than, statuses))


def each_prunable(
    store: Store, older_than: float | None = None, statuses: Iterable[str] = PRUNABLE
) -> Iterator[Prunable]:
    """The sessions of `store` that `prune` removes, newest first, each as it is judged.

    Those with a `session.json` (what `remove_session` removes) whose status
    is in `statuses` (only the `PRUNABLE` ones count: never running or
    unknown) and, with `older_than`, created more than that many seconds ago
    (`created_at`, else the manifest's or the directory's mtime). A session's
    status is read only when the one before it has been taken, so a caller
    that stops early (a listing's `--limit`) reads no more.
    """
    wanted = set(statuses) & set(PRUNABLE)
    now = time.time()
    for session in store.sessions():
        # What `remove_session` refuses is never listed: the dry run lists what would go,
        # and a `prune --yes` would fail on it (exit 1) on every run.
        if not _has_manifest(session):
            continue
        status = session_status(session)
        if status not in wanted:
            continue
        try:
            age = now - created_key(session)
        except OSError:
            continue  # removed since the listing
        if older_than is not None and age <= older_than:
            continue
        created = (session.manifest or {}).get("created_at")
        created_at = created if isinstance(created, str) else None
        yield Prunable(session.path.name, session.path, status, created_at, age)


def prune(
    store: Store, candidates: Iterable[Prunable]
) -> tuple[list[Prunable], list[tuple[Prunable, str]]]:
    """Remove the `candidates` (from `prunable`) still prunable now.

    Returns those removed, and those left with why (one a mirror daemon
    writes into, one that cannot be removed). Each is read again just
    before it goes: one that is running by now, or gone already, is left
    out silently, and so is one whose status is not the one it was chosen
    for (`prune --status interrupted` listed it; it was finished since,
    maybe while the prompt waited: that done session was not asked for).
    (Leftovers of earlier removals are `sweep_removed`'s.)
    """
    removed: list[Prunable] = []
    left: list[tuple[Prunable, str]] = []
    for candidate in candidates:
        try:
            session = store.open(candidate.id)
            status = session_status(session)
            if status not in PRUNABLE or status != candidate.status:
                continue
            remove_session(session)
        except SessionNotFound:
            continue
        except (SessionStoreError, OSError) as exc:
            left.append((candidate, str(exc)))
            continue
        removed.append(candidate)
    return removed, left

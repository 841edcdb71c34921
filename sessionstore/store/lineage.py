"""Lineage: copying earlier sessions' records into `previous/<id>/` of a new session.

What is copied from each previous session (and nothing else: no logs, no
foreign entries, no manifest, no `previous/` of its own):

- `constraints.json` and `report.json`;
- per trial `trials/<n>/`: every top-level file named `*.json`, `*.yml`,
  `*.yaml` or `*.toml` (the marker and the configs) and the `patches/` tree;
- per verification attempt `service/<k>/`: the same top-level files (the
  attempt's config and its marker).

Reading a previous session follows the readers' recipe (`fsread`): the walk
goes by directory fd, every directory opened `O_NOFOLLOW|O_DIRECTORY`
relative to its parent, every file `O_NOFOLLOW|O_NONBLOCK` and `fstat`ed
before its first byte is read. So an entry lineage would copy that is a
symlink, FIFO, socket or device (or a `trials/`, record or `patches/` that
is not a real directory) is skipped, never followed, never waited on, and
warned about (`LineageWarning`, one line naming the path and what it is).
Temp entries are left out silently. A file is copied up to the size `fstat`
gave when it was opened, so a file growing while it is copied cannot make
the copy endless.

The copy keeps the session layout, so `Session.open(previous/<id>)` reads it
like any raw workspace. A previous session with no records (no trial or
attempt file lineage would copy) is warned about and copied not at all: no
`previous/<id>/` stands for it.

Which sessions may be previous: `done`, `failed` and `interrupted` ones.
`running` is refused (`PreviousRunning`), and so is `unknown`
(`PreviousUnknown`): a manifest whose fields do not read right cannot say
whether its writer still runs, so its records may still be changing. So may
those of a session a mirror daemon still writes into, whatever its status:
refused too (`PreviousRunning`).

Crash safety: each previous session is copied into a temp directory beside
its final name and renamed into place, so `previous/<id>` is either a whole
copy or absent, never partial. A session removed while it is copied (renamed
away, then deleted) gave part of its records: it is not copied at all
(`SessionNotFound`). `Store.create` does this inside the staging
directory it publishes atomically. `include_previous(store, session)` redoes
the copy for every pinned id of an existing session: it is idempotent, sweeps
the debris a killed copy left behind, and is "the next call" that heals a
session whose copy was interrupted or damaged. All writes go through the
directory fd of `previous/`, opened without following a symlink: a planted
`previous/<id>` symlink is replaced as a link, never written through.

Modules: the walk (what is selected) is `lineage_walk`, which sessions may
be previous `lineage_checks`, what `inspect` shows `lineage_info`; this one
copies. Lineage copies a tree by directory fd, a local mechanism beside the
storage seam; in an `s3://` store `lineage_remote` selects the same keys from
a listing and copies them on the server.
"""

from __future__ import annotations

import os
import warnings
from collections.abc import Iterable, Iterator
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import TYPE_CHECKING

from sessionstore._fs import read as fsread
from sessionstore._fs.atomic import (
    DIR_MODE,
    FILE_MODE,
    build_dir,
    sweep_temps_at,
    temp_name,
    write_all,
)
from sessionstore._fs.staging import StagingTree
from sessionstore._fs.tree import exchange_at, remove_tree_at
from sessionstore.errors import CorruptFile, LineageWarning, SessionNotFound
from sessionstore.format.names import PREVIOUS_DIR
from sessionstore.storage.s3_path import S3Path
from sessionstore.store.lineage_checks import chain_gaps, check_previous, check_usable, is_running
from sessionstore.store.lineage_info import has_copy, lineage_info, pinned, valid_id
from sessionstore.store.lineage_walk import (
    CONFIG_SUFFIXES,
    MAX_PATCH_DEPTH,
    PATCHES_DIR,
    Selection,
    Visit,
    walk_session,
)

_CHUNK = 1 << 20
_CREATE_FLAGS = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC

if TYPE_CHECKING:
    from sessionstore.store.session import Session, Store

__all__ = [
    "CONFIG_SUFFIXES",
    "MAX_PATCH_DEPTH",
    "PATCHES_DIR",
    "Selection",
    "Visit",
    "chain_gaps",
    "check_previous",
    "check_usable",
    "copy_previous",
    "copy_session_records",
    "has_records",
    "include_previous",
    "is_running",
    "lineage_info",
    "select_files",
    "walk_session",
]


def _no_records(session_id: str) -> str:
    return f"previous session {session_id} has no records; nothing copied from it"


@contextmanager
def _session_fd(source: Path) -> Iterator[int]:
    """The directory fd of a session at `source` (a path the caller gave, so followed)."""
    try:
        fd = fsread.open_dir(source, follow=True)
    except OSError:
        raise SessionNotFound(str(source)) from None
    try:
        yield fd
    finally:
        os.close(fd)


@contextmanager
def _store_session_fd(store: Store, session_id: str) -> Iterator[int]:
    """The directory fd of session `session_id` in `store`; a symlink there is no session."""
    try:
        root = fsread.open_dir(store.root, follow=True)
    except OSError:
        raise SessionNotFound(session_id, store.root) from None
    try:
        fd = fsread.open_dir(session_id, root)
    except OSError:
        raise SessionNotFound(session_id, store.root) from None
    finally:
        os.close(root)
    try:
        yield fd
    finally:
        os.close(fd)


def _copy_file(src_fd: int, size: int, dir_fd: int, name: str) -> None:
    """Copy `size` bytes (at most) of `src_fd` into the new file `name` in `dir_fd`; fsynced.

    `O_EXCL|O_NOFOLLOW`: the file is made new in our own staging directory,
    never opened through anything planted there.
    """
    out = os.open(name, _CREATE_FLAGS, 0o600, dir_fd=dir_fd)
    try:
        os.fchmod(out, FILE_MODE)
        left = size
        while left > 0 and (chunk := os.read(src_fd, min(_CHUNK, left))):
            left -= len(chunk)
            write_all(out, chunk)
        os.fsync(out)
    finally:
        os.close(out)


def _copy_into(
    source_fd: int, previous_fd: int, session_id: str, store: Store | None = None
) -> Selection:
    """Copy the session at `source_fd` to `previous/<session_id>` (open at `previous_fd`).

    Built in a temp directory and renamed into place (`build_dir`), replacing
    an existing copy; on failure the temp is removed and the old copy left
    as it was. With `store` (the source is its session `session_id`), the
    source must still be there once every file is read (`_still_in_store`).
    """

    def build(staging_fd: int, _: str) -> Selection:
        tree = StagingTree(staging_fd)
        try:

            def copy(rel: str, fd: int, st: os.stat_result) -> None:
                parent, _, name = rel.rpartition("/")
                _copy_file(fd, st.st_size, tree.dir_fd(parent), name)

            found = walk_session(source_fd, copy)
            if store is not None:
                _still_in_store(store, session_id, source_fd)
            # Every file and directory entry must be durable before the rename publishes.
            tree.finish()
        finally:
            tree.close()
        return found

    return build_dir(
        previous_fd, build, lambda staging: _replace_dir(previous_fd, staging, session_id)
    )


def _replace_dir(dir_fd: int, staging: str, name: str) -> None:
    """Rename `staging` onto `name` (both in `dir_fd`), moving an existing `name` aside first.

    What stood at `name` is removed as what it is: a symlink is unlinked (its
    target never touched), a directory removed by fd without following links.
    """
    try:
        os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
    except FileNotFoundError:
        os.rename(staging, name, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
        return
    # rename(2) cannot replace a non-empty directory. Swapped in one step, `name` is
    # never absent: a kill leaves the old copy or the new one there, and a temp that
    # is garbage either way (never the only copy of a pinned session since deleted).
    if exchange_at(dir_fd, staging, name):
        remove_tree_at(dir_fd, staging)
        return
    # Where it cannot be swapped: moved aside, then dropped. A crash in between leaves
    # `name` absent (never partial); the next call recopies, and `doctor` tells.
    old = temp_name()
    os.rename(name, old, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
    os.rename(staging, name, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
    remove_tree_at(dir_fd, old)


def _still_in_store(store: Store, session_id: str, source_fd: int) -> None:
    """Raise `SessionNotFound` unless the session read at `source_fd` is still `session_id`
    of `store`. A session is removed by renaming it away, then deleting its files: one
    removed while it was copied gave files of some records, not others, and a completed
    trial read without its marker; such a copy is never published as whole."""
    here = os.fstat(source_fd)
    try:
        st = os.stat(store.root / session_id, follow_symlinks=False)
    except OSError:
        st = None
    if st is None or (st.st_dev, st.st_ino) != (here.st_dev, here.st_ino):
        raise SessionNotFound(session_id, store.root, "it was removed while it was copied")


@contextmanager
def _previous_fd(path: Path, *, create: bool = False) -> Iterator[int]:
    """The fd of a session's `previous/` at `path` (its parent followed, itself never).

    Raises `CorruptFile` when `previous` is a symlink or not a directory:
    nothing is ever written through it.
    """
    parent = fsread.open_dir(path.parent, follow=True)
    try:
        if create:
            with suppress(FileExistsError):
                os.mkdir(path.name, DIR_MODE, dir_fd=parent)
        try:
            fd = fsread.open_dir(path.name, parent)
        except fsread.WrongKind as exc:
            problem = f"{fsread.problem(exc)}; remove it, then copy the lineage again"
            raise CorruptFile(path, problem) from None
    finally:
        os.close(parent)
    try:
        yield fd
    finally:
        os.close(fd)


def select_files(source: Path) -> list[str]:
    """The relative paths that lineage copies from the session at `source`, sorted."""
    with _session_fd(source) as fd:
        return walk_session(fd).files


def has_records(source: Path) -> bool:
    """Whether the session at `source` holds a trial or attempt file lineage would copy."""
    with _session_fd(source) as fd:
        return walk_session(fd).has_records


def copy_session_records(source: Path, target: Path) -> int:
    """Copy the lineage files of the session at `source` to `target`; returns the count.

    One atomic step: built beside `target` and renamed into place (an
    existing `target` is replaced). `target.parent` must be a real directory
    (never followed if it is a symlink). Warns (`LineageWarning`) for each
    entry skipped and when `source` has no records (then nothing is copied).
    """
    with _session_fd(source) as source_fd:
        found = walk_session(source_fd)
        if found.has_records:
            with _previous_fd(target.parent) as previous_fd:
                found = _copy_into(source_fd, previous_fd, target.name)
    _warn(found, target.name, stacklevel=3)
    return len(found.files) if found.has_records else 0


def _warn(found: Selection, session_id: str, stacklevel: int) -> None:
    messages = found.messages(session_id)
    if not found.has_records:
        messages.append(_no_records(session_id))
    for message in messages:
        warnings.warn(LineageWarning(message), stacklevel=stacklevel + 1)


def copy_previous(store: Store, session_dir: Path, ids: Iterable[str]) -> list[Path]:
    """Copy each previous session with records into `session_dir/previous/<id>/`.

    Used by `Store.create` on its staging directory, after `check_previous`.
    Warns (`LineageWarning`) for each skipped entry and each session with no
    records, which is not copied (no `previous/` at all when none has
    records). Returns the copies; raises `SessionNotFound`.
    """
    previous_dir = session_dir / PREVIOUS_DIR
    copies: list[Path] = []
    for session_id in ids:
        probe = _copy_from_store(store, previous_dir, session_id)
        _warn(probe, session_id, stacklevel=2)
        if probe.has_records:
            copies.append(previous_dir / session_id)
    return copies


def _copy_from_store(store: Store, previous_dir: Path, session_id: str) -> Selection:
    """Copy session `session_id` of `store` to `previous_dir/<session_id>` if it has records;
    what its walk found. `SessionNotFound` if it is gone, or was removed while it was read
    (`_still_in_store`; its records may then have looked absent)."""
    with _store_session_fd(store, session_id) as source_fd:
        found = walk_session(source_fd)
        if not found.has_records:
            _still_in_store(store, session_id, source_fd)
            return found
        with _previous_fd(previous_dir, create=True) as previous_fd:
            return _copy_into(source_fd, previous_fd, session_id, store)


def include_previous(store: Store, session: Session) -> list[Path]:
    """Re-copy every previous session pinned in `session`'s manifest; idempotent.

    This is the call that heals a lineage copy a crash interrupted: it removes
    the debris of dead copiers, then replaces each `previous/<id>/` with a
    fresh whole copy (a `previous/<id>` planted as a symlink or a file is
    replaced as an entry, never followed). A pinned session that has since
    been deleted (or is while it is copied), or that has no records, keeps
    its existing copy if there is one (the second also warns,
    `LineageWarning`; the first raises `SessionNotFound` when there is
    none). Raises `PreviousRunning` if a
    pinned session is running again (`PreviousUnknown` if its status is
    unknown), `CorruptFile` if `previous` is a symlink or not a directory.
    """
    if isinstance(session.path, S3Path):
        from sessionstore.store import lineage_remote  # an s3:// store only

        return lineage_remote.include_previous(store, session)
    previous_dir = session.path / PREVIOUS_DIR
    copies: list[Path] = []
    if os.path.lexists(previous_dir):
        with _previous_fd(previous_dir) as fd:
            sweep_temps_at(fd)
    for session_id in pinned(session):
        target = previous_dir / session_id
        if not valid_id(session_id):
            message = f"previous session id {session_id!r} is not a valid id; skipped"
            warnings.warn(LineageWarning(message), stacklevel=2)
            continue
        try:
            check_usable(store.open(session_id), session_id)
            found = _copy_from_store(store, previous_dir, session_id)
        except SessionNotFound:  # deleted, before or while it was copied
            if has_copy(session.path, session_id):
                copies.append(target)
                continue
            raise
        _warn(found, session_id, stacklevel=2)
        if found.has_records or has_copy(session.path, session_id):
            copies.append(target)
    return copies

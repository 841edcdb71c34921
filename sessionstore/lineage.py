"""Lineage: copying earlier sessions' records into `previous/<id>/` of a new session.

What is copied from each previous session (and nothing else: no logs, no
foreign entries, no manifest, no `previous/` of its own):

- `constraints.json` and `report.json`;
- per trial `trials/<n>/`: every top-level file named `*.json`, `*.yml`,
  `*.yaml` or `*.toml` (the marker and the configs) and the `patches/` tree;
- per verification attempt `service/<k>/`: the same top-level files (the
  attempt's config and its marker).

Symlinks and temp entries are never copied. The copy keeps the session
layout, so `Session.open(previous/<id>)` reads it like any raw workspace.
A previous session with no records (no trial or attempt file lineage would
copy) is warned about and copied not at all: no `previous/<id>/` stands for it.

Crash safety: each previous session is copied into a temp directory beside
its final name and renamed into place, so `previous/<id>` is either a whole
copy or absent, never partial. `Store.create` does this inside the staging
directory it publishes atomically. `include_previous(store, session)` redoes
the copy for every pinned id of an existing session: it is idempotent, sweeps
the debris a killed copy left behind, and is "the next call" that heals a
session whose copy was interrupted or damaged.
"""

from __future__ import annotations

import os
import shutil
import warnings
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from sessionstore.atomic import AtomicFile, fsync_dir, is_temp_name, sweep_temps, temp_name
from sessionstore.errors import PreviousRunning, SessionNotFound
from sessionstore.layout import (
    CONSTRAINTS,
    MARKERS,
    PREVIOUS_DIR,
    REPORT,
    SERVICE,
    TRIALS,
    record_number,
)
from sessionstore.store import DIR_MODE, FILE_MODE, Session, Store

CONFIG_SUFFIXES = (".json", ".yml", ".yaml", ".toml")
PATCHES_DIR = "patches"


class LineageWarning(UserWarning):
    """A previous session builds on a session that was not included, or has no records."""


def is_running(session: Session) -> bool:
    """Whether a session may still be writing records.

    Running means: no completed `report.json`, a manifest status of neither
    done nor failed, and either its recorded writer is alive or no writer is
    recorded (then nothing but the report can tell it ended). An
    `interrupted` session (writer dead) is not running.
    """
    from sessionstore.summary import session_status

    return session_status(session) == "running"


def _pinned(session: Session) -> list[str]:
    """The manifest's previous ids, each once in first-seen order (older manifests repeat some)."""
    value = (session.manifest or {}).get("previous")
    return (
        list(dict.fromkeys(v for v in value if isinstance(v, str)))
        if isinstance(value, list)
        else []
    )


def chain_gaps(store: Store, ids: Iterable[str]) -> list[str]:
    """One message per previous-of-a-previous session that `ids` leaves out."""
    included = list(ids)
    messages: list[str] = []
    for session_id in included:
        for parent in _pinned(store.open(session_id)):
            if parent not in included:
                messages.append(
                    f"previous session {session_id!r} builds on {parent!r}, which is not "
                    f"included; add --previous {parent} to give its records too"
                )
    return messages


def check_previous(store: Store, ids: Iterable[str]) -> list[str]:
    """Validate sessions named as previous; warn (`LineageWarning`) about gaps and empties.

    Raises `SessionNotFound` for a missing session and `PreviousRunning` for
    one that is still running (see `is_running`). Returns the warning texts:
    one per chain gap, one per session with no records (which is not copied).
    """
    ids = list(ids)
    for session_id in ids:
        if is_running(store.open(session_id)):
            raise PreviousRunning(session_id)
    messages = chain_gaps(store, ids)
    messages += [_no_records(i) for i in ids if not has_records(store.root / i)]
    for message in messages:
        warnings.warn(LineageWarning(message), stacklevel=3)
    return messages


def _no_records(session_id: str) -> str:
    return f"previous session {session_id} has no records; nothing copied from it"


def has_records(source: Path) -> bool:
    """Whether `source` holds a trial or attempt file lineage would copy."""
    prefixes = (f"{TRIALS}/", f"{SERVICE}/")
    return any(rel.startswith(prefixes) for rel in select_files(source))


def select_files(source: Path) -> list[str]:
    """The relative paths that lineage copies from a session directory, sorted."""
    found: list[str] = []
    for name in (CONSTRAINTS, REPORT):
        if (source / name).is_file() and not (source / name).is_symlink():
            found.append(name)
    for collection in MARKERS:
        for record in _entries(source / collection):
            if record_number(record.name) is None or not record.is_dir(follow_symlinks=False):
                continue
            prefix = f"{collection}/{record.name}"
            for entry in _entries(Path(record.path)):
                if entry.is_file(follow_symlinks=False) and entry.name.endswith(CONFIG_SUFFIXES):
                    found.append(f"{prefix}/{entry.name}")
                elif (
                    collection == TRIALS
                    and entry.name == PATCHES_DIR
                    and entry.is_dir(follow_symlinks=False)
                ):
                    found.extend(f"{prefix}/{rel}" for rel in _tree(Path(entry.path), PATCHES_DIR))
    return sorted(found)


def _entries(directory: Path) -> list[os.DirEntry[str]]:
    try:
        with os.scandir(directory) as it:
            return [e for e in it if not is_temp_name(e.name)]
    except (FileNotFoundError, NotADirectoryError):
        return []


def _tree(directory: Path, prefix: str) -> list[str]:
    """Regular files under `directory` as `prefix/...` paths (no symlinks, no temps)."""
    found: list[str] = []
    for entry in _entries(directory):
        rel = f"{prefix}/{entry.name}"
        if entry.is_dir(follow_symlinks=False):
            found.extend(_tree(Path(entry.path), rel))
        elif entry.is_file(follow_symlinks=False):
            found.append(rel)
    return found


def _copy_file(source: Path, target: Path) -> None:
    """Copy one file's bytes durably (fsync); never through a symlink at the source."""
    src = os.open(source, os.O_RDONLY | os.O_NOFOLLOW)
    try:
        with AtomicFile(target, FILE_MODE, sync_dir=False) as out:
            while chunk := os.read(src, 1 << 20):
                out.write(chunk)
    finally:
        os.close(src)


def copy_session_records(source: Path, target: Path) -> int:
    """Copy the lineage files of `source` to `target` as one atomic step; returns the count.

    The copy is built in a temp directory beside `target` and renamed into
    place; an existing `target` is replaced. On failure the temp is removed
    and `target` is left as it was.
    """
    parent = target.parent
    staging = parent / temp_name()
    os.mkdir(staging, DIR_MODE)
    try:
        os.chmod(staging, DIR_MODE)
        files = select_files(source)
        made: set[Path] = {staging}
        for rel in files:
            dest = staging / rel
            for directory in reversed(dest.parents):
                if directory not in made and staging in directory.parents:
                    os.mkdir(directory, DIR_MODE)
                    made.add(directory)
            _copy_file(source / rel, dest)
        # Every file and directory entry must be durable before the rename publishes them.
        for directory in sorted(made, key=lambda p: len(p.parts), reverse=True):
            fsync_dir(directory)
        _replace_dir(staging, target)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    fsync_dir(parent)
    return len(files)


def _replace_dir(staging: Path, target: Path) -> None:
    """Rename `staging` onto `target`, moving an existing `target` aside first."""
    if not os.path.lexists(target):
        os.rename(staging, target)
        return
    # rename(2) cannot replace a non-empty directory: move it aside, then drop it.
    # A crash in between leaves `target` absent (never partial); the next call recopies.
    old = target.parent / temp_name()
    os.rename(target, old)
    os.rename(staging, target)
    shutil.rmtree(old)


def copy_previous(store: Store, session_dir: Path, ids: Iterable[str]) -> list[Path]:
    """Copy each previous session with records into `session_dir/previous/<id>/`.

    Used by `Store.create` on its staging directory, after `check_previous`
    warned about the sessions without records, which are skipped (no
    `previous/` at all when none has records). Returns the copies; raises
    `SessionNotFound`.
    """
    previous_dir = session_dir / PREVIOUS_DIR
    copies: list[Path] = []
    for session_id in ids:
        source = store.root / session_id
        if not source.is_dir() or source.is_symlink():
            raise SessionNotFound(session_id, store.root)
        if not has_records(source):
            continue
        os.makedirs(previous_dir, DIR_MODE, exist_ok=True)
        copy_session_records(source, previous_dir / session_id)
        copies.append(previous_dir / session_id)
    return copies


def include_previous(store: Store, session: Session) -> list[Path]:
    """Re-copy every previous session pinned in `session`'s manifest; idempotent.

    This is the call that heals a lineage copy a crash interrupted: it removes
    the debris of dead copiers, then replaces each `previous/<id>/` with a
    fresh whole copy. A pinned session that has since been deleted, or that
    has no records, keeps its existing copy if there is one (the second also
    warns, `LineageWarning`; the first raises `SessionNotFound` when there is
    none). Raises `PreviousRunning` if a pinned session is running again.
    """
    previous_dir = session.path / PREVIOUS_DIR
    if previous_dir.is_dir():
        sweep_temps(previous_dir)
    copies: list[Path] = []
    for session_id in _pinned(session):
        source = store.root / session_id
        target = previous_dir / session_id
        if not source.is_dir():
            if target.is_dir():
                copies.append(target)
                continue
            raise SessionNotFound(session_id, store.root)
        if is_running(Session.open(source)):
            raise PreviousRunning(session_id)
        if not has_records(source):
            warnings.warn(LineageWarning(_no_records(session_id)), stacklevel=2)
            if target.is_dir():
                copies.append(target)
            continue
        os.makedirs(previous_dir, DIR_MODE, exist_ok=True)
        copy_session_records(source, target)
        copies.append(target)
    return copies


def lineage_info(session: Session) -> list[dict[str, Any]]:
    """For `inspect`: each pinned id, whether its copy exists, and what the copy holds."""
    info: list[dict[str, Any]] = []
    for session_id in _pinned(session):
        copy = session.path / PREVIOUS_DIR / session_id
        copied = copy.is_dir() and not copy.is_symlink()
        counts: dict[str, int] = {}
        if copied:
            for collection in MARKERS:
                counts[collection] = sum(
                    1 for e in _entries(copy / collection) if record_number(e.name) is not None
                )
        info.append(
            {
                "id": session_id,
                "path": str(copy),
                "copied": copied,
                "trials": counts.get(TRIALS),
                "service": counts.get("service"),
            }
        )
    return info

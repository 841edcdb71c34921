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
whether its writer still runs, so its records may still be changing.

Crash safety: each previous session is copied into a temp directory beside
its final name and renamed into place, so `previous/<id>` is either a whole
copy or absent, never partial. `Store.create` does this inside the staging
directory it publishes atomically. `include_previous(store, session)` redoes
the copy for every pinned id of an existing session: it is idempotent, sweeps
the debris a killed copy left behind, and is "the next call" that heals a
session whose copy was interrupted or damaged. All writes go through the
directory fd of `previous/`, opened without following a symlink: a planted
`previous/<id>` symlink is replaced as a link, never written through.
"""

from __future__ import annotations

import os
import shutil
import stat
import warnings
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sessionstore._display import escape
from sessionstore._fs import read as fsread
from sessionstore._fs.atomic import is_temp_name, sweep_temps_at, temp_name
from sessionstore.errors import (
    CorruptFile,
    InvalidId,
    LineageWarning,
    PreviousRunning,
    PreviousUnknown,
    SessionNotFound,
)
from sessionstore.format.names import (
    CONSTRAINTS,
    MARKERS,
    PREVIOUS_DIR,
    REPORT,
    SERVICE,
    TRIALS,
    record_number,
    validate_id,
)
from sessionstore.store.session import DIR_MODE, FILE_MODE, Session, Store
from sessionstore.store.status import manifest_problem, session_status

CONFIG_SUFFIXES = (".json", ".yml", ".yaml", ".toml")
PATCHES_DIR = "patches"
# Levels below a record's `patches/` the walk enters (as the mirror's walk, one fd a level);
# a deeper directory is skipped and warned about, never a RecursionError or EMFILE.
MAX_PATCH_DEPTH = 256
_CHUNK = 1 << 20
_CREATE_FLAGS = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC


def is_running(session: Session) -> bool:
    """Whether a session may still be writing records.

    Running means: no completed `report.json`, a manifest status of neither
    done nor failed, and either its recorded writer is alive or no writer is
    recorded (then nothing but the report can tell it ended). An
    `interrupted` session (writer dead) is not running. An `unknown` session
    is not counted as running here, but cannot serve as previous either
    (`check_usable` decides that).
    """
    return session_status(session) == "running"


def check_usable(session: Session, session_id: str) -> None:
    """Refuse a session that cannot serve as previous: `running` or `unknown`.

    Raises `PreviousRunning` for a running session and `PreviousUnknown` (a
    `PreviousRunning`) for one whose status is unknown; `done`, `failed` and
    `interrupted` sessions pass.
    """
    status = session_status(session)
    if status == "running":
        raise PreviousRunning(session_id)
    if status == "unknown":
        reason = session.manifest_error or manifest_problem(session.manifest or {})
        raise PreviousUnknown(session_id, reason or "its manifest does not read right")


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
                    f"previous session {session_id!r} builds on {escape(repr(parent))}, which "
                    f"is not included; add --previous {escape(parent)} to give its records too"
                )
    return messages


def check_previous(store: Store, ids: Iterable[str]) -> list[str]:
    """Validate sessions named as previous; warn (`LineageWarning`) about chain gaps.

    Raises `SessionNotFound` for a missing session, `PreviousRunning` for one
    that is running and `PreviousUnknown` for one whose status is unknown
    (see `check_usable`). Returns the warning texts, one per chain gap. The
    warnings about what the copy skips, and about sessions with no records,
    come from the copy itself (`copy_previous`), which is what reads them.
    """
    ids = list(ids)
    for session_id in ids:
        check_usable(store.open(session_id), session_id)
    messages = chain_gaps(store, ids)
    for message in messages:
        warnings.warn(LineageWarning(message), stacklevel=3)
    return messages


def _no_records(session_id: str) -> str:
    return f"previous session {session_id} has no records; nothing copied from it"


@dataclass
class Selection:
    """What the walk of a previous session found: the files lineage copies, sorted, and
    each entry it skipped with what that entry is (`fsread.problem`)."""

    files: list[str] = field(default_factory=list)
    skipped: list[tuple[str, str]] = field(default_factory=list)

    @property
    def has_records(self) -> bool:
        prefixes = (f"{TRIALS}/", f"{SERVICE}/")
        return any(rel.startswith(prefixes) for rel in self.files)

    def messages(self, session_id: str) -> list[str]:
        """One line per skipped entry (names escaped: they are the agent's)."""
        return [
            f"previous session {session_id}: {escape(rel)} {escape(why)}; not copied"
            for rel, why in self.skipped
        ]


# Called with each regular file lineage copies: its path in the session, its open
# read fd and the fstat of that fd. The walk closes the fd afterwards.
Visit = Callable[[str, int, os.stat_result], None]


def _ignore(rel: str, fd: int, st: os.stat_result) -> None:
    return None


def walk_session(session_fd: int, visit: Visit = _ignore) -> Selection:
    """Walk the session open at `session_fd` by directory fd; `visit` each file lineage copies.

    Never follows a symlink, never opens a FIFO for a blocking read, never
    recurses (the `patches/` walk keeps an explicit stack, `MAX_PATCH_DEPTH`
    deep at most). A file or directory that vanishes mid-walk is left out.
    """
    found = Selection()
    for name in (CONSTRAINTS, REPORT):
        _file(session_fd, name, name, visit, found)
    for collection in MARKERS:
        with _subdir(session_fd, collection, collection, found) as collection_fd:
            if collection_fd is None:
                continue
            # Foreign entries are not records and never copied; records in numeric order.
            numbered = {n: i for n in _names(collection_fd) if (i := record_number(n)) is not None}
            for name in sorted(numbered, key=numbered.__getitem__):
                prefix = f"{collection}/{name}"
                with _subdir(collection_fd, name, prefix, found) as record_fd:
                    if record_fd is not None:
                        _record(record_fd, prefix, collection == TRIALS, visit, found)
    found.files.sort()
    return found


def _names(dir_fd: int) -> list[str]:
    # listdir(fd) reads through a dup of the fd, so the caller's fd stays usable.
    return [n for n in os.listdir(dir_fd) if not is_temp_name(n)]


@contextmanager
def _subdir(parent_fd: int, name: str, rel: str, found: Selection) -> Iterator[int | None]:
    """The directory `name` below `parent_fd` (`O_NOFOLLOW`), or None: absent, or skipped."""
    try:
        fd = fsread.open_dir(name, parent_fd)
    except FileNotFoundError:
        yield None
        return
    except OSError as exc:
        found.skipped.append((rel, fsread.problem(exc)))
        yield None
        return
    try:
        yield fd
    finally:
        os.close(fd)


def _file(dir_fd: int, name: str, rel: str, visit: Visit, found: Selection) -> None:
    try:
        fd, st = fsread.open_file(name, dir_fd)
    except FileNotFoundError:
        return
    except OSError as exc:
        found.skipped.append((rel, fsread.problem(exc)))
        return
    try:
        visit(rel, fd, st)
    finally:
        os.close(fd)
    found.files.append(rel)


def _record(record_fd: int, prefix: str, trial: bool, visit: Visit, found: Selection) -> None:
    for name in sorted(_names(record_fd)):
        if name.endswith(CONFIG_SUFFIXES):
            _file(record_fd, name, f"{prefix}/{name}", visit, found)
        elif trial and name == PATCHES_DIR:
            with _subdir(record_fd, name, f"{prefix}/{name}", found) as patches_fd:
                if patches_fd is not None:
                    _tree(patches_fd, f"{prefix}/{name}", visit, found)


def _tree(top_fd: int, top_rel: str, visit: Visit, found: Selection) -> None:
    """Every regular file below `top_fd`, iteratively; one open fd per level entered."""
    # Each frame: a directory's fd (None for the caller's `top_fd`), its path, and its
    # entries still to visit; the frame's fd is closed when the frame is popped.
    stack: list[tuple[int | None, str, list[os.DirEntry[str]]]] = []

    def push(fd: int | None, rel: str) -> None:
        with os.scandir(top_fd if fd is None else fd) as it:
            entries = sorted((e for e in it if not is_temp_name(e.name)), key=lambda e: e.name)
        stack.append((fd, rel, entries[::-1]))

    try:
        push(None, top_rel)
        while stack:
            fd, rel, entries = stack[-1]
            if not entries:
                stack.pop()
                if fd is not None:
                    os.close(fd)
                continue
            entry = entries.pop()
            here = top_fd if fd is None else fd
            child = f"{rel}/{entry.name}"
            if not entry.is_dir(follow_symlinks=False):
                _file(here, entry.name, child, visit, found)
                continue
            if len(stack) >= MAX_PATCH_DEPTH:
                found.skipped.append((child, f"is deeper than {MAX_PATCH_DEPTH} levels"))
                continue
            try:
                sub = fsread.open_dir(entry.name, here)
            except FileNotFoundError:
                continue
            except OSError as exc:  # swapped for a symlink or a file since the listing
                found.skipped.append((child, fsread.problem(exc)))
                continue
            try:
                push(sub, child)
            except BaseException:
                os.close(sub)
                raise
    finally:
        for fd, _, _ in stack:
            if fd is not None:
                os.close(fd)


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


def select_files(source: Path) -> list[str]:
    """The relative paths that lineage copies from the session at `source`, sorted."""
    with _session_fd(source) as fd:
        return walk_session(fd).files


def has_records(source: Path) -> bool:
    """Whether the session at `source` holds a trial or attempt file lineage would copy."""
    with _session_fd(source) as fd:
        return walk_session(fd).has_records


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
            view = memoryview(chunk)
            while view:
                view = view[os.write(out, view) :]
        os.fsync(out)
    finally:
        os.close(out)


class _Staging:
    """A new directory tree written by directory fd, in the walk's depth-first order.

    Only the chain of directories the last file went into is held open (one
    fd a level, never one per record): a directory the walk has left is
    fsynced (its entries are all made) and closed, as `finish` does for the
    rest, so every entry is durable before the tree is published.
    """

    def __init__(self, root_fd: int) -> None:
        self.root_fd = root_fd
        self.chain: dict[str, int] = {}

    def dir_fd(self, rel_dir: str) -> int:
        """The fd of `rel_dir` below the root, made on first use."""
        if not rel_dir:
            self._leave("")
            return self.root_fd
        if rel_dir in self.chain:
            self._leave(rel_dir)
            return self.chain[rel_dir]
        parent, _, name = rel_dir.rpartition("/")
        parent_fd = self.dir_fd(parent)
        with suppress(FileExistsError):  # made earlier in this copy (the walk came back)
            os.mkdir(name, DIR_MODE, dir_fd=parent_fd)
        fd = fsread.open_dir(name, parent_fd)
        self.chain[rel_dir] = fd
        try:
            os.fchmod(fd, DIR_MODE)  # mkdir honours the umask; the mode is part of the format
        except BaseException:
            self.close()
            raise
        return fd

    def _leave(self, keep: str) -> None:
        """fsync and close every open directory that is not `keep` or one of its ancestors."""
        for rel in sorted(self.chain, key=len, reverse=True):
            if keep != rel and not keep.startswith(rel + "/"):
                fd = self.chain.pop(rel)
                try:
                    os.fsync(fd)
                finally:
                    os.close(fd)

    def finish(self) -> None:
        """fsync every directory still open, deepest first, and the root."""
        self._leave("")
        os.fsync(self.root_fd)

    def close(self) -> None:
        """Close what is open without syncing (on failure)."""
        for fd in self.chain.values():
            os.close(fd)
        self.chain = {}


def _copy_into(source_fd: int, previous_fd: int, session_id: str) -> Selection:
    """Copy the session at `source_fd` to `previous/<session_id>` (open at `previous_fd`).

    Built in a temp directory and renamed into place, replacing an existing
    copy; on failure the temp is removed and the old copy left as it was.
    """
    staging = temp_name()
    os.mkdir(staging, DIR_MODE, dir_fd=previous_fd)
    try:
        staging_fd = fsread.open_dir(staging, previous_fd)
        tree = _Staging(staging_fd)
        try:
            os.fchmod(staging_fd, DIR_MODE)

            def copy(rel: str, fd: int, st: os.stat_result) -> None:
                parent, _, name = rel.rpartition("/")
                _copy_file(fd, st.st_size, tree.dir_fd(parent), name)

            found = walk_session(source_fd, copy)
            # Every file and directory entry must be durable before the rename publishes.
            tree.finish()
        finally:
            tree.close()
            os.close(staging_fd)
        _replace_dir(previous_fd, staging, session_id)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True, dir_fd=previous_fd)
        raise
    os.fsync(previous_fd)
    return found


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
    # rename(2) cannot replace a non-empty directory: move it aside, then drop it.
    # A crash in between leaves `name` absent (never partial); the next call recopies.
    old = temp_name()
    os.rename(name, old, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
    os.rename(staging, name, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
    if stat.S_ISDIR(os.stat(old, dir_fd=dir_fd, follow_symlinks=False).st_mode):
        shutil.rmtree(old, dir_fd=dir_fd)
    else:
        os.unlink(old, dir_fd=dir_fd)


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
        with _store_session_fd(store, session_id) as source_fd:
            probe = walk_session(source_fd)
            if probe.has_records:
                with _previous_fd(previous_dir, create=True) as previous_fd:
                    probe = _copy_into(source_fd, previous_fd, session_id)
        _warn(probe, session_id, stacklevel=2)
        if probe.has_records:
            copies.append(previous_dir / session_id)
    return copies


def include_previous(store: Store, session: Session) -> list[Path]:
    """Re-copy every previous session pinned in `session`'s manifest; idempotent.

    This is the call that heals a lineage copy a crash interrupted: it removes
    the debris of dead copiers, then replaces each `previous/<id>/` with a
    fresh whole copy (a `previous/<id>` planted as a symlink or a file is
    replaced as an entry, never followed). A pinned session that has since
    been deleted, or that has no records, keeps its existing copy if there is
    one (the second also warns, `LineageWarning`; the first raises
    `SessionNotFound` when there is none). Raises `PreviousRunning` if a
    pinned session is running again (`PreviousUnknown` if its status is
    unknown), `CorruptFile` if `previous` is a symlink or not a directory.
    """
    previous_dir = session.path / PREVIOUS_DIR
    copies: list[Path] = []
    if os.path.lexists(previous_dir):
        with _previous_fd(previous_dir) as fd:
            sweep_temps_at(fd)
    for session_id in _pinned(session):
        target = previous_dir / session_id
        if not _valid_id(session_id):
            message = f"previous session id {escape(repr(session_id))} is not a valid id; skipped"
            warnings.warn(LineageWarning(message), stacklevel=2)
            continue
        try:
            source = store.open(session_id)
        except SessionNotFound:
            if _has_copy(session.path, session_id):
                copies.append(target)
                continue
            raise
        check_usable(source, session_id)
        with _store_session_fd(store, session_id) as source_fd:
            found = walk_session(source_fd)
            if found.has_records:
                with _previous_fd(previous_dir, create=True) as previous_fd:
                    found = _copy_into(source_fd, previous_fd, session_id)
        _warn(found, session_id, stacklevel=2)
        if found.has_records or _has_copy(session.path, session_id):
            copies.append(target)
    return copies


def _valid_id(value: str) -> bool:
    try:
        validate_id(value)
    except InvalidId:
        return False
    return True


def _has_copy(session_path: Path, session_id: str) -> bool:
    copied, _, fd = _copy_state(session_path, session_id)
    if fd is not None:
        os.close(fd)
    return copied


def _copy_state(session_path: Path, session_id: str) -> tuple[bool, str | None, int | None]:
    """(copied, problem, an open fd of the copy or None) for `previous/<id>` of a session.

    Nothing is followed: a session directory, `previous` or `previous/<id>`
    that is a symlink (or not a directory) is not a copy, and the problem
    says what it is. An id that is not a valid session id (`../x` in a
    planted manifest) is never opened at all.
    """
    if not _valid_id(session_id):
        return False, "not a valid session id", None
    try:
        session_fd = fsread.open_dir(session_path)
    except OSError as exc:
        return False, f"session directory {fsread.problem(exc)}", None
    try:
        try:
            previous_fd = fsread.open_dir(PREVIOUS_DIR, session_fd)
        except FileNotFoundError:
            return False, None, None
        except OSError as exc:
            return False, f"{PREVIOUS_DIR} {fsread.problem(exc)}", None
    finally:
        os.close(session_fd)
    try:
        copy_fd = fsread.open_dir(session_id, previous_fd)
    except FileNotFoundError:
        return False, None, None
    except OSError as exc:
        return False, f"{PREVIOUS_DIR}/{session_id} {fsread.problem(exc)}", None
    finally:
        os.close(previous_fd)
    return True, None, copy_fd


def _count_records(copy_fd: int, collection: str) -> tuple[int, str | None]:
    """Record directories in `collection` of the copy (symlinks not counted), and a problem."""
    try:
        fd = fsread.open_dir(collection, copy_fd)
    except FileNotFoundError:
        return 0, None
    except OSError as exc:
        return 0, f"{collection} {fsread.problem(exc)}"
    try:
        with os.scandir(fd) as it:
            n = sum(
                1
                for e in it
                if record_number(e.name) is not None and e.is_dir(follow_symlinks=False)
            )
        return n, None
    finally:
        os.close(fd)


def lineage_info(session: Session) -> list[dict[str, Any]]:
    """For `inspect`: each pinned id, whether its copy exists, what it holds, what is wrong.

    Read by directory fd without following anything: a `previous` or
    `previous/<id>` planted as a symlink shows `copied: false` with the
    `problem` naming it, and what it points to is never read.
    """
    info: list[dict[str, Any]] = []
    for session_id in _pinned(session):
        copied, problem, copy_fd = _copy_state(session.path, session_id)
        counts: dict[str, int] = {}
        if copy_fd is not None:
            try:
                problems = []
                for collection in MARKERS:
                    counts[collection], trouble = _count_records(copy_fd, collection)
                    if trouble:
                        problems.append(trouble)
                problem = "; ".join(problems) or None
            finally:
                os.close(copy_fd)
        info.append(
            {
                "id": session_id,
                "path": str(session.path / PREVIOUS_DIR / session_id),
                "copied": copied,
                "trials": counts.get(TRIALS),
                "service": counts.get(SERVICE),
                "problem": problem,
            }
        )
    return info

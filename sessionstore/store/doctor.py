"""Checking one session against the format, and sweeping what is provably garbage.

`doctor(session)` reports, one `Problem` each: a manifest that is missing,
does not parse or has fields of the wrong type (or an id that is not the
directory's name, or a status other than the completed report's: a finish
cut short); a missing or torn `constraints.json`, a torn
`report.json`; a collection that is missing, a symlink or not a
directory; each torn marker; each foreign entry of a collection; each
lineage copy `inspect` shows a problem for (a `previous` or
`previous/<id>` that is a symlink or not a directory, a pinned id that is
not a valid id), or that is missing while the pinned session, still in the
store, has records to copy; each
leftover temp entry (`.sstmp-*`, anywhere in the session); the modes of
what the format defines (the session, its collections and records
`0700`, the store's files `0644`, a marker the owner cannot read or
others may write); what cannot be read.

With `repair`, temp entries that are provably garbage are removed, and
nothing else ever is. A temp's name is `.sstmp-<pid>-<random>`: its
writer is dead when no process has that pid (or a zombie has it), or when
the process that has it now started after the temp was last changed (its
ctime, which no writer can set back), so the pid was recycled. A temp of
a live pid is a write in progress: not a problem, and kept. A temp whose
name gives no pid is garbage only once unchanged (ctime) for longer than
`SAFE_AGE` while no writer of the session is alive (the recorded harness,
by pid and start time, or a mirror daemon holding the session's lock);
else it is reported and kept. Everything is done by directory fd,
nothing followed: a temp that is a symlink is removed as a link.
"""

from __future__ import annotations

import contextlib
import os
import stat
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from sessionstore._fs import read as fsread
from sessionstore._fs.atomic import DIR_MODE, FILE_MODE, is_temp_name, temp_pid
from sessionstore._fs.tree import remove_tree_at
from sessionstore._fs.walk import Entry, walk
from sessionstore._proc import PID_MAX, process_alive, process_start_time
from sessionstore.format.names import (
    CONSTRAINTS,
    MANIFEST,
    MARKERS,
    PREVIOUS_DIR,
    REPORT,
    record_number,
)
from sessionstore.storage.s3_path import S3Path
from sessionstore.store.files import exists
from sessionstore.store.lifecycle import mirror_daemon, recorded_writer
from sessionstore.store.lineage_info import copy_expected, has_copy, lineage_info, pinned, valid_id
from sessionstore.store.records import RecordState
from sessionstore.store.status import manifest_problem, read_constraints, report_status

if TYPE_CHECKING:
    from sessionstore.store.collection import Collection
    from sessionstore.store.session import Session

__all__ = ["SAFE_AGE", "Checkup", "Problem", "doctor", "temp_verdict"]

# How long a temp that names no writer must be unchanged before it can be garbage;
# the format's own age for debris (docs/format.md, "Temp entries").
SAFE_AGE = 3600.0
# /proc start times are rounded to the boot time's whole second plus a clock tick.
_START_SLACK_S = 2.0
# The mirror daemon's lock at a session's top (`sessionstore.mirror.lock`, a layer
# this one may not import): an flock held on it is a daemon writing into the session.
_STORE_FILES = (MANIFEST, CONSTRAINTS, REPORT)


@dataclass(frozen=True)
class Problem:
    """One thing wrong with the session at `path`. `kind`: manifest, constraints, report,
    collection, torn, foreign, lineage, temp, mode or unreadable; `repaired`: removed by
    `--repair`."""

    path: Path
    kind: str
    detail: str
    repaired: bool = False

    def __str__(self) -> str:
        done = " (removed)" if self.repaired else ""
        return f"{self.path}: {self.kind}: {self.detail}{done}"

    def to_dict(self) -> dict[str, Any]:
        return {
            "path": str(self.path),
            "kind": self.kind,
            "detail": self.detail,
            "repaired": self.repaired,
        }


@dataclass(frozen=True)
class Checkup:
    """What `doctor` found in the session at `path`; `in_progress`: temps of live writers."""

    path: Path
    problems: tuple[Problem, ...]
    in_progress: tuple[Path, ...] = ()

    @property
    def healthy(self) -> bool:
        """No problem is left (every one found was repaired, or there was none)."""
        return all(p.repaired for p in self.problems)


def doctor(session: Session, *, repair: bool = False, now: float | None = None) -> Checkup:
    """Check `session` (rules in the module docstring); with `repair`, remove garbage temps.

    Never raises because of what the session holds; an `OSError` only if the
    session directory itself cannot be opened.
    """
    problems = _files(session) + _collections(session) + _lineage(session)
    in_progress: list[Path] = []
    if not isinstance(session.path, S3Path):  # no modes or temps in an object store
        held = _copy_missing(session)
        walked, in_progress = _walk(session, repair, time.time() if now is None else now, held)
        # A collection that cannot be listed is reported once, by `_collections` (which
        # says what it costs): the walk meets the same error on the same directory.
        told = {p.path for p in problems if p.kind == "unreadable"}
        problems += [p for p in walked if p.kind != "unreadable" or p.path not in told]
    problems.sort(key=lambda p: str(p.path))  # stable: one path's problems keep their order
    return Checkup(session.path, tuple(problems), tuple(in_progress))


def _files(session: Session) -> list[Problem]:
    """The manifest, constraints and report: present where they must be, and parsing."""
    found: list[Problem] = []
    top = session.path
    if session.manifest_error is not None:
        found.append(Problem(top / MANIFEST, "manifest", _strip(session.manifest_error, MANIFEST)))
    elif session.manifest is None:
        detail = "missing: this directory was not made by sessionstore, or lost its manifest"
        found.append(Problem(top / MANIFEST, "manifest", detail))
    else:
        problem = manifest_problem(session.manifest)
        if problem is not None:
            found.append(Problem(top / MANIFEST, "manifest", _strip(problem, MANIFEST)))
        if session.id is not None and session.id != top.name:
            detail = f"id '{session.id}' is not the directory's name '{top.name}'"
            found.append(Problem(top / MANIFEST, "manifest", detail))
    _, error = read_constraints(session)
    if error is not None:
        found.append(Problem(top / CONSTRAINTS, "constraints", _strip(error, CONSTRAINTS)))
    elif session.manifest is not None and not exists(
        session.storage, f"{session.key}/{CONSTRAINTS}"
    ):
        detail = "missing: every session made by sessionstore has it ({} when none)"
        found.append(Problem(top / CONSTRAINTS, "constraints", detail))
    report = session.report()
    if report.state is RecordState.TORN:
        found.append(Problem(top / REPORT, "report", _strip(report.error or "torn", REPORT)))
    elif report.data is not None and session.manifest is not None:
        # The manifest's status follows the report: one that does not is a finish cut
        # short between the two (a kill), misleading a reader of session.json alone. A
        # status of the wrong type is told above (`manifest_problem`).
        ended, said = report_status(report.data), session.manifest.get("status", "running")
        if said != ended and said in ("running", "done", "failed"):
            detail = (
                f"status {said}, but {REPORT} ended the session as {ended} (a finish cut "
                "short); finishing it again brings it to the report's (the report is not "
                "replaced)"
            )
            found.append(Problem(top / MANIFEST, "manifest", detail))
    return found


def _strip(reason: str, name: str) -> str:
    return reason.removeprefix(f"{name}: ")


def _collections(session: Session) -> list[Problem]:
    """Each collection: a directory; each torn marker; each foreign entry."""
    found: list[Problem] = []
    for collection in (session.trials, session.service):
        where = collection.path
        if isinstance(where, S3Path):  # a prefix: nothing there is no problem, nor a file
            found.extend(_collection_records(collection))
            continue
        try:
            st: os.stat_result | None = os.stat(where, follow_symlinks=False)
        except FileNotFoundError:
            st = None
        except OSError as exc:
            found.append(Problem(where, "unreadable", _strip(fsread.problem(exc), "unreadable")))
            continue
        if st is None:
            if session.manifest is not None:
                detail = "missing: every session made by sessionstore has it"
                found.append(Problem(where, "collection", detail))
            continue
        if not stat.S_ISDIR(st.st_mode):
            what = "a symlink" if stat.S_ISLNK(st.st_mode) else "not a directory"
            detail = f"is {what}, so it holds no records (nothing is read through it)"
            found.append(Problem(where, "collection", detail))
            continue
        found.extend(_collection_records(collection))
    return found


def _collection_records(collection: Collection) -> list[Problem]:
    """Each torn marker and each foreign entry of a collection."""
    found: list[Problem] = []
    where = collection.path
    records, foreign = collection.scan()
    if collection.problem is not None:  # a directory not listed (no read permission)
        detail = _strip(collection.problem, "unreadable")
        found.append(Problem(where, "unreadable", f"{detail}; none of its records was read"))
    for record in records:
        if record.state is RecordState.TORN:
            marker = record.path / collection.marker
            detail = _strip(record.error or "torn", collection.marker)
            found.append(Problem(marker, "torn", f"marker {detail}"))
    for name in foreign:
        detail = f"not a record of {where.name}/ (ignored by every reader)"
        found.append(Problem(where / name, "foreign", detail))
    return found


def _lineage(session: Session) -> list[Problem]:
    """Each problem `inspect` shows for a pinned session's copy (read as it reads them), and
    a missing copy whose session, still in the store, has records (`copy_expected`)."""
    found: list[Problem] = []
    top = session.path
    local = not isinstance(top, S3Path)
    for item in lineage_info(session):
        problem = item["problem"]
        if problem is None and not item["copied"] and local and copy_expected(top, item["id"]):
            detail = (
                f"missing, while previous session {item['id']} has records to copy (a copy "
                "cut short, or removed); `lineage.include_previous` copies it again"
            )
            found.append(Problem(Path(item["path"]), "lineage", detail))
        if problem is None or (local and "unreadable: " in problem):
            continue  # what cannot be read, the walk reports where it is (`_walk`)
        if not valid_id(item["id"]):  # never a path: `../x` names no copy
            detail = f"previous names '{item['id']}', {problem}"
            found.append(Problem(top / MANIFEST, "lineage", detail))
        elif problem.startswith(f"{PREVIOUS_DIR} "):  # `previous` itself: once, not per id
            where = top / PREVIOUS_DIR
            if not any(p.path == where for p in found):
                found.append(Problem(where, "lineage", problem.removeprefix(f"{PREVIOUS_DIR} ")))
        else:
            detail = problem.removeprefix(f"{PREVIOUS_DIR}/{item['id']} ")
            found.append(Problem(Path(item["path"]), "lineage", detail))
    return found


def _copy_missing(session: Session) -> bool:
    """Whether a pinned id has no copy in previous/: a temp there may be it, moved aside by
    a replace cut short, and the only copy left if its session was removed since: kept."""
    return any(valid_id(i) and not has_copy(session.path, i) for i in pinned(session))


def _walk(
    session: Session, repair: bool, now: float, held: bool
) -> tuple[list[Problem], list[Path]]:
    """Modes and temps, over the session tree by fd (temps never entered); `held`: temps
    right in previous/ are kept (`_copy_missing`)."""
    found: list[Problem] = []
    in_progress: list[Path] = []
    writers = _WritersAlive(session)
    top = fsread.open_dir(session.path)
    try:
        mode = stat.S_IMODE(os.fstat(top).st_mode)
        if mode != DIR_MODE:
            found.append(Problem(session.path, "mode", f"{mode:04o}, expected {DIR_MODE:04o}"))
        for entry in walk(top, descend=lambda e: not is_temp_name(e.name)):
            # An entry's path is built only for what is reported: building it for every
            # entry costs its depth each time, minutes for a 10,000-level record.
            if entry.kind == "error":
                path = session.path.joinpath(*entry.parts())
                found.append(Problem(path, "unreadable", _strip(entry.error or "", "unreadable")))
            elif is_temp_name(entry.name):
                path = session.path.joinpath(*entry.parts())
                kept = held and entry.parts()[:-1] == (PREVIOUS_DIR,)
                problem = _temp(entry, path, repair, writers, now, kept)
                if problem is None:
                    in_progress.append(path)
                else:
                    found.append(problem)
            else:
                found.extend(_mode(entry, session.path))
    finally:
        os.close(top)
    return found, in_progress


def _temp(
    entry: Entry, path: Path, repair: bool, writers: Callable[[], bool], now: float, kept: bool
) -> Problem | None:
    """A leftover temp as a problem (removed if `repair` and garbage, not `kept`), or None."""
    assert entry.st is not None
    garbage, why = temp_verdict(entry.name, entry.st, writers, now)
    if garbage and kept:
        garbage, why = False, f"{why}, but it may hold the copy a pinned id lacks"
    if garbage is None:
        return None
    if not garbage:
        return Problem(path, "temp", f"{why}; kept (not provably garbage)")
    detail = f"leftover of a dead writer: {why}"
    if not repair:
        return Problem(path, "temp", detail)
    try:
        with contextlib.suppress(FileNotFoundError):
            remove_tree_at(entry.dir_fd, entry.name)
    except OSError as exc:
        return Problem(path, "temp", f"{detail}; not removed: {fsread.problem(exc)}")
    return Problem(path, "temp", detail, repaired=True)


def temp_verdict(
    name: str, st: os.stat_result, writers_alive: Callable[[], bool], now: float
) -> tuple[bool | None, str]:
    """Whether the temp entry `name` (lstat `st`) is garbage: True (provably), False (kept,
    maybe garbage), None (its writer is alive: a write in progress); and why."""
    pid = temp_pid(name)
    if pid is not None and 0 < pid <= PID_MAX:
        if pid == os.getpid():
            return None, "written by this process"
        if not process_alive(pid, None):
            return True, f"no process has its pid {pid}"
        started = process_start_time(pid)
        if started is not None and started > st.st_ctime + _START_SLACK_S:
            return True, f"pid {pid} is a process started after the temp was last changed"
        return None, f"its writer (pid {pid}) is alive"
    age = now - st.st_ctime
    if age <= SAFE_AGE:
        return False, f"its name gives no writer and it changed {age:.0f} s ago"
    if writers_alive():
        return False, "its name gives no writer and a writer of the session is alive"
    hours = SAFE_AGE / 3600
    return True, f"its name gives no writer, unchanged for over {hours:g} h, no writer alive"


class _WritersAlive:
    """Whether a writer of the session is alive, asked once, when a temp first needs it."""

    def __init__(self, session: Session) -> None:
        self.session = session
        self.answer: bool | None = None

    def __call__(self) -> bool:
        if self.answer is None:
            session = self.session
            writer = recorded_writer(session)  # a pid of the wrong type: cannot tell
            self.answer = (
                (session.manifest is None and session.manifest_error is not None)  # unreadable
                or (writer is not None and writer.alive is not False)
                or mirror_daemon(session) is not None
            )
        return self.answer


def _top_parts(entry: Entry) -> tuple[str, ...] | None:
    """The entry's path below the session if it is at most 3 levels down (a marker, the
    deepest entry the format gives a mode), else None, found in at most 3 steps up."""
    node = entry.parent
    for _ in range(3):
        if node.parent is None:
            return entry.parts()
        node = node.parent
    return None


def _mode(entry: Entry, top: Path) -> list[Problem]:
    """The mode the format gives this entry (below the session `top`), if it gives one,
    against the entry's."""
    assert entry.st is not None
    parts = _top_parts(entry)
    if parts is None:
        return []
    mode = stat.S_IMODE(entry.st.st_mode)
    in_collection = parts[0] in MARKERS and len(parts) >= 2 and record_number(parts[1]) is not None
    marker = MARKERS.get(parts[0])
    if entry.kind == "directory" and (
        (len(parts) == 1 and parts[0] in MARKERS) or (len(parts) == 2 and in_collection)
    ):
        expected: int | None = DIR_MODE
    elif entry.kind == "file" and len(parts) == 1 and parts[0] in _STORE_FILES:
        expected = FILE_MODE
    elif entry.kind == "file" and len(parts) == 3 and in_collection and parts[2] == marker:
        if mode & stat.S_IRUSR and not mode & (stat.S_IWGRP | stat.S_IWOTH):
            return []
        detail = f"{mode:04o}: a marker must be readable by its owner and writable by no one else"
        return [Problem(top.joinpath(*parts), "mode", detail)]
    else:
        return []
    if mode == expected:
        return []
    return [Problem(top.joinpath(*parts), "mode", f"{mode:04o}, expected {expected:04o}")]

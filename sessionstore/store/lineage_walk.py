"""Lineage's walk: what of a previous session is copied, read by the readers' recipe.

The walk goes by directory fd, every directory opened `O_NOFOLLOW|O_DIRECTORY`
relative to its parent, every file `O_NOFOLLOW|O_NONBLOCK` and `fstat`ed
before its first byte is read (`fsread`), and it never recurses (the
`patches/` walk keeps an explicit stack). What it copies and skips is
listed in `sessionstore.store.lineage`.

A tree walk of arbitrary files, local by nature: an object store would list
the same keys (`Storage.list`) and stream each object.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

from sessionstore._display import escape
from sessionstore._fs import read as fsread
from sessionstore._fs.atomic import is_temp_name
from sessionstore.format.names import CONSTRAINTS, MARKERS, REPORT, SERVICE, TRIALS, record_number

__all__ = [
    "CONFIG_SUFFIXES",
    "MAX_PATCH_DEPTH",
    "PATCHES_DIR",
    "Selection",
    "Visit",
    "walk_session",
]

CONFIG_SUFFIXES = (".json", ".yml", ".yaml", ".toml")
PATCHES_DIR = "patches"
# Levels below a record's `patches/` the walk enters (as the mirror's walk, one fd a level);
# a deeper directory is skipped and warned about, never a RecursionError or EMFILE.
MAX_PATCH_DEPTH = 256


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

"""Names in a mirror pass: what it reserves in a destination, the store's files it never
touches, and how source names become destination names (`redact_name`)."""

from __future__ import annotations

import os
import stat
from collections.abc import Callable

from sessionstore._fs.atomic import TEMP_PREFIX
from sessionstore.errors import RedactionUnsafe
from sessionstore.format.names import CONSTRAINTS, INDEX, MANIFEST, REPORT

TYPE_CHECKING = False  # typing's, without importing typing (mypy reads it as such)
if TYPE_CHECKING:
    from sessionstore.redact.redactor import Redactor

# Destination entries we own (the cache, the daemon's lock): never mirrored over, never deleted.
RESERVED_PREFIX = ".sessionstore-"
# Set while a pass may have temps in flight; its presence makes the next pass sweep.
DIRTY_NAME = RESERVED_PREFIX + "mirror-dirty"
# Files at the top of a session that only the store writes (its readers, for the index).
STORE_OWNED = frozenset([MANIFEST, CONSTRAINTS, REPORT, INDEX])

Pair = tuple[os.DirEntry[str], str]  # (source entry, destination name)


def redacted_names(
    entries: list[os.DirEntry[str]], rel: str, name: Callable[[str], str]
) -> tuple[list[Pair], list[tuple[str, str]], dict[str, list[os.DirEntry[str]]]]:
    """With a redactor: the (entry, destination name) pairs, the problems (destination
    path, message) of names that collide or are invalid, and every destination name the
    source accounts for (for --delete). Our temps are ignored."""
    groups: dict[str, list[os.DirEntry[str]]] = {}
    for e in entries:
        if not e.name.startswith(TEMP_PREFIX):
            groups.setdefault(name(e.name), []).append(e)
    problems: list[tuple[str, str]] = []
    pairs: list[Pair] = []
    for dname, group in groups.items():
        drel = f"{rel}/{dname}" if rel else dname
        if len(group) > 1:
            problems.append((drel, f"name collision: {len(group)} source names map to this name"))
        elif not dname or "/" in dname or dname in (".", ".."):
            problems.append((drel, "the redacted name is not a valid file name"))
        else:
            pairs.append((group[0], dname))
    return pairs, problems, groups


def special_kind(e: os.DirEntry[str]) -> str:
    """Why a non-regular, non-directory, non-symlink entry is skipped (never opened)."""
    try:
        mode = e.stat(follow_symlinks=False).st_mode
    except OSError:
        return "special file"
    if stat.S_ISFIFO(mode):
        return "special file (fifo)"
    if stat.S_ISSOCK(mode):
        return "special file (socket)"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "special file (device)"
    return "special file"


def safe_name(redactor: Redactor) -> Callable[[str], str]:
    """`redact_name` that answers "" (reported as an invalid name) where it refuses a name."""

    def name(value: str) -> str:
        try:
            redacted: str = redactor.redact_name(value)
        except RedactionUnsafe:
            return ""
        return redacted

    return name


def identity(name: str) -> str:
    return name

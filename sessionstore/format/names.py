"""Names of the on-disk format v1 (docs/format.md), shared by the store and the mirror."""

from __future__ import annotations

import re

from sessionstore._fs.atomic import DIR_MODE, FILE_MODE, TEMP_PREFIX
from sessionstore.errors import InvalidId

__all__ = [
    "CONSTRAINTS",
    "DIR_MODE",
    "FILE_MODE",
    "FORMAT_VERSION",
    "GENERATED_ID_RE",
    "ID_PATTERN",
    "INDEX",
    "MANIFEST",
    "MARKERS",
    "MARKER_NAMES",
    "MAX_RECORD",
    "MAX_RECORD_DIGITS",
    "MIRROR_LOCK",
    "MIRROR_PID",
    "PREVIOUS_DIR",
    "REPORT",
    "SERVICE",
    "TEMP_PREFIX",
    "TRIALS",
    "is_id",
    "record_number",
    "validate_id",
]

FORMAT_VERSION = 1
# DIR_MODE (directories, 0700), FILE_MODE (files, 0644) and TEMP_PREFIX are the format's
# too; they are defined by the atomic-write recipe (`_fs.atomic`), which the storage
# backends beside this package share, and re-exported here.

MANIFEST = "session.json"
CONSTRAINTS = "constraints.json"
REPORT = "report.json"
# The summary index at a session's top: a cache of its sealed markers that readers write
# and never trust over the markers (docs/format.md, "Summary index"). Store-owned: a
# mirror never writes or deletes it.
INDEX = ".sessionstore-index.json"
PREVIOUS_DIR = "previous"
# The mirror daemon's lock at its destination's top (an flock held on it is a daemon
# mirroring in) and the holder's pid beside it: the mirror takes them, the store asks.
MIRROR_LOCK = ".sessionstore-mirror.lock"
MIRROR_PID = ".sessionstore-mirror.pid"

TRIALS = "trials"
SERVICE = "service"
# Collection directory -> the completion marker of each record in it.
MARKERS: dict[str, str] = {TRIALS: "trial.json", SERVICE: "verification.json"}
# Every file whose presence completes something; written (and mirrored) last.
MARKER_NAMES = frozenset([*MARKERS.values(), REPORT])

GENERATED_ID_RE = re.compile(r"[0-9a-f]{8}")
ID_PATTERN = r"^[a-z0-9][a-z0-9-]{0,40}$"
_ID_RE = re.compile(ID_PATTERN.strip("^$"))
# Decimal without leading zeros, starting at 1, at most 18 digits: "10" is a record,
# "010", "0" and a 19-digit name are foreign. The cap keeps every number an int64
# in any harness language; `Collection.begin()` refuses to allocate past it.
MAX_RECORD_DIGITS = 18
MAX_RECORD = 10**MAX_RECORD_DIGITS - 1
_NUMBER_RE = re.compile(rf"[1-9][0-9]{{0,{MAX_RECORD_DIGITS - 1}}}")


def validate_id(value: str, what: str = "session id") -> str:
    """Return `value` if it is a valid session id, else raise `InvalidId`."""
    if not isinstance(value, str) or not _ID_RE.fullmatch(value):
        raise InvalidId(str(value), what, ID_PATTERN)
    return value


def is_id(value: str) -> bool:
    """Whether `value` is a valid session id (`validate_id` without the error)."""
    return isinstance(value, str) and _ID_RE.fullmatch(value) is not None


def record_number(name: str) -> int | None:
    """The record number a collection entry name denotes, or None if the name is foreign."""
    if _NUMBER_RE.fullmatch(name):
        return int(name)
    return None

"""One directory's group in the change cache: its bytes, read (`parse_group`) and written
(`dump_group`), the one codec of a group.

A group maps the names of one destination directory's files to their entries
(`ENTRY_LEN` integers each; `cache_file` says which). Version 4 writes it
packed, as one JSON string, so that the file stays one JSON document:

    "<hex of: n (uint32) | n x ENTRY_LEN int64 | the n names, NUL-separated>"

integers little-endian, names as the file system spells them (`os.fsencode`:
a name that is not UTF-8 is its own bytes). The standard library unpacks it at
C speed (`binascii`, `array`) with no JSON parse: a no-op pass then imports no
JSON library for its groups, and orjson's import (with dataclasses, inspect and
uuid, which its init imports) cost a pass more time and memory than its parse
saved (issue 16). Hex, not base64: twice the bytes, where base64 takes 4/3, but
base64's decoder alone took most of the time of orjson's whole parse. A group
holding an integer that int64 cannot (an inode number at or past 2**63, a time
past the year 2262) is written wide instead: the JSON object of version 3,
`{"name":[integers]}`, a name that is not UTF-8 spelled by `encode_key`. Both
forms are read.
"""

from __future__ import annotations

import binascii
import itertools
import json
import os
import sys
from array import array

TYPE_CHECKING = False  # typing's, without importing typing (mypy reads it as such)
if TYPE_CHECKING:
    from typing import TypeGuard

ENTRY_LEN = 8
DEST = slice(5, ENTRY_LEN)  # an entry's destination half: what `dest_sig` makes

Entry = list[int]
Group = dict[str, Entry]  # the files of one destination directory, by name

_NOT_NAMES = frozenset(["", ".", ".."])
_COUNT = 4  # bytes of a packed group's name count
_WIDTH = 8 * ENTRY_LEN  # bytes of one packed entry
_SWAP = sys.byteorder == "big"  # packed integers are little-endian on every host
_FS = (sys.getfilesystemencoding(), sys.getfilesystemencodeerrors())  # os.fsencode's


def dest_sig(st: os.stat_result) -> list[int]:
    """The destination file's identity as an entry stores it (`entry[DEST]`)."""
    return [st.st_size, st.st_mtime_ns, st.st_ino]


def is_entry(value: object) -> TypeGuard[Entry]:
    """Whether a cached value is an entry: a list of ENTRY_LEN values (integers when ours)."""
    return type(value) is list and len(value) == ENTRY_LEN


def is_name(name: str) -> bool:
    """Whether a group's key can name a file in its directory (one path component)."""
    return name not in _NOT_NAMES and "/" not in name and "\0" not in name


def encode_key(key: str) -> str:
    """JSON needs UTF-8; a non-UTF-8 name (surrogate-escaped) gets an unambiguous form.

    NUL never occurs in a path, so the prefixed form cannot collide with a real one.
    """
    try:
        key.encode("utf-8")
    except UnicodeEncodeError:
        import base64  # rare: only non-UTF-8 names pay for the import

        return "\0" + base64.b64encode(os.fsencode(key)).decode("ascii")
    return key


def decode_key(key: str) -> str:
    if key.startswith("\0"):
        import base64

        return os.fsdecode(base64.b64decode(key[1:]))
    return key


def parse_group(text: bytes) -> Group:
    """One directory's stored group, packed or wide; empty if it is neither (never raises).

    Its values are not checked here, where every pass parses every group: a value
    that is not an entry (`is_entry`) vouches for nothing where it is used (`unchanged`
    checks it, `copy` compares before writing, `Cache.group` drops it).
    """
    if len(text) > 1 and text[0] == text[-1] == 0x22:  # '"'
        return _unpack(text)
    return _parse_wide(text)


def _unpack(text: bytes) -> Group:
    try:
        data = binascii.a2b_hex(text[1:-1])
    except binascii.Error:  # not hex, or of an odd length
        return {}
    n = int.from_bytes(data[:_COUNT], "little")
    end = _COUNT + n * _WIDTH
    if len(data) < end or not n:
        return {}
    names = data[end:].decode(*_FS).split("\0")
    if len(names) != n:
        return {}
    ints = array("q")
    ints.frombytes(data[_COUNT:end])
    if _SWAP:
        ints.byteswap()
    # ENTRY_LEN at a time, as lists (what `is_entry` asks). The lengths are equal (checked
    # above), so zip's strict=True would only add work to every group of every pass.
    at = iter(ints.tolist())
    entries = map(list, zip(*[at] * ENTRY_LEN))  # noqa: B905
    return dict(zip(names, entries))  # noqa: B905


def _parse_wide(text: bytes) -> Group:
    try:
        group = json.loads(text)
    except (ValueError, RecursionError):  # not JSON (or not UTF-8), or nested past the stack
        return {}
    if type(group) is not dict:
        return {}
    try:
        "".join(group).encode("utf-8")  # a lone surrogate is no name a mirror wrote
        if b"\\u0000" in text:  # an encoded name: NUL is never in a real one
            return {decode_key(k): v for k, v in group.items()}
    except ValueError:
        return {}
    return group


def dump_group(group: Group) -> bytes:
    """A group's bytes: packed, or wide if an integer does not fit int64.

    Only entries of ENTRY_LEN integers under a name (`is_name`) are written: anything
    else (found in a group read, never made by a pass) vouched for nothing.
    """
    try:
        return _pack(group)
    except (TypeError, ValueError, OverflowError):  # not all entries, or not all int64
        kept = {k: v for k, v in group.items() if is_name(k) and _is_ints(v)}
    if not kept:
        return b"{}"
    try:
        return _pack(kept)
    except OverflowError:
        wide = {encode_key(k): v for k, v in kept.items()}
        return json.dumps(wide, separators=(",", ":")).encode()


def _pack(group: Group) -> bytes:
    """A packed group of a non-empty `group`; `TypeError`/`ValueError` unless every entry
    is ENTRY_LEN integers under a name (`is_name`), `OverflowError` if one does not fit
    int64."""
    if {*map(len, group.values())} != {ENTRY_LEN}:
        raise ValueError("an entry of another length")
    names = "\0".join(group)
    if names.count("\0") != len(group) - 1 or "/" in names or not _NOT_NAMES.isdisjoint(group):
        raise ValueError("a name that is not one path component")
    ints = array("q", itertools.chain.from_iterable(group.values()))
    if _SWAP:
        ints.byteswap()
    data = len(group).to_bytes(_COUNT, "little") + ints.tobytes() + names.encode(*_FS)
    return b'"' + binascii.b2a_hex(data) + b'"'


def _is_ints(value: object) -> bool:
    return is_entry(value) and {*map(type, value)} == {int}

"""The change cache's file (`cache` has the format): its bytes, read and written.

`read` turns a file of version 3, 2 or 1 into a reference per directory
(`offset << SHIFT | length` of its group in the file: an int a pass keeps and
compares by identity); versions 2 and 1 are rebuilt in memory, as version 3
would hold them, once. `chunks` writes version 3 from references and new
groups. `parse_group` and `dump_group` are the one codec of a group, names
that are not UTF-8 encoded by `encode_key`.
"""

from __future__ import annotations

import errno
import itertools
import json
import os
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, TypeGuard

from sessionstore._orjson import orjson
from sessionstore.storage.journal import outside
from sessionstore.storage.tree import BytesFile

if TYPE_CHECKING:
    from sessionstore.storage.tree import RootFile

VERSION = 3
_NOT_NAMES = frozenset(["", ".", ".."])
_FLAT_VERSION = 1  # one object of paths: read, never written
_TEXT_VERSION = 2  # one object of directories, each group a JSON string: read, never written
# source signature (5) + destination (size, mtime_ns, ino)
ENTRY_LEN = 8
DEST = slice(5, ENTRY_LEN)  # an entry's destination half: what `dest_sig` makes

Entry = list[int]
Group = dict[str, Entry]  # the files of one destination directory, by name
# A directory's group in a pass's new cache: as stored (its reference), or as it made it.
Stored = int | Group

# A stored group's reference: its offset in the file << SHIFT | its length in bytes.
SHIFT = 32
MASK = (1 << SHIFT) - 1
_SEP = b",\n"  # between two groups
_END = b"\n]}\n"  # after the last
_HEAD_STEP = 1 << 20  # bytes read at once while looking for the end of the head
_BATCH = 1 << 20  # bytes of a new file gathered for each write


def dest_sig(st: os.stat_result) -> list[int]:
    """The destination file's identity as an entry stores it (`entry[DEST]`)."""
    return [st.st_size, st.st_mtime_ns, st.st_ino]


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
    """One directory's stored group; empty if it is not a JSON object (never raises).

    Its values are not checked here, where every pass parses every group: a value
    that is not an entry (`is_entry`) vouches for nothing where it is used (`unchanged`
    checks it, `copy` compares before writing, `Cache.group` drops it).
    """
    try:
        group = orjson.loads(text)
    except orjson.JSONDecodeError:
        return {}
    if not isinstance(group, dict):
        return {}
    if b"\\u0000" in text:  # an encoded name: NUL is never in a real one
        try:
            return {decode_key(k): v for k, v in group.items()}
        except ValueError:
            return {}
    return group


def is_entry(value: object) -> TypeGuard[Entry]:
    """Whether a cached value is an entry: a list of ENTRY_LEN values (integers when ours)."""
    return type(value) is list and len(value) == ENTRY_LEN


def dump_group(group: Group) -> bytes:
    """A group's bytes, sized to fit: orjson's own result holds 4 KiB however short it
    is, and a new cache keeps one per directory until it is written (82 MB for 20,000
    directories of one file, where the file is 6 MB)."""
    return bytes(memoryview(orjson.dumps({encode_key(k): v for k, v in group.items()})))


def chunks(
    redactor: object, names: list[str], parts: list[int | bytes], text: Callable[[int], bytes]
) -> Iterator[bytes]:
    """A version 3 file's bytes in batches of about `_BATCH`, never the whole in memory.

    `names` are encoded (`encode_key`); each part is a new group's bytes or a stored
    group's reference, whose bytes `text` reads back (`OSError` if they are not all
    there: the file read shrank meanwhile).
    """
    head = {
        "version": VERSION,
        "redactor": redactor,
        "dirs": names,
        "sizes": [p & MASK if isinstance(p, int) else len(p) for p in parts],
        "groups": [],
    }
    line = orjson.dumps(head)[: -len(b"]}")] + b"\n"  # the groups' array left open
    batch, size = [line], len(line)
    for i, part in enumerate(parts):
        if isinstance(part, int):
            data = text(part)
            if len(data) != part & MASK:
                raise OSError(errno.EIO, "the change cache shrank while the pass read it")
        else:
            data = part
        if i:
            batch.append(_SEP)
        batch.append(data)
        size += len(data) + len(_SEP)
        if size >= _BATCH:
            yield b"".join(batch)
            batch, size = [], 0
    batch.append(_END)
    yield b"".join(batch)


# What `read` finds: the stored redactor, each directory's group by reference, the
# file to read them from, and whether the file must be rewritten (version 1 or 2).
Found = tuple[object, dict[str, int], "RootFile", bool]


def read(file: RootFile) -> Found | None:
    """What the cache file holds if it is well-formed, else None (never raises for bad
    content; `OSError` if it cannot be read)."""
    line, whole = _first_line(file)
    if whole:
        return _head(file, line)
    return _older(line)


def _first_line(file: RootFile) -> tuple[bytes, bool]:
    """The file's first line and True; or, if it has no line break, all of it and False."""
    chunks: list[bytes] = []
    offset = 0
    while chunk := file.read_at(offset, _HEAD_STEP):
        end = chunk.find(b"\n")
        if end >= 0:
            chunks.append(chunk[:end])
            return b"".join(chunks), True
        chunks.append(chunk)
        offset += len(chunk)
    return b"".join(chunks), False


def _head(file: RootFile, line: bytes) -> Found | None:
    """A version 3 file's references from its head; None unless the head is whole and
    the file is exactly as long as the head says."""
    try:
        # The standard library's parser: orjson's holds about 12 bytes per byte of its
        # input at once (26 MB for the head of a 200k-file cache), the peak of a pass.
        head = json.loads(line + b"]}")
    except (ValueError, RecursionError):  # not JSON (or not UTF-8), or nested past the stack
        return None
    if not isinstance(head, dict) or head.get("version") != VERSION:
        return None
    names, sizes = head.get("dirs"), head.get("sizes")
    if not (isinstance(names, list) and isinstance(sizes, list) and head.get("groups") == []):
        return None
    if len(names) != len(sizes) or not {*map(type, names)} <= {str}:
        return None
    if not {*map(type, sizes)} <= {int} or (sizes and not 0 < min(sizes) <= max(sizes) <= MASK):
        return None
    base = len(line) + 1
    if file.size != base + sum(sizes) + len(_SEP) * max(len(sizes) - 1, 0) + len(_END):
        return None  # torn, or not a file this module wrote
    # Each group's offset: the head's line, then every group before it and its separator.
    offsets = itertools.accumulate((n + len(_SEP) for n in sizes), initial=base)
    # `offsets` has one more (the end): zip stops at the last size.
    at = [offset << SHIFT | n for offset, n in zip(offsets, sizes, strict=False)]
    refs = dict(zip(names, at, strict=True))
    if len(refs) != len(names):
        return None
    decoded = _decoded(refs)
    return None if decoded is None else (head.get("redactor"), decoded, file, False)


def _decoded(refs: dict[str, int]) -> dict[str, int] | None:
    """`refs` with encoded (non-UTF-8) directory names decoded; None if one is malformed
    or is not a path below the destination: a cache naming one was not written by a
    mirror, and must never steer a removal (`--delete` walks to the directories the
    cache names) outside the destination."""
    if "\0" in "".join(refs):
        try:
            refs = {decode_key(k): v for k, v in refs.items()}
        except ValueError:
            return None
    return None if outside([rel for rel in refs if rel]) else refs


def is_name(name: str) -> bool:
    """Whether a group's key can name a file in its directory (one path component)."""
    return name not in _NOT_NAMES and "/" not in name and "\0" not in name


def _older(data: bytes) -> Found | None:
    """A version 1 or 2 file's groups, rebuilt in memory as references (read once)."""
    try:
        doc = orjson.loads(data)
    except orjson.JSONDecodeError:
        return None
    if not isinstance(doc, dict):
        return None
    version = doc.get("version")
    texts: dict[str, bytes] | None = None
    if version == _FLAT_VERSION:
        texts = _from_flat(doc.get("files"))
    elif version == _TEXT_VERSION:
        dirs = doc.get("dirs")
        if isinstance(dirs, dict) and {*map(type, dirs.values())} <= {str}:
            texts = {rel: text.encode() for rel, text in dirs.items()}
    if texts is None:
        return None
    refs: dict[str, int] = {}
    offset = 0
    for rel, text in texts.items():
        refs[rel] = offset << SHIFT | len(text)
        offset += len(text)
    decoded = _decoded(refs)
    if decoded is None:
        return None
    return doc.get("redactor"), decoded, BytesFile(b"".join(texts.values())), True


def _from_flat(files: object) -> dict[str, bytes] | None:
    """A version 1 cache's flat {path: entry} as groups (read once, after an upgrade)."""
    if not isinstance(files, dict):
        return None
    groups: dict[str, Group] = {}
    try:
        for key, entry in files.items():
            if not (isinstance(entry, list) and len(entry) == ENTRY_LEN):
                return None
            rel, _, name = decode_key(key).rpartition("/")
            groups.setdefault(encode_key(rel), {})[name] = entry
    except ValueError:
        return None
    return {rel: dump_group(g) for rel, g in groups.items()}

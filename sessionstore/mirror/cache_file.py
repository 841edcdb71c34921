"""The change cache's file (`cache` has the format): its bytes, read and written.

`read` turns a file of version 4, 3, 2 or 1 into a reference per directory
(`offset << SHIFT | length` of its group in the file: an int a pass keeps and
compares by identity); the groups of versions 3, 2 and 1 are rebuilt in
memory, as version 4 would hold them, once. `chunks` writes version 4 from
references and new groups. A group's bytes are `cache_group`'s; the head and
the files of versions 1 and 2 are parsed by the standard library's `json`.
"""

from __future__ import annotations

import errno
import itertools
import json
from collections.abc import Callable, Iterator

from sessionstore.mirror.cache_group import (
    ENTRY_LEN,
    Group,
    decode_key,
    dump_group,
    encode_key,
    parse_group,
)
from sessionstore.storage.journal import outside
from sessionstore.storage.tree import BytesFile

TYPE_CHECKING = False  # typing's, without importing typing (mypy reads it as such)
if TYPE_CHECKING:
    from sessionstore.storage.tree import RootFile

VERSION = 4
_FLAT_VERSION = 1  # one object of paths: read, never written
_TEXT_VERSION = 2  # one object of directories, each group a JSON string: read, never written
_WIDE_VERSION = 3  # every group a JSON object (`cache_group`'s wide form): read, never written

# A directory's group in a pass's new cache: as stored (its reference), or as it made it.
Stored = int | Group

# A stored group's reference: its offset in the file << SHIFT | its length in bytes.
SHIFT = 32
MASK = (1 << SHIFT) - 1
_SEP = b",\n"  # between two groups
_END = b"\n]}\n"  # after the last
_HEAD_STEP = 1 << 20  # bytes read at once while looking for the end of the head
# A first line past this is no cache a pass holds in memory (a head naming ~2 million
# directories; a version 1 or 2 file, one line, of ~300,000 files): untrusted, rebuilt.
_HEAD_MAX = 64 << 20
_BATCH = 1 << 20  # bytes of a new file gathered for each write


def chunks(
    redactor: object, names: list[str], parts: list[int | bytes], text: Callable[[int], bytes]
) -> Iterator[bytes]:
    """A version 4 file's bytes in batches of about `_BATCH`, never the whole in memory.

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
    line = json.dumps(head, separators=(",", ":")).encode()[: -len(b"]}")] + b"\n"  # left open
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
# file to read them from, and whether the file must be rewritten (version 1, 2 or 3).
Found = tuple[object, dict[str, int], "RootFile", bool]


def read(file: RootFile) -> Found | None:
    """What the cache file holds if it is well-formed, else None (never raises for bad
    content; `OSError` if it cannot be read)."""
    first = _first_line(file)
    if first is None:
        return None
    line, whole = first
    if whole:
        return _head(file, line)
    return _older(line)


def _first_line(file: RootFile) -> tuple[bytes, bool] | None:
    """The file's first line and True; or, if it has no line break, all of it and False;
    None if that runs past `_HEAD_MAX` (a file no mirror wrote, however large, is never
    read whole)."""
    chunks: list[bytes] = []
    offset = 0
    while offset < _HEAD_MAX and (chunk := file.read_at(offset, _HEAD_STEP)):
        end = chunk.find(b"\n")
        if end >= 0:
            chunks.append(chunk[:end])
            return (b"".join(chunks), True) if offset + end <= _HEAD_MAX else None
        chunks.append(chunk)
        offset += len(chunk)
    return None if offset >= _HEAD_MAX else (b"".join(chunks), False)


def _head(file: RootFile, line: bytes) -> Found | None:
    """A version 4 file's references from its head (a version 3 file's groups rebuilt);
    None unless the head is whole and the file is exactly as long as the head says."""
    try:
        # The standard library's parser, which also holds the least memory while it
        # parses: orjson's held about 12 bytes per byte of its input at once.
        head = json.loads(line + b"]}")
    except (ValueError, RecursionError):  # not JSON (or not UTF-8), or nested past the stack
        return None
    if not isinstance(head, dict) or head.get("version") not in (VERSION, _WIDE_VERSION):
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
    if head["version"] == _WIDE_VERSION:
        texts = {rel: file.read_at(ref >> SHIFT, ref & MASK) for rel, ref in refs.items()}
        return _rebuilt(head.get("redactor"), texts)
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


def _older(data: bytes) -> Found | None:
    """A version 1 or 2 file's groups, rebuilt in memory as references (read once)."""
    try:
        doc = json.loads(data)
    except (ValueError, RecursionError):
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
    return None if texts is None else _rebuilt(doc.get("redactor"), texts)


def _rebuilt(redactor: object, texts: dict[str, bytes]) -> Found | None:
    """An older file's groups (`texts`, by encoded directory) written as version 4 would
    write them, in memory, as references into those bytes (read once: the pass rewrites
    the file). A group that holds no entry is left out."""
    packed = {rel: dump_group(parse_group(text)) for rel, text in texts.items()}
    refs: dict[str, int] = {}
    offset = 0
    for rel, text in packed.items():
        if text != b"{}":
            refs[rel] = offset << SHIFT | len(text)
            offset += len(text)
    decoded = _decoded(refs)
    if decoded is None:
        return None
    return redactor, decoded, BytesFile(b"".join(t for t in packed.values() if t != b"{}")), True


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

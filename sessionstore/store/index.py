"""The summary index: a session's sealed markers cached at its top, never trusted over them.

Listing a store reads every marker of every session; the index (`INDEX`,
`.sessionstore-index.json`, docs/format.md "Summary index") lets a reader
skip the reads of the markers that have not changed. Per collection it maps
each completed record's name to `[identity, marker object]`, the identity
being the marker's `[st_dev, st_ino, st_size, st_mtime_ns, st_ctime_ns]`
taken before it was read. A reader lists the collection as always (records
added or removed show at once), stats every listed marker
(`LocalStorage.stat_each`: one `fstatat` each, nothing opened) and takes the
cached object only where the identity is the same; every other record (no
entry, a marker changed, gone or not a regular file, an entry of the wrong
shape) is read from its marker exactly as without an index.

The index's first line also keeps what a listing derives from the records
(`summary`: progress, counts, the best trial) under the key it was derived
from: the listing's other inputs (objective, planned count, constraints) and
every record's name and identity. A listing that finds that key unchanged
takes the fields and parses nothing else; the second line (the markers) is
parsed only when some record changed.

Why an unchanged identity means unchanged bytes: the kernel sets `st_ctime`
on every change of a file's content, mode or name, and user space cannot set
it (`touch` sets mtime, and changes ctime doing so); a new file under the
same name has a new ctime too. The one gap is the clock's tick: a marker
changed twice within one tick keeps its ctime, so a marker whose ctime is
less than `SETTLE_NS` old when it is read is not cached (git's "racily
clean" rule), nor any summary derived from it. Markers over
`MAX_CACHED_BYTES` are not cached, so an index stays quick to load.

Each line is its JSON document after the CRC-32 of that document's bytes (8
lowercase hex digits and a space: `index_bytes`), so that accidental damage
(a flipped bit, a torn or shifted write) makes the line it hits unusable
rather than believed: a head whose checksum fails is no index (read from the
markers, rewritten), a markers line whose checksum fails caches nothing. The
head's checksum is checked when it is loaded, the markers line's only when
it is parsed, so a listing that takes the summary checks only the head. A
checksum is no defence against someone rewriting the index consistently:
whoever can write it can write the markers it describes.

Who writes it: a reader that asks to (`write=True`; `inspect` does), when the
index was missing, unusable or out of date, atomically (a temp file renamed
over it) but without fsync: a crash can lose or tear it, and a torn index is
one more corrupt index, ignored and rebuilt. A write that fails (no write
permission, a read-only filesystem, a full disk, a directory in its place)
is skipped: the answer came from the markers anyway. An index the reader
may not read (another user's: it is 0600) is left as it is, its markers read
instead; replacing it would lock its owner out in turn. Other readers (`view`,
the library by default) use it and never write it. Local stores only: in an
object store the reads are the round trips a listing would cost anyway.
"""

from __future__ import annotations

import contextlib
import time
import zlib
from typing import TYPE_CHECKING, Any

from sessionstore import _json as jsonio
from sessionstore._orjson import orjson
from sessionstore.errors import StorageError
from sessionstore.format.names import INDEX
from sessionstore.storage.local import LocalStorage
from sessionstore.store.records import Record, RecordState, records_of

if TYPE_CHECKING:
    from sessionstore.store.collection import Collection
    from sessionstore.store.session import Session

__all__ = ["INDEX_FORMAT", "MAX_CACHED_BYTES", "SETTLE_NS", "SummaryIndex", "index_bytes"]

# 3: each line carries the checksum of its document; 2 was two lines of bare JSON.
INDEX_FORMAT = 3
# Markers bigger than this are read every time (the bench's markers are ~400 bytes).
MAX_CACHED_BYTES = 64 * 1024
# How old a marker's ctime must be when it is read for it to be cached: longer than any
# filesystem's timestamp tick (ext4 and XFS: a jiffy; some: 1 s), with margin.
SETTLE_NS = 2_000_000_000
# Levels the index's second line wraps a marker in (the object, the collection, the
# entry): a marker deeper than a marker may be (docs/format.md, "Reading") makes it unusable.
_INDEX_DEPTH = 3
# orjson parses at most 1024 levels of nesting and writes at most 254 (a test checks
# both): markers parsed inside this many lists are refused by the parse exactly when
# they inside `ENVELOPE_DEPTH + _INDEX_DEPTH` lists could not be written (a cached
# marker at most 240 levels deep, its 3 levels in the index above it).
_PAD = 1024 - (254 - jsonio.ENVELOPE_DEPTH - _INDEX_DEPTH)
# The deepest markers line that parse admits.
_MAX_DEPTH = 1024 - _PAD


class SummaryIndex:
    """The summary index of one session, for one reading of its collections.

    Optionally `summary` first (the kept fields, if still true), else `scan` each
    collection (`trials`, `service`) and `keep` what was derived from them; then
    `save`: with `write`, the index is replaced when what was read differs from it.
    Not thread-safe.
    """

    def __init__(self, session: Session, *, write: bool = False) -> None:
        storage = session.storage
        self._storage = storage if isinstance(storage, LocalStorage) else None
        self._key = f"{session.key}/{INDEX}"
        # Only into a session the library made: a raw workspace named by path is the
        # user's directory, and its mtime is its date in the store listing.
        self._write = write and session.manifest is not None
        self._new: dict[str, dict[str, list[Any]]] = {}
        self._now = time.time_ns()
        # Per collection: its record numbers, foreign names, and each record's identity.
        self._listed: dict[str, tuple[list[int], list[str], list[list[int] | None]]] = {}
        self._summary_key: list[Any] | None = None
        self._kept: dict[str, Any] | None = None
        self._whole = True  # every record scanned so far is cached in `_new`
        self._head: dict[str, Any] = {}
        self._markers: bytes | None = None  # the second line, until `_old` parses it
        self._old: dict[str, Any] = {}
        self._dirty = False
        if self._storage is not None:
            self._load()

    def _load(self) -> None:
        """Read the index; what is at its name must be replaced (`_dirty`) when it is
        not a regular file, too large, or its first line is no index of this format (its
        checksum, `_checked`, included)."""
        assert self._storage is not None
        try:
            data = self._storage.get(self._key, jsonio.MAX_MARKER_BYTES)
        except StorageError as exc:  # a symlink, a FIFO, a directory, too large: never read
            # Another user's index (0600) is theirs: replacing it would make this one
            # unreadable to them, and two users listing a store would each rewrite it.
            if isinstance(exc.__cause__, PermissionError):
                self._write = False
            else:
                self._dirty = True
            return
        if data is None:
            return
        # orjson never writes a raw newline (one in a string is `\n`): the first is the end
        # of the first line. A deep first line fails orjson's own limit: it is never
        # written back, so it needs no depth rule of its own.
        line, newline, self._markers = data.partition(b"\n")
        head = _checked(line)
        try:
            value = None if head is None else orjson.loads(head)
        except orjson.JSONDecodeError:
            value = None
        if not newline or type(value) is not dict or value.get("format") != INDEX_FORMAT:
            self._markers = None
            self._dirty = True
            return
        self._head = value

    def _cached(self) -> dict[str, Any]:
        """The second line's cached markers, parsed when first needed ({} when unusable)."""
        if self._markers is not None:
            markers = _checked(self._markers)
            value = None if markers is None else _parse_markers(markers)
            self._markers = None
            if type(value) is dict:
                self._old = value
            else:
                self._dirty = True
        return self._old

    def _listing(self, collection: Collection) -> tuple[list[int], list[str], list[Any]]:
        """The collection's numbers and foreign names (one listing) and each record's
        marker identity (`stat_each`), taken once per reading."""
        listed = self._listed.get(collection.name)
        if listed is None:
            assert self._storage is not None
            numbers, foreign = collection.listing()
            names = [str(n) for n in numbers]
            idents = self._storage.stat_each(collection.key, names, collection.marker)
            listed = self._listed[collection.name] = (numbers, foreign, idents)
        return listed

    def summary(self, key: list[Any], *collections: Collection) -> dict[str, Any] | None:
        """The fields kept for `key` (the listing's other inputs, JSON values) when every
        record of `collections` is still the one they were derived from, else None.

        Lists and stats the collections (what `scan` would); `keep` then keeps new fields
        under the same key.
        """
        if self._storage is None:
            return None
        full = list(key)
        for collection in collections:
            numbers, _, idents = self._listing(collection)
            full += [numbers, idents]
        self._summary_key = full
        kept = self._head.get("summary")
        if type(kept) is dict and kept.get("key") == full:
            fields = kept.get("fields")
            if type(fields) is dict:
                return fields
        return None

    def keep(self, fields: dict[str, Any]) -> None:
        """Keep `fields` (JSON values), derived from the records the scans returned, under
        the key `summary` was last asked with: only if every one of them is cached."""
        if self._summary_key is None or not self._whole or self._new.keys() != self._listed.keys():
            return  # a record not cached, or a collection of the key not scanned
        self._kept = {"key": self._summary_key, "fields": fields}
        self._dirty = self._dirty or self._head.get("summary") != self._kept

    def scan(self, collection: Collection) -> tuple[list[Record], list[str]]:
        """`collection.scan()`: the records in numeric order, each as its marker says now,
        and the foreign names; the markers unchanged since they were cached are not read."""
        if self._storage is None:
            return collection.scan()
        numbers, foreign, idents = self._listing(collection)
        names = [str(n) for n in numbers]
        cached = self._cached().get(collection.name)
        if type(cached) is not dict:
            self._dirty = self._dirty or cached is not None
            cached = {}
        kept: dict[str, list[Any]] = {}
        records: list[Record | None] = []
        unread: list[int] = []
        path = collection.path
        completed = RecordState.COMPLETED
        below = Record.below
        # zip without strict=True (equal by construction): its keyword parse is per record.
        for i, (name, ident) in enumerate(zip(names, idents)):  # noqa: B905
            entry = cached.get(name)
            if (
                ident is not None
                and type(entry) is list
                and len(entry) == 2
                and entry[0] == ident
                and type(entry[1]) is dict
            ):
                kept[name] = entry
                records.append(below(numbers[i], path, completed, entry[1], None))
            else:
                records.append(None)
                unread.append(i)
        if len(kept) != len(cached):
            self._dirty = True  # entries of records gone, changed or malformed
        if unread:
            read = self._read(
                collection,
                [numbers[i] for i in unread],
                [names[i] for i in unread],
                [idents[i] for i in unread],
                kept,
            )
            for i, record in zip(unread, read):  # noqa: B905
                records[i] = record
        self._whole = self._whole and len(kept) == len(names)
        self._new[collection.name] = kept
        return [r for r in records if r is not None], foreign

    def _read(
        self,
        collection: Collection,
        numbers: list[int],
        names: list[str],
        idents: list[Any],
        kept: dict[str, list[Any]],
    ) -> list[Record]:
        """The records `numbers` (named `names`, listed with `idents`) as their markers
        say; each completed, settled and small one is cached in `kept`."""
        assert self._storage is not None
        answers = self._storage.read_each(
            collection.key, names, collection.marker, jsonio.MAX_MARKER_BYTES
        )
        read = records_of(
            numbers,
            names,
            collection.path,
            collection.marker,
            collection.key,
            [answer for answer, _ in answers],
        )
        settled = self._now - SETTLE_NS
        for name, ident, record, (_, read_ident) in zip(names, idents, read, answers):  # noqa: B905
            # The file read must be the one listed: a record renamed away and back
            # between the two would cache one marker's bytes under another's identity.
            if (
                record.state is RecordState.COMPLETED
                and ident is not None
                and read_ident == ident
                and ident[2] <= MAX_CACHED_BYTES
                and ident[4] < settled
            ):
                kept[name] = [ident, record.data]
                self._dirty = True
        return read

    def save(self) -> None:
        """Replace the index with what the scans read, if asked to write and it differs.

        Collections not scanned are left out of it (their entries are rebuilt on the
        next reading), and so are fields not kept this reading. Never raises for the
        index's sake: see the module docstring.
        """
        if not (self._write and self._dirty and self._storage is not None):
            return
        head: dict[str, Any] = {"format": INDEX_FORMAT}
        if self._kept is not None:
            head["summary"] = self._kept
        # A cache that cannot be written changes nothing the reader shows: a value JSON
        # cannot hold (`TypeError`: an objective path that is no UTF-8, a timestamp past
        # 64-bit nanoseconds), permissions, read-only, ENOSPC, a directory in its place,
        # the session removed meanwhile.
        with contextlib.suppress(TypeError, OSError, StorageError):
            body = index_bytes(orjson.dumps(head), orjson.dumps(self._new))
            self._storage.put_cache(self._key, body)


def index_bytes(head: bytes, markers: bytes) -> bytes:
    """The index file's bytes for its two lines' JSON documents (`head`, `markers`): each
    line the document after its checksum (`_prefix`). The one serialiser of the format."""
    return _prefix(head) + head + b"\n" + _prefix(markers) + markers


def _prefix(document: bytes) -> bytes:
    """What precedes `document` on its line: its CRC-32, 8 lowercase hex digits, a space."""
    return b"%08x " % zlib.crc32(document)


def _checked(line: bytes) -> bytes | None:
    """The JSON document of one index line, or None when its checksum is not its bytes'."""
    # Compared as bytes, not parsed: `int()` would also take `+`, `_` and upper case.
    document = line[9:]
    return document if line[:9] == _prefix(document) else None


def _parse_markers(data: bytes) -> Any:
    """The index's second line, parsed; None when it is no single JSON document or is
    nested deeper than its markers could be written back (see `_PAD`)."""
    # Nesting is at most the count of opening brackets: a small index (a few markers)
    # is parsed as it is, for the lists below cost it seven times its plain parse.
    pad = 0 if data.count(b"[") + data.count(b"{") < _MAX_DEPTH else _PAD
    # Parsed inside `_PAD` levels of lists, so that orjson's own nesting limit refuses an
    # index too deep to write back (see `_PAD`) in the one parse: writing the whole index
    # again to find out was a fifth of its load (2.9 MB for 10,000 trials).
    try:
        value = orjson.loads(b"[" * pad + data + b"]" * pad)
    except orjson.JSONDecodeError:
        return None
    for _ in range(pad):
        # Each level must be the one list put around it: data such as `1],[2` parses
        # inside them too, but it is no single document.
        if type(value) is not list or len(value) != 1:
            return None
        value = value[0]
    return value

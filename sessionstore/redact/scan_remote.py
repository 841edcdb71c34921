"""`sessionstore scan` of an `s3://` store or session: every object's key and bytes.

The objects below a prefix are listed once (`S3Storage.files_below`) and
each is streamed through the `Scanner` in bounded chunks, as a local file
is. Names are scanned once per key component (a directory-like prefix is
one name, however many objects are below it), and so is each `/` of a key,
for a secret its components spell together. An object store has no
symlinks, FIFOs or devices, so nothing is skipped; an object that cannot
be read is a `ScanError` and the scan goes on. Keys are shown below the
root as given, through the scanner's redactor, as `scan_tree` shows them.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

from sessionstore.errors import StorageError
from sessionstore.redact.scan import Scanner
from sessionstore.redact.scan_tree import Event, Finding, ScanError, ScanTotals, display_path

if TYPE_CHECKING:
    from sessionstore.storage.s3 import S3Storage

__all__ = ["scan_objects"]


def scan_objects(
    storage: S3Storage, prefix: str, shown: str, scanner: Scanner, totals: ScanTotals
) -> Iterator[Event]:
    """Every finding and error of scanning the objects below `prefix` ("" for the whole
    store), each path shown as `shown/<key below prefix>`. Listing failures raise here."""
    keys = storage.files_below(prefix)
    seen: set[str] = set()
    for rel in keys:
        parts = rel.split("/")
        path = display_path(scanner, f"{shown}/{rel}")  # whole: a secret may span `shown`
        for i in range(len(parts)):
            named = "/".join(parts[: i + 1])
            if named in seen:
                continue
            seen.add(named)
            where = display_path(scanner, f"{shown}/{named}")
            name = parts[i].encode("utf-8", "surrogateescape")
            for hit in scanner.scan_bytes(name):
                totals.findings += 1
                yield Finding(where, hit.offset, "name", hit.kind, hit.source)
            above = f"{shown}/{'/'.join(parts[:i])}" if i else shown
            across = scanner.scan_across(above.encode("utf-8", "surrogateescape"), name)
            for hit in across:  # a key's names together spell a secret
                totals.findings += 1
                yield Finding(where, hit.offset, "path", hit.kind, hit.source)
        totals.files += 1
        key = f"{prefix}/{rel}" if prefix else rel
        try:
            found = storage.chunks(key)
            if found is None:  # removed since the listing: it was not there
                totals.files -= 1
                continue
            for hit in scanner.scan_chunks(found[1]):
                totals.findings += 1
                yield Finding(path, hit.offset, "content", hit.kind, hit.source)
        except StorageError as exc:
            totals.errors += 1
            yield ScanError(path, exc.problem)

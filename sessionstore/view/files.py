"""A record's files, read through the storage seam (`Storage.list` and `get`).

The viewer never resolves a path itself: a file is one it found by listing
its record, level by level, and it is read by a bounded `get`, so what the
backend refuses (a symlink, a FIFO, a directory swapped on the way) is
reported, never followed or waited on, and an `s3://` store reads the same.
A walk is bounded in depth and in entries, so a runaway tree cannot stall a page.

A file past `READ_LIMIT` is never held whole, nor is a raw download of any
size: its tail (a page shows a large log's end) and its chunks come from the object store's
ranged reads, or locally from one fd opened by the readers' recipe
(`_fs.read.open_under`: every component `O_NOFOLLOW` below the store root,
a regular file only), which is what the seam's `get` does too.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

from sessionstore._fs import read as fsread
from sessionstore.errors import InvalidInput, StorageError, TooLarge
from sessionstore.storage.base import Storage, check_names
from sessionstore.storage.local import LocalStorage
from sessionstore.store.session import MAX_RECORD_DEPTH
from sessionstore.view.render import is_binary, is_binary_chunks

# Bytes read of one file: its size is known up to here; larger ones are not read.
READ_LIMIT = 16 * 1024 * 1024
# Entries listed in one record: past this the listing says it stopped.
MAX_ENTRIES = 10_000
_CHUNK = 1 << 20


@dataclass(frozen=True)
class Listing:
    """A record's files ('/'-separated paths below it) in order, and the directories
    not entered (path, why)."""

    files: list[str]
    skipped: list[tuple[str, str]]


def record_key(session_key: str, collection: str, n: int) -> str:
    """The storage key of record `n` of `collection` of the session `session_key`."""
    return f"{session_key}/{collection}/{n}"


def list_files(storage: Storage, key: str) -> Listing:
    """Every file below the record `key`, by `Storage.list`, breadth-first, bounded.

    An entry listed as no prefix is a file (a symlink or FIFO is listed so
    too; reading it is refused by the backend); a directory deeper than
    `MAX_RECORD_DEPTH` levels, or one that cannot be listed, is skipped
    with why.
    """
    files: list[str] = []
    skipped: list[tuple[str, str]] = []
    queue: list[tuple[str, int]] = [("", 0)]
    seen = 0
    while queue:
        rel, depth = queue.pop(0)
        try:
            listed = sorted(storage.list(f"{key}/{rel}" if rel else key))
        except StorageError as exc:
            skipped.append((rel or ".", exc.problem))
            continue
        for item in listed:
            path = f"{rel}/{item.name}" if rel else item.name
            seen += 1
            if seen > MAX_ENTRIES:
                skipped.append((path, f"not listed: more than {MAX_ENTRIES} entries"))
                return Listing(sorted(files), skipped)
            try:  # an object key `.../1/../x` lists `..`: no key can name what is below it
                check_names([item.name])
            except InvalidInput:
                skipped.append((path, "is not a name a file can have ('.' or '..'); not read"))
                continue
            if not item.is_prefix:
                files.append(path)
            elif depth + 1 > MAX_RECORD_DEPTH:
                skipped.append((path, f"is deeper than {MAX_RECORD_DEPTH} levels"))
            else:
                queue.append((path, depth + 1))
    return Listing(sorted(files), skipped)


def is_listed(storage: Storage, key: str, parts: list[str]) -> bool:
    """Whether `parts` names a file of the record `key`: each directory on the way, and
    the file, listed by its parent (a name the record does not list is never read).

    A path deeper than `list_files` goes is never listed: each level lists its
    parent again, so the work grows with the square of the depth, and one
    request for a file 3,000 levels down kept a core busy for minutes.
    """
    if len(parts) > MAX_RECORD_DEPTH + 1:  # `MAX_RECORD_DEPTH` directories, then the file
        return False
    prefix = key
    for i, name in enumerate(parts):
        try:
            found = {item.name: item.is_prefix for item in storage.list(prefix)}
        except StorageError:
            return False
        last = i == len(parts) - 1
        if name not in found or found[name] is not (not last):
            return False
        prefix = f"{prefix}/{name}"
    return bool(parts)


@dataclass(frozen=True)
class Content:
    """What a bounded read of a file found: its bytes, or why there are none."""

    data: bytes | None
    size: int | None  # None: larger than READ_LIMIT, or unreadable
    problem: str | None
    large: bool = False  # larger than the limit: `tail` and `stream` read it


def read_file(storage: Storage, key: str, limit: int = READ_LIMIT) -> Content:
    """The bytes of the file at `key`, read by one bounded `get` (never followed)."""
    try:
        data = storage.get(key, limit)
    except TooLarge:
        return Content(None, None, f"larger than {limit // (1024 * 1024)} MiB; not read", True)
    except StorageError as exc:
        return Content(None, None, exc.problem)
    if data is None:
        return Content(None, None, "removed since it was listed")
    return Content(data, len(data), None)


@runtime_checkable
class _Ranged(Protocol):
    """What an object store's storage offers beyond `Storage` (`S3Storage`)."""

    def tail(self, key: str, length: int) -> tuple[int, bytes] | None: ...

    def chunks(self, key: str) -> tuple[int, Iterator[bytes]] | None: ...


def _open_local(storage: LocalStorage, key: str) -> tuple[int, int] | None:
    """(fd, size) of the regular file `key`, every component opened `O_NOFOLLOW`; None
    when absent or refused (a symlink, a FIFO: never followed, never waited on)."""
    try:
        root = fsread.open_dir(storage.root, follow=True)  # the user's path, as `get`
    except OSError:
        return None
    try:
        fd, st = fsread.open_under(root, key.split("/"))
    except OSError:
        return None
    finally:
        os.close(root)
    return fd, st.st_size


def tail(storage: Storage, key: str, length: int) -> tuple[int, bytes] | None:
    """The size of the file `key` and its last `length` bytes (at most); None if unreadable."""
    if isinstance(storage, LocalStorage):
        opened = _open_local(storage, key)
        if opened is None:
            return None
        fd, size = opened
        try:
            return size, os.pread(fd, length, max(size - length, 0))
        except OSError:
            return None
        finally:
            os.close(fd)
    if isinstance(storage, _Ranged):
        try:
            return storage.tail(key, length)
        except OSError:
            return None
    return None


def file_size(storage: Storage, key: str) -> int | None:
    """The size of the file `key`, none of its bytes read (a stat, a HEAD); None if
    unreadable (refused as `tail` refuses, or removed)."""
    found = tail(storage, key, 0)
    return None if found is None else found[0]


@dataclass
class Stream:
    """A file read in chunks: its size (what is sent as `Content-Length`), its first chunk
    (to sniff), the rest, `again` (the whole file once more, from its first byte: to
    check it before `rest` is sent) and `close` (call it whether or not read)."""

    size: int
    first: bytes
    rest: Iterator[bytes]
    again: Callable[[], Iterator[bytes]]
    close: Callable[[], None]


def _exactly(key: str, size: int, sent: int, rest: Iterator[bytes]) -> Iterator[bytes]:
    """`rest` (after `sent` bytes), raising `StorageError` rather than end short of `size`
    or go past it: the file changed size while it was sent, and the server then cuts the
    connection, so a client told `size` bytes never takes a torn body for the whole."""
    for chunk in rest:
        sent += len(chunk)
        if sent > size:
            break
        yield chunk
    if sent != size:
        raise StorageError(key, f"changed size while it was sent ({size} bytes at the start)")


def stream(storage: Storage, key: str) -> Stream | None:
    """The file `key` as chunks of at most 1 MiB, never held whole; None if unreadable.

    Locally the size is the one at opening: what is appended meanwhile is not
    sent, so the length announced is the length sent. An object store's is
    the one its GET answered. A file that ends short of it (truncated, or a
    connection to the object store lost) raises while it is sent; so does
    `again` (locally the same fd read again, on an object store a second GET).
    """
    if isinstance(storage, LocalStorage):
        opened = _open_local(storage, key)
        if opened is None:
            return None
        fd, size = opened

        def chunks(pos: int) -> Iterator[bytes]:
            while pos < size and (chunk := os.pread(fd, min(_CHUNK, size - pos), pos)):
                pos += len(chunk)
                yield chunk

        try:
            first = os.pread(fd, min(_CHUNK, size), 0)
        except OSError:
            os.close(fd)
            return None
        rest = _exactly(key, size, len(first), chunks(len(first)))
        return Stream(
            size, first, rest, lambda: _exactly(key, size, 0, chunks(0)), lambda: os.close(fd)
        )
    if isinstance(storage, _Ranged):
        try:
            found = storage.chunks(key)
            if found is None:
                return None
            size, body = found
            first = next(body, b"")
        except OSError:  # `StorageError` too: refused, or failed before the first byte
            return None
        rest = _exactly(key, size, len(first), body)
        return Stream(size, first, rest, lambda: _again(storage, key, size), lambda: None)
    return None


def raw_file(storage: Storage, key: str) -> tuple[Stream, bool] | None:
    """The file `key` as a `Stream` and whether it is binary; None if unreadable.

    Never held whole, whatever its size: 48 slow clients each holding a 15 MiB
    file took the server to 1.4 GB. Up to `READ_LIMIT` the whole file decides
    (read once more, chunk by chunk, by `Stream.again`); past it the first chunk.
    """
    body = stream(storage, key)
    if body is None:
        return None
    try:
        if body.size > READ_LIMIT:
            return body, is_binary(body.first, head=True)
        if len(body.first) == body.size:  # one chunk: the whole file (no second GET)
            return body, is_binary(body.first)
        return body, is_binary_chunks(body.again())
    except OSError:  # `StorageError` too: truncated, removed, unreadable meanwhile
        body.close()
        return None


def _again(storage: _Ranged, key: str, size: int) -> Iterator[bytes]:
    """The object `key` once more, by a second GET; `StorageError` if it is gone or its
    size is no longer `size`."""
    found = storage.chunks(key)
    if found is None:
        raise StorageError(key, "removed while it was read")
    yield from _exactly(key, size, 0, found[1])

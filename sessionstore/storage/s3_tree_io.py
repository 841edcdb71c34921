"""A mirror destination in a bucket (`S3Dest`) and the transfers of `S3Tree` (s3_tree.py).

`S3Dest` is made once per `Mirror`: the URL, the settings, the obstore
clients and the upload threads, reused by every pass (one connection pool).
Opening it probes that the server refuses a second `If-None-Match: *`
create (and a stale `If-Match`), as a store's open does: a record's marker is sealed only by that
condition, so a server that ignores it (`rclone serve s3`) is refused unless
the user accepts one writer at a time (`--single-writer`).

Uploads: a file up to `SINGLE_PUT_MAX` is collected in memory, then PUT on
one of `UPLOADS` threads (obstore waits without the GIL), at most
`IN_FLIGHT` of them at once, so memory stays bounded. A larger file is
streamed as a multipart upload (`obstore.open_writer`) as it is read: at
most a few parts in memory; an error while filling it aborts the upload,
and one killed midway leaves an incomplete upload, never an object (the
next pass aborts it: `abort_incomplete_uploads`).
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import re
import stat
import threading
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from typing import TYPE_CHECKING, Any

from sessionstore.errors import StorageError
from sessionstore.storage.s3 import S3Storage
from sessionstore.storage.s3_config import S3Settings, S3Url, client_error
from sessionstore.storage.s3_open import check_conditional

if TYPE_CHECKING:
    from obstore import WritableFile

UPLOADS = 8  # upload threads per destination
IN_FLIGHT = 32  # collected files waiting for or in a PUT (each <= SINGLE_PUT_MAX)
SINGLE_PUT_MAX = 8 << 20  # larger files go up in parts
PART_SIZE = 8 << 20
PART_CONCURRENCY = 4
_MODE = stat.S_IFREG | 0o644  # objects have no permission bits


def object_stat(size: int, e_tag: str | None) -> os.stat_result:
    """An object's metadata as the mirror compares it: size, and for `st_ino` its ETag.

    The ETag changes whenever the object is replaced by other bytes; `st_mtime_ns`
    is 0, since a PUT does not answer the object's LastModified (a HEAD per
    file would) and the ETag already says what matters.
    """
    tag = (e_tag or "").strip('"').encode()
    ino = int.from_bytes(hashlib.blake2b(tag, digest_size=7).digest(), "big")
    return os.stat_result((_MODE, ino, 0, 1, 0, 0, size, 0, 0, 0, 0.0, 0.0, 0.0, 0, 0, 0))


# What obstore refuses in a key (the ASCII controls; S3 itself would take them): checked
# before anything is sent, so a dry run predicts the refusal as the real pass meets it.
_CONTROL = re.compile("[\x00-\x1f\x7f]")


def object_key(dest: S3Dest, rel: str) -> str:
    """The bucket key of the destination path `rel`; `OSError` (one line) if it cannot be one."""
    if _CONTROL.search(rel):
        raise OSError(0, "a control character in the name cannot be part of an object key")
    return dest.key(rel)


class S3Dest(S3Storage):
    """`s3://BUCKET/PREFIX`, the mirror's destination: its clients, opened and probed once.

    An `S3Storage` of the prefix (its conditional create seals markers and
    takes the lease) with the upload threads. Raises `StorageError` (one line,
    no credential) when the bucket cannot be reached, the credentials are
    refused, or the server ignores `If-None-Match` and `single_writer` (None:
    `$SESSIONSTORE_S3_SINGLE_WRITER`) does not accept one writer at a time
    (the probe of the store, `s3_open.check_conditional`). `probe=False` (a dry
    run) sends nothing here: no write at all, and no check of the server.
    """

    def __init__(
        self,
        url: S3Url,
        settings: S3Settings | None = None,
        *,
        single_writer: bool | None = None,
        probe: bool = True,
    ) -> None:
        if not url.prefix:
            raise StorageError(str(url), "a mirror destination needs a prefix: s3://BUCKET/PREFIX")
        super().__init__(url, settings)
        self.store = self._store  # one client per destination: each costs ~0.2 s to make
        if probe:
            self.check_server(single_writer)
        self.pool = ThreadPoolExecutor(UPLOADS, thread_name_prefix="s3-put")
        self.slots = threading.BoundedSemaphore(IN_FLIGHT)

    def __str__(self) -> str:
        return str(self.url)

    def check_server(self, single_writer: bool | None = None) -> None:
        """The probe of the server (`s3_open.check_conditional`), if `probe=False` skipped it."""
        check_conditional(self, single_writer, "another writer could overwrite a sealed record")

    def key(self, rel: str) -> str:
        """The bucket key of a destination path ("" is the prefix itself)."""
        return self.url.key(rel) if rel else self.url.prefix

    def problem(self, exc: Exception, rel: str) -> str:
        """One line for a failure on `rel` (client_error: no credential, no server text)."""
        return client_error(exc, rel, self.url, self.settings).problem

    def abort_incomplete_uploads(self) -> int:
        """Abort every multipart upload left below the prefix (by a killed pass); how many.

        obstore cannot list multipart uploads, so boto3 does (the issue's fallback
        client), built from the same settings. Imported here only: a pass needs it
        only after an interrupted one.
        """
        from sessionstore.storage.s3_keys import boto3_client

        client = boto3_client(self.settings)
        bucket, below = self.url.bucket, self.url.prefix + "/"
        aborted = 0
        for page in client.get_paginator("list_multipart_uploads").paginate(
            Bucket=bucket, Prefix=below
        ):
            for upload in page.get("Uploads", []):
                client.abort_multipart_upload(
                    Bucket=bucket, Key=upload["Key"], UploadId=upload["UploadId"]
                )
                aborted += 1
        return aborted


class Upload:
    """What `fill` writes one destination file into: memory, then parts past SINGLE_PUT_MAX."""

    def __init__(self, dest: S3Dest, key: str) -> None:
        self.dest = dest
        self.key = key
        self.parts: list[bytes] = []
        self.size = 0
        self.md5 = hashlib.md5(usedforsecurity=False)
        self.writer: WritableFile | None = None

    def write(self, data: bytes | memoryview) -> None:
        # Bytes for obstore: a view of the redactor's chunk (network-bound here anyway).
        data = data if type(data) is bytes else bytes(data)
        self.size += len(data)
        if self.writer is not None:
            self.writer.write(data)
            return
        self.parts.append(data)
        self.md5.update(data)
        if self.size > SINGLE_PUT_MAX:
            import obstore

            self.writer = obstore.open_writer(
                self.dest.store,
                self.key,
                buffer_size=PART_SIZE,
                max_concurrency=PART_CONCURRENCY,
            )
            for part in self.parts:
                self.writer.write(part)
            self.parts = []

    def abort(self, exc: BaseException) -> None:
        """Abandon a streamed upload: leaving its context with an error aborts it."""
        if self.writer is not None:
            writer, self.writer = self.writer, None
            writer.__exit__(type(exc), exc, exc.__traceback__)

    def finish_streamed(self) -> os.stat_result:
        """Complete a streamed upload, then read its ETag back (its completion says none)."""
        import obstore

        assert self.writer is not None
        writer, self.writer = self.writer, None
        try:
            writer.close()
        except Exception:
            # A failed completion may leave the upload behind: abort it now, not only
            # after a killed pass (this pass clears the in-progress flag at its end).
            with contextlib.suppress(Exception):
                self.dest.abort_incomplete_uploads()
            raise
        meta = obstore.head(self.dest.store, self.key)
        return object_stat(meta["size"], meta["e_tag"])

    def data(self) -> bytes:
        return b"".join(self.parts)

    def expected(self) -> os.stat_result:
        """The metadata a single PUT of `data` yields: its ETag is the MD5 of its bytes."""
        return object_stat(self.size, f'"{self.md5.hexdigest()}"')


def put_later(dest: S3Dest, key: str, data: bytes) -> Future[str | None]:
    """Start an unconditional PUT on the upload threads; its ETag when done.

    Blocks while IN_FLIGHT PUTs are pending (bounded memory).
    """
    import obstore

    dest.slots.acquire()

    def put() -> str | None:
        try:
            result = obstore.put(dest.store, key, data, use_multipart=False)
            return result["e_tag"]
        finally:
            dest.slots.release()

    try:
        return dest.pool.submit(put)
    except BaseException:
        dest.slots.release()
        raise


class Reader:
    """A read handle on one object (a comparison): exact-size reads over a GET stream."""

    def __init__(self, result: Any) -> None:
        meta = result.meta
        self.stat = object_stat(meta["size"], meta["e_tag"])
        self._chunks = iter(result.stream(min_chunk_size=1 << 20))
        self._buf = b""

    def read(self, n: int) -> bytes:
        while len(self._buf) < n:
            chunk = next(self._chunks, None)
            if chunk is None:
                break
            self._buf += bytes(chunk)
        out, self._buf = self._buf[:n], self._buf[n:]
        return out


def fetch(dest: S3Dest, rel: str, on_error: Callable[[str], None]) -> Any | None:
    """A GET of `rel`, or None (absent, or failed: reported through `on_error`)."""
    import obstore

    try:
        return obstore.get(dest.store, dest.key(rel))
    except FileNotFoundError:
        return None
    except Exception as exc:
        on_error(dest.problem(exc, rel))
        return None

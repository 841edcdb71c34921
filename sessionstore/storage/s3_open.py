"""Opening an `s3://` store: one `S3Storage` per URL per process, its server probed once.

`open_store` is how the engine opens a store in a bucket (`Store(url)`): before
its first write it probes the server for `If-None-Match: *` and `If-Match` (once per process
per endpoint and bucket) and refuses one that ignores it, unless the store is accepted as
single-writer (`check_conditional`, which a mirror destination runs too).
`storage_at` finds the opened store that holds an `S3Path`
(how a session or record named by its path reaches its storage, as
`store.files.locate` does for a local path).
"""

from __future__ import annotations

import os
import threading

from sessionstore.errors import StorageError
from sessionstore.storage.s3 import S3Storage
from sessionstore.storage.s3_config import S3Settings, S3Url
from sessionstore.storage.s3_path import S3Path

__all__ = ["SINGLE_WRITER_ENV", "check_conditional", "open_store", "storage_at"]

SINGLE_WRITER_ENV = "SESSIONSTORE_S3_SINGLE_WRITER"

# Stores opened by this process, by URL, and what each (endpoint, bucket)'s probe found:
# a process probes a bucket once, so `inspect` pays one probe, not one per session.
_OPENED: dict[str, S3Storage] = {}
_PROBED: dict[tuple[str, str], str] = {}  # "" or the condition the server ignores
_OPEN_LOCK = threading.Lock()


def open_store(url: S3Url, *, single_writer: bool | None = None) -> S3Storage:
    """The store at `url`, its server probed for `If-None-Match: *` once per process,
    before its first write.

    A server that ignores the condition is refused (`StorageError` naming the
    endpoint, at the first write, or here when this process probed it already)
    unless `single_writer` (None: the `SESSIONSTORE_S3_SINGLE_WRITER` variable
    is `1`) accepts a store with one writer at a time. A reader sends no probe:
    it writes nothing, and a read-only key can read. A missing bucket, bad
    credentials and an unreachable endpoint are refused by the first request.
    """
    settings = S3Settings.from_env()
    with _OPEN_LOCK:
        storage = _OPENED.get(str(url))
        if storage is None or storage.settings != settings:
            storage = S3Storage(url, settings)
        _OPENED[str(url)] = storage
        known = (settings.where, url.bucket) in _PROBED

    def gate() -> None:
        check_conditional(storage, single_writer, "two writers could take the same record")

    if known:
        gate()  # no request: a server known to ignore the condition is refused at once
        # Passed: an earlier opening's gate, left pending by its refusal, would refuse this
        # one's writes too (the storage is shared), though it accepts one writer.
        storage.gate_writes(None)
    else:
        storage.gate_writes(gate)  # a command that only reads never sends the probe
    return storage


def check_conditional(storage: S3Storage, single_writer: bool | None, risk: str) -> None:
    """Probe `storage`'s server for `If-None-Match: *` and `If-Match` (once per process per
    endpoint and bucket) and set `storage.enforced`; `StorageError` naming the endpoint,
    the condition and `risk` (what could go wrong there) if it ignores one, unless
    `single_writer` (None: the `SESSIONSTORE_S3_SINGLE_WRITER` variable is `1`)."""
    if single_writer is None:
        single_writer = os.environ.get(SINGLE_WRITER_ENV, "") == "1"
    probe = (storage.settings.where, storage.url.bucket)
    with _OPEN_LOCK:
        if probe not in _PROBED:
            _PROBED[probe] = storage.probe_conditional()
        ignored = _PROBED[probe]
        storage.enforced = not ignored
    if ignored and not single_writer:
        raise StorageError(
            str(storage.url),
            f"the server at {storage.settings.where} ignores {ignored}, so {risk}; use a "
            f"server that enforces it, or accept one writer at a time with --single-writer "
            f"({SINGLE_WRITER_ENV}=1)",
        )


def storage_at(path: S3Path, depth: int) -> tuple[S3Storage, str]:
    """The opened store holding `path` and the key of `path` in it, the key being
    its last `depth` components (1: a session, 3: a record); `StorageError` if no
    store of this process holds it."""
    parts = path.parts
    top = S3Path(*parts[: len(parts) - depth])
    storage = _OPENED.get(str(top)) if len(parts) - depth >= 2 else None
    if storage is None:
        raise StorageError(str(path), "is in no s3:// store opened by this process")
    return storage, "/".join(parts[len(parts) - depth :])

"""What one mirror pass needs from its `Mirror`: `PassConfig`, built by the Mirror per pass.

The pass modules (walk, sync, finish) read this and never the Mirror itself,
so none of them reaches into another module's private state.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

TYPE_CHECKING = False  # typing's, without importing typing (mypy reads it as such)
if TYPE_CHECKING:
    from typing import Final

    from sessionstore.mirror.exclude import Exclude
    from sessionstore.mirror.lock import DestLock
    from sessionstore.redact.redactor import Redactor
    from sessionstore.storage.s3_tree_io import S3Dest


class PassConfig:
    """The settings of one pass (see `Mirror` for what each means), read-only.

    A plain class, not a frozen dataclass: importing `dataclasses` (and the
    `inspect` it imports) was a tenth of a no-op pass's start-up (issue 16).
    `Final` makes mypy refuse a change to a field.
    """

    __slots__ = (
        "chunk_size",
        "delete",
        "dest_real",
        "dry_run",
        "durable",
        "exclude",
        "fingerprints",
        "lock",
        "on_chunk",
        "redactor",
        "remote",
        "source",
        "window_ns",
    )

    def __init__(
        self,
        *,
        source: Path,
        dest_real: Path,
        remote: S3Dest | None,
        redactor: Redactor | None,
        durable: bool,
        delete: bool,
        dry_run: bool,
        exclude: Exclude | None,
        window_ns: int,
        chunk_size: int,
        fingerprints: dict[object, str],
        on_chunk: Callable[[str], None] | None,
        lock: DestLock | None,
    ) -> None:
        self.source: Final = source
        self.dest_real: Final = dest_real  # resolved once, by the Mirror (s3://: its URL)
        self.remote: Final = remote  # an s3:// destination
        self.redactor: Final = redactor
        self.durable: Final = durable
        self.delete: Final = delete
        self.dry_run: Final = dry_run  # write nothing in the destination (`dry.DryTree`)
        # None: no patterns (the walk then never calls into exclude).
        self.exclude: Final = exclude
        self.window_ns: Final = window_ns
        self.chunk_size: Final = chunk_size
        # The Mirror's scrypt memo (`cache.fingerprint`), shared by its passes: mutable on purpose.
        self.fingerprints: Final = fingerprints
        self.on_chunk: Final = on_chunk  # the Mirror's test hook, called after each chunk
        # The daemon's lock, while one runs: the pass checks the destination is still the
        # one locked (`DestinationLost`), and never creates it.
        self.lock: Final = lock

"""What one mirror pass needs from its `Mirror`: `PassConfig`, built by the Mirror per pass.

The pass modules (walk, sync, finish) read this and never the Mirror itself,
so none of them reaches into another module's private state.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from sessionstore.mirror.exclude import Exclude
    from sessionstore.redact.redactor import Redactor
    from sessionstore.storage.s3_tree_io import S3Dest


@dataclass(frozen=True)
class PassConfig:
    """The settings of one pass (see `Mirror` for what each means)."""

    source: Path
    dest_real: Path  # resolved once, by the Mirror (an s3:// destination: its URL)
    remote: S3Dest | None  # an s3:// destination
    redactor: Redactor | None
    durable: bool
    delete: bool
    dry_run: bool  # write nothing in the destination (`dry.DryTree`)
    exclude: Exclude | None  # None: no patterns (the walk then never calls into exclude)
    window_ns: int
    chunk_size: int
    # The Mirror's scrypt memo (`cache.fingerprint`), shared by its passes: mutable on purpose.
    fingerprints: dict[object, str]
    on_chunk: Callable[[str], None] | None  # the Mirror's test hook, called after each chunk

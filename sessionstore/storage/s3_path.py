"""`S3Path`: where a session or record of an `s3://` store is, for messages and outputs.

The engine names sessions and records by `Path` (`Session.path`,
`Record.path`, every error's location). A session in a bucket gets an
`S3Path`, a `Path` whose text is its URL (`s3://bucket/prefix/ID/trials/3`)
and that cannot be used as a local path: `os.fspath` raises `StorageError`,
so any local operation reached with it (an `open`, a `stat`, a watch) fails
loudly instead of touching a local file of a similar name. Everything read
or written goes through the store's `S3Storage` (`storage.s3_open.storage_at`
finds it from an `S3Path`).

Kept apart from `s3_config` and `s3` so that telling a local path from a
remote one imports nothing else.
"""

from __future__ import annotations

import os
from pathlib import Path, PosixPath

from sessionstore.errors import StorageError

TYPE_CHECKING = False  # typing's, without importing typing (mypy reads it as such)
if TYPE_CHECKING:
    from sessionstore.storage.s3_config import S3Url

__all__ = ["S3Path", "absolute", "s3_root", "split_session_url"]


class S3Path(PosixPath):
    """`s3://BUCKET/KEY...`: a `Path` for display only (see the module docstring).

    Built as `S3Path("/BUCKET/KEY...")`; `/`, `parent`, `name` and `joinpath`
    give `S3Path`s.
    """

    __slots__ = ()

    def __str__(self) -> str:
        return "s3:/" + super().__str__()

    def __fspath__(self) -> str:
        raise StorageError(str(self), "is in object storage, not a local path")

    @property
    def bucket(self) -> str:
        return self.parts[1]

    @property
    def key(self) -> str:
        """The bucket key it names ("" for the bucket itself)."""
        return "/".join(self.parts[2:])


def s3_root(root: str | os.PathLike[str]) -> S3Url | None:
    """The `s3://` store `root` names (a URL string or an `S3Path`), else None (local).

    Raises `InvalidInput` for a malformed URL (`s3_config.parse_s3_url`).
    """
    if isinstance(root, S3Path):
        text = str(root)
    elif isinstance(root, str) and root[:5].lower() == "s3://":
        text = root
    else:
        return None
    from sessionstore.storage.s3_config import parse_s3_url

    return parse_s3_url(text)


def absolute(path: Path) -> Path:
    """`path` made absolute: a local path by `os.path.abspath`, an `S3Path` as it is."""
    return path if isinstance(path, S3Path) else Path(os.path.abspath(path))


def split_session_url(text: str) -> tuple[str, str]:
    """`s3://BUCKET/PREFIX/ID` as its store's URL and the id (neither checked here)."""
    store, _, session_id = text.rstrip("/").rpartition("/")
    return store, session_id

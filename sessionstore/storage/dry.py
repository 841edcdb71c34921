"""What every dry run's tree shares (`mirror.dry.DryTree` over a directory, `s3_dry.S3DryTree`
over a bucket): each change answered as if it had succeeded, nothing touched.

`DryChanges` is mixed in before the real tree class, so its answers replace
the tree's changes while every read stays the real one; `Count` is where a
dry run's `fill` writes (the bytes counted, the redacted size, not kept).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable
from typing import Any, Protocol

from sessionstore.storage.tree import Sealed

__all__ = ["Count", "DryChanges"]


class Count:
    """A `Writer` that keeps nothing: `size` is how many bytes were written."""

    def __init__(self) -> None:
        self.size = 0

    def write(self, data: bytes | memoryview, /) -> None:
        self.size += len(data)


class _Tree(Protocol):
    def lstat(self, d: Any, name: str) -> os.stat_result | None: ...

    def commit_file(
        self, d: Any, name: str, mode: int, fill: Callable[[Any], None], guards: Any = ...
    ) -> os.stat_result | None: ...


class DryChanges:
    """The changes of a tree, answered without touching anything (see the module docstring).

    What a dry run cannot know: whether an emptied directory would be removed
    by `--delete` (it answers no), and what a concurrent writer does meanwhile.
    """

    def commit_marker(
        self: _Tree, d: Any, name: str, mode: int, fill: Callable[[Any], None]
    ) -> os.stat_result | None:
        if self.lstat(d, name) is not None:
            raise Sealed(name)
        return self.commit_file(d, name, mode, fill)

    def unlink(self: _Tree, d: Any, name: str) -> bool:
        return self.lstat(d, name) is not None

    def rmdir(self, d: Any, name: str) -> bool:
        return False

    def fchmod(self, d: Any, fd: int, mode: int) -> None:
        pass

    def sweep(self) -> bool:
        return True  # nothing removed: a dry run keeps the flag as it found it

    def put_root_file(self, name: str, chunks: Iterable[bytes], mode: int) -> None:
        pass  # not even consumed: the old file it reads from stays as it is

    def set_flag(self, name: str) -> None:
        pass

    def reset_claims(self, claims: dict[str, Any]) -> None:
        pass

    def clear_flag(self, name: str) -> None:
        pass

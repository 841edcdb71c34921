"""The storage interface and its key rules.

A key is a relative path of '/'-separated components, like
`trials/3/trial.json`: no empty component, no `.` or `..`, no NUL, no
leading or trailing '/'. A prefix is "" (the root) or a key; a listing
names what is directly below it.

Each operation is atomic for a reader on any host: an object is seen whole
or not at all. Absent is an answer, never an error; anything else that
stops an operation (a symlink where a key is, a non-regular file, an I/O
error) raises `StorageError` naming the key.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Protocol

from sessionstore.errors import InvalidInput


@dataclass(frozen=True)
class Listed:
    """One name directly below a listed prefix: an object, or a prefix with objects below."""

    name: str
    is_prefix: bool


def check_key(key: str, what: str = "storage key") -> str:
    """`key` if it is a valid key, else `InvalidInput` naming what is wrong."""
    if not key or key.startswith("/") or key.endswith("/"):
        raise InvalidInput(what, f"{key!r} must be a relative path with no leading or trailing '/'")
    if "\0" in key:
        raise InvalidInput(what, f"{key!r} contains a NUL byte")
    if any(part in ("", ".", "..") for part in key.split("/")):
        raise InvalidInput(what, f"{key!r} has an empty, '.' or '..' component")
    return key


def join(prefix: str, name: str) -> str:
    return f"{prefix}/{name}" if prefix else name


class Storage(Protocol):
    """Five operations; every rule of the store engine is written against these alone."""

    def create(self, key: str, data: bytes) -> bool:
        """Store `data` at `key` only if nothing is there; False (nothing written) if taken.

        This is how a record is written exactly once: two writers on two hosts
        cannot both succeed.
        """
        ...

    def put(self, key: str, data: bytes) -> None:
        """Store `data` at `key`, replacing what is there, atomically."""
        ...

    def get(self, key: str, limit: int) -> bytes | None:
        """The bytes at `key`; None if absent; `TooLarge` (nothing read) past `limit` bytes."""
        ...

    def list(self, prefix: str) -> Iterator[Listed]:
        """What is directly below `prefix` ("" for the root), in no particular order.

        An absent prefix lists nothing.
        """
        ...

    def remove_tree(self, prefix: str) -> None:
        """Remove every object at or below `prefix`; absent is fine."""
        ...

"""The storage interface and its key rules.

A key is a relative path of '/'-separated components, like
`trials/3/trial.json`: no empty component, no `.` or `..`, no NUL, no
leading or trailing '/'. A prefix is "" (the root) or a key; a listing
names what is directly below it. A prefix exists while an object is below
it (a local backend also keeps empty directories, and `claim` makes one).

Each operation is atomic for a reader on any host: an object is seen whole
or not at all, and `create` and `put` are durable when they return. Absent
is an answer, never an error; what the tree holds that stops an operation
(a symlink where a key is, a non-regular file, a component that is not a
prefix) and any failure of a read raise `StorageError`, whose `key` is the
key at fault: the key asked for, or the prefix of it whose last component is the
problem (`s/trials` for a `trials` that is a FIFO). A write that fails
for another reason (no space left, an I/O error) raises that `OSError`
itself, and leaves nothing visible. A backend's own
in-progress writes (names starting `.sstmp-`, the format's temp entries)
are never listed.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import NamedTuple, Protocol

from sessionstore.errors import InvalidInput, StorageError


class Listed(NamedTuple):
    """One name directly below a listed prefix: an object, or a prefix with objects below.

    An entry that is neither (a local symlink, FIFO or device) is listed as
    not a prefix; reading it as an object raises `StorageError`. A named
    tuple, not a frozen dataclass: `inspect` lists one per record of every
    session, and the dataclass's `__init__` cost 2.5 k instructions more each.
    """

    name: str
    is_prefix: bool


_BAD_PARTS = frozenset(("", ".", ".."))


def check_key(key: str, what: str = "storage key") -> str:
    """`key` if it is a valid key, else `InvalidInput` naming what is wrong."""
    # Quoted, not repr'd: the CLI escapes a message once where it prints it (a non-str
    # key is a caller's bug, shown by repr).
    shown = f"'{key}'" if isinstance(key, str) else repr(key)
    if not isinstance(key, str) or not key or key.startswith("/") or key.endswith("/"):
        raise InvalidInput(what, f"{shown} must be a relative path with no leading or trailing '/'")
    if "\0" in key:
        raise InvalidInput(what, f"{shown} contains a NUL byte")
    if not _BAD_PARTS.isdisjoint(key.split("/")):  # C-level: once per key of every read
        raise InvalidInput(what, f"{shown} has an empty, '.' or '..' component")
    return key


def check_names(names: Sequence[str]) -> None:
    """`InvalidInput` unless every name is one key component (C-level checks: one per batch)."""
    joined = "".join(names)
    if "/" in joined or "\0" in joined or not _BAD_PARTS.isdisjoint(names):
        bad = next(n for n in names if "/" in n or "\0" in n or n in _BAD_PARTS)
        raise InvalidInput("storage name", f"'{bad}' must be one key component")


def check_prefix(prefix: str) -> str:
    """`prefix` if it is "" (the root) or a valid key, else `InvalidInput`."""
    return prefix if prefix == "" else check_key(prefix, "storage prefix")


def join(prefix: str, name: str) -> str:
    """The key of `name` directly below `prefix` ("" is the root)."""
    return f"{prefix}/{name}" if prefix else name


class Storage(Protocol):
    """Seven operations; every rule of the store engine is written against these alone."""

    def create(self, key: str, data: bytes) -> bool:
        """Store `data` at `key` only if nothing is there; False (nothing written) if taken.

        This is how a record is written exactly once: two writers on two hosts
        cannot both succeed. Everything put below the key's prefix earlier is
        durable before the new object can be seen (a marker never points at
        missing files).
        """
        ...

    def put(self, key: str, data: bytes, *, mode: int | None = None) -> None:
        """Store `data` at `key`, replacing what is there, atomically.

        `mode`: the permission bits, for a backend that keeps them (None: the
        format's file mode); others ignore it.
        """
        ...

    def get(self, key: str, limit: int) -> bytes | None:
        """The bytes at `key`; None if absent; `TooLarge` (nothing read) past `limit` bytes."""
        ...

    def get_each(
        self, prefix: str, names: Sequence[str], leaf: str, limit: int
    ) -> list[bytes | StorageError | None]:
        """`get` of `prefix/<name>/leaf` for each name, in order, each `StorageError`
        (`TooLarge` too) as that name's answer: one unusable object never stops the others.

        How a collection's markers are read (`s/trials`, the numbers,
        `trial.json`): local, `prefix` is reached once; an object store may
        send the GETs concurrently. `prefix` must be a key and each name and
        `leaf` one component, else `InvalidInput` before anything is read.
        """
        ...

    def list(self, prefix: str) -> Iterator[Listed]:
        """What is directly below `prefix` ("" for the root), in no particular order.

        An absent prefix lists nothing.
        """
        ...

    def remove_tree(self, prefix: str) -> None:
        """Remove every object at or below `prefix`; absent is fine."""
        ...

    def claim(self, prefix: str) -> bool:
        """Take the prefix `prefix` if no one has: True for the one caller that took it.

        How the engine allocates a record number, atomically across hosts.
        Local: `mkdir(2)` (the format's rule). An object store: `create` of
        a claim object below the prefix.
        """
        ...

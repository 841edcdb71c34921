"""`Tree`: the per-pass, streaming face of a storage backend that the mirror writes through.

`Storage` (base.py) is what the store engine needs: whole objects by key.
A mirror pass needs more, and needs it cheaply per file: the metadata of
an entry (the no-op pass decides "unchanged" from it alone, one call per
file), a streaming read to compare, a streaming atomic write, a
create-if-absent commit for record markers, removals, and a way to make
everything written so far durable before a marker. `local_tree.LocalTree`
is the first implementation (a local directory through directory fds).

For an object-storage backend, the mapping is:

- a *directory* is a key prefix; `Dir.rel` is it ("" for the root) and
  `entry(d, name, key)` is a HEAD of `key`, answering `st_size`, `st_mtime_ns`
  and, for `st_ino`, anything that changes whenever the object is replaced
  (a generation number or a hash of the ETag);
- `commit_file` is a single PUT (or a multipart upload completed only after
  `fill` returned), `commit_marker` a conditional PUT (`If-None-Match: *`)
  that raises `Sealed` when the key exists;
- `flush` waits for outstanding writes, and `unconfirmed` says whether one
  below a record failed (its marker then waits); `check` is always True (no symlinks);
- `open_file` returns a handle on a ranged GET.

Rules every implementation keeps: absent is an answer (None or False), never
an error; nothing is ever written outside the tree (on a local disk: a symlink
or non-directory where a directory belongs is reported through the error sink
once and nothing is written through it); a directory moved or replaced during
a pass is refused before anything is written to it.
"""

from __future__ import annotations

from collections.abc import Callable

ErrorSink = Callable[[str, str], None]  # (destination path, one-line problem)


class BytesFile:
    """A `RootFile` held in memory: an object fetched whole, or a file's bytes rebuilt."""

    def __init__(self, data: bytes) -> None:
        self.data = data
        self.size = len(data)

    def read_at(self, offset: int, n: int) -> bytes:
        return self.data[offset : offset + n]

    def close(self) -> None:
        self.data = b""


class Sealed(Exception):
    """`commit_marker` found its name taken: the record was sealed by another writer."""


class RecordSealed(Exception):
    """`commit_file` found the marker of a record the file is in, just before its commit:
    the record was sealed meanwhile and the file was not committed (nothing left behind).

    `record` is that record's path from the root.
    """

    def __init__(self, record: str) -> None:
        super().__init__(record)
        self.record = record


# The protocols are for mypy: defined only when it reads them, so that a pass imports no
# `typing` (its start-up, issue 16). Nothing subclasses them or checks an instance
# against them at run time.
TYPE_CHECKING = False  # typing's, without importing typing (mypy reads it as such)
if TYPE_CHECKING:
    import os
    from collections.abc import Iterable, Sequence
    from typing import Protocol, TypeVar

    from sessionstore.storage.journal import Claim

    class Writer(Protocol):
        """What `commit_file`'s `fill` writes the bytes into (a local `AtomicFile`, an upload)."""

        def write(self, data: bytes | memoryview, /) -> None: ...

    class RootFile(Protocol):
        """A file at the root read by offset (the change cache: each directory's part when
        the pass reaches it, never the whole file at once)."""

        size: int  # when it was opened

        def read_at(self, offset: int, n: int) -> bytes:
            """Up to `n` bytes at `offset` (fewer only at the end; `OSError` if unreadable)."""
            ...

        def close(self) -> None: ...

    class Dir(Protocol):
        """A directory of the tree (a prefix): where it sits and what the pass learnt about it."""

        name: str
        rel: str  # its path from the root ("" for the root)
        created: bool  # made by this pass: it holds nothing the pass did not write

    D = TypeVar("D", bound=Dir)  # the backend's own directory type

    class Tree(Protocol[D]):
        """The operations a mirror pass performs on its destination, and only those.

        One per pass; not thread-safe. Each method taking a directory may create
        nothing but what it says; errors about a directory go to the error sink.
        """

        root: D

        def open_root(self, path: str, *, create: bool = True) -> bool:
            """Open (creating if missing) the destination root; False (reported) if unusable.

            Without `create`, a missing root raises `FileNotFoundError` (a bucket's
            prefix always exists: a name).
            """
            ...

        def identity(self) -> tuple[int, int]:
            """Something that identifies the root (a local (dev, ino)), to skip it in the source."""
            ...

        def entry(self, d: D, name: str, key: str) -> os.stat_result | None:
            """The metadata of entry `name` of `d` (`key`: its path from the root); None if absent.

            Never follows a symlink at `name`. The no-op pass's one call per file.
            """
            ...

        def lstat(self, d: D, name: str) -> os.stat_result | None:
            """`entry` for callers without the key at hand (markers, --delete)."""
            ...

        def present(self, d: D) -> bool:
            """Whether `d` exists as a directory, creating it (and its parents) if missing."""
            ...

        def open_file(self, d: D, name: str) -> int | None:
            """A read handle on a regular file (never a symlink, never blocking), else None."""
            ...

        def reach(self, d: D, *, quiet: bool = False) -> bool:
            """Whether `d` exists and is usable; a bad one is reported once unless `quiet`."""
            ...

        def check(self, d: D) -> bool:
            """Whether `d` and its parents still sit where they were found (before a change)."""
            ...

        def read(self, fd: int, n: int) -> bytes:
            """Up to `n` bytes of an open handle (fewer only at its end)."""
            ...

        def fstat(self, fd: int) -> os.stat_result:
            """The metadata of an open handle."""
            ...

        def close_file(self, fd: int) -> None:
            """Release a handle from `open_file`."""
            ...

        def open_root_file(self, name: str) -> RootFile | None:
            """A regular file at the root (the change cache), open for reads by offset, else
            None (also, on a local tree, when another user made it: storage/local_tree_root)."""
            ...

        def put_root_file(self, name: str, chunks: Iterable[bytes], mode: int) -> None:
            """Replace a file at the root atomically with the concatenated `chunks`.

            An error raised while `chunks` is consumed propagates and leaves the old file.
            """
            ...

        def commit_file(
            self,
            d: D,
            name: str,
            mode: int,
            fill: Callable[[Writer], None],
            guards: Sequence[tuple[D, str]] = (),
        ) -> os.stat_result | None:
            """Write `name` atomically from `fill`; its metadata, or None if `d` is unusable.

            Readers see the old file or the new one, never a part. Errors of
            `fill` propagate and leave nothing behind. `guards`: (record directory,
            marker name) of each record `d` is in; a local tree that finds one of
            those markers just before the rename commits nothing (`RecordSealed`,
            or, durable, the path in `withheld`). A bucket does not look yet.
            """
            ...

        def commit_marker(
            self, d: D, name: str, mode: int, fill: Callable[[Writer], None]
        ) -> os.stat_result | None:
            """`commit_file` only if `name` is absent; raises `Sealed` if it is taken."""
            ...

        def unconfirmed(self, d: D) -> bool:
            """Whether a write below `d` failed after `commit_file` returned (before a marker)."""
            ...

        def fchmod(self, d: D, fd: int, mode: int) -> None:
            """Set the permission bits of an open file of `d`."""
            ...

        def unlink(self, d: D, name: str) -> bool:
            """Remove a file; False if it was gone or `d` is unusable."""
            ...

        def rmdir(self, d: D, name: str) -> bool:
            """Remove a directory that holds no file (empty directories below it go too);
            False otherwise."""
            ...

        def sweep(self) -> bool:
            """After an interrupted pass: remove its dead temps anywhere in the tree.

            False when part of the tree could not be swept (reported through the error
            sink): the pass then leaves the in-progress flag for the next one.
            """
            ...

        def set_flag(self, name: str) -> None:
            """Create the in-progress flag at the root, durably if asked (a local tree then
            appends a claim to it for each file it commits: storage/journal.py)."""
            ...

        def claims(self, name: str) -> dict[str, list[Claim]]:
            """The claims an interrupted pass left in the in-progress flag `name`, by path."""
            ...

        def reset_claims(self, claims: dict[str, list[Claim]]) -> None:
            """Leave only `claims` in the flag this pass set (the cache holds the others)."""
            ...

        def clear_flag(self, name: str) -> None:
            """Remove the flag (absent is fine)."""
            ...

        def flush(self) -> None:
            """Make everything committed so far durable (before a record's marker)."""
            ...

        def close(self, d: D) -> None:
            """The pass is done with `d`: flush it if it changed, release it."""
            ...

        def close_all(self) -> None:
            """End of pass: flush what is left and release everything."""
            ...

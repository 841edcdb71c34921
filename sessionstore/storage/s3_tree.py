"""A prefix of a bucket as a `Tree` (storage/tree.py): the mirror's S3 destination.

One per pass, over the `S3Dest` its Mirror keeps. The mapping
(docs/object-storage.md, "Mirror to S3"):

- `open_root` LISTs the whole prefix once (1,000 keys a request): the
  answer of every `entry`/`lstat` of the pass, so a no-op pass makes a
  handful of requests, never a HEAD per file. An entry's `st_size` is the
  object's size, `st_ino` a hash of its ETag. The change cache is the index
  of what this mirror committed, and the LIST validates it: a cache entry
  counts only while the listed object has the size and ETag it recorded.
- `commit_file` PUTs (below SINGLE_PUT_MAX, on the upload threads, in
  parallel) or streams a multipart upload (larger files, as read).
  Before a marker the pass asks `unconfirmed`, which waits for every
  pending PUT: if one of the record failed, the marker waits; else it is
  committed by a conditional create
  (`If-None-Match: *`): a record sealed meanwhile raises `Sealed`, and the
  server keeps anyone from overwriting a marker.
- the change cache is written with `If-Match` on the ETag it was read with
  (`If-None-Match: *` when there was none): a second mirror that rewrote it
  meanwhile is never clobbered (this pass then just keeps no cache).
- directories are prefixes: `present` is always true (an empty directory
  cannot be mirrored), `check` too (a bucket has no symlinks to swap in).
- `sweep` (after an interrupted pass) aborts incomplete multipart uploads.
"""

from __future__ import annotations

import errno
import os
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import Future
from typing import TYPE_CHECKING, Any

from sessionstore.errors import StorageError
from sessionstore.storage.local_tree_dirs import LocalDir
from sessionstore.storage.s3_keys import objects_below
from sessionstore.storage.s3_tree_io import (
    Reader,
    S3Dest,
    Upload,
    fetch,
    object_key,
    object_stat,
    put_later,
)
from sessionstore.storage.tree import BytesFile, ErrorSink, Sealed

if TYPE_CHECKING:
    from sessionstore.storage.journal import Claim
    from sessionstore.storage.tree import Tree, Writer

__all__ = ["S3Dest", "S3Tree"]


class S3Tree:
    """The destination of one pass in a bucket; nodes are `LocalDir`s used by `rel` only."""

    def __init__(
        self,
        dest: S3Dest,
        root: LocalDir,
        error: ErrorSink,
        before_change: Callable[[], None],
        durable: bool,
    ) -> None:
        self.dest = dest
        self.root = root
        self.error = error
        self.before_change = before_change
        self.objects: dict[str, os.stat_result] = {}  # destination path -> metadata
        self.dirs: set[str] = {""}  # every prefix with an object below it
        self.pending: dict[str, Future[str | None]] = {}
        self.failed: set[str] = set()  # PUTs that failed after `commit_file` returned
        self.etags: dict[str, str | None] = {}  # root files read: their ETag
        self.readers: dict[int, Reader] = {}

    # -- the listing -------------------------------------------------------------

    def open_root(self, path: str, *, create: bool = True) -> bool:
        """LIST the prefix (`path` is its URL, for messages); False (reported) if it fails.

        A prefix is a name: there is nothing to create, nor to find missing.
        """
        dest = self.dest
        start = len(dest.url.prefix) + 1
        try:
            found = objects_below(dest, dest.url.prefix)
        except StorageError as exc:
            self.error(".", f"destination: {exc.problem}")
            return False
        for key, size, e_tag in found:
            self._add(key[start:], object_stat(size, e_tag))
        return True

    def _add(self, rel: str, st: os.stat_result) -> None:
        self.objects[rel] = st
        while "/" in rel:
            rel = rel.rpartition("/")[0]
            if rel in self.dirs:
                break
            self.dirs.add(rel)

    def identity(self) -> tuple[int, int]:
        return (-1, -1)  # never a directory of the (local) source

    def entry(self, d: LocalDir, name: str, key: str) -> os.stat_result | None:
        return self.objects.get(key)

    def lstat(self, d: LocalDir, name: str) -> os.stat_result | None:
        return self.objects.get(f"{d.rel}/{name}" if d.rel else name)

    def present(self, d: LocalDir) -> bool:
        return True  # a prefix exists once an object is below it; nothing to create

    def reach(self, d: LocalDir, *, quiet: bool = False) -> bool:
        return d.rel in self.dirs

    def check(self, d: LocalDir) -> bool:
        return True

    def open_below(self, parent: LocalDir, d: LocalDir) -> None:
        """Nothing to open: a prefix is a name."""

    def unconfirmed(self, d: LocalDir) -> bool:
        """Whether a PUT below `d` failed after `commit_file` returned (waits for them all)."""
        self.flush()
        if not d.rel:
            return bool(self.failed)
        below = d.rel + "/"
        return any(rel.startswith(below) for rel in self.failed)

    # -- reading -------------------------------------------------------------------

    def open_file(self, d: LocalDir, name: str) -> int | None:
        rel = f"{d.rel}/{name}" if d.rel else name
        if rel not in self.objects:
            return None
        self._wait(rel)
        result = fetch(self.dest, rel, lambda problem: self.error(rel, problem))
        if result is None:
            return None
        handle = len(self.readers) + 1
        while handle in self.readers:
            handle += 1
        self.readers[handle] = Reader(result)
        return handle

    def read(self, fd: int, n: int) -> bytes:
        return self.readers[fd].read(n)

    def fstat(self, fd: int) -> os.stat_result:
        return self.readers[fd].stat

    def close_file(self, fd: int) -> None:
        self.readers.pop(fd, None)

    def open_root_file(self, name: str) -> BytesFile | None:
        """The object fetched whole (one GET, its ETag kept for `put_root_file`'s condition)."""
        result = fetch(self.dest, name, lambda problem: self.error(name, problem))
        if result is None:
            self.etags[name] = None
            return None
        try:
            data = bytes(result.bytes())
        except Exception as exc:
            self.error(name, self.dest.problem(exc, name))
            return None
        self.etags[name] = result.meta["e_tag"]
        return BytesFile(data)

    # -- changing --------------------------------------------------------------------

    def put_root_file(self, name: str, chunks: Iterable[bytes], mode: int) -> None:
        """Replace a root object only if it is still the one read (`OSError` if not)."""
        import obstore
        from obstore import exceptions as oe

        data = b"".join(chunks)  # one conditional PUT of the whole body
        etag = self.etags.get(name)
        condition: Any = {"e_tag": etag} if etag else "create"
        try:
            result = obstore.put(
                self.dest.store, self.dest.key(name), data, mode=condition, use_multipart=False
            )
        except (oe.PreconditionError, oe.AlreadyExistsError):
            raise OSError(
                0, "changed by another writer since this pass read it; not overwritten"
            ) from None
        except Exception as exc:
            raise OSError(0, self.dest.problem(exc, name)) from None
        self.etags[name] = result["e_tag"]

    def commit_file(
        self,
        d: LocalDir,
        name: str,
        mode: int,
        fill: Callable[[Writer], None],
        guards: Sequence[tuple[LocalDir, str]] = (),
    ) -> os.stat_result | None:
        """Upload `name` from `fill`; its expected metadata (small files: the PUT is pending).

        `guards` are not looked at yet: a record sealed during the pass can still
        get this object (docs/mirror.md, "Sealed records"). A HEAD of each marker
        just before the PUT would narrow that, never close it: no PUT can be
        conditional on another key's absence.

        A PUT that fails later is reported when it is waited for (`flush`,
        `unconfirmed`: the record's marker then waits). An error of `fill`
        aborts a streamed upload.
        """
        rel = f"{d.rel}/{name}" if d.rel else name
        key = object_key(self.dest, rel)
        self.before_change()
        self._wait(rel)
        upload = Upload(self.dest, key)
        try:
            fill(upload)
            if upload.writer is not None:
                written = upload.finish_streamed()
            else:
                written = upload.expected()
                self.pending[rel] = put_later(self.dest, upload.key, upload.data())
        except Exception as exc:
            upload.abort(exc)
            if isinstance(exc, OSError) or not _client_error(exc):
                raise
            raise OSError(0, self.dest.problem(exc, rel)) from None
        except BaseException as exc:
            upload.abort(exc)
            raise
        self.failed.discard(rel)
        self._add(rel, written)
        return written

    def commit_marker(
        self, d: LocalDir, name: str, mode: int, fill: Callable[[Writer], None]
    ) -> os.stat_result | None:
        """Seal a record by a conditional create; `Sealed` if taken.

        The caller has asked `unconfirmed` first: every file of the record is in.
        """
        rel = f"{d.rel}/{name}" if d.rel else name
        key = object_key(self.dest, rel)
        self.before_change()
        upload = Upload(self.dest, key)
        fill(upload)  # a marker is at most 64 MiB, read whole by the caller already
        try:
            created = self.dest.create(rel, upload.data())
        except OSError as exc:
            raise OSError(0, getattr(exc, "problem", str(exc))) from None
        if not created:
            raise Sealed(name)
        written = upload.expected()
        self._add(rel, written)
        return written

    def fchmod(self, d: LocalDir, fd: int, mode: int) -> None:
        """Objects have no permission bits."""

    def unlink(self, d: LocalDir, name: str) -> bool:
        import obstore

        rel = f"{d.rel}/{name}" if d.rel else name
        if rel not in self.objects:
            return False
        self.before_change()
        self._wait(rel)
        try:
            obstore.delete(self.dest.store, self.dest.key(rel))
        except Exception as exc:
            raise OSError(0, self.dest.problem(exc, rel)) from None
        del self.objects[rel]
        return True

    def rmdir(self, d: LocalDir, name: str) -> bool:
        """A prefix is gone with its last object: True when nothing is below it any more."""
        below = f"{d.rel}/{name}/" if d.rel else f"{name}/"
        return not any(rel.startswith(below) for rel in self.objects)

    def sweep(self) -> bool:
        """After an interrupted pass: abort its incomplete multipart uploads (the bucket's
        temps; a single PUT leaves none)."""
        try:
            self.dest.abort_incomplete_uploads()
        except Exception as exc:
            self.error(".", f"cannot abort incomplete uploads: {self.dest.problem(exc, '')}")
            return False
        return True

    def claims(self, name: str) -> dict[str, list[Claim]]:
        """None: a bucket keeps no journal (an object cannot be appended to), so the
        objects of a killed pass are this mirror's only once a pass finds them again."""
        return {}

    def reset_claims(self, claims: dict[str, list[Claim]]) -> None:
        """Nothing to keep: a bucket keeps no journal (`claims`)."""

    def set_flag(self, name: str) -> None:
        import obstore

        try:
            obstore.put(self.dest.store, self.dest.key(name), b"", use_multipart=False)
        except Exception as exc:
            raise OSError(errno.EIO, self.dest.problem(exc, name)) from None

    def clear_flag(self, name: str) -> None:
        import obstore

        try:
            obstore.delete(self.dest.store, self.dest.key(name))
        except FileNotFoundError:
            pass
        except Exception as exc:
            self.error(name, self.dest.problem(exc, name))

    # -- waiting for uploads ---------------------------------------------------------

    def _wait(self, rel: str) -> None:
        future = self.pending.pop(rel, None)
        if future is not None:
            self._settle(rel, future)

    def _settle(self, rel: str, future: Future[str | None]) -> None:
        try:
            etag = future.result()
        except Exception as exc:
            self.failed.add(rel)
            self.objects.pop(rel, None)
            self.error(rel, self.dest.problem(exc, rel))
            return
        listed = self.objects.get(rel)
        if listed is not None and object_stat(listed.st_size, etag).st_ino != listed.st_ino:
            # Not the MD5 the object was expected to get (encryption, another server):
            # the cache entry will not vouch for it, and the next pass compares instead.
            self.objects[rel] = object_stat(listed.st_size, etag)

    def flush(self) -> None:
        """Wait for every pending PUT; failures are reported (and listed in `failed`)."""
        pending, self.pending = self.pending, {}
        for rel, future in pending.items():
            self._settle(rel, future)

    def close(self, d: LocalDir) -> None:
        """Nothing is held per directory."""

    def close_all(self) -> None:
        self.flush()
        self.readers.clear()


def _client_error(exc: Exception) -> bool:
    return type(exc).__module__.startswith("obstore")


if TYPE_CHECKING:  # S3Tree is a Tree: checked by mypy, costs nothing at run time
    _check: type[Tree[LocalDir]] = S3Tree

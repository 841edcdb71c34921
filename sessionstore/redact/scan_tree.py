"""Scanning a store, a session or any directory (or one file) for secrets: `sessionstore scan`.

`scan_path` walks the tree by directory fd (`_fs.walk`: nothing followed,
no recursion, one directory fd at a time) and runs the `Scanner` over
every regular file's bytes, streamed in bounded chunks, and over every
entry's name (and a symlink's target text, read with `readlink`, never
followed), and over the end of the path up to each name, the root given
included (`Scanner.scan_across`): a secret holding a `/` is spelled by the
names it spans, none of which holds it (`ab/cdefgh12` as `ab` holding
`cdefgh12`). A symlink, FIFO, socket or device is never opened: it is
reported `Skipped`. What cannot be read is a `ScanError`, and the scan goes on.

Paths are given for people and tools to find the leak, never to repeat
it: each path is shown through the scanner's redactor (`Scanner.display_name`)
whole, the root as it was given included, so a secret in a file name is
replaced by the marker in every path printed, and so is one a name completes
with the root (`abc/defgh12` found below the root `r/abc`).
"""

from __future__ import annotations

import errno
import os
import stat
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from sessionstore._fs import read as fsread
from sessionstore._fs.walk import Entry, Node, walk
from sessionstore.errors import InvalidInput, RedactionUnsafe
from sessionstore.redact.scan import Hit, Scanner

__all__ = ["Finding", "ScanError", "ScanTotals", "Skipped", "display_path", "scan_path"]

_ROOT_FLAGS = os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC


@dataclass(frozen=True, slots=True)
class Finding:
    """A secret at `path`: in its bytes at `offset` (`where` "content"), in its name
    (`where` "name", `offset` into the name), spelled by its name and the names above it
    across a `/` ("path", `offset` into the name, negative: it starts above) or in a
    symlink's target ("link target")."""

    path: str
    offset: int
    where: str
    kind: str
    source: str

    def to_dict(self) -> dict[str, Any]:
        return {
            "type": "finding",
            "path": self.path,
            "offset": self.offset,
            "in": self.where,
            "kind": self.kind,
            "source": self.source,
        }


@dataclass(frozen=True, slots=True)
class Skipped:
    """An entry never opened: `reason` is what it is (symlink, fifo, socket, device)."""

    path: str
    reason: str

    def to_dict(self) -> dict[str, Any]:
        return {"type": "skipped", "path": self.path, "reason": self.reason}


@dataclass(frozen=True, slots=True)
class ScanError:
    """An entry that could not be scanned (unreadable, moved meanwhile); `error` says why."""

    path: str
    error: str

    def to_dict(self) -> dict[str, Any]:
        return {"type": "error", "path": self.path, "error": self.error}


@dataclass
class ScanTotals:
    """Counts of what a scan saw, filled in as its events are taken."""

    files: int = 0
    findings: int = 0
    skipped: int = 0
    errors: int = 0


Event = Finding | Skipped | ScanError


def scan_path(
    path: str | os.PathLike[str],
    scanner: Scanner,
    *,
    follow: bool = True,
    totals: ScanTotals | None = None,
) -> Iterator[Event]:
    """Every finding, skipped entry and error of scanning `path`, as they are found.

    `path` is a directory (walked) or a regular file; `follow`: a symlink at
    `path` itself is followed (the user named it). Raises here, before any
    event, `InvalidInput` for a `path` that is missing or of another kind,
    `OSError` when it cannot be opened. `totals` is updated as events are taken.
    """
    counts = totals if totals is not None else ScanTotals()
    where = os.fspath(path)
    shown = display_path(scanner, where)  # as every path is shown, in errors too
    if "\0" in where:  # as `user_path` says it, but quoting the path as shown
        raise InvalidInput("scan", f"{shown!r} contains a NUL byte, which no path can hold")
    fsread.user_path(where, "scan")
    flags = _ROOT_FLAGS if follow else _ROOT_FLAGS | os.O_NOFOLLOW
    try:
        fd = os.open(where, flags)
    except FileNotFoundError:
        raise InvalidInput(shown, "no such file or directory") from None
    except OSError as exc:
        if exc.errno in (errno.ELOOP, errno.ENXIO, errno.EOPNOTSUPP):  # a symlink, a socket
            raise InvalidInput(shown, f"{fsread.problem(exc)}; nothing scanned") from None
        raise OSError(exc.errno, exc.strerror, shown) from None
    try:
        mode = os.fstat(fd).st_mode
    except BaseException:
        os.close(fd)
        raise
    if stat.S_ISDIR(mode):
        return _Tree(where, scanner, counts).events(fd)
    if stat.S_ISREG(mode):
        return _one_file(shown, fd, scanner, counts)
    os.close(fd)
    raise InvalidInput(shown, "is not a regular file or a directory; nothing scanned")


def _one_file(where: str, fd: int, scanner: Scanner, counts: ScanTotals) -> Iterator[Event]:
    try:
        counts.files += 1
        for hit in scanner.scan_fd(fd):
            counts.findings += 1
            yield Finding(where, hit.offset, "content", hit.kind, hit.source)
    except OSError as exc:
        counts.errors += 1
        yield ScanError(where, fsread.problem(exc))
    finally:
        os.close(fd)


class _Tree:
    """One directory scan: the walk, and the shown path of the directory last seen."""

    def __init__(self, root: str, scanner: Scanner, counts: ScanTotals) -> None:
        self.root = root
        self.scanner = scanner
        self.counts = counts
        self._shown: tuple[Node | None, str] = (None, "")

    def events(self, fd: int) -> Iterator[Event]:
        try:
            for entry in walk(fd):
                yield from self._entry(entry)
        finally:
            os.close(fd)

    def _entry(self, entry: Entry) -> Iterator[Event]:
        c = self.counts
        if entry.kind == "error":
            c.errors += 1
            yield ScanError(self._path(entry), entry.error or "unreadable")
            return
        name = os.fsencode(entry.name)
        for hit in self.scanner.scan_bytes(name):
            yield self._found(entry, hit, "name")
        if name and self.scanner.may_cross(name):
            above = os.fsencode(os.path.join(self.root, self._below(entry)).rstrip("/"))
            for hit in self.scanner.scan_across(above, name):
                yield self._found(entry, hit, "path")
        if entry.kind == "file":
            c.files += 1
            yield from self._content(entry)
        elif entry.kind == "symlink":
            c.skipped += 1
            yield Skipped(self._path(entry), "symlink")
            yield from self._link_target(entry)
        elif entry.kind != "directory":
            c.skipped += 1
            yield Skipped(self._path(entry), entry.kind)

    def _content(self, entry: Entry) -> Iterator[Event]:
        try:
            fd = entry.open()
        except FileNotFoundError:
            self.counts.files -= 1  # removed since the listing: it was not there
            return
        except OSError as exc:
            self.counts.errors += 1
            yield ScanError(self._path(entry), fsread.problem(exc))
            return
        try:
            for hit in self.scanner.scan_fd(fd):
                yield self._found(entry, hit, "content")
        except OSError as exc:
            self.counts.errors += 1
            yield ScanError(self._path(entry), fsread.problem(exc))
        finally:
            os.close(fd)

    def _link_target(self, entry: Entry) -> Iterator[Event]:
        try:
            target = os.readlink(entry.name, dir_fd=entry.dir_fd)
        except OSError:
            return  # replaced since the listing; nothing of it to read
        for hit in self.scanner.scan_bytes(os.fsencode(target)):
            yield self._found(entry, hit, "link target")

    def _found(self, entry: Entry, hit: Hit, where: str) -> Finding:
        self.counts.findings += 1
        return Finding(self._path(entry), hit.offset, where, hit.kind, hit.source)

    def _path(self, entry: Entry) -> str:
        """The root, then the path below it, with its secrets redacted.

        Redacted whole, not name by name: a secret holding a `/` (base64 does)
        spans names, and the root's names too. Built only for an entry that is
        reported, and kept for the directory last shown (its siblings usually
        come next).
        """
        below = self._below(entry)
        rel = os.path.join(below, entry.name) if entry.name else below
        return display_path(self.scanner, os.path.join(self.root, rel) if rel else self.root)

    def _below(self, entry: Entry) -> str:
        """The path of the entry's directory below the root ("" the root itself)."""
        node, below = self._shown
        if node is not entry.parent:
            below = os.path.join(*entry.parent.parts()) if entry.parent.parts() else ""
            self._shown = (entry.parent, below)
        return below


def display_path(scanner: Scanner, path: str) -> str:
    """`path` as shown: redacted (a fixed text where the redactor refuses it)."""
    try:
        return scanner.display_name(path)
    except RedactionUnsafe:
        return "<a name that cannot be shown redacted>"

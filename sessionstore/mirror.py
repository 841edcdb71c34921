"""The atomic mirror: one stateless pass that never commits a torn read.

`Mirror(source, dest, redactor).run_once()` re-lists the source tree and
copies every changed regular file whole into the destination, redacted,
through a temp file and a rename. Nothing but the destination is needed for
correctness; a pass may be killed at any moment and the next one converges.

How a pass decides, per file (see `_mirror_copy` for the torn-read guard and
`_mirror_cache` for the change cache):

- *unchanged* when its lstat signature equals the cached one and the
  destination file still has the cached (size, mtime, inode): two stats, no
  read. Without a trustworthy cache entry an existing destination file is
  compared before anything is written, so a lost cache never rewrites.
- *copied* when a settled version was read whole without its signature
  moving; *unstable* (retried next pass, reported every pass) otherwise.
- *markers last*: a record's marker (`trials/<n>/trial.json`,
  `service/<n>/verification.json`, at any depth) is committed only after
  every other file under the record is in place, and only if it parses as a
  JSON object; `report.json` at the root waits for the whole pass. In durable
  mode the directories written so far are fsynced before a marker's rename,
  so a crash never leaves a marker ahead of its files.

The walk holds a directory fd per level and opens everything relative to it
with `O_NOFOLLOW`, so renaming a directory to a symlink during the pass
cannot redirect a read outside the source. Symlinks and special files are
reported as skipped and never opened. Names go through `redact_name`;
source names never reach the report or the cache (only destination names).
"""

from __future__ import annotations

import contextlib
import errno
import functools
import os
import stat
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import orjson

from sessionstore import _mirror_copy as rd
from sessionstore._mirror_cache import CACHE_NAME, Cache, Entry
from sessionstore.atomic import AtomicFile, fsync_dir, is_temp_name, sweep_temps
from sessionstore.errors import InvalidInput
from sessionstore.layout import MARKERS, REPORT, record_number

if TYPE_CHECKING:
    from sessionstore.redact import Redactor

__all__ = ["CACHE_NAME", "RESERVED_PREFIX", "Mirror", "PassReport"]

# Destination entries we own (the cache, the daemon's lock): never mirrored over, never deleted.
RESERVED_PREFIX = ".sessionstore-"
DEFAULT_CHUNK = 1 << 20
# A write() in progress already stamped ctime when it started; a window wider than one
# clock tick also covers big single in-place writes (10 ms of memcpy is ~50 MB).
DEFAULT_MIN_WINDOW_NS = 10_000_000
_OPEN_DIR = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0)


@dataclass
class PassReport:
    """What one pass did. Paths are destination (name-redacted) paths relative to its root.

    Messages never contain file content, secret values or source names.
    """

    source_missing: bool = False
    copied: list[str] = field(default_factory=list)
    unchanged: int = 0
    unstable: list[dict[str, str]] = field(default_factory=list)
    held_back: list[dict[str, str]] = field(default_factory=list)
    skipped: list[dict[str, str]] = field(default_factory=list)
    errors: list[dict[str, str]] = field(default_factory=list)
    deleted: list[str] = field(default_factory=list)
    delete_skipped: str | None = None
    duration: float = 0.0

    @property
    def ok(self) -> bool:
        """True when no file failed because of an error (unstable and held back are fine)."""
        return not self.errors

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict (non-UTF-8 name bytes shown as backslash escapes)."""
        return {
            "ok": self.ok,
            "source_missing": self.source_missing,
            "copied": [_show(p) for p in self.copied],
            "unchanged": self.unchanged,
            "unstable": _show_items(self.unstable),
            "held_back": _show_items(self.held_back),
            "skipped": _show_items(self.skipped),
            "errors": _show_items(self.errors),
            "deleted": [_show(p) for p in self.deleted],
            "delete_skipped": self.delete_skipped,
            "duration": round(self.duration, 6),
        }


def _show(path: str) -> str:
    return os.fsencode(path).decode("utf-8", "backslashreplace")


def _show_items(items: list[dict[str, str]]) -> list[dict[str, str]]:
    return [{k: _show(v) if k == "path" else v for k, v in item.items()} for item in items]


def describe(exc: OSError) -> str:
    """An OS error without its file name (a source name may hold a secret)."""
    name = errno.errorcode.get(exc.errno or 0, "")
    text = exc.strerror or type(exc).__name__
    return f"{text} ({name})" if name else text


class Mirror:
    """Mirror `source` into `dest`, redacted, one atomic file at a time.

    `durable=False` skips every fsync (fast, not crash-proof). `delete=True`
    removes destination entries whose source is gone, unless the listing had
    errors. `racy_window_ns`: how old a file's ctime must be before it is
    trusted (default: the larger of one coarse clock tick and 10 ms; raise it
    for NFS, whose server clock and attribute caching need a second or more).
    `_on_chunk` is a test hook called with the destination path after every
    chunk read, so tests can mutate a file while it is being read.

    Not thread-safe; one pass at a time per destination.
    """

    def __init__(
        self,
        source: str | os.PathLike[str],
        dest: str | os.PathLike[str],
        redactor: Redactor | None = None,
        *,
        durable: bool = True,
        delete: bool = False,
        racy_window_ns: int | None = None,
        chunk_size: int = DEFAULT_CHUNK,
        _on_chunk: Callable[[str], None] | None = None,
    ) -> None:
        self.source = Path(source)
        self.dest = Path(dest)
        src, dst = self.source.resolve(), self.dest.resolve()
        if src == dst or dst in src.parents:
            raise InvalidInput("mirror", "the source must not be the destination or inside it")
        self.redactor = redactor if redactor else None
        self.durable = durable
        self.delete = delete
        self.window_ns = (
            racy_window_ns
            if racy_window_ns is not None
            else max(rd.coarse_tick_ns(), DEFAULT_MIN_WINDOW_NS)
        )
        self.chunk_size = chunk_size
        self._on_chunk = _on_chunk
        # scrypt per cache salt, so a long-lived Mirror pays for the fingerprint once.
        self._fingerprints: dict[bytes, str] = {}

    def run_once(self) -> PassReport:
        """One full pass over the source. Never raises for a file's problem; see the report."""
        return self._pass(None)

    def _pass(self, dirs: Iterable[str] | None = None) -> PassReport:
        """A pass over the whole tree (`dirs=None`) or over some source subtrees.

        `dirs` are source paths relative to the root ("a/b"); one inside a
        record is widened to the record, so the markers-last rule still sees
        every file of it. Cache entries outside the visited subtrees are kept.
        """
        started = time.monotonic()
        run = _Pass(self)
        run.run(None if dirs is None else _subtrees(dirs))
        run.report.duration = time.monotonic() - started
        return run.report


def _subtrees(dirs: Iterable[str]) -> list[tuple[str, ...]]:
    """Normalized, record-widened, de-duplicated source subtrees (() is the root)."""
    roots: set[tuple[str, ...]] = set()
    for d in dirs:
        parts = tuple(p for p in str(d).split("/") if p not in ("", "."))
        if ".." in parts:
            raise InvalidInput("mirror", "a pass directory must stay inside the source")
        for i in range(1, len(parts)):
            if parts[i - 1] in MARKERS and record_number(parts[i]) is not None:
                parts = parts[: i + 1]
                break
        roots.add(parts)
    ordered = sorted(roots, key=len)
    kept: list[tuple[str, ...]] = []
    for parts in ordered:
        if not any(parts[: len(k)] == k for k in kept):
            kept.append(parts)
    return kept


class _Pass:
    """The state of one pass: its report, the new cache, and what to fsync and delete."""

    def __init__(self, mirror: Mirror) -> None:
        self.m = mirror
        self.report = PassReport()
        self.name: Callable[[str], str] = (
            mirror.redactor.redact_name if mirror.redactor else _identity
        )
        self.cache: Cache
        self.entries: dict[str, Entry] = {}
        self.to_fsync: set[str] = set()
        self.doomed: list[tuple[str, str]] = []  # (dest path, dest relpath) for --delete
        self.listing_failed = False
        self.dest_id: tuple[int, int] | None = None

    # -- the pass ------------------------------------------------------------

    def run(self, subtrees: list[tuple[str, ...]] | None) -> None:
        m = self.m
        try:
            root_fd = os.open(m.source, os.O_RDONLY | os.O_DIRECTORY | getattr(os, "O_CLOEXEC", 0))
        except FileNotFoundError:
            self.report.source_missing = True
            return
        except OSError as exc:
            self.error(".", f"source: {describe(exc)}")
            return
        try:
            if not self.ensure_root():
                return
            self.cache = Cache.load(m.dest, m.redactor, m._fingerprints)
            if subtrees is None or () in subtrees:
                self.visit(root_fd, str(m.dest), "", None, None, full=True)
            else:
                for parts in subtrees:
                    self.visit_subtree(root_fd, parts)
        finally:
            os.close(root_fd)
        self.finish(subtrees)

    def ensure_root(self) -> bool:
        dest = self.m.dest
        try:
            st = os.stat(dest)
        except FileNotFoundError:
            try:
                os.makedirs(dest, 0o700)
                st = os.stat(dest)
            except OSError as exc:
                self.error(".", f"destination: {describe(exc)}")
                return False
            self.to_fsync.update((str(dest), str(dest.parent)))
        except OSError as exc:
            self.error(".", f"destination: {describe(exc)}")
            return False
        if not stat.S_ISDIR(st.st_mode):
            self.error(".", "destination is not a directory")
            return False
        self.dest_id = (st.st_dev, st.st_ino)
        return True

    def visit_subtree(self, root_fd: int, parts: tuple[str, ...]) -> None:
        """Walk down to one subtree (creating its destination dirs) and visit it."""
        fd, dest, rel, parent = root_fd, str(self.m.dest), "", None
        fds: list[int] = []
        try:
            for i, part in enumerate(parts):
                dname = self.name(part)
                if self.m.redactor is not None and self.collides(fd, part, dname):
                    self.error(_join(rel, dname), "name collision: source names map to this name")
                    return
                try:
                    fd = os.open(part, _OPEN_DIR, dir_fd=fd)
                except OSError:
                    return  # gone or replaced since the caller saw it; a full pass settles it
                fds.append(fd)
                rel, dest = _join(rel, dname), os.path.join(dest, dname)
                if i < len(parts) - 1 and not self.ensure_dir(dest, rel, None):
                    return
                parent = parts[i - 1] if i else None
            if not self.ensure_dir(dest, rel, None):
                return
            self.visit(fd, dest, rel, parts[-1], parent, full=False)
        finally:
            for f in fds:
                os.close(f)

    def collides(self, dir_fd: int, name: str, dname: str) -> bool:
        with os.scandir(dir_fd) as it:
            return any(e.name != name and self.name(e.name) == dname for e in it)

    def visit(
        self,
        src_fd: int,
        dest: str,
        rel: str,
        src_name: str | None,
        parent_name: str | None,
        *,
        full: bool,
    ) -> int:
        """Mirror one directory, recursively; returns how many files in it are not in place."""
        try:
            with os.scandir(src_fd) as it:
                entries = sorted(it, key=_by_name)
        except OSError as exc:
            self.listing_failed = True
            self.error(rel or ".", f"cannot list: {describe(exc)}")
            return 1
        dest_entries = self.list_dest(dest, rel)

        marker: str | None = None
        if src_name is None:
            marker = REPORT if full else None
        elif parent_name in MARKERS and record_number(src_name) is not None:
            marker = MARKERS[parent_name]

        groups: dict[str, list[os.DirEntry[str]]] = {}
        for e in entries:
            if not is_temp_name(e.name):
                groups.setdefault(self.name(e.name), []).append(e)

        pending = 0
        subdirs: list[tuple[os.DirEntry[str], str, str]] = []
        held: tuple[os.DirEntry[str], str, str] | None = None
        for dname, group in groups.items():
            drel = _join(rel, dname)
            if len(group) > 1:
                self.error(drel, f"name collision: {len(group)} source names map to this name")
                pending += 1
                continue
            e = group[0]
            if not dname or "/" in dname or dname in (".", ".."):
                self.error(drel, "the redacted name is not a valid file name")
                pending += 1
            elif dname.startswith(RESERVED_PREFIX) or is_temp_name(dname):
                self.skip(drel, "reserved name")
            elif e.is_dir(follow_symlinks=False):
                subdirs.append((e, dname, drel))
            elif e.is_symlink():
                self.skip(drel, "symlink")
            elif not e.is_file(follow_symlinks=False):
                self.skip(drel, "special file")
            elif e.name == marker:
                held = (e, dname, drel)
            else:
                pending += self.sync(src_fd, e, dest, dname, drel, dest_entries.get(dname), False)

        for e, dname, drel in subdirs:
            pending += self.visit_child(src_fd, e, dest, dname, drel, src_name, dest_entries)

        if held is not None:
            e, dname, drel = held
            if pending:
                noun = "file" if pending == 1 else "files"
                self.hold(drel, f"waiting for {pending} {noun}")
                pending += 1
            else:
                pending += self.sync(src_fd, e, dest, dname, drel, dest_entries.get(dname), True)

        if self.m.delete:
            for dname, dent in dest_entries.items():
                if dname not in groups:
                    self.doomed.append((dent.path, _join(rel, dname)))
        return pending

    def visit_child(
        self,
        src_fd: int,
        e: os.DirEntry[str],
        dest: str,
        dname: str,
        drel: str,
        src_name: str | None,
        dest_entries: dict[str, os.DirEntry[str]],
    ) -> int:
        if self.dest_id is not None and e.inode() == self.dest_id[1]:
            with contextlib.suppress(OSError):
                if e.stat(follow_symlinks=False).st_dev == self.dest_id[0]:
                    self.skip(drel, "the destination itself")
                    return 0
        try:
            fd = os.open(e.name, _OPEN_DIR, dir_fd=src_fd)
        except FileNotFoundError:
            return 0
        except OSError as exc:
            if exc.errno in (errno.ELOOP, errno.ENOTDIR):
                self.unstable(drel, "replaced during the pass")
                return 1
            self.listing_failed = True
            self.error(drel, f"cannot open directory: {describe(exc)}")
            return 1
        try:
            if os.fstat(fd).st_ino != e.inode():
                self.unstable(drel, "replaced during the pass")
                return 1
            child = os.path.join(dest, dname)
            if not self.ensure_dir(child, drel, dest_entries.get(dname)):
                return 1
            return self.visit(fd, child, drel, e.name, src_name, full=False)
        finally:
            os.close(fd)

    # -- destination ---------------------------------------------------------

    def list_dest(self, dest: str, rel: str) -> dict[str, os.DirEntry[str]]:
        """Destination entries by name (ours excluded), sweeping stale temps on the way."""
        found: dict[str, os.DirEntry[str]] = {}
        temps = False
        try:
            with os.scandir(dest) as it:
                for e in it:
                    if is_temp_name(e.name):
                        temps = True
                    elif not e.name.startswith(RESERVED_PREFIX):
                        found[e.name] = e
        except OSError as exc:
            self.error(rel or ".", f"cannot list destination: {describe(exc)}")
            self.listing_failed = True
        if temps:
            try:
                sweep_temps(Path(dest))
            except OSError as exc:
                self.error(rel or ".", f"cannot sweep temp files: {describe(exc)}")
        return found

    def ensure_dir(self, path: str, rel: str, dent: os.DirEntry[str] | None) -> bool:
        try:
            if dent is not None and dent.is_dir(follow_symlinks=False):
                return True
            os.mkdir(path, 0o700)
        except FileExistsError:
            if stat.S_ISDIR(os.lstat(path).st_mode):
                return True
            self.error(rel, "the destination has a non-directory here")
            return False
        except OSError as exc:
            self.error(rel, f"cannot create directory: {describe(exc)}")
            return False
        self.to_fsync.update((path, os.path.dirname(path)))
        return True

    # -- one file --------------------------------------------------------------

    def sync(
        self,
        src_fd: int,
        e: os.DirEntry[str],
        dest: str,
        dname: str,
        drel: str,
        dent: os.DirEntry[str] | None,
        is_marker: bool,
    ) -> int:
        """Bring one file up to date; returns 1 if it is not in place (0 if it is or vanished)."""
        try:
            st = e.stat(follow_symlinks=False)
        except FileNotFoundError:
            return 0
        except OSError as exc:
            self.error(drel, describe(exc))
            return 1
        cached = self.cache.entries.get(drel) if self.cache.trusted else None
        if cached is not None and dent is not None and _same_source(cached, st):
            try:
                dst = dent.stat(follow_symlinks=False)
            except OSError:
                dst = None
            if dst is not None and _same_dest(cached, dst):
                self.entries[drel] = cached
                self.report.unchanged += 1
                return 0
        # Compare before writing when there is no record of what the destination holds.
        compare = dent is not None and cached is None
        try:
            fd, st = rd.open_source(src_fd, e.name, st, self.m.window_ns)
        except rd.Vanished:
            return 0
        except rd.Unstable as exc:
            return self.not_settled(drel, str(exc), is_marker)
        except OSError as exc:
            self.error(drel, describe(exc))
            return 1
        path = os.path.join(dest, dname)
        try:
            done = self.copy(fd, st, path, drel, compare, is_marker)
        except rd.Unstable as exc:
            return self.not_settled(drel, str(exc), is_marker)
        except _HeldBack as exc:
            self.hold(drel, str(exc))
            return 1
        except OSError as exc:
            self.error(drel, describe(exc))
            return 1
        finally:
            os.close(fd)
        return 0 if done else 1

    def copy(
        self, fd: int, st: os.stat_result, path: str, drel: str, compare: bool, is_marker: bool
    ) -> bool:
        """Read one settled version (the open fd) and commit it; True when in place."""
        m = self.m
        hook = functools.partial(m._on_chunk, drel) if m._on_chunk is not None else None
        mode = stat.S_IMODE(st.st_mode) & 0o777
        data: bytes | None = None
        if is_marker:
            sink = rd.Collect()
            rd.read_stable(fd, st, sink, m.redactor, m.chunk_size, hook)
            data = sink.data()
            problem = _json_object_problem(data)
            if problem:
                raise _HeldBack(f"not a JSON object: {problem}")
        if compare:
            same = self.compare(fd, st, path, data, mode, hook)
            if same is not None:
                self.entries[drel] = [*rd.signature(st), *same]
                self.report.unchanged += 1
                return True
        if is_marker and m.durable:
            self.flush()  # the record's files must be durable before its marker is
        with AtomicFile(Path(path), mode, durable=m.durable, sync_dir=False) as out:
            if data is not None:
                out.write(data)
            else:
                rd.read_stable(fd, st, rd.Write(out.write), m.redactor, m.chunk_size, hook)
            written = os.stat(out.temp)
        self.to_fsync.add(os.path.dirname(path))
        self.entries[drel] = [*rd.signature(st), *_dest_sig(written)]
        self.report.copied.append(drel)
        return True

    def compare(
        self,
        fd: int,
        st: os.stat_result,
        path: str,
        data: bytes | None,
        mode: int,
        hook: Callable[[], None] | None,
    ) -> list[int] | None:
        """The destination's (size, mtime, ino) if it already holds exactly these bytes."""
        try:
            dfd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0))
        except OSError:
            return None
        try:
            dst = os.fstat(dfd)
            if not stat.S_ISREG(dst.st_mode):
                return None
            sink = rd.Compare(dfd)
            if data is not None:
                same = sink.feed(data)
            else:
                same = rd.read_stable(fd, st, sink, self.m.redactor, self.m.chunk_size, hook)
            if not (same and sink.at_eof()):
                return None
            if stat.S_IMODE(dst.st_mode) != mode:
                os.fchmod(dfd, mode)
            return _dest_sig(dst)
        finally:
            os.close(dfd)

    # -- reporting -------------------------------------------------------------

    def not_settled(self, drel: str, reason: str, is_marker: bool) -> int:
        if is_marker:
            self.hold(drel, f"unstable: {reason}")
        else:
            self.unstable(drel, reason)
        return 1

    def error(self, path: str, message: str) -> None:
        self.report.errors.append({"path": path, "error": message})

    def unstable(self, path: str, reason: str) -> None:
        self.report.unstable.append({"path": path, "reason": reason})

    def hold(self, path: str, reason: str) -> None:
        self.report.held_back.append({"path": path, "reason": reason})

    def skip(self, path: str, reason: str) -> None:
        self.report.skipped.append({"path": path, "reason": reason})

    # -- end of pass -----------------------------------------------------------

    def flush(self) -> None:
        """fsync every directory that got a rename or mkdir (once each)."""
        for d in sorted(self.to_fsync):
            try:
                fsync_dir(Path(d))
            except FileNotFoundError:
                pass  # removed by --delete after being written to
            except OSError as exc:
                rel = os.path.relpath(d, self.m.dest)
                self.error(rel, f"cannot fsync directory: {describe(exc)}")
        self.to_fsync.clear()

    def finish(self, subtrees: list[tuple[str, ...]] | None) -> None:
        m = self.m
        if m.delete:
            if self.listing_failed:
                self.report.delete_skipped = "the listing had errors; nothing was deleted"
            else:
                for path, rel in self.doomed:
                    self.remove(path, rel)
        if m.durable:
            self.flush()
        entries = self.entries
        if subtrees is not None and () not in subtrees:
            prefixes = tuple(
                _join("", "/".join(self.name(p) for p in parts)) + "/" for parts in subtrees
            )
            kept = {k: v for k, v in self.cache.entries.items() if not k.startswith(prefixes)}
            entries = {**kept, **entries} if self.cache.trusted else entries
        if self.cache.trusted and entries == self.cache.entries:
            return
        self.cache.entries = entries
        try:
            self.cache.save(m.dest, self.cache.document(m.redactor, m._fingerprints), m.durable)
        except OSError as exc:
            self.error(CACHE_NAME, f"cannot write the change cache: {describe(exc)}")

    def remove(self, path: str, rel: str) -> None:
        """Delete a destination entry without a source; keeps our own (reserved) names."""
        try:
            st = os.lstat(path)
        except FileNotFoundError:
            return
        try:
            if stat.S_ISDIR(st.st_mode):
                with os.scandir(path) as it:
                    children = list(it)
                for c in children:
                    if not c.name.startswith(RESERVED_PREFIX) and not is_temp_name(c.name):
                        self.remove(c.path, _join(rel, c.name))
                with contextlib.suppress(OSError):  # not empty: something reserved is left
                    os.rmdir(path)
            else:
                os.unlink(path)
                self.report.deleted.append(rel)
        except OSError as exc:
            self.error(rel, f"cannot delete: {describe(exc)}")
            return
        self.to_fsync.add(os.path.dirname(path))


class _HeldBack(Exception):
    """A marker that must not be committed yet; the message is the reason."""


def _identity(name: str) -> str:
    return name


def _by_name(e: os.DirEntry[str]) -> str:
    return e.name


def _join(rel: str, name: str) -> str:
    return f"{rel}/{name}" if rel else name


def _same_source(cached: Entry, st: os.stat_result) -> bool:
    return (
        cached[0] == st.st_size
        and cached[1] == st.st_mtime_ns
        and cached[2] == st.st_ctime_ns
        and cached[3] == st.st_ino
        and cached[4] == st.st_dev
    )


def _same_dest(cached: Entry, dst: os.stat_result) -> bool:
    return (
        cached[5] == dst.st_size
        and cached[6] == dst.st_mtime_ns
        and cached[7] == dst.st_ino
        and stat.S_ISREG(dst.st_mode)
    )


def _dest_sig(st: os.stat_result) -> list[int]:
    return [st.st_size, st.st_mtime_ns, st.st_ino]


def _json_object_problem(data: bytes) -> str | None:
    """Why `data` is not a JSON object, in words that never quote the content."""
    try:
        value = orjson.loads(data)
    except orjson.JSONDecodeError as exc:
        return f"{exc.msg} at line {exc.lineno} column {exc.colno}"
    if not isinstance(value, dict):
        return f"a JSON {type(value).__name__}"
    return None

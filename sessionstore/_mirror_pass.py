"""One mirror pass: the walk, the per-file decisions, and the end-of-pass bookkeeping.

`Mirror` (in `sessionstore.mirror`) builds a `_Pass` per pass. The walk holds
a directory fd per level and opens everything relative to it with
`O_NOFOLLOW`, so renaming a directory to a symlink mid-pass cannot redirect a
read outside the source. Per directory: list the source, map names through
`redact_name` (collisions are errors), then regular files (each through the
no-read fast path `unchanged`, else `sync`), subdirectories, and last the
record's marker, committed only when nothing below it is pending.

The destination is read only where needed: each file's lstat for the fast
path; directories are stat'ed lazily before something is written below them
(`need_dir`) and listed only for --delete, after an untrusted cache, or after
an interrupted pass (the in-progress flag `DIRTY_NAME`, which triggers the
temp sweep).
"""

from __future__ import annotations

import contextlib
import errno
import functools
import os
import stat
from collections.abc import Callable, Container
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import orjson

from sessionstore import _mirror_copy as rd
from sessionstore._mirror_cache import CACHE_NAME, Cache, Entry
from sessionstore.atomic import TEMP_PREFIX, AtomicFile, fsync_dir, is_temp_name, sweep_temps
from sessionstore.errors import InvalidInput
from sessionstore.layout import MARKERS, REPORT, record_number

if TYPE_CHECKING:
    from sessionstore.mirror import Mirror
    from sessionstore.redact import Redactor

# Destination entries we own (the cache, the daemon's lock): never mirrored over, never deleted.
RESERVED_PREFIX = ".sessionstore-"
# Set while a pass may have temps in flight; its presence makes the next pass sweep.
DIRTY_NAME = RESERVED_PREFIX + "mirror-dirty"
_CLOEXEC: int = getattr(os, "O_CLOEXEC", 0)
_OPEN_DIR = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | _CLOEXEC


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


def _describe(exc: OSError) -> str:
    """An OS error without its file name (a source name may hold a secret)."""
    name = errno.errorcode.get(exc.errno or 0, "")
    text = exc.strerror or type(exc).__name__
    return f"{text} ({name})" if name else text


class _Pass:
    """The state of one pass: its report, the new cache, and what to fsync and delete."""

    def __init__(self, mirror: Mirror) -> None:
        self.m = mirror
        self.report = PassReport()
        # Checked per pass: secrets may be registered on the same Redactor later.
        self.redactor = mirror.redactor if mirror.redactor else None
        self.name: Callable[[str], str] = _safe_name(self.redactor) if self.redactor else _identity
        self.cache: Cache
        self.entries: dict[str, Entry] = {}
        self.to_fsync: set[str] = set()
        self.doomed: list[tuple[str, str]] = []  # (dest path, dest relpath) for --delete
        self.listing_failed = False
        self.dest_id: tuple[int, int] | None = None
        self.dirty_path = ""
        self.dirty = False
        self.ready: set[str] = set()  # destination directories known to exist this pass
        self.created: set[str] = set()  # ... and those this pass created (empty but for us)
        self.cached: Callable[[str], Entry | None] = _no_entry
        self.list_dests = True

    # -- the pass ------------------------------------------------------------

    def run(self, subtrees: list[tuple[str, ...]] | None) -> None:
        m = self.m
        try:
            root_fd = os.open(m.source, os.O_RDONLY | os.O_DIRECTORY | getattr(os, "O_CLOEXEC", 0))
        except FileNotFoundError:
            self.report.source_missing = True
            return
        except OSError as exc:
            self.error(".", f"source: {_describe(exc)}")
            return
        try:
            if not self.ensure_root():
                return
            self.cache = Cache.load(m.dest, self.redactor, m._fingerprints)
            self.dirty_path = os.path.join(m.dest, DIRTY_NAME)
            self.dirty = os.path.lexists(self.dirty_path)
            self.cached = self.cache.entries.get if self.cache.trusted else _no_entry
            # Read the destination's directories only when something there needs it.
            self.list_dests = m.delete or self.dirty
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
                self.error(".", f"destination: {_describe(exc)}")
                return False
            self.to_fsync.update((str(dest), str(dest.parent)))
        except OSError as exc:
            self.error(".", f"destination: {_describe(exc)}")
            return False
        if not stat.S_ISDIR(st.st_mode):
            self.error(".", "destination is not a directory")
            return False
        self.dest_id = (st.st_dev, st.st_ino)
        self.ready.add(str(dest))
        return True

    def visit_subtree(self, root_fd: int, parts: tuple[str, ...]) -> None:
        """Walk down to one subtree (creating its destination dirs) and visit it."""
        fd, dest, rel, parent = root_fd, str(self.m.dest), "", None
        fds: list[int] = []
        try:
            for i, part in enumerate(parts):
                dname = self.name(part)
                if self.redactor is not None and self.collides(fd, part, dname):
                    self.error(_join(rel, dname), "name collision: source names map to this name")
                    return
                try:
                    fd = os.open(part, _OPEN_DIR, dir_fd=fd)
                except OSError:
                    return  # gone or replaced since the caller saw it; a full pass settles it
                fds.append(fd)
                rel, dest = _join(rel, dname), os.path.join(dest, dname)
                if not self.need_dir(dest, rel):
                    return
                parent = parts[i - 1] if i else None
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
                entries = list(it)
        except OSError as exc:
            self.listing_failed = True
            self.error(rel or ".", f"cannot list: {_describe(exc)}")
            return 1
        dest_names = self.list_dest(dest, rel) if self.list_dests else None

        marker: str | None = None
        if src_name is None:
            marker = REPORT if full else None
        elif parent_name in MARKERS and record_number(src_name) is not None:
            marker = MARKERS[parent_name]

        pairs, pending, expected = self.dest_names(entries, rel)
        subdirs: list[tuple[os.DirEntry[str], str, str]] = []
        held: tuple[os.DirEntry[str], str, str] | None = None
        files = 0
        for e, dname in pairs:
            drel = f"{rel}/{dname}" if rel else dname
            if dname[0] == "." and (dname.startswith((RESERVED_PREFIX, TEMP_PREFIX))):
                self.skip(drel, "reserved name")
            elif e.is_file(follow_symlinks=False):
                files += 1
                if e.name == marker:
                    held = (e, dname, drel)
                elif not self.unchanged(e, dest, dname, drel):
                    pending += self.sync(src_fd, e, dest, dname, drel, False)
            elif e.is_dir(follow_symlinks=False):
                subdirs.append((e, dname, drel))
            elif e.is_symlink():
                self.skip(drel, "symlink")
            else:
                self.skip(drel, "special file")

        for e, dname, drel in subdirs:
            pending += self.visit_child(src_fd, e, dest, dname, drel, src_name)
        if not files and not self.need_dir(dest, rel):  # mirror empty directories too
            pending += 1

        if held is not None:
            e, dname, drel = held
            if pending:
                noun = "file" if pending == 1 else "files"
                self.hold(drel, f"waiting for {pending} {noun}")
                pending += 1
            elif not self.unchanged(e, dest, dname, drel):
                pending += self.sync(src_fd, e, dest, dname, drel, True)

        if dest_names is not None and self.m.delete:
            self.doomed.extend(
                (os.path.join(dest, n), _join(rel, n)) for n in dest_names if n not in expected
            )
        return pending

    def dest_names(
        self, entries: list[os.DirEntry[str]], rel: str
    ) -> tuple[list[tuple[os.DirEntry[str], str]], int, Container[str]]:
        """(entry, destination name) pairs, errors for names that collide, and every
        destination name the source accounts for (for --delete). Our temps are ignored."""
        if self.redactor is None:  # names map to themselves: no collision possible
            pairs = [(e, e.name) for e in entries if not e.name.startswith(TEMP_PREFIX)]
            return pairs, 0, {name for _, name in pairs}
        groups: dict[str, list[os.DirEntry[str]]] = {}
        for e in entries:
            if not e.name.startswith(TEMP_PREFIX):
                groups.setdefault(self.name(e.name), []).append(e)
        pending = 0
        pairs = []
        for dname, group in groups.items():
            drel = _join(rel, dname)
            if len(group) > 1:
                self.error(drel, f"name collision: {len(group)} source names map to this name")
                pending += 1
            elif not dname or "/" in dname or dname in (".", ".."):
                self.error(drel, "the redacted name is not a valid file name")
                pending += 1
            else:
                pairs.append((group[0], dname))
        return pairs, pending, groups

    def visit_child(
        self,
        src_fd: int,
        e: os.DirEntry[str],
        dest: str,
        dname: str,
        drel: str,
        src_name: str | None,
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
            self.error(drel, f"cannot open directory: {_describe(exc)}")
            return 1
        try:
            if os.fstat(fd).st_ino != e.inode():
                self.unstable(drel, "replaced during the pass")
                return 1
            return self.visit(fd, f"{dest}/{dname}", drel, e.name, src_name, full=False)
        finally:
            os.close(fd)

    # -- destination ---------------------------------------------------------

    def list_dest(self, dest: str, rel: str) -> list[str]:
        """Destination entry names (ours excluded), sweeping stale temps on the way.

        Only when the pass must see the destination's own entries: for --delete,
        or to sweep after a pass that was interrupted (see `DIRTY_NAME`).
        """
        found: list[str] = []
        temps = False
        try:
            with os.scandir(dest) as it:
                for e in it:
                    if e.name.startswith(TEMP_PREFIX):
                        temps = True
                    elif not e.name.startswith(RESERVED_PREFIX):
                        found.append(e.name)
        except FileNotFoundError:
            pass  # not created yet: nothing to sweep or delete
        except OSError as exc:
            self.error(rel or ".", f"cannot list destination: {_describe(exc)}")
            self.listing_failed = True
        if temps:
            try:
                sweep_temps(Path(dest))
            except OSError as exc:
                self.error(rel or ".", f"cannot sweep temp files: {_describe(exc)}")
        return found

    def need_dir(self, path: str, rel: str) -> bool:
        """Make sure the destination directory exists (a real one), creating it 0700 if not.

        Checked lazily, once per pass, only before something is written below it:
        a pass that finds every file unchanged never stats a directory.
        """
        if path in self.ready:
            return True
        parent_rel = rel.rpartition("/")[0]
        if not self.need_dir(os.path.dirname(path), parent_rel):
            return False
        try:
            st = os.lstat(path)
        except FileNotFoundError:
            try:
                self.touch()
                os.mkdir(path, 0o700)
            except OSError as exc:
                self.error(rel, f"cannot create directory: {_describe(exc)}")
                return False
            self.created.add(path)
            self.to_fsync.update((path, os.path.dirname(path)))
        except OSError as exc:
            self.error(rel, f"cannot use directory: {_describe(exc)}")
            return False
        else:
            if not stat.S_ISDIR(st.st_mode):
                self.error(rel, "the destination has a non-directory here")
                return False
        self.ready.add(path)
        return True

    def touch(self) -> None:
        """Before the first change to the destination in this pass: flag it as in progress.

        A pass killed midway leaves temps; finding the flag, the next pass lists
        every destination directory and sweeps them. A pass that changes
        nothing never lists the destination at all.
        """
        if self.dirty:
            return
        fd = os.open(self.dirty_path, os.O_WRONLY | os.O_CREAT | os.O_NOFOLLOW | _CLOEXEC, 0o600)
        os.close(fd)
        if self.m.durable:
            fsync_dir(self.m.dest)
        self.dirty = True

    # -- one file --------------------------------------------------------------

    def unchanged(self, e: os.DirEntry[str], dest: str, dname: str, drel: str) -> bool:
        """The no-read fast path: two stats and a cache lookup (see `_unchanged`)."""
        cached = self.cached(drel)
        if cached is None:
            return False
        try:
            st = e.stat(follow_symlinks=False)
        except OSError:
            return False  # sync() sorts out vanished files and errors
        if not _unchanged(cached, st, f"{dest}/{dname}"):
            return False
        self.entries[drel] = cached
        self.report.unchanged += 1
        return True

    def sync(
        self,
        src_fd: int,
        e: os.DirEntry[str],
        dest: str,
        dname: str,
        drel: str,
        is_marker: bool,
    ) -> int:
        """Copy one file that `unchanged` did not vouch for; returns 1 if it is not in place."""
        try:
            st = e.stat(follow_symlinks=False)
        except FileNotFoundError:
            return 0
        except OSError as exc:
            self.error(drel, _describe(exc))
            return 1
        path = f"{dest}/{dname}"
        # No record of what the destination holds: compare before writing (unless this
        # pass just created the directory, which then holds nothing we did not write).
        compare = self.cached(drel) is None and dest not in self.created and os.path.lexists(path)
        try:
            fd, st = rd.open_source(src_fd, e.name, st, self.m.window_ns)
        except rd.Vanished:
            return 0
        except rd.Unstable as exc:
            return self.not_settled(drel, str(exc), is_marker)
        except OSError as exc:
            self.error(drel, _describe(exc))
            return 1
        try:
            done = self.copy(fd, st, dest, path, drel, compare, is_marker)
        except rd.Unstable as exc:
            return self.not_settled(drel, str(exc), is_marker)
        except _HeldBack as exc:
            self.hold(drel, str(exc))
            return 1
        except InvalidInput as exc:
            # The redactor refuses content it cannot redact safely (see redact.py);
            # its message names no secret.
            self.error(drel, exc.problem)
            return 1
        except OSError as exc:
            self.error(drel, _describe(exc))
            return 1
        finally:
            os.close(fd)
        return 0 if done else 1

    def copy(
        self,
        fd: int,
        st: os.stat_result,
        dest: str,
        path: str,
        drel: str,
        compare: bool,
        is_marker: bool,
    ) -> bool:
        """Read one settled version (the open fd) and commit it; True when in place."""
        m = self.m
        hook = functools.partial(m._on_chunk, drel) if m._on_chunk is not None else None
        mode = stat.S_IMODE(st.st_mode) & 0o777
        data: bytes | None = None
        if is_marker:
            sink = rd.Collect()
            rd.read_stable(fd, st, sink, self.redactor, m.chunk_size, hook)
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
        if not self.need_dir(dest, drel.rpartition("/")[0]):
            return False
        self.touch()
        with AtomicFile(path, mode, durable=m.durable, sync_dir=False) as out:
            if data is not None:
                out.write(data)
            else:
                # A comparison that found a difference has read part of the fd already.
                writer = rd.Write(out.write)
                rd.read_stable(fd, st, writer, self.redactor, m.chunk_size, hook, rewind=compare)
            written = out.stat()
        self.to_fsync.add(dest)
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
                same = rd.read_stable(fd, st, sink, self.redactor, self.m.chunk_size, hook)
            if not (same and sink.at_eof()):
                return None
            if stat.S_IMODE(dst.st_mode) != mode:
                self.touch()
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
                self.error(rel, f"cannot fsync directory: {_describe(exc)}")
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
        if not (self.cache.trusted and entries == self.cache.entries):
            self.cache.entries = entries
            try:
                doc = self.cache.document(self.redactor, m._fingerprints)
                self.cache.save(m.dest, doc, m.durable)
            except OSError as exc:
                self.error(CACHE_NAME, f"cannot write the change cache: {_describe(exc)}")
        if self.dirty:
            # Every temp of this pass is committed or removed, and this pass listed
            # (and swept) the destination if the flag was set before it started.
            with contextlib.suppress(FileNotFoundError):
                os.unlink(self.dirty_path)

    def remove(self, path: str, rel: str) -> None:
        """Delete a destination entry without a source; keeps our own (reserved) names."""
        try:
            st = os.lstat(path)
        except FileNotFoundError:
            return
        try:
            self.touch()
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
            self.error(rel, f"cannot delete: {_describe(exc)}")
            return
        self.to_fsync.add(os.path.dirname(path))


class _HeldBack(Exception):
    """A marker that must not be committed yet; the message is the reason."""


def _safe_name(redactor: Redactor) -> Callable[[str], str]:
    """`redact_name` that answers "" (reported as an invalid name) where it refuses a name."""

    def name(value: str) -> str:
        try:
            redacted: str = redactor.redact_name(value)
        except InvalidInput:
            return ""
        return redacted

    return name


def _identity(name: str) -> str:
    return name


def _join(rel: str, name: str) -> str:
    return f"{rel}/{name}" if rel else name


def _no_entry(_rel: str) -> None:
    return None


def _unchanged(cached: Entry, st: os.stat_result, dest_path: str) -> bool:
    """Whether the source still is the committed version and the destination still holds it.

    ctime first: it is the field that moves on every change.
    """
    if not (
        cached[2] == st.st_ctime_ns
        and cached[0] == st.st_size
        and cached[1] == st.st_mtime_ns
        and cached[3] == st.st_ino
        and cached[4] == st.st_dev
    ):
        return False
    try:
        dst = os.lstat(dest_path)
    except OSError:
        return False
    return (
        cached[6] == dst.st_mtime_ns
        and cached[5] == dst.st_size
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

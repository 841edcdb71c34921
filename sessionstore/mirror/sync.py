"""One file of a mirror pass: the no-read fast path, the copy, the sealed comparison.

`FileOps` is the per-file half of `walk.Pass` (which inherits it):
it uses the pass's state declared below and nothing else. A file is
*unchanged* (two stats and a cache lookup), *synced* (a settled version read
through the torn-read guard of `copy` and committed through the
destination tree), or, in a sealed record, only *compared* (a difference is
recorded as diverged, never written).
"""

from __future__ import annotations

import functools
import os
import stat
from collections.abc import Callable

from sessionstore._fs.read import MAX_MARKER_BYTES
from sessionstore.errors import RedactionUnsafe
from sessionstore.mirror import copy as rd
from sessionstore.mirror.cache_file import Stored
from sessionstore.mirror.cache_group import ENTRY_LEN, Group, dest_sig, is_entry
from sessionstore.mirror.layout import redact_message
from sessionstore.mirror.report import UNSTABLE_MARKER, PassReport
from sessionstore.mirror.sealing import Sealing
from sessionstore.storage.local_tree import LocalDir, LocalTree, describe
from sessionstore.storage.tree import RecordSealed, Sealed

TYPE_CHECKING = False  # typing's, without importing typing (mypy reads it as such)
if TYPE_CHECKING:
    from sessionstore.mirror.config import PassConfig
    from sessionstore.mirror.frame import Frame
    from sessionstore.redact.redactor import Redactor
    from sessionstore.storage.journal import Claim
    from sessionstore.storage.tree import Writer

_S_ISREG = stat.S_ISREG


class FileOps(Sealing):
    """Per-file decisions of a pass, and its report lines."""

    # Provided by the pass (with `Sealing`'s).
    m: PassConfig
    redactor: Redactor | None
    report: PassReport
    groups: dict[str, Stored]  # the new cache, by directory (`open_group`, `close_group`)
    stored: dict[str, int]  # the trusted cache's groups by reference, else none
    read_group: Callable[[int], Group]  # a stored group, parsed (`Cache.parsed`)
    regrouped: bool  # some directory's new group is not its stored one
    claims: dict[str, list[Claim]]  # what an interrupted pass committed (storage/journal.py)
    not_dirs: set[str]  # source files that found a directory in their place
    dest_entry: Callable[[LocalDir, str, str], os.stat_result | None]  # tree.entry, bound once
    late = 0  # markers `settle_late` held back (read off the hot path: a class default)

    def unchanged(self, dest: Frame, e: os.DirEntry[str], dname: str, drel: str) -> bool:
        """The no-read fast path: two stats and a cache lookup.

        The source must still be the committed version (ctime first: it moves on
        every change) and the destination must still hold the file this mirror
        committed (size, mtime, inode). One call per file in a no-op pass, so
        the checks are inline, and the caller counts it in `report.unchanged`
        (once per directory, not once per file).
        """
        cached = dest.cached.get(dname)
        if type(cached) is not list or len(cached) != ENTRY_LEN:
            return False  # none, or not an entry (groups are parsed unchecked)
        try:
            st = e.stat(follow_symlinks=False)
        except OSError:
            return False  # sync() sorts out vanished files and errors
        if not (
            cached[2] == st.st_ctime_ns
            and cached[0] == st.st_size
            and cached[1] == st.st_mtime_ns
            and cached[3] == st.st_ino
            and cached[4] == st.st_dev
        ):
            return False
        dst = self.dest_entry(dest, dname, drel)
        if dst is None:
            return False
        if not (
            cached[6] == dst.st_mtime_ns
            and cached[5] == dst.st_size
            and cached[7] == dst.st_ino
            and _S_ISREG(dst.st_mode)
        ):
            return False
        dest.entries[dname] = cached
        return True

    def open_group(self, frame: Frame) -> None:
        """On entering a directory: its stored group parsed, its new one registered."""
        stored = self.stored.get(frame.rel)
        if stored is not None:
            frame.cached = self.read_group(stored)
        self.groups[frame.rel] = frame.entries

    def close_group(self, frame: Frame) -> None:
        """On leaving it: the stored text itself if all its files, and no others, are unchanged."""
        cached = frame.cached
        if cached and frame.same == len(cached) == len(frame.entries):
            self.groups[frame.rel] = self.stored[frame.rel]  # the same reference: kept as read
        elif cached or frame.entries:
            self.regrouped = True

    def changed(
        self, frame: Frame, e: os.DirEntry[str], dname: str, drel: str, marker: bool
    ) -> int:
        """A file `unchanged` did not vouch for: mirror it, or in a sealed record only
        compare it; 1 if it is not in place."""
        record = self.sealed(frame)
        if record is not None:
            self.check_sealed(record.rel, frame, e, dname, drel)
            return 0
        return self.sync(frame, e, dname, drel, marker)

    def open_settled(
        self, frame: Frame, e: os.DirEntry[str], drel: str, marker: bool
    ) -> tuple[int, os.stat_result] | int:
        """The source file open at a settled version, or the pending count (0 or 1)."""
        try:
            listed = e.stat(follow_symlinks=False)
        except FileNotFoundError:
            return 0
        except OSError as exc:
            self.error(drel, describe(exc))
            return 1
        try:
            return rd.open_source(frame.src_fd, e.name, listed, self.m.window_ns)
        except rd.Vanished:
            return 0
        except rd.Unstable as exc:
            return self.not_settled(drel, str(exc), marker)
        except OSError as exc:
            self.error(drel, describe(exc))
            return 1

    def sync(self, frame: Frame, e: os.DirEntry[str], dname: str, drel: str, marker: bool) -> int:
        """Copy one file that `unchanged` did not vouch for; returns 1 if it is not in place."""
        opened = self.open_settled(frame, e, drel, marker)
        if isinstance(opened, int):
            return opened
        fd, st = opened
        dest = frame
        try:
            if marker and st.st_size > MAX_MARKER_BYTES:  # torn for the readers too
                self.hold(drel, f"torn: larger than the {MAX_MARKER_BYTES >> 20} MiB marker limit")
                return 1
            # A directory this pass created holds nothing it did not write.
            found = None if dest.created else self.tree.lstat(dest, dname)
            if found is not None and stat.S_ISDIR(found.st_mode):
                # Never half-replaced: --delete may empty it, the end of the pass reports.
                self.not_dirs.add(drel)
                return 1
            existed = found is not None
            done = self.copy(fd, st, dest, dname, drel, existed, marker)
        except Sealed:
            self.hold(drel, SEALED_MEANWHILE)
            return 1
        except RecordSealed as exc:  # found just before the rename: nothing was written
            self.sealed_meanwhile(frame, exc.record, drel)
            return 0
        except rd.Unstable as exc:
            return self.not_settled(drel, str(exc), marker)
        except _HeldBack as exc:
            self.hold(drel, str(exc))
            return 1
        except RedactionUnsafe as exc:
            # The redactor refuses content it cannot redact safely (redact/redactor.py);
            # its message names no secret.
            self.error(drel, exc.problem)
            return 1
        except OSError as exc:
            self.error(drel, describe(exc))
            return 1
        finally:
            os.close(fd)
        return 0 if done else 1

    def copy(
        self,
        fd: int,
        st: os.stat_result,
        dest: Frame,
        dname: str,
        drel: str,
        existed: bool,
        marker: bool,
    ) -> bool:
        """Read one settled version (the open fd) and commit it; True when in place.

        `existed`: the destination holds something at `dname`.
        """
        m = self.m
        # No record of what the destination holds, or only a claim (an interrupted pass
        # wrote it, from a source version not recorded): compare before writing.
        cached = dest.cached.get(dname)
        compare = existed and (not is_entry(cached) or not cached[3] or drel in self.claims)
        hook = self.hook(drel)
        mode = stat.S_IMODE(st.st_mode) & 0o777
        data: bytes | None = None
        if marker:
            sink = rd.Collect()
            rd.read_stable(fd, st, sink, self.redactor, m.chunk_size, hook)
            data = sink.data()
            problem = rd.json_object_problem(data)
            if problem:
                raise _HeldBack(f"not a JSON object: {problem}")
        if compare:
            same = self.compare(fd, st, dest, dname, data, hook, fix_mode=mode)
            if same is not None:
                dest.entries[dname] = [*rd.signature(st), *same]
                self.report.unchanged += 1
                return True
        seal = marker and dest.record is dest
        if marker:
            self.marker_ready(dest, seal)

        def fill(out: Writer) -> None:
            if data is not None:
                out.write(data)
            else:
                # A comparison that found a difference has read part of the fd already.
                writer = rd.Write(out.write)
                rd.read_stable(fd, st, writer, self.redactor, m.chunk_size, hook, rewind=compare)

        # A record's marker seals it: create-if-absent, so a record another writer sealed
        # meanwhile is never overwritten (`Sealed`). report.json at a root is replaced.
        if seal:
            written = self.tree.commit_marker(dest, dname, mode, fill)
        else:  # in a record: only if its marker is still absent at the rename (`guards`)
            written = self.tree.commit_file(dest, dname, mode, fill, self.guards(dest))
        if written is None:
            return False
        dest.entries[dname] = [*rd.signature(st), *dest_sig(written)]
        self.report.copied.append(drel)
        if not existed:
            self.report.new.append(drel)
        return True

    def marker_ready(self, dest: LocalDir, seal: bool) -> None:
        """Raise `_HeldBack` unless a marker may be committed in `dest` now.

        A record's marker is published only once its files are durable (the
        tree's `commit_marker` sees to it); report.json (`seal` False) waits for
        every marker of the pass to be in place.
        """
        tree = self.tree
        if not seal and self.m.durable:
            late = self.settle_late()
            if late:
                raise _HeldBack(_waiting(late))
        if tree.unconfirmed(dest):
            if self.m.remote is not None:
                raise _HeldBack("waiting for files whose upload failed")
            assert isinstance(tree, LocalTree)
            raise _HeldBack(_waiting(tree.blockers(dest)))

    def compare(
        self,
        fd: int,
        st: os.stat_result,
        dest: Frame,
        dname: str,
        data: bytes | None,
        hook: Callable[[], None] | None,
        *,
        fix_mode: int | None,
    ) -> list[int] | None:
        """The destination's (size, mtime, ino) if it already holds exactly these bytes.

        `fix_mode`: the permission bits it must have (set if not); None leaves them.
        A file with other bits and another name is not the same: it is replaced.
        """
        dfd = self.tree.open_file(dest, dname)
        if dfd is None:
            return None
        try:
            dst = self.tree.fstat(dfd)
            sink = rd.Compare(functools.partial(self.tree.read, dfd))
            if data is not None:
                same = sink.feed(data)
            else:
                same = rd.read_stable(fd, st, sink, self.redactor, self.m.chunk_size, hook)
            if not (same and sink.at_eof()):
                return None
            if fix_mode is not None and stat.S_IMODE(dst.st_mode) != fix_mode:
                if self.sealed_now(dest) is not None:
                    return dest_sig(dst)  # a sealed record's modes are not compared
                if dst.st_nlink > 1:
                    # A chmod changes the inode, so every name of it: another one (a
                    # `cp -al` snapshot of the destination) may be outside both trees.
                    # A new file (temp and rename) leaves the other name as it was.
                    return None
                self.tree.fchmod(dest, dfd, fix_mode)
            return dest_sig(dst)
        finally:
            self.tree.close_file(dfd)

    def check_sealed(
        self, record: str, frame: Frame, e: os.DirEntry[str], dname: str, drel: str
    ) -> None:
        """A file of a sealed record: never written; a difference is reported as diverged."""
        opened = self.open_settled(frame, e, drel, False)
        if isinstance(opened, int):
            return
        fd, st = opened
        try:
            same = self.compare(fd, st, frame, dname, None, self.hook(drel), fix_mode=None)
        except rd.Unstable as exc:
            self.unstable(drel, str(exc))
            return
        except RedactionUnsafe as exc:
            self.error(drel, exc.problem)
            return
        except OSError as exc:
            self.error(drel, describe(exc))
            return
        finally:
            os.close(fd)
        if same is None:
            self.diverged.setdefault(record, []).append(drel)
        else:
            frame.entries[dname] = [*rd.signature(st), *same]
            self.report.unchanged += 1

    def settle_late(self) -> int:
        """Flush the tree, take back what it could not finish after `copy` counted it.

        Returns how many so far. A commit that failed later (reported by the tree) is
        neither copied nor this mirror's; a marker the tree declined to link is
        held back: another writer sealed the record meanwhile, or a commit below
        it failed.
        """
        tree = self.tree
        tree.flush()
        failed = set(tree.failed)
        if isinstance(tree, LocalTree):
            while tree.declined:
                rel, below = tree.declined.popitem()
                self.hold(rel, _waiting(below) if below else SEALED_MEANWHILE)
                failed.add(rel)
                self.late += 1
            while tree.withheld:  # not renamed: its record was sealed meanwhile
                rel, record = tree.withheld.popitem()
                self.diverged.setdefault(record, []).append(rel)
                failed.add(rel)
        if failed:
            report = self.report
            report.copied = [rel for rel in report.copied if rel not in failed]
            report.new = [rel for rel in report.new if rel not in failed]
            for rel in failed:
                where, _, name = rel.rpartition("/")
                group = self.groups.get(where)
                if isinstance(group, dict):  # a group kept as stored text had no commit
                    group.pop(name, None)
        return len(tree.failed) + self.late

    def hook(self, drel: str) -> Callable[[], None] | None:
        on_chunk = self.m.on_chunk
        return functools.partial(on_chunk, drel) if on_chunk is not None else None

    # -- reporting -------------------------------------------------------------

    def not_settled(self, drel: str, reason: str, marker: bool) -> int:
        if marker:
            self.hold(drel, f"{UNSTABLE_MARKER}{reason}")
        else:
            self.unstable(drel, reason)
        return 1

    def error(self, path: str, message: str) -> None:
        if self.redactor is not None:  # it may name the destination root, which the user named
            message = redact_message(self.redactor, message)
        self.report.errors.append({"path": path, "error": message})

    def unstable(self, path: str, reason: str) -> None:
        self.report.unstable.append({"path": path, "reason": reason})

    def hold(self, path: str, reason: str) -> None:
        self.report.held_back.append({"path": path, "reason": reason})

    def skip(self, path: str, reason: str) -> None:
        self.report.skipped.append({"path": path, "reason": reason})


SEALED_MEANWHILE = "sealed meanwhile in the destination; not overwritten"


def _waiting(files: int) -> str:
    return f"waiting for {files} {'file' if files == 1 else 'files'}"


class _HeldBack(Exception):
    """A marker that must not be committed yet; the message is the reason."""

"""One mirror pass: the walk, the per-file decisions, and the end-of-pass bookkeeping.

`Mirror` (in `sessionstore.mirror.mirror`) builds a `Pass` per pass from a `PassConfig`.
The walk is iterative: an explicit stack of `Frame`s, one per directory level (at most
`MAX_DEPTH`; deeper subtrees are reported, not followed), each holding the source
directory's fd and its destination `LocalDir`. Source entries are opened relative to
their directory's fd with `O_NOFOLLOW`, so renaming a directory to a symlink mid-pass
cannot redirect a read outside the source; the destination is touched only through
`dest.LocalTree`, which does the same for every write. Per directory: list the source,
map names through `redact_name` (collisions are errors), then regular files (each
through the no-read fast path `unchanged`, else `sync`: the per-file half, `FileOps`, is
in `sync`), subdirectories, and last the record's marker, committed only when nothing
below it is pending. The directory's group of the change cache (`cache`) is parsed when
it is entered and dropped when it is left. A big full pass shares the walk below one
directory with a forked, read-only verifier (`split`); a subset pass reaches its
subtrees through `subtree`.

Exclusion (`exclude`): a directory's entries are filtered by the patterns right after it
is listed, before any of them is looked at; a subset pass never goes below an excluded
directory. A dry run walks with `dry.DryTree`: it answers every change without making it.

Sealing: a record whose marker is in the destination is never written again. Its files
are only compared (`check_sealed`); a difference is reported as `diverged`, never
applied. When the destination is a session (it holds `session.json`), the store's own
files at its top are skipped.

The destination is read only where needed: one `O_PATH` open (and close) per directory,
by name under its parent's fd (`LocalTree.open_below`), each file's lstat through it for
the fast path, and a record's marker once something in the record needs more than the fast
path. Directories are listed only after an interrupted pass (the in-progress flag
`DIRTY_NAME`: the pass sweeps the whole destination for dead temps before it starts);
`--delete` works from the change cache (`finish`), not from listings.
"""

from __future__ import annotations

import errno
import os
from collections.abc import Collection

from sessionstore._fs.atomic import TEMP_PREFIX
from sessionstore.format.names import MANIFEST, MARKERS, REPORT
from sessionstore.mirror import split
from sessionstore.mirror.cache import Cache
from sessionstore.mirror.cache_file import Stored
from sessionstore.mirror.finish import finish_pass
from sessionstore.mirror.frame import MAX_DEPTH, Child, Frame
from sessionstore.mirror.layout import (
    DIRTY_NAME,
    OWNED,
    RESERVED,
    RESERVED_PREFIX,
    STORE_OWNED,
    names_for,
    redacted_names,
    special_kind,
)
from sessionstore.mirror.report import PassReport
from sessionstore.mirror.subtree import mount_root, source_is_dest, visit_subtree
from sessionstore.mirror.sync import FileOps
from sessionstore.storage.local_tree import OPEN_DIR, describe
from sessionstore.storage.trees import make_tree

TYPE_CHECKING = False  # typing's, without importing typing (mypy reads it as such)
if TYPE_CHECKING:
    from sessionstore.mirror.config import PassConfig
    from sessionstore.storage.journal import Claim
    from sessionstore.storage.trees import DestTree


class Pass(FileOps):
    """The state of one pass: its report, the new cache, the destination tree."""

    def __init__(self, config: PassConfig) -> None:
        self.m = config
        self.report = PassReport()
        # Checked per pass: secrets may be registered on the same Redactor later.
        self.redactor = config.redactor if config.redactor else None
        self.name, self.spans = names_for(self.redactor, str(config.dest_real))  # see layout
        self.tree: DestTree
        self.cache: Cache | None = None
        self.groups: dict[str, Stored] = {}
        self.stored: dict[str, int] = {}
        self.regrouped = False
        # Dest rel of each listed dir -> the destination names the source accounts for:
        # a list (no redactor) that `finish.listings` makes a set of only when the end of the
        # pass asks; None where the pass vouched for every entry (`leave`). Not the
        # DirEntry lists: kept alive, the collector walks them.
        self.listings: dict[str, Collection[str] | None] = {}
        self.tops: list[str] = []  # dest rels of the subtrees walked ("" for a full pass)
        self.diverged: dict[str, list[str]] = {}  # sealed record -> files that differ
        self.not_dirs: set[str] = set()  # source files a directory is in the place of (finish)
        self.listing_failed = False
        self.dest_id = (-1, -1)  # the destination root's (dev, ino), once opened
        self.dirty = False  # the in-progress flag exists
        self.flagged = False  # ... and this pass set it (it appends its claims there)
        self.unswept = False  # ... it existed at the start, and the sweep fell short
        # Dest rel -> (size, mtime_ns, ino): what an interrupted pass committed (its claims);
        # once finish has settled them, those it could not (storage/journal.py).
        self.claims: dict[str, list[Claim]] = {}
        self.is_session = False
        self.exclude = config.exclude
        self.src_rels: dict[str, str] = {}  # with exclude only: dest rel -> source rel
        self.excluded_names: set[str] = set()  # with exclude and names redacted: `not_excluded`
        # Where `split` shares out subdirectories, and the cached directories below each.
        self.split_at: tuple[str, dict[str, list[str]]] | None = None
        self.verifier: split.Verifier | None = None
        # Dest rel -> (files, stored rels) of directories the verifier vouched for.
        self.adopted: dict[str, tuple[int, list[str]]] = {}

    # -- the pass ------------------------------------------------------------

    def run(self, subtrees: list[tuple[str, ...]] | None) -> None:
        m = self.m
        try:
            root_fd = os.open(m.source, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        except FileNotFoundError:
            self.report.source_missing = True
            return
        except OSError as exc:
            self.error(".", f"source: {describe(exc)}")
            return
        # The destination root is the root frame of a full pass (unlisted otherwise).
        root = Frame(None, "", "", root_fd, None, None, None)
        if m.dry_run and m.remote is None:  # a bucket's dry tree is make_tree's
            from sessionstore.mirror.dry import DryTree

            self.tree = DryTree(root, self.error, self.touch, m.durable)
        else:
            self.tree = make_tree(m.remote, root, self.error, self.touch, m.durable, m.dry_run)
        lock, where = m.lock, str(m.remote or m.dest_real)  # a daemon's: `DestLock.open_root`
        try:
            ok = self.tree.open_root(where) if lock is None else lock.open_root(self.tree, where)
            if ok:  # one fstat a pass, for the source check and the walk's skip
                self.dest_id = self.tree.identity()
            if ok and not source_is_dest(self, root_fd):
                self.start(full=subtrees is None or () in subtrees)
                if subtrees is None or () in subtrees:
                    self.tops.append("")
                    if self.enter(root):
                        self.walk(root)
                else:
                    for parts in subtrees:
                        visit_subtree(self, root_fd, parts)
                finish_pass(self)
        finally:
            try:
                if self.verifier is not None:
                    self.verifier.close()
                if self.cache is not None:
                    self.cache.close()
                self.tree.close_all()
            finally:  # also when closing raised
                os.close(root_fd)
                # The tree holds bound methods of the pass (`error`, `touch`): without
                # this the pass, its cache and its listings would wait for the collector.
                self.__dict__.pop("dest_entry", None)
                del self.tree

    def start(self, *, full: bool) -> None:
        """What the pass needs to know about the destination root before the walk.

        `full`: the pass walks the whole source (only such a pass shares its walk, `split`).
        """
        tree, root = self.tree, self.tree.root
        self.cache = Cache.load(tree, self.redactor, self.m.fingerprints)
        self.stored = self.cache.groups if self.cache.trusted else {}
        self.read_group = self.cache.parsed
        self.dest_entry = tree.entry
        self.dirty = tree.lstat(root, DIRTY_NAME) is not None
        if self.dirty:  # an earlier pass was interrupted: its temps go before anything else
            self.unswept = not tree.sweep()
            self.claims = tree.claims(DIRTY_NAME)
        self.cache.add_owned(self.claims)  # a cache made with other secrets: its files
        self.is_session = tree.lstat(root, MANIFEST) is not None
        if full and len(self.stored) >= split.MIN_GROUPS and split.allowed(self):
            self.split_at = split.plan(self.stored, split.MIN_GROUPS)

    # -- the walk ------------------------------------------------------------

    def walk(self, top: Frame, depth: int = 0) -> None:
        """Depth-first below an entered frame, with an explicit stack (no recursion limit).

        `depth`: how many levels below the destination root `top` is.
        """
        stack = [top]
        try:
            while stack:
                frame = stack[-1]
                child = next(frame.subdirs, None)
                if child is not None:
                    entered = self.child(frame, child, depth + len(stack))
                    if entered is not None:
                        stack.append(entered)
                    continue
                self.leave(frame)  # releases it; on an exception the finally below does
                stack.pop()
        finally:
            for frame in stack:  # only after an exception: release what is still open
                self.release(frame)

    def enter(self, frame: Frame) -> bool:
        """List one source directory and handle its files; False (released) if unlistable.

        Long because it is the no-op pass's inner loop: one function, the per-file
        checks inline, no call per file but the fast path's.
        """
        try:
            with os.scandir(frame.src_fd) as it:
                entries = list(it)
        except OSError as exc:
            self.listing_failed = True
            self.error(frame.shown, f"cannot list: {describe(exc)}")
            self.release(frame)
            return False
        if self.exclude is not None:  # before any entry is looked at: excluded is never read
            from sessionstore.mirror.exclude import not_excluded  # loaded with the patterns

            entries = not_excluded(self, frame, entries)
        rel = frame.rel
        self.open_group(frame)
        src_name, parent_name = frame.src_name, frame.parent_name
        marker: str | None = None
        if frame.record is frame:
            assert parent_name is not None
            marker = MARKERS[parent_name]
        elif src_name is None and not self.is_session:
            marker = REPORT  # a full pass's root: report.json waits for everything
        # Destination name of each source name, unless names map to themselves (no
        # redactor: no collision possible); then the loop lists them as it goes. No
        # map, zip or set per directory: they cost the no-op pass more than the loop.
        rename: dict[str, str] | None = None
        names: list[str] = []
        note = names.append
        if self.redactor is None:
            pending = 0
            frame.listing = names
        else:
            pairs, problems, groups = redacted_names(entries, rel, self.name, self.spans)
            for drel, problem in problems:
                self.error(drel, problem)
            pending = len(problems)
            frame.listing = groups
            rename = {e.name: dname for e, dname in pairs}  # not: collisions, our temps
        subdirs: list[Child] = []
        store_top = self.is_session and src_name is None  # the root of a session
        files = same = 0
        # The no-op pass's inner loop: locals, and the fast path called directly.
        for e in entries:
            if rename is None:
                dname = e.name
                note(dname)
            elif (found := rename.get(e.name)) is not None:
                dname = found
            else:
                continue  # reported above (or a temp of ours)
            drel = f"{rel}/{dname}" if rel else dname
            if dname[0] == "." and (dname.startswith((RESERVED_PREFIX, TEMP_PREFIX))):
                if not dname.startswith(TEMP_PREFIX):  # our temps are not the source's
                    self.skip(drel, RESERVED)
            elif store_top and dname in STORE_OWNED:
                self.skip(drel, OWNED)
            elif e.is_file(follow_symlinks=False):
                files += 1
                if e.name == marker:
                    frame.held = (e, dname, drel)
                elif self.unchanged(frame, e, dname, drel):
                    same += 1
                else:
                    pending += self.changed(frame, e, dname, drel, False)
            elif e.is_dir(follow_symlinks=False):
                subdirs.append((e, dname, drel))
            elif e.is_symlink():
                self.skip(drel, "symlink")
            else:
                self.skip(drel, special_kind(e))
        frame.files, frame.pending, frame.same = files, pending, same
        self.report.unchanged += same
        frame.subdirs = iter(subdirs)
        if self.split_at is not None and rel == self.split_at[0]:
            under, self.split_at = self.split_at[1], None
            frame.subdirs = split.start(self, frame, subdirs, under)
        return True

    def leave(self, frame: Frame) -> None:
        """After the subdirectories: empty directories, then the marker; pending goes up."""
        # Sealing is looked up only where it decides something (no lstat on the fast path).
        if not frame.files and self.sealed(frame) is None and not self.tree.present(frame):
            frame.pending += 1  # mirror empty directories too
        if frame.held is not None:
            e, dname, drel = frame.held
            if frame.pending and self.sealed(frame) is None:
                noun = "file" if frame.pending == 1 else "files"
                self.hold(drel, f"waiting for {frame.pending} {noun}")
                frame.pending += 1
            elif self.unchanged(frame, e, dname, drel):
                self.report.unchanged += 1
                frame.same += 1
            else:
                frame.pending += self.changed(frame, e, dname, drel, True)
        self.close_group(frame)
        # Every entry an unchanged file of the group kept as stored, or a subdirectory
        # entered: `finish._Vouched` answers for its names, not kept (12 MB at 200k files).
        vouched = (
            len(frame.listing) == frame.same + frame.entered == frame.entered + len(frame.cached)
        )
        self.listings[frame.rel] = None if vouched else frame.listing
        frame.listing = ()
        if frame.created:  # by this pass (or, in a dry run, it would be)
            self.report.created_dirs.append(frame.rel)
        if frame.fd is not None or frame.touched:  # `release`, inline: once per directory
            self.tree.close(frame)
        if frame.src_name is not None:
            os.close(frame.src_fd)
        if frame.up is not None:
            frame.up.pending += frame.pending
        # A record frame is its own `record`: a cycle that only the collector would free,
        # which `mirror --once` runs without (and then pays for all of them at exit).
        frame.record = None

    def release(self, frame: Frame) -> None:
        """Close what `frame` holds; safe twice (an exception may come between)."""
        try:
            self.tree.close(frame)
        finally:
            if frame.src_name is not None and frame.src_fd >= 0:
                os.close(frame.src_fd)
                frame.src_fd = -1
            frame.record = None  # see `leave`

    def child(self, frame: Frame, child: Child, depth: int) -> Frame | None:
        """Open a source subdirectory and enter it; None (counted in `frame`) if not entered.

        `depth`: the subdirectory's level below the destination root.
        """
        e, dname, drel = child
        if self.adopted and split.adopt(self, frame, drel):
            return None
        ino = e.inode()
        if ino == self.dest_id[1]:
            try:
                if e.stat(follow_symlinks=False).st_dev == self.dest_id[0]:
                    self.skip(drel, "the destination itself")
                    return None
            except OSError:
                pass  # gone: the open below sorts it out
        if depth > MAX_DEPTH:
            self.error(drel, f"deeper than {MAX_DEPTH} levels; not mirrored")
            frame.pending += 1
            return None
        try:
            fd = os.open(e.name, OPEN_DIR, dir_fd=frame.src_fd)
        except FileNotFoundError:
            return None
        except OSError as exc:
            frame.pending += 1
            if exc.errno in (errno.ELOOP, errno.ENOTDIR):
                self.unstable(drel, "replaced during the pass")
            else:
                self.listing_failed = True
                self.error(drel, f"cannot open directory: {describe(exc)}")
            return None
        if os.fstat(fd).st_ino != ino and not mount_root(self, frame, fd, drel):
            os.close(fd)  # swapped since the listing, or the destination mounted here
            return None
        entered = Frame(frame, dname, drel, fd, e.name, frame.src_name, frame)
        self.tree.open_below(frame, entered)  # parents first, before any of its files
        try:
            listed = self.enter(entered)
        except BaseException:  # not on the walk's stack yet: nobody else would close it
            self.release(entered)
            raise
        if listed:
            frame.entered += 1
            return entered
        frame.pending += 1
        return None

    # -- the in-progress flag --------------------------------------------------

    def touch(self) -> None:
        """Before the first change to the destination in this pass: flag it as in progress.

        A pass killed midway leaves temps, and files its cache does not record yet;
        finding the flag, the next pass sweeps the whole destination first and reads
        the claims the flag holds (storage/journal.py). A pass that changes nothing
        never lists the destination at all.
        """
        if not self.flagged:
            self.flagged = True  # once: a flag that cannot be made is no file's error
            try:
                self.tree.set_flag(DIRTY_NAME)  # also when it exists: the claims go on after it
                self.dirty = True
            except OSError as exc:  # the root not writable, say: mirrored all the same
                self.error(DIRTY_NAME, f"cannot create the in-progress flag: {describe(exc)}")

"""A local directory as a `Tree`: opening and validating its directories (`LocalTree`'s base).

The mirror's destination backend. Nothing outside this module calls `os.*`
on a destination path or fd.

Every destination directory is a `LocalDir`, opened lazily with
`O_NOFOLLOW|O_DIRECTORY` relative to its parent's fd, down from `/` (the
destination root's own ancestors are nodes too). No path string is resolved
after the root's path was: a symlink or a non-directory where a directory
belongs fails the open (`ELOOP`/`ENOTDIR`) and makes that subtree an error,
reported once, whether it was planted before the pass or swapped in during it.

An open fd keeps pointing at its directory wherever that directory is moved,
so before every change (mkdir, temp create, rename, chmod, unlink, rmdir,
sweep) `check` re-validates the chain: each node's entry in its parent must
still be the inode the fd holds, up to the root's entry in its parent. A directory moved out of the
tree or replaced mid-pass is then refused before anything is written through
it. Reads change nothing and skip the check: the walk opens each directory
it enters by name under its parent's fd (`LocalTree.open_below`) and stats its
files through that fd; a directory reached otherwise is `verify`ed (lstat'ed,
parents first, relative to the root's fd) and its entries are then stat'ed by
their path from there.

Directory fsyncs are batched per directory: a touched directory is fsynced
once, when the walk leaves it (`close`), or earlier by `flush` (before a
record's marker).
"""

from __future__ import annotations

import errno
import os
import stat
from collections.abc import Callable

TYPE_CHECKING = False  # typing's, without importing typing (mypy reads it as such)
if TYPE_CHECKING:
    pass

OPEN_DIR = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
# Destination directories are only ever used as `dir_fd=` anchors (and fstat'ed), which
# an O_PATH fd serves at a lower open and close cost than a readable one: the no-op
# pass opens one per directory. Listing and fsync reopen "." through it.
_OPEN_PATH = getattr(os, "O_PATH", os.O_RDONLY) | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
# O_NONBLOCK: a fifo planted in the destination must not hang a comparison.

_UNKNOWN, _OPEN, _MISSING, _BAD = range(4)
UNKNOWN = _UNKNOWN  # a node not yet opened nor found missing (Frame sets it inline)

ErrorSink = Callable[[str, str], None]


def describe(exc: OSError) -> str:
    """An OS error without its file name (a source name may hold a secret)."""
    name = errno.errorcode.get(exc.errno or 0, "")
    text = exc.strerror or type(exc).__name__
    return f"{text} ({name})" if name else text


def _open_problem(exc: OSError, parent_fd: int, name: str) -> str:
    """Why `name` could not be opened as a directory (O_PATH says ENOTDIR for a symlink)."""
    if exc.errno in (errno.ELOOP, errno.ENOTDIR):
        try:
            link = stat.S_ISLNK(os.stat(name, dir_fd=parent_fd, follow_symlinks=False).st_mode)
        except OSError:
            link = exc.errno == errno.ELOOP
        if link:
            return "a symlink is where a directory belongs; nothing is written through it"
        return "a non-directory is where a directory belongs"
    return f"cannot open directory: {describe(exc)}"


class LocalDir:
    """One destination directory: its place (parent node + name) and, once opened, its fd.

    `rel` is the destination-relative path reported for it ("" for the root,
    "." for the root's ancestors).
    """

    # Slots, every one set in __init__ (no class-level defaults): one node per
    # directory per pass, and a read of a class default misses the interpreter's
    # attribute cache (the no-op pass's cost). `Frame` (mirror/walk.py) sets them inline.
    __slots__ = ("created", "fd", "ident", "name", "parent", "rel", "state", "touched", "verified")

    def __init__(self, parent: LocalDir | None, name: str, rel: str) -> None:
        self.parent = parent
        self.name = name
        self.rel = rel
        self.fd: int | None = None
        self.state = _UNKNOWN
        self.ident: tuple[int, int] | None = None  # the fd's (dev, ino), taken at first check
        self.created = False  # by this pass: holds nothing we did not write
        self.touched = False  # changed since its last fsync
        # lstat'ed as a directory (parents first) relative to the root's fd: reads may
        # then resolve its path from the root without opening it (`verify`).
        self.verified = False

    @property
    def shown(self) -> str:
        return self.rel or "."


class LocalDirs:
    """The destination's directories: the root chain, lazily opened directories, their checks.

    The base of `LocalTree` (storage/local_tree.py), which adds the reads, the changes
    and closing.

    `error(path, message)` receives one line per unusable directory;
    `before_change()` runs before every change (the pass sets the in-progress flag at
    the first; the mirror's read-only verifier, mirror/split.py, stops there).
    """

    def __init__(
        self, root: LocalDir, error: ErrorSink, before_change: Callable[[], None], durable: bool
    ) -> None:
        self.error = error
        self.before_change = before_change
        self.durable = durable
        self.root = root  # placed under its parent by `open_root`
        self._chain: list[LocalDir] = []  # "/" down to the root's parent, open for the pass
        self._unsynced: set[LocalDir] = set()

    # -- the root ----------------------------------------------------------------

    def open_root(self, path: str, *, create: bool = True) -> bool:
        """Open the (absolute, resolved) destination root component by component.

        Missing components are created 0700; without `create`, a missing one
        raises `FileNotFoundError` (a daemon's destination, removed under it).
        False (with the error reported) when a component is a symlink, not a
        directory, or unusable.
        """
        parts = [p for p in path.split("/") if p]
        if not parts:
            self.error(".", "destination: the filesystem root is not a mirror destination")
            return False
        node = LocalDir(None, "/", ".")
        node.fd = os.open("/", _OPEN_PATH)
        node.state = _OPEN
        self._chain.append(node)
        for i, part in enumerate(parts):
            last = i == len(parts) - 1
            child = self.root if last else LocalDir(node, part, ".")
            child.parent, child.name = node, part
            try:
                child.fd = os.open(part, _OPEN_PATH, dir_fd=node.fd)
            except FileNotFoundError:
                if not create:
                    raise
                # No in-progress flag for these: a new directory holds no temps to sweep.
                if self._make(child, flag=False) is None:
                    return False
            except OSError as exc:
                where = "/" + "/".join(parts[: i + 1])
                self.error(".", f"destination: {where}: {_open_problem(exc, node.fd, part)}")
                return False
            else:
                child.state = _OPEN
            if not last:
                self._chain.append(child)
            node = child
        return True

    # -- opening directories ------------------------------------------------------

    def fd_of(self, d: LocalDir, *, quiet: bool = False) -> int | None:
        """The directory's fd, opening it (and its ancestors) if needed; None if missing or bad.

        A symlink or non-directory is reported once (unless `quiet`); below a bad
        or missing directory everything is missing, silently.
        """
        if d.state == _OPEN:
            return d.fd
        if d.state != _UNKNOWN:
            return None
        parent = d.parent
        if parent is not None and parent.state == _OPEN:  # the walk's case: one open, inline
            try:
                d.fd = os.open(d.name, _OPEN_PATH, dir_fd=parent.fd)
            except OSError as exc:
                self._failed(d, parent, exc, quiet)
                return None
            d.state = _OPEN
            return d.fd
        # Open the unknown ancestors top-down, without recursion.
        pending = [d]
        while pending[-1].parent is not None and pending[-1].parent.state == _UNKNOWN:
            pending.append(pending[-1].parent)
        for node in reversed(pending):
            above = node.parent
            if above is None or above.state != _OPEN:
                node.state = _MISSING
            else:
                self._open(node, above, quiet)
        return d.fd if d.state == _OPEN else None

    def _open(self, d: LocalDir, parent: LocalDir, quiet: bool) -> None:
        try:
            d.fd = os.open(d.name, _OPEN_PATH, dir_fd=parent.fd)
        except OSError as exc:
            self._failed(d, parent, exc, quiet)
        else:
            d.state = _OPEN

    def _failed(self, d: LocalDir, parent: LocalDir, exc: OSError, quiet: bool) -> None:
        """`d` could not be opened: missing (quietly), or bad (reported once unless `quiet`)."""
        if isinstance(exc, FileNotFoundError):
            d.state = _MISSING
            return
        d.state = _BAD
        if not quiet:
            assert parent.fd is not None
            self.error(d.shown, _open_problem(exc, parent.fd, d.name))

    def ensure(self, d: LocalDir) -> int | None:
        """The directory's fd, creating it and missing ancestors (0700); None if it cannot be."""
        fd = self.fd_of(d)
        if fd is not None or d.state == _BAD:
            return fd
        missing = [d]
        while missing[-1].parent is not None and missing[-1].parent.state == _MISSING:
            missing.append(missing[-1].parent)
        top = missing[-1].parent
        if top is None or self.fd_of(top) is None:
            return None  # below a bad directory: reported there
        for node in reversed(missing):
            if self._make(node) is None:
                return None
        return d.fd

    def _make(self, d: LocalDir, *, flag: bool = True) -> int | None:
        parent = d.parent
        assert parent is not None and parent.fd is not None
        if not self.check(parent):
            return None
        try:
            if flag:
                self.before_change()
            os.mkdir(d.name, 0o700, dir_fd=parent.fd)
        except FileExistsError:
            pass  # created meanwhile: opened below like any other
        except OSError as exc:
            d.state = _BAD
            self.error(d.shown, f"cannot create directory: {describe(exc)}")
            return None
        else:
            d.created = True
            self._touch(parent)
            self._touch(d)
        d.state = _UNKNOWN
        return self.fd_of(d)

    def check(self, d: LocalDir) -> bool:
        """Whether `d` and its ancestors up to the root still sit where they were opened.

        Called before every change. The root's own entry in its parent is
        checked too (the destination itself moved or swapped), not the
        directories above it: those are the user's, opened once per pass. A
        mismatch marks that node bad and reports it once; below it, False silently.
        """
        node: LocalDir | None = d
        while node is not None and node.parent is not None:
            if node.state != _OPEN:
                return False
            assert node.fd is not None and node.parent.fd is not None
            try:
                if node.ident is None:
                    own = os.fstat(node.fd)
                    node.ident = (own.st_dev, own.st_ino)
                here = os.stat(node.name, dir_fd=node.parent.fd, follow_symlinks=False)
            except OSError:
                here = None
            if here is None or (here.st_dev, here.st_ino) != node.ident:
                node.state = _BAD
                node.verified = False
                self.error(node.shown, "moved or replaced during the pass; nothing written there")
                return False
            if node is self.root:
                break
            node = node.parent
        return True

    # -- reading ------------------------------------------------------------------

    def verify(self, d: LocalDir) -> bool:
        """Whether `d` is a directory that reads may reach by its path from the root's fd.

        For a directory the walk did not open (`LocalTree.open_below`): one lstat,
        parents first, relative to the root's fd. A directory whose lstat
        is not a directory goes through `fd_of`, which reports a symlink or a
        non-directory once, exactly as when opening it; below one, False.

        A path resolved from the root follows a symlink swapped in for an
        already-verified ancestor, as an fd opened before the swap keeps pointing
        at the directory moved away: for a read, both see the tree as it was when
        the walk reached it. Changes never rely on this: they go through fds and
        `check` the chain first.
        """
        pending: list[LocalDir] = []
        node: LocalDir | None = d
        while node is not None and not node.verified and node.state == _UNKNOWN:
            pending.append(node)
            node = node.parent
        if node is None or not (node.verified or node.state == _OPEN):
            return False  # missing or bad above (reported there)
        root_fd = self.root.fd
        assert root_fd is not None  # open for the whole pass (never a cwd-relative stat)
        for node in reversed(pending):
            try:
                mode = os.stat(node.rel, dir_fd=root_fd, follow_symlinks=False).st_mode
            except FileNotFoundError:
                node.state = _MISSING
                return False
            except OSError:
                mode = 0
            if not stat.S_ISDIR(mode) and self.fd_of(node) is None:
                return False
            node.verified = True
        return True

    def present(self, d: LocalDir) -> bool:
        """Whether `d` is a directory in the destination, creating it (0700) if missing."""
        return d.fd is not None or d.verified or self.verify(d) or self.ensure(d) is not None

    def _touch(self, d: LocalDir) -> None:
        if self.durable and not d.touched:
            d.touched = True
            self._unsynced.add(d)

"""Walking a tree someone else wrote: by directory fd, nothing followed, no recursion.

`walk(root_fd)` yields every entry below the directory open at `root_fd`,
in name order, depth first, each with its `lstat` (taken relative to its
directory's fd, never following) and that directory's fd, valid until the
walk resumes: a consumer opens a regular file with `entry.open()`
(`O_NOFOLLOW|O_NONBLOCK`, checked to be the inode that was listed) or
removes an entry relative to `entry.dir_fd`; a FIFO, socket or device is
never opened by the walk, and a symlink is never followed.

Like `_fs.tree.remove_tree_at` (and coreutils' fts), the walk holds one
directory fd at a time and keeps only names on its stack: going back up
opens `..` and checks it is the directory that was entered (device and
inode), so a 10,000-level tree is neither a RecursionError nor an EMFILE,
and a tree moved during the walk ends it with one `Entry` of kind `error`
instead of walking somewhere else.
"""

from __future__ import annotations

import errno
import os
import stat
from collections.abc import Callable, Iterator
from dataclasses import dataclass

from sessionstore._fs import read as fsread

__all__ = ["ROOT", "Entry", "Node", "walk"]

# lstat mode test -> the kind an entry reports.
_KINDS = (
    (stat.S_ISREG, "file"),
    (stat.S_ISDIR, "directory"),
    (stat.S_ISLNK, "symlink"),
    (stat.S_ISFIFO, "fifo"),
    (stat.S_ISSOCK, "socket"),
    (stat.S_ISCHR, "device"),
    (stat.S_ISBLK, "device"),
)


@dataclass(frozen=True, slots=True)
class Node:
    """A directory's place in the tree: its parent's node and its name (None: the root).

    A linked list, so an entry 10,000 levels down costs one node, not a
    10,000-item tuple; `parts()` builds the path when it is asked for.
    """

    parent: Node | None
    name: str

    def parts(self) -> tuple[str, ...]:
        names: list[str] = []
        node: Node | None = self
        while node is not None and node.parent is not None:
            names.append(node.name)
            node = node.parent
        return tuple(reversed(names))


ROOT = Node(None, "")


@dataclass(frozen=True, slots=True)
class Entry:
    """One entry of the walk. `kind`: file, directory, symlink, fifo, socket, device,
    unknown, or error (`error` says what; then `st` may be None).

    `dir_fd` is the fd of the directory holding it, valid until the walk resumes.
    """

    parent: Node
    name: str
    kind: str
    st: os.stat_result | None
    dir_fd: int
    error: str | None = None

    def parts(self) -> tuple[str, ...]:
        """The entry's path below the root, one name per component."""
        return (*self.parent.parts(), self.name) if self.name else self.parent.parts()

    def open(self) -> int:
        """A read fd of this regular file: never follows, never blocks, same inode as listed.

        Raises `OSError` (`fsread.WrongKind` for an entry swapped since it was listed).
        """
        fd, st = fsread.open_file(self.name, self.dir_fd)
        if self.st is not None and (st.st_dev, st.st_ino) != (self.st.st_dev, self.st.st_ino):
            os.close(fd)
            raise OSError(errno.ESTALE, "replaced since it was listed", self.name)
        return fd


def _kind(mode: int) -> str:
    return next((name for test, name in _KINDS if test(mode)), "unknown")


def _identity(st: os.stat_result) -> tuple[int, int]:
    return st.st_dev, st.st_ino


def _names(fd: int) -> list[str]:
    """The names in the directory open at `fd`, in reverse order (popped first to last)."""
    with os.scandir(fd) as it:
        return sorted((e.name for e in it), reverse=True)


def walk(root_fd: int, descend: Callable[[Entry], bool] | None = None) -> Iterator[Entry]:
    """Every entry below the directory open at `root_fd` (which stays open and ours).

    A directory is yielded before its contents; it is entered unless
    `descend(entry)` says no. A directory that cannot be listed or entered
    is yielded again, as an `error` entry saying why, and the walk goes on.

    Long because the loop is one state machine (the current fd, the stack of
    names still to visit, the identities that guard the way back up), as in
    `_fs.tree.remove_tree_at`; split, each part would pass all of it around.
    """
    fd = os.dup(root_fd)
    # Frames of the directories above the current one: their node, their identity,
    # and their names still to visit.
    stack: list[tuple[Node, tuple[int, int], list[str]]] = []
    node = ROOT
    try:
        here = _identity(os.fstat(fd))
        names = _names(fd)
        while True:
            if not names:
                if not stack:
                    return
                parent_node, parent_id, names = stack.pop()
                up = os.open("..", fsread.DIR_FLAGS, dir_fd=fd)
                os.close(fd)
                fd = up
                if _identity(os.fstat(fd)) != parent_id:
                    problem = "moved during the walk; the rest of the tree was not walked"
                    yield Entry(node, "", "error", None, fd, problem)
                    return
                node, here = parent_node, parent_id
                continue
            name = names.pop()
            try:
                st = os.stat(name, dir_fd=fd, follow_symlinks=False)
            except FileNotFoundError:
                continue  # removed since the listing: it was not there
            except OSError as exc:
                yield Entry(node, name, "error", None, fd, fsread.problem(exc))
                continue
            entry = Entry(node, name, _kind(st.st_mode), st, fd)
            yield entry
            if entry.kind != "directory" or (descend is not None and not descend(entry)):
                continue
            try:
                sub = fsread.open_dir(name, fd)
            except FileNotFoundError:
                continue
            except OSError as exc:
                yield Entry(node, name, "error", st, fd, fsread.problem(exc))
                continue
            try:
                if _identity(os.fstat(sub)) != _identity(st):
                    raise OSError(errno.ESTALE, "replaced since it was listed")
                sub_names = _names(sub)
            except OSError as exc:
                os.close(sub)
                yield Entry(node, name, "error", st, fd, fsread.problem(exc))
                continue
            stack.append((node, here, names))
            os.close(fd)
            fd, node, here, names = sub, Node(node, name), _identity(st), sub_names
    finally:
        os.close(fd)

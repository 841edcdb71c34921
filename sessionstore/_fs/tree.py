"""Removing a directory tree by directory fd: the one way sessionstore removes a tree; and
swapping two entries of a directory atomically (`exchange_at`), so a tree is replaced
without a moment when its name is absent; and renaming onto a name only while it is free
(`rename_new_at`).

`remove_tree_at` removes a tree as coreutils' `rm -r` does (fts over
openat): every step relative to a directory fd, nothing followed, no
recursion, and one open directory fd at a time, so a 10,000-level tree is
neither a RecursionError nor an EMFILE. Going back up opens `..` and checks
it is the directory that was entered (device and inode): a tree moved
during the removal stops it with an error instead of removing elsewhere.
"""

from __future__ import annotations

import contextlib
import errno
import os
import stat
import sys

from sessionstore._fs import read as fsread

__all__ = ["exchange_at", "remove_tree_at", "rename_new_at"]

_RENAME_NOREPLACE = 1  # linux/fs.h
_RENAME_EXCHANGE = 2


def exchange_at(dir_fd: int, a: str, b: str) -> bool:
    """Swap the entries `a` and `b` of the directory open at `dir_fd` in one step
    (`renameat2(RENAME_EXCHANGE)`); False when this system or file system cannot
    (not Linux, no such call in the C library, EINVAL/ENOSYS), and nothing changed.

    Both names must exist; any other failure is raised as the `OSError` it is.
    """
    return _renameat2(dir_fd, a, b, _RENAME_EXCHANGE)


def rename_new_at(dir_fd: int, a: str, b: str) -> bool:
    """Rename `a` to `b` (both in the directory open at `dir_fd`) only if nothing is at `b`
    (`renameat2(RENAME_NOREPLACE)`: rename(2) would replace an empty directory made there);
    `FileExistsError` if something is. False when this system or file system cannot, and
    nothing changed: the caller then checks and renames, with a window between the two."""
    return _renameat2(dir_fd, a, b, _RENAME_NOREPLACE)


def _renameat2(dir_fd: int, a: str, b: str, flags: int) -> bool:
    if sys.platform != "linux":
        return False
    import ctypes  # on use: only a replacement pays for it

    libc = ctypes.CDLL(None, use_errno=True)
    call = getattr(libc, "renameat2", None)
    if call is None:  # a C library older than glibc 2.28, or without the wrapper
        return False
    if call(dir_fd, os.fsencode(a), dir_fd, os.fsencode(b), flags) == 0:
        return True
    code = ctypes.get_errno()
    if code in (errno.EINVAL, errno.ENOSYS, errno.EOPNOTSUPP):
        return False
    raise OSError(code, os.strerror(code), b if code == errno.EEXIST else a)


def _identity(fd: int) -> tuple[int, int]:
    st = os.fstat(fd)
    return st.st_dev, st.st_ino


def _next_subdir(fd: int, dirs_only: bool) -> str | None:
    """Unlink the non-directories of the directory open at `fd` up to its first
    subdirectory, and return that subdirectory's name (None: the directory is empty).

    `dirs_only`: a non-directory is never unlinked; it raises ENOTEMPTY instead.
    """
    with os.scandir(fd) as it:
        for entry in it:
            if entry.is_dir(follow_symlinks=False):
                return entry.name
            if dirs_only:
                raise OSError(errno.ENOTEMPTY, os.strerror(errno.ENOTEMPTY), entry.name)
            with contextlib.suppress(FileNotFoundError):
                os.unlink(entry.name, dir_fd=fd)
    return None


def remove_tree_at(dir_fd: int, name: str, *, dirs_only: bool = False) -> None:
    """Remove the entry `name` of the directory open at `dir_fd`, and everything below it.

    A symlink is removed as a link, never followed; absent is fine. Raises
    `OSError` if something cannot be removed or the tree moves meanwhile.
    `dirs_only`: remove a directory that holds nothing but directories, as rmdir(2)
    removes an empty one (absent or not a directory raises); a file found in it
    stops the removal with ENOTEMPTY, never removed (the empty directories met
    before it are gone).
    """
    try:
        st = os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
    except FileNotFoundError:
        if dirs_only:
            raise
        return
    if not stat.S_ISDIR(st.st_mode):
        if dirs_only:
            raise NotADirectoryError(errno.ENOTDIR, os.strerror(errno.ENOTDIR), name)
        os.unlink(name, dir_fd=dir_fd)
        return
    fd = fsread.open_dir(name, dir_fd)
    # The directories entered, top first: each one's name in its parent and its identity.
    chain = [(name, _identity(fd))]
    try:
        while True:
            child = _next_subdir(fd, dirs_only)
            if child is not None:
                try:
                    sub = fsread.open_dir(child, fd)
                except FileNotFoundError:
                    continue
                except OSError as exc:
                    if dirs_only or exc.errno not in (errno.ENOTDIR, errno.ELOOP, errno.EINVAL):
                        raise
                    # Swapped for a file or a symlink since the listing: remove it as one.
                    with contextlib.suppress(FileNotFoundError):
                        os.unlink(child, dir_fd=fd)
                    continue
                os.close(fd)
                fd = sub
                chain.append((child, _identity(fd)))
                continue
            if len(chain) == 1:
                break
            parent = os.open("..", fsread.DIR_FLAGS, dir_fd=fd)
            if _identity(parent) != chain[-2][1]:
                os.close(parent)
                raise OSError(errno.ESTALE, "the tree moved while it was removed", name)
            os.close(fd)
            fd = parent
            os.rmdir(chain.pop()[0], dir_fd=fd)
    finally:
        os.close(fd)
    os.rmdir(name, dir_fd=dir_fd)

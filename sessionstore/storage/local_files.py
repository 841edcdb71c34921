"""The files of `LocalStorage`: each read or write of one name in a directory fd.

The callers (`storage.local`) reach the directory (`local_dirs`); these open
only the name inside it, never following it: a read with `_fs.read`'s recipe
(`O_NOFOLLOW|O_NONBLOCK`, fstat before the first byte), a `create` with a temp
(`O_EXCL|O_NOFOLLOW`) linked to the name.
"""

from __future__ import annotations

import contextlib
import os

from sessionstore._fs import read as fsread
from sessionstore._fs.atomic import publish_once, temp_name, write_all
from sessionstore.errors import TooLarge
from sessionstore.storage.local_dirs import error as _error

__all__ = ["create_in", "lexists", "read_in", "read_with_stat"]

_CREATE_FLAGS = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC


def lexists(name: str, dir_fd: int) -> bool:
    try:
        os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
    except FileNotFoundError:
        return False
    return True


def read_in(parent: int, name: str, limit: int, where: tuple[str, ...]) -> bytes | None:
    """The bytes of the regular file `name` in `parent`: None if absent, else at most `limit`.

    Raises `TooLarge` past `limit` (nothing read), `StorageError` for anything
    that stops the read (a symlink, a FIFO, an I/O error), naming the key:
    `where` (the parts of `parent`'s key) and `name`, joined only then (this
    runs once per marker of a listing).
    """
    found = read_with_stat(parent, name, limit, where)
    return None if found is None else found[0]


def read_with_stat(
    parent: int, name: str, limit: int, where: tuple[str, ...]
) -> tuple[bytes, os.stat_result] | None:
    """`read_in`, with the `fstat` of the very file read (what a cache may key it by)."""
    try:
        fd, st = fsread.open_file(name, parent)
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise _error("/".join((*where, name)), exc) from exc
    try:
        data = None if st.st_size > limit else fsread.read_capped(fd, limit)
    except OSError as exc:
        raise _error("/".join((*where, name)), exc) from exc
    finally:
        os.close(fd)
    if data is None:
        raise TooLarge("/".join((*where, name)), limit)
    return data, st


def create_in(parent: int, name: str, data: bytes, mode: int) -> bool:
    """`create` of `name` in the directory `parent`: a temp written and fsynced, `parent`
    fsynced, the temp linked to `name` (False if taken), unlinked, `parent` fsynced."""
    temp = temp_name()
    linked = False
    try:
        out = os.open(temp, _CREATE_FLAGS, 0o600, dir_fd=parent)
        try:
            os.fchmod(out, mode)
            write_all(out, data)
            os.fsync(out)
        finally:
            os.close(out)
        os.fsync(parent)
        if not publish_once(temp, name, parent):
            return False
        # The temp name goes before the fsync, so one journal commit covers both.
        linked = True
        with contextlib.suppress(FileNotFoundError):
            os.unlink(temp, dir_fd=parent)
        os.fsync(parent)
    finally:
        if not linked:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(temp, dir_fd=parent)
    return True

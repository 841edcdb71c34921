"""The mirror's own files at a local destination's root: the change cache's reads and
writes, and the in-progress flag with its journal of claims (`LocalTree`'s base).

`LocalRoot` sits between `LocalSync` (durable commits) and `LocalTree` (the
walk's reads and changes). A root file is read only when it is this user's
or the destination owner's (`_readable`): the destination may sit in a
shared directory, and a file another user planted there must not steer a
pass. Modes are not looked at (a filesystem without them, vfat or cifs,
shows 0777), nor links (a `cp -al` snapshot of the destination links the
cache, which is only ever replaced by a rename); the flag is appended to
only when it has one link (`_appendable`), so nothing is written through to
a file elsewhere.
"""

from __future__ import annotations

import contextlib
import errno
import os
import stat
from collections.abc import Iterable

from sessionstore._fs.atomic import AtomicFile, fsync_dir, write_all
from sessionstore._fs.read import FILE_FLAGS
from sessionstore.storage import journal
from sessionstore.storage.local_tree_dirs import LocalDir
from sessionstore.storage.local_tree_sync import LocalSync

__all__ = ["FdFile", "LocalRoot"]


class FdFile:
    """A `RootFile` on an open fd: positional reads, so a forked verifier shares it safely."""

    def __init__(self, fd: int, size: int) -> None:
        self.fd: int | None = fd
        self.size = size

    def read_at(self, offset: int, n: int) -> bytes:
        if self.fd is None:
            raise OSError(errno.EBADF, "the file was closed")
        return os.pread(self.fd, n, offset)

    def close(self) -> None:
        fd, self.fd = self.fd, None
        if fd is not None:
            os.close(fd)


class LocalRoot(LocalSync):
    """The change cache's reads and writes, and the in-progress flag (`set_flag`)."""

    # The in-progress flag, open to append a claim per commit (storage/journal.py).
    _journal: int | None = None

    def open_file(self, d: LocalDir, name: str) -> int | None:
        """A read fd on a regular file (never a symlink, never blocking on a fifo), else None."""
        fd = self.fd_of(d)
        if fd is None:
            return None
        try:
            ffd = os.open(name, FILE_FLAGS, dir_fd=fd)
        except OSError:
            return None
        try:
            ok = stat.S_ISREG(os.fstat(ffd).st_mode)
        except OSError:
            ok = False
        if not ok:
            os.close(ffd)
            return None
        return ffd

    def open_root_file(self, name: str) -> FdFile | None:
        """A regular file at the root (never a symlink, never a fifo) that may be the
        mirror's own (`_readable`), read by `pread`, else None.

        The open file is the one read to the end, whatever replaces its name meanwhile.
        """
        fd = self.open_file(self.root, name)
        if fd is None:
            return None
        try:
            st = os.fstat(fd)
            if _readable(st, self._owner()):
                return FdFile(fd, st.st_size)
        except OSError:
            pass
        os.close(fd)
        return None

    def _owner(self) -> int:
        """The uid that owns the destination root."""
        assert self.root.fd is not None
        return os.fstat(self.root.fd).st_uid

    def put_root_file(self, name: str, chunks: Iterable[bytes], mode: int) -> None:
        """Replace a file at the root atomically; its bytes are durable, not the rename.

        The root is not fsynced for it (as before the Tree): the one caller, the
        change cache, is safe to lose (the pass then compares instead of trusting).
        """
        assert self.root.fd is not None
        with AtomicFile(name, mode, durable=self.durable, sync_dir=False, dir_fd=self.root.fd) as f:
            for chunk in chunks:
                f.write(chunk)

    def set_flag(self, name: str) -> None:
        """Create the in-progress flag at the root if absent (durable if asked), and keep it
        open: each commit of the pass appends its claim to it (`_start`).

        A flag that must not be appended to (`_appendable`: another user's, or a hard
        link to a file elsewhere) is replaced by a new one; one that cannot be replaced
        (a directory), or not appended to, still flags the destination, and the pass
        goes on without a journal (its files are then kept by --delete until a pass
        copies them again: a proof lost, never one made).
        """
        root = self.root
        assert root.fd is not None
        if not self.check(root):
            raise OSError(errno.ESTALE, "the destination was moved or replaced")
        flags = os.O_WRONLY | os.O_APPEND | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_NOCTTY
        flags |= os.O_CLOEXEC
        try:
            fd: int | None = os.open(name, flags, dir_fd=root.fd)
        except FileNotFoundError:
            fd = None
        except OSError:  # a symlink, a fifo with no reader, a directory, not writable
            fd = -1
        if fd is not None and fd >= 0:
            try:
                st = os.fstat(fd)
                if _appendable(st, self._owner()):
                    if st.st_size:  # ends a record a kill cut, before this pass's first claim
                        write_all(fd, b"\0")
                    self._keep_journal(fd)
                    return
            except OSError:  # a full disk: no journal this pass
                os.close(fd)
                self._keep_journal(None)
                return
            os.close(fd)
        if fd is not None:  # something else has the name
            try:
                os.unlink(name, dir_fd=root.fd)
            except OSError:
                self._keep_journal(None)
                return
        try:
            fd = os.open(name, flags | os.O_CREAT | os.O_EXCL, 0o600, dir_fd=root.fd)
        except FileExistsError:  # planted again since the unlink: it flags all the same
            fd = None
        self._keep_journal(fd)
        if self.durable:
            fsync_dir(".", dir_fd=root.fd)

    def _keep_journal(self, fd: int | None) -> None:
        self._close_journal()
        self._journal = fd

    def claims(self, name: str) -> dict[str, list[journal.Claim]]:
        """The claims in the in-progress flag `name`: what an interrupted pass committed.

        At most `journal.MAX_BYTES` of them are read: a claim not read proves nothing.
        """
        file = self.open_root_file(name)  # None if it cannot be the mirror's own
        if file is None:
            return {}
        try:
            return journal.read(file.read_at(0, min(file.size, journal.MAX_BYTES)))
        except OSError:
            return {}
        finally:
            file.close()

    def reset_claims(self, claims: dict[str, list[journal.Claim]]) -> None:
        """Leave only `claims` in the journal this pass keeps open: the change cache holds
        every other claimed file now. A kill or a full disk midway loses proofs, never
        makes one."""
        if self._journal is None:
            return
        with contextlib.suppress(OSError):
            os.ftruncate(self._journal, 0)
            kept = (journal.record(key, claim) for key, each in claims.items() for claim in each)
            write_all(self._journal, b"".join(kept))

    def clear_flag(self, name: str) -> None:
        """Remove a file at the root if the root is still in place (absent is fine)."""
        self._close_journal()
        root = self.root
        assert root.fd is not None
        if self.check(root):
            with contextlib.suppress(FileNotFoundError):
                os.unlink(name, dir_fd=root.fd)

    def close_all(self) -> None:
        try:
            super().close_all()
        finally:
            self._close_journal()

    def _close_journal(self) -> None:
        fd, self._journal = self._journal, None
        if fd is not None:
            os.close(fd)


def _readable(st: os.stat_result, owner: int) -> bool:
    """Whether a root file may be the mirror's own: this user's or the destination
    owner's (a pass run with sudo reads what the user's passes wrote)."""
    return stat.S_ISREG(st.st_mode) and st.st_uid in (os.geteuid(), owner)


def _appendable(st: os.stat_result, owner: int) -> bool:
    """Whether the flag may be appended to: readable, and no other name for it."""
    return _readable(st, owner) and st.st_nlink == 1

"""One daemon per destination: an `flock` on a lock file in the destination.

The lock file is opened through the destination's directory fds, like every
other file the mirror touches there (a symlink at its name or in the path is
refused, never followed), and the holder's pid is written beside it so a
second daemon can name it in its `LockHeld` error.
"""

from __future__ import annotations

import fcntl
import os
import stat
from typing import TYPE_CHECKING

from sessionstore._fs import read as fsread
from sessionstore._fs.atomic import AtomicFile
from sessionstore.errors import InvalidInput, LockHeld
from sessionstore.format.names import MIRROR_LOCK, MIRROR_PID
from sessionstore.storage.local_tree import LocalDir, LocalTree

if TYPE_CHECKING:
    from sessionstore.mirror.mirror import Mirror


class DestLock:
    """The held one-daemon-per-destination lock; `release()` drops it (any thread)."""

    def __init__(self, fd: int) -> None:
        self._fd: int | None = fd

    def release(self) -> None:
        fd, self._fd = self._fd, None
        if fd is not None:
            os.close(fd)  # closing the only fd drops the flock


_LOCK_FLAGS = os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC


def acquire_lock(mirror: Mirror) -> DestLock:
    """Take the one-daemon-per-destination lock; raise `LockHeld` naming the holder.

    The destination is created (0700) if missing and opened like a pass opens
    it, so a symlink in its path or at the lock's name is refused, never followed.
    """
    problems: list[str] = []
    root = LocalDir(None, "", "")
    tree = LocalTree(root, lambda _path, problem: problems.append(problem), _no_change, True)
    try:
        if not tree.open_root(str(mirror.dest_real)):
            raise InvalidInput(str(mirror.dest), "; ".join(problems))
        assert root.fd is not None
        fd = os.open(MIRROR_LOCK, _LOCK_FLAGS, 0o600, dir_fd=root.fd)
        try:
            if not stat.S_ISREG(os.fstat(fd).st_mode):
                raise InvalidInput(str(mirror.dest), f"{MIRROR_LOCK} is not a regular file")
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                raise LockHeld(mirror.dest, fsread.read_pid(MIRROR_PID, root.fd)) from None
            with AtomicFile(MIRROR_PID, 0o600, dir_fd=root.fd) as pid_file:
                pid_file.write(f"{os.getpid()}\n".encode())
        except BaseException:
            os.close(fd)
            raise
    finally:
        tree.close_all()
    return DestLock(fd)


def _no_change() -> None:
    """Taking the lock needs no in-progress flag: it writes no temps a pass would sweep."""

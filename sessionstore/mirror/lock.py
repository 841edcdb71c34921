"""One daemon per destination: an `flock` on a lock file in the destination (in a bucket:
a lease object created conditionally).

The lock file is opened through the destination's directory fds, like every
other file the mirror touches there (a symlink at its name or in the path is
refused, never followed), and the holder's pid is written beside it so a
second daemon can name it in its `LockHeld` error.

The lock lives in what it locks, so it excludes other daemons only while the
destination is the directory it was taken in. `DestLock.holds` tells a pass
whether it still is: the destination's lock file is the very file held (in a
bucket, the lease still holds this daemon's token). A session removed by
`rm --force`, or a destination moved away and replaced, is not: the daemon's
next pass raises `DestinationLost` instead of re-creating it.
"""

from __future__ import annotations

import fcntl
import functools
import os
import secrets
import socket
import stat
from collections.abc import Callable
from typing import TYPE_CHECKING

from sessionstore import _json as jsonio
from sessionstore._fs import read as fsread
from sessionstore._fs.atomic import AtomicFile
from sessionstore._proc import process_alive, process_start_time
from sessionstore.errors import DestinationLost, InvalidInput, LockHeld, StorageError
from sessionstore.format.names import MIRROR_LOCK, MIRROR_PID
from sessionstore.storage.local_tree import LocalDir, LocalTree

if TYPE_CHECKING:
    from sessionstore.mirror.mirror import Mirror
    from sessionstore.storage.s3_tree_io import S3Dest
    from sessionstore.storage.trees import DestTree


class DestLock:
    """The held one-daemon-per-destination lock; `release()` drops it (any thread, once).

    `holds(tree)`: whether the destination a pass opened as `tree` is still the
    one locked (see the module docstring). `gone()`: a check cheap enough for a
    timer, True once the lock file is known deleted or no longer at its name (a
    bucket's lease: never). It only calls for a pass, which decides (`holds`), so
    it says so once: a destination the pass merely reports (a symlink swapped in)
    must not cost a pass every time the timer asks.
    """

    def __init__(
        self,
        drop: Callable[[], None],
        holds: Callable[[DestTree], bool],
        gone: Callable[[], bool] = lambda: False,
    ) -> None:
        self._drop: Callable[[], None] | None = drop
        self.holds = holds
        self._gone: Callable[[], bool] | None = gone

    def gone(self) -> bool:
        if self._drop is None or self._gone is None or not self._gone():
            return False
        self._gone = None  # said once: see the class docstring
        return True

    def open_root(self, tree: DestTree, where: str) -> bool:
        """`tree.open_root` for a pass of the daemon holding this lock: False (reported)
        if unusable; `DestinationLost` if it is no longer the destination locked.

        A missing destination is not created: it was removed since the lock was taken.
        """
        try:
            if not tree.open_root(where, create=False):
                return False
        except FileNotFoundError:
            raise DestinationLost(where) from None
        if not self.holds(tree):
            raise DestinationLost(where)
        return True

    def release(self) -> None:
        drop, self._drop = self._drop, None
        if drop is not None:
            drop()


_LOCK_FLAGS = os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC


def acquire_lock(mirror: Mirror) -> DestLock:
    """Take the one-daemon-per-destination lock; raise `LockHeld` naming the holder.

    The destination is created (0700) if missing and opened like a pass opens
    it, so a symlink in its path or at the lock's name is refused, never followed.
    In a bucket the lock is a lease object (`_acquire_lease`).
    """
    if mirror.remote is not None:
        return _acquire_lease(mirror.remote)
    problems: list[str] = []
    root = LocalDir(None, "", "")
    tree = LocalTree(root, lambda _path, problem: problems.append(problem), _no_change, True)
    try:
        if not tree.open_root(str(mirror.dest_real)):
            raise InvalidInput(str(mirror.dest), "; ".join(problems))
        assert root.fd is not None
        try:
            fd = os.open(MIRROR_LOCK, _LOCK_FLAGS, 0o600, dir_fd=root.fd)
        except OSError as exc:
            raise _in_destination(exc, mirror, MIRROR_LOCK) from None
        try:
            if not stat.S_ISREG(os.fstat(fd).st_mode):
                raise InvalidInput(str(mirror.dest), f"{MIRROR_LOCK} is not a regular file")
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                raise LockHeld(str(mirror.dest), fsread.read_pid(MIRROR_PID, root.fd)) from None
            try:
                with AtomicFile(MIRROR_PID, 0o600, dir_fd=root.fd) as pid_file:
                    pid_file.write(f"{os.getpid()}\n".encode())
            except OSError as exc:
                raise _in_destination(exc, mirror, MIRROR_PID) from None
            held = os.fstat(fd)
        except BaseException:
            os.close(fd)
            raise
    finally:
        tree.close_all()
    # Closing the only fd drops the flock.
    return DestLock(
        functools.partial(os.close, fd),
        functools.partial(_holds_file, held),
        functools.partial(_lock_gone, fd, str(mirror.dest_real)),
    )


def _in_destination(exc: OSError, mirror: Mirror, name: str) -> OSError:
    """`exc` naming the destination's file `name` it is about: the bare name, or the pid
    file's temp (a failed rename names it), said nothing of which destination."""
    return OSError(exc.errno, exc.strerror, os.path.join(str(mirror.dest), name))


def _lock_gone(fd: int, root: str) -> bool:
    """Whether the lock file `fd` holds is deleted, or no longer the one at `root`'s lock name.

    A lock file with no name left was deleted (`rm` of the session deletes its
    tree), which an fstat tells without a path. But a hard link of it may live
    on (a `cp -al` snapshot of the destination), and then only its name tells:
    a timer's look by path, never trusted beyond calling for a pass.
    """
    held = os.fstat(fd)
    if held.st_nlink == 0:
        return True
    try:
        if not stat.S_ISDIR(os.lstat(root).st_mode):
            return False  # a symlink or a file at its name: each pass reports it
        found = os.lstat(os.path.join(root, MIRROR_LOCK))
    except FileNotFoundError:
        return True
    except OSError:
        return False
    return (found.st_dev, found.st_ino) != (held.st_dev, held.st_ino)


def _holds_file(held: os.stat_result, tree: DestTree) -> bool:
    """Whether the lock file in the destination `tree` opened is the file `held` (flocked)."""
    found = tree.lstat(tree.root, MIRROR_LOCK)
    return found is not None and (found.st_dev, found.st_ino) == (held.st_dev, held.st_ino)


def _acquire_lease(dest: S3Dest) -> DestLock:
    """The lock of a bucket destination: `MIRROR_LOCK` created with `If-None-Match: *`.

    A flock cannot exclude another host, so the lease is an object: created
    conditionally (the server lets one of two daemons have it), holding a
    token, the host, the pid and its start time, and deleted on release if it
    still holds our token. A lease left by a dead daemon of this host is taken
    over; one of another host is reported (`LockHeld` names its host and pid)
    and must be removed by hand once that daemon is known to be gone.
    """
    token = secrets.token_hex(16)
    host = socket.gethostname()
    pid = os.getpid()
    body = jsonio.dumps(
        {"token": token, "host": host, "pid": pid, "pid_started_at": process_start_time(pid)}
    )
    for _ in range(3):  # again after the lease went, or another took a dead one over
        if dest.create(MIRROR_LOCK, body):
            return _lease(dest, token)
        raw = dest.get(MIRROR_LOCK, 4096)
        if raw is None:
            continue  # released since the create: create it again
        found, _ = jsonio.parse_object(raw)
        holder = found if found is not None else {}
        other_pid = holder.get("pid") if isinstance(holder.get("pid"), int) else None
        started = holder.get("pid_started_at")
        if (
            holder.get("host") != host
            or other_pid is None
            or process_alive(other_pid, started if isinstance(started, float) else None)
        ):
            other = holder.get("host")  # quoted, not repr'd: the CLI escapes it once
            other = f"'{other}'" if isinstance(other, str) else repr(other)
            where = f"{dest.url}/{MIRROR_LOCK} (host {other})"
            raise LockHeld(where, other_pid)
        # A dead daemon's: replaced only while it is still that lease (`If-Match`). Of
        # two daemons taking it over at once one does; the other finds it alive above.
        # Removed, then created, the slower one's removal took the faster one's lease.
        from sessionstore.storage.s3_create import replace_if

        if replace_if(dest, MIRROR_LOCK, body, holding=raw):
            return _lease(dest, token)
    raise LockHeld(f"{dest.url}/{MIRROR_LOCK}", None)


def _lease(dest: S3Dest, token: str) -> DestLock:
    """The lock held while the lease holds `token`."""
    return DestLock(
        functools.partial(_release_lease, dest, token),
        functools.partial(_holds_lease, dest, token),
    )


def _release_lease(dest: S3Dest, token: str) -> None:
    if _lease_token(dest) == token:
        dest.remove(MIRROR_LOCK)


def _holds_lease(dest: S3Dest, token: str, _tree: DestTree) -> bool:
    """Whether the lease is still this daemon's: one GET a pass. A GET that fails says
    nothing either way (the pass's own requests report the server), so it holds."""
    try:
        return _lease_token(dest) == token
    except StorageError:
        return True


def _lease_token(dest: S3Dest) -> object:
    found, _ = jsonio.parse_object(dest.get(MIRROR_LOCK, 4096) or b"")
    return None if found is None else found.get("token")


def _no_change() -> None:
    """Taking the lock needs no in-progress flag: it writes no temps a pass would sweep."""

"""A pass's way in: the source root checked, then (a subset pass) down to one subtree.

The daemon's passes after events walk only the subtrees that changed. Each is
reached by opening its path component by component (relative to the parent's
fd, never through a symlink), mapping names as a full pass would, and then
entered as a frame of its own with its destination directories above it.
"""

from __future__ import annotations

import errno
import os

from sessionstore._fs.atomic import TEMP_PREFIX
from sessionstore.mirror.cache import join
from sessionstore.mirror.frame import MAX_DEPTH, Frame
from sessionstore.mirror.layout import OWNED, RESERVED, RESERVED_PREFIX, SPANS, STORE_OWNED
from sessionstore.storage.local_tree import OPEN_DIR, LocalDir, describe

# Only climbed through and fstat'ed: O_PATH needs no read permission on a directory above.
_OPEN_UP = getattr(os, "O_PATH", os.O_RDONLY) | os.O_DIRECTORY | os.O_CLOEXEC

TYPE_CHECKING = False  # typing's, without importing typing (mypy reads it as such)
if TYPE_CHECKING:
    from sessionstore.mirror.walk import Pass


def source_is_dest(run: Pass, root_fd: int) -> bool:
    """Whether the source root `root_fd` is the destination or inside it (an error of
    the pass if so).

    `Mirror` refuses such a pair of paths, but a source is looked up by name at
    every pass: swapped for a symlink to the destination under a daemon, the
    tree was copied onto itself, each pass's commits the next one's events; to a
    directory in it, that directory was copied to the destination's top. So the
    directories above the source root are climbed (`..`, by fd) to the top.
    """
    own = os.fstat(root_fd)
    if (own.st_dev, own.st_ino) == run.dest_id:
        run.error(".", "source: is the destination now; nothing mirrored")
        return True
    if _below(root_fd, (own.st_dev, own.st_ino), run.dest_id):
        run.error(".", "source: is inside the destination now; nothing mirrored")
        return True
    return False


def _below(fd: int, here: tuple[int, int], top: tuple[int, int]) -> bool:
    """Whether the directory open at `fd` (identity `here`) has `top` above it.

    Climbs `..` to the file system's root (its own parent); a directory that
    cannot be climbed (no search permission) ends the climb: not below.
    """
    fd = os.dup(fd)
    try:
        while True:
            try:
                up = os.open("..", _OPEN_UP, dir_fd=fd)
            except OSError:
                return False
            os.close(fd)
            fd = up
            st = os.fstat(fd)
            above = (st.st_dev, st.st_ino)
            if above == top:
                return True
            if above == here:  # `/` is its own parent
                return False
            here = above
    finally:
        os.close(fd)


def mount_root(run: Pass, frame: Frame, fd: int, drel: str) -> bool:
    """Whether `fd`, a subdirectory of `frame` opened by a name its listing gave another
    inode, is the root of a filesystem mounted there: then it is walked.

    A listing's inode of a mount point is the covered directory's (`d_ino`), never the
    mounted root's that the open gives, so only a different mount tells a mount point
    from a directory swapped in since the listing (unstable, pending in `frame`). The
    destination mounted inside the source is skipped, as when its inode is listed.
    """
    own = os.fstat(fd)
    if not _other_mount(frame.src_fd, fd, own):
        frame.pending += 1
        run.unstable(drel, "replaced during the pass")
        return False
    if (own.st_dev, own.st_ino) == run.dest_id:
        run.skip(drel, "the destination itself")
        return False
    return True


def _other_mount(parent_fd: int, fd: int, own: os.stat_result) -> bool:
    """Whether the directory open at `fd` is on another mount than the one at `parent_fd`.

    Another device says so; a bind mount of the parent's filesystem has its device,
    and only the mount id tells (Linux: /proc/self/fdinfo; elsewhere not known).
    """
    if own.st_dev != os.fstat(parent_fd).st_dev:
        return True
    ids = [_mount_id(parent_fd), _mount_id(fd)]
    return None not in ids and ids[0] != ids[1]


def _mount_id(fd: int) -> int | None:
    try:
        with open(f"/proc/self/fdinfo/{fd}", "rb") as info:
            for line in info:
                if line.startswith(b"mnt_id:"):
                    return int(line[7:])
    except (OSError, ValueError):
        pass
    return None


def visit_subtree(run: Pass, root_fd: int, parts: tuple[str, ...]) -> None:
    """Walk down to one source subtree (without visiting what is above it) and visit it."""
    fd, dest, rel = root_fd, run.tree.root, ""
    fds: list[int] = []
    nodes: list[LocalDir] = []
    try:
        for i, part in enumerate(parts, 1):
            if run.exclude is not None and run.exclude.excluded("/".join(parts[:i]), True):
                return  # an event below an excluded directory: nothing there is mirrored
            dname = run.name(part)
            if _never_walked(run, dname, join(rel, dname), top=i == 1):
                return
            if run.redactor is not None and _collides(run, fd, part, dname, rel):
                return
            if run.spans is not None and run.spans(rel, dname):
                run.error(rel or ".", SPANS)
                return
            if i > MAX_DEPTH:  # as a full pass would say of it: nothing below is mirrored
                run.error(join(rel, dname), f"deeper than {MAX_DEPTH} levels; not mirrored")
                return
            try:
                fd = os.open(part, OPEN_DIR, dir_fd=fd)
            except OSError as exc:
                if exc.errno in (errno.ENOENT, errno.ENOTDIR, errno.ELOOP):
                    return  # gone or replaced since the caller saw it; a full pass settles it
                # Not to be dropped unsaid (EMFILE, EACCES): the pass would be ok and its
                # change lost until a full pass. As a full pass reports it.
                run.listing_failed = True
                run.error(join(rel, dname), f"cannot open directory: {describe(exc)}")
                return
            fds.append(fd)
            rel = join(rel, dname)
            own = os.fstat(fd)
            if (own.st_dev, own.st_ino) == run.dest_id:  # its own writes' events: never a source
                run.skip(rel, "the destination itself")
                return
            if len(fds) < len(parts):
                dest = LocalDir(dest, dname, rel)
                nodes.append(dest)
        parent_name = parts[-2] if len(parts) > 1 else None
        frame = Frame(dest, dname, rel, fds.pop(), parts[-1], parent_name, None)
        run.src_rels[rel] = "/".join(parts)
        run.tops.append(rel)
        if run.enter(frame):
            run.walk(frame, len(parts))
    finally:
        for node in reversed(nodes):
            run.tree.close(node)
        for f in fds:
            os.close(f)


def _never_walked(run: Pass, dname: str, drel: str, *, top: bool) -> bool:
    """Whether a full pass would pass over the directory `dname` (reporting it as it does):
    a name of the mirror's own files or temps, or one the store owns at a session's top."""
    if dname[0] == "." and dname.startswith((RESERVED_PREFIX, TEMP_PREFIX)):
        if not dname.startswith(TEMP_PREFIX):  # our temps are not the source's
            run.skip(drel, RESERVED)
        return True
    if top and run.is_session and dname in STORE_OWNED:
        run.skip(drel, OWNED)
        return True
    return False


def _collides(run: Pass, dir_fd: int, name: str, dname: str, rel: str) -> bool:
    """Whether another name in the directory `rel` (open at `dir_fd`) maps to `dname` too,
    or the directory cannot be listed to tell (EMFILE, a deep path under a low ulimit):
    either is an error of the pass, reported here."""
    try:
        with os.scandir(dir_fd) as it:
            if not any(e.name != name and run.name(e.name) == dname for e in it):
                return False
    except OSError as exc:  # as a full pass reports a directory it cannot list
        run.listing_failed = True
        run.error(rel or ".", f"cannot list: {describe(exc)}")
        return True
    run.error(join(rel, dname), "name collision: source names map to this name")
    return True

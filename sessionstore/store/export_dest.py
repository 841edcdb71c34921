"""Where an export may not go: inside the session it exports from, inside the store that
holds that session, or inside any session at all (`refuse_inside`).

At a store's top a directory named as an id lists as a session that is none; inside
a session it is a record of it (`trials/<n>` with a marker reads as a completed trial)
or a foreign entry. Checked on the directory the export writes through, climbing by
`..` from its fd, so a symlink on the way does not hide it.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING

from sessionstore._fs import read as fsread
from sessionstore.errors import InvalidInput
from sessionstore.format.names import MANIFEST, PREVIOUS_DIR, SERVICE, TRIALS

if TYPE_CHECKING:
    from sessionstore.store.session import Session

__all__ = ["refuse_inside"]

# Levels `_below` climbs at most: far more than a path can have (PATH_MAX is 4096 bytes).
_MAX_CLIMB = 4096
# What every session made by sessionstore holds at its top (docs/format.md).
_SESSION = (MANIFEST, TRIALS, SERVICE)


def refuse_inside(session: Session, parent_fd: int, dest: Path) -> None:
    """`InvalidInput` when `dest` (made in the directory open at `parent_fd`) is inside the
    session, inside the store holding it, or inside any session.

    A session directory with a `session.json`, read or not, is in a store (its
    parent); so is a lineage copy (`previous/<id>`, exported by its path: the store
    is that of the session holding it). A raw workspace named by its path is in no
    store. Any session is a directory with `session.json`, `trials` and `service`.
    """
    if _below(parent_fd, session.path):
        raise InvalidInput(str(dest), "is inside the session it exports from; export elsewhere")
    holder = _holding_session(session)
    if holder is not None and _below(parent_fd, holder.parent):
        raise InvalidInput(
            str(dest),
            f"is inside the store {holder.parent}, which holds only sessions; export elsewhere",
        )
    if _below(parent_fd, None):
        raise InvalidInput(
            str(dest),
            f"is inside a session (a directory holding {MANIFEST}, {TRIALS}/ and {SERVICE}/); "
            "export elsewhere",
        )


def _holding_session(session: Session) -> Path | None:
    """The session directory `session` is (it has a manifest), or the one whose lineage
    copy it is (`<session>/previous/<id>`), if any."""
    if session.manifest is not None or session.manifest_error is not None:
        return session.path
    path = Path(os.path.abspath(session.path))
    above = path.parent.parent
    if path.parent.name == PREVIOUS_DIR and all(os.path.lexists(above / n) for n in _SESSION):
        return above
    return None


def _below(dir_fd: int, top: Path | None) -> bool:
    """Whether the directory open at `dir_fd` is `top` or below it (`top` None: a directory
    laid out as a session, of any store): walked up by `..` from the fd the
    export writes through, so no path is resolved again (bounded, as `_fs.walk` climbs: a
    directory that will not open or stat is taken as not below)."""
    wanted = None
    if top is not None:
        try:
            st = os.stat(top)
        except OSError:
            return False
        wanted = (st.st_dev, st.st_ino)
    fd = os.dup(dir_fd)
    try:
        for _ in range(_MAX_CLIMB):
            st = os.fstat(fd)
            if (st.st_dev, st.st_ino) == wanted or (wanted is None and _is_session(fd)):
                return True
            up = os.open("..", fsread.DIR_FLAGS, dir_fd=fd)
            os.close(fd)
            fd = up
            above = os.fstat(fd)
            if (above.st_dev, above.st_ino) == (st.st_dev, st.st_ino):
                return False  # the root: its `..` is itself
    except OSError:
        return False
    finally:
        os.close(fd)
    return False


def _is_session(dir_fd: int) -> bool:
    """Whether the directory open at `dir_fd` is laid out as a session: a stray file named
    `session.json` (another tool's, in a home directory) does not make one."""
    try:
        for name in _SESSION:
            os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
    except OSError:
        return False
    return True

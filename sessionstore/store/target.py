"""Naming a session from outside: a TARGET is a session id in a store, or a session directory.

The CLI's TARGET argument and `--store` option mean what these functions
say. A name that is a valid session id and names a session in the store is
that session; anything else is read as a path. The store is `--store`, else
`$SESSIONSTORE_HOME`, else `~/.sessionstore`.

Kept import-light on purpose: `sessionstore mirror` resolves its DST here
on every no-op pass, so the store engine is imported only by the functions
that open a session.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING

from sessionstore.errors import InvalidId, SessionNotFound
from sessionstore.format.names import validate_id

if TYPE_CHECKING:
    from sessionstore.store.session import Session

__all__ = ["STORE_ENV", "default_store_root", "resolve_destination", "resolve_target", "store_root"]

STORE_ENV = "SESSIONSTORE_HOME"


def default_store_root() -> Path:
    """`$SESSIONSTORE_HOME`, else `~/.sessionstore` (not expanded: `store_root` does that)."""
    home = os.environ.get(STORE_ENV)
    return Path(home) if home else Path.home() / ".sessionstore"


def store_root(store: str | os.PathLike[str] | None = None) -> Path:
    """The store directory: `store` if given, else `default_store_root()`; `~` expanded."""
    return (Path(store) if store is not None else default_store_root()).expanduser()


def _store_id(target: str, root: Path) -> bool:
    """Whether `target` is a valid session id naming a directory in the store at `root`."""
    try:
        validate_id(target)
    except InvalidId:
        return False
    return (root / target).is_dir()


def resolve_target(target: str, store: str | os.PathLike[str] | None = None) -> Session:
    """The session `target` names: an id of a session in `store` first, else a directory path.

    `store` None is the default store (`default_store_root`). Raises
    `SessionNotFound` naming `target` and the store when it names neither.
    A directory without `session.json` (a raw workspace) is a session too,
    as `Session.open` reads it.
    """
    # Imported here, not at the top: `resolve_destination` (every `sessionstore mirror`
    # start-up) needs none of the store engine.
    from sessionstore.store.session import Session, Store

    root = store_root(store)
    if _store_id(target, root):
        return Store(root).open(target)
    if Path(target).is_dir():
        return Session.open(target)
    raise SessionNotFound(target, root)


def resolve_destination(dst: str, store: str | os.PathLike[str] | None = None) -> Path:
    """Where `sessionstore mirror SRC DST` writes: the session DST of `store`, else the path DST.

    A valid session id that names no session in the store and no existing
    path is most likely a mistyped id, and mirroring would create a stray
    directory named like a session: it raises `SessionNotFound` with a hint
    to spell a new directory as a path (`./NAME`). Anything else (a path,
    whether it exists or not) is returned as it is.
    """
    try:
        validate_id(dst)
    except InvalidId:
        return Path(dst)
    root = store_root(store)
    if (root / dst).is_dir():
        return root / dst
    if not Path(dst).exists():
        raise SessionNotFound(
            dst, root, hint=f"to mirror into a new directory of that name, write ./{dst}"
        )
    return Path(dst)

"""Naming a session from outside: a TARGET is a session id in a store, or a session directory.

The CLI's TARGET argument and `--store` option mean what these functions
say. A name that is a valid session id and names a session in the store is
that session; else an existing directory path is that directory; else a name
that is the start of exactly one session id of the store (git-style, any
length) is that session, and the start of several is `AmbiguousTarget`
listing them. The store is `--store`, else `$SESSIONSTORE_HOME`, else
`~/.sessionstore`.

Kept import-light on purpose: `sessionstore mirror` resolves its DST here
on every no-op pass, so the store engine is imported only by the functions
that open a session.
"""

from __future__ import annotations

import os
from pathlib import Path

from sessionstore.errors import AmbiguousTarget, InvalidId, InvalidInput, SessionNotFound
from sessionstore.format.names import MANIFEST, is_id, validate_id
from sessionstore.storage.s3_path import S3Path, s3_root, split_session_url

TYPE_CHECKING = False  # typing's, without importing typing (mypy reads it as such)
if TYPE_CHECKING:
    from sessionstore.store.session import Session

__all__ = [
    "STORE_ENV",
    "default_store_root",
    "mistyped_id",
    "prefix_matches",
    "resolve_destination",
    "resolve_target",
    "store_root",
]

STORE_ENV = "SESSIONSTORE_HOME"


def default_store_root() -> Path:
    """`$SESSIONSTORE_HOME`, else `~/.sessionstore` (not expanded: `store_root` does that)."""
    home = os.environ.get(STORE_ENV)
    if home:
        remote = s3_root(home)
        return remote.path() if remote is not None else Path(home)
    return Path.home() / ".sessionstore"


def store_root(store: str | os.PathLike[str] | None = None) -> Path:
    """The store: `store` if given, else `default_store_root()`; `~` expanded.

    An `s3://BUCKET/PREFIX` store is its `S3Path` (`InvalidInput` if malformed).
    """
    if store is None:
        return default_store_root().expanduser()
    remote = s3_root(store)
    return remote.path() if remote is not None else Path(store).expanduser()


def _store_id(target: str, root: Path) -> bool:
    """Whether `target` is a valid session id naming a directory in the store at `root`."""
    try:
        validate_id(target)
    except InvalidId:
        return False
    if isinstance(root, S3Path):
        return True  # the store's listing cannot do better than opening it: `Store.open`
    return (root / target).is_dir()


def prefix_matches(prefix: str, root: Path) -> list[str]:
    """The ids of the store at `root` that start with `prefix`, sorted.

    Only entries that are sessions count: directories (not symlinks) whose
    name is a valid id. A `prefix` that cannot start an id, or a store that
    cannot be listed, matches nothing.
    """
    try:
        validate_id(prefix)
    except InvalidId:
        return []
    if isinstance(root, S3Path):  # the names listed, each with its manifest (not read)
        from sessionstore.storage.s3 import S3Storage
        from sessionstore.store.session import Store

        storage = Store(root).storage
        assert isinstance(storage, S3Storage)
        return [name for name in storage.prefixes_holding(prefix, MANIFEST) if is_id(name)]
    try:
        with os.scandir(root) as entries:
            names = [
                e.name
                for e in entries
                if e.name.startswith(prefix) and e.is_dir(follow_symlinks=False)
            ]
    except OSError:
        return []
    found = []
    for name in names:
        try:
            found.append(validate_id(name))
        except InvalidId:
            continue
    return sorted(found)


def _unique_prefix(prefix: str, root: Path) -> str | None:
    """The one id of the store starting with `prefix`; None if none; `AmbiguousTarget` if many."""
    found = prefix_matches(prefix, root)
    if len(found) > 1:
        raise AmbiguousTarget(prefix, root, found)
    return found[0] if found else None


def resolve_target(
    target: str, store: str | os.PathLike[str] | None = None, *, follow: bool = True
) -> Session:
    """The session `target` names: an id of a session in `store` first, else a
    directory path, else the start of exactly one id of `store`.

    `store` None is the default store (`default_store_root`). Raises
    `SessionNotFound` naming `target` and the store when it names none of
    them, `AmbiguousTarget` listing the ids when it starts several, and
    `InvalidInput` for an empty `target` (not the current directory).
    A directory without `session.json` (a raw workspace) is a session too,
    as `Session.open` reads it. A path that is a symlink is followed to its
    session unless `follow` is False (`rm`): then it is `InvalidInput`.
    """
    # Imported here, not at the top: `resolve_destination` (every `sessionstore mirror`
    # start-up) needs none of the store engine.
    from sessionstore.store.session import Session, Store

    if not target:
        # Path("") is the current directory: `rm "$ID"` with ID unset would remove it.
        raise InvalidInput("TARGET", "is empty; name a session id, a prefix of one, or a path")
    if s3_root(target) is not None:  # s3://BUCKET/PREFIX/ID: the session ID of that store
        url, name = split_session_url(target)
        named = Store(url)
        try:
            return named.open(name)
        except SessionNotFound:
            match = _unique_prefix(name, named.root)  # s3://BUCKET/PREFIX/<start of an id>
            if match is None:
                raise
            return named.open(match)
    root = store_root(store)
    if _store_id(target, root):
        try:
            return Store(root).open(target)
        except SessionNotFound:
            if not isinstance(root, S3Path):
                raise
    if not follow and os.path.islink(Path(target)):  # Path: `link/` is the link too
        # `rm ./link` would remove the session the link names, wherever it is: what the
        # user may remove is what they name, never what a link leads to (nor the link,
        # which is no session).
        raise InvalidInput(target, "is a symlink; not followed, so nothing was removed")
    if Path(target).is_dir():
        return Session.open(target)
    match = _unique_prefix(target, root)
    if match is not None:
        return Store(root).open(match)
    raise SessionNotFound(target, root)


def resolve_destination(dst: str, store: str | os.PathLike[str] | None = None) -> Path:
    """Where `sessionstore mirror SRC DST` writes: the session DST of `store`, else the path DST.

    A valid session id that names no session in the store and no existing
    path is most likely a mistyped id, and mirroring would create a stray
    directory named like a session: it raises `SessionNotFound` with a hint
    to spell a new directory as a path (`./NAME`), unless it is the start
    of exactly one id of the store: then it is that session (several:
    `AmbiguousTarget`). Anything else (a path, whether it exists or not) is
    returned as it is.
    """
    try:
        validate_id(dst)
    except InvalidId:
        return Path(dst)
    root = store_root(store)
    if (root / dst).is_dir():
        return root / dst
    if not Path(dst).exists():
        match = _unique_prefix(dst, root)
        if match is not None:
            return root / match
        raise mistyped_id(dst, root)
    return Path(dst)


def mistyped_id(dst: str, root: Path) -> SessionNotFound:
    """The error of a mirror DST that is a valid id naming no session of the store `root`
    and nothing else: most likely a mistyped id, so a new directory is spelled `./NAME`."""
    return SessionNotFound(
        dst, root, hint=f"to mirror into a new directory of that name, write ./{dst}"
    )

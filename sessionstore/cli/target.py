"""Resolving a TARGET argument: a session id in the store, or a path to a session directory."""

from __future__ import annotations

from pathlib import Path

from sessionstore.errors import SessionNotFound
from sessionstore.format.names import validate_id
from sessionstore.store.session import Session, Store


def resolve(store: Store, target: str) -> Session:
    """The session `target` names: an id in `store` first, else a directory path."""
    try:
        validate_id(target)
    except ValueError:
        pass
    else:
        if (store.root / target).is_dir():
            return store.open(target)
    if Path(target).is_dir():
        return Session.open(target)
    raise SessionNotFound(target, store.root)

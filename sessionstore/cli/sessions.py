"""A store's sessions as a listing chooses them: `--status`, `--label`, `--sort`, `--limit`.

Shared by `inspect` (the rows), `scan` (the sessions scanned) and `prune`
(the sessions removed), so the three choose and order alike.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import TYPE_CHECKING

from sessionstore.cli.listing import Listing, name_order

if TYPE_CHECKING:
    from sessionstore.inspect.best import Objective
    from sessionstore.inspect.summary import SessionView
    from sessionstore.store.session import Session, Store


def session_views(
    store: Store,
    chosen: list[Session],
    listing: Listing,
    goal: Objective,
    *,
    write_index: bool = False,
) -> Iterator[SessionView]:
    """Each session's view in the listing's order, loaded only when it is next: labels and
    names are the manifest's (read by the store's listing), status and best need the records.

    `chosen` are the store's sessions (newest first) that carry the listing's labels;
    `write_index`: refresh each session's summary index (`inspect` only).
    """
    from sessionstore.inspect.summary import SessionView
    from sessionstore.store.remote import each, read_ahead

    def load(session: Session) -> SessionView:
        with read_ahead(session):
            return SessionView.load(session, goal, write_index=write_index)

    if listing.sort == "name":
        chosen.sort(key=lambda s: name_order(s.manifest, s.path.name))
    # A session removed (renamed away whole) while the list is read was not there: rows
    # stream for a while, and it must not show as an empty running session.
    views: Iterable[SessionView] = (
        view
        for view in each(store.storage, load, chosen)
        if listing.wants(view.status) and _still_there(view.session)
    )
    if listing.sort == "best":
        views = sorted(views, key=best_key)  # every session is read first: no way round it
    return listing.take(views)


def _still_there(session: Session) -> bool:
    """Whether a listed session is still there: one removed while the list streams is left out."""
    from sessionstore.storage.s3_path import S3Path

    # In a bucket `rm` deletes the manifest first, and its read view says so.
    return isinstance(session.path, S3Path) or session.path.is_dir()


def best_key(view: SessionView) -> tuple[int, float]:
    """Best first: sessions with a best trial by its value (the objective's direction),
    those meeting the constraints before those that fell short, then those without one."""
    from sessionstore.inspect.best import best_first

    best = view.best
    if best is None:
        return best_first(None, None, view.objective)
    return best_first(best.value, best.meets_constraints, view.objective)

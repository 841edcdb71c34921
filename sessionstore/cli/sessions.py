"""A store's sessions as a listing chooses them: `--status`, `--label`, `--sort`, `--limit`.

Shared by `inspect` (the rows), `scan` (the sessions scanned) and `prune`
(the sessions removed), so the three choose and order alike.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from typing import TYPE_CHECKING, Any, TypeVar

from sessionstore.cli.listing import Listing, name_order

if TYPE_CHECKING:
    from sessionstore.inspect.best import Objective
    from sessionstore.inspect.summary import SessionView
    from sessionstore.store.session import Session, Store

T = TypeVar("T")


def session_views(
    store: Store, chosen: list[Session], listing: Listing, goal: Objective
) -> Iterator[SessionView]:
    """Each session's view in the listing's order, loaded only when it is next: labels and
    names are the manifest's (read by the store's listing), status and best need the records.

    `chosen` are the store's sessions (newest first) that carry the listing's labels.
    """
    from sessionstore.inspect.summary import SessionView

    return _listed(
        store,
        chosen,
        listing,
        lambda session: SessionView.load(session, goal),
        lambda view: view.status,
        lambda view: view.best.to_dict() if view.best else None,
        goal,
    )


def session_rows(
    store: Store, chosen: list[Session], listing: Listing, goal: Objective
) -> Iterator[dict[str, Any]]:
    """`session_views`' summaries (what `inspect` lists, as a table or as data), each
    session's summary index refreshed and its kept summary used where it still holds
    (`session_summary`)."""
    from sessionstore.inspect.summary import session_summary

    return _listed(
        store,
        chosen,
        listing,
        lambda session: session_summary(session, goal, write_index=True),
        lambda row: row["status"],
        lambda row: row["best"],
        goal,
        json=True,
    )


def _listed(
    store: Store,
    chosen: list[Session],
    listing: Listing,
    load: Callable[[Session], T],
    status: Callable[[T], str],
    best: Callable[[T], dict[str, Any] | None],
    goal: Objective,
    *,
    json: bool = False,
) -> Iterator[T]:
    """What `load` makes of each chosen session, chosen and ordered by `listing`; `status`
    and `best` (its `Best.to_dict()`) say what `--status` and `--sort best` look at;
    `json`: `load` makes JSON values (`store.remote.each`)."""
    from sessionstore.store.remote import each, read_ahead

    def read(session: Session) -> T:
        with read_ahead(session):
            return load(session)

    if listing.sort == "name":
        chosen.sort(key=lambda s: name_order(s.manifest, s.path.name))
    # A session removed (renamed away whole) while the list is read was not there: rows
    # stream for a while, and it must not show as an empty running session.
    items: Iterable[T] = (
        item
        for session, item in zip(chosen, each(store.storage, read, chosen, json=json), strict=True)
        if listing.wants(status(item)) and _still_there(session)
    )
    if listing.sort == "best":
        # Every session is read first: no way round it.
        items = sorted(items, key=lambda item: best_key(best(item), goal))
    return listing.take(items)


def _still_there(session: Session) -> bool:
    """Whether a listed session is still there: one removed while the list streams is left out."""
    from sessionstore.storage.s3_path import S3Path

    # In a bucket `rm` deletes the manifest first, and its read view says so.
    return isinstance(session.path, S3Path) or session.path.is_dir()


def best_key(best: dict[str, Any] | None, objective: Objective) -> tuple[int, float]:
    """Best first, by a session's best trial (`Best.to_dict()`, or None): sessions with one
    by its value (the objective's direction), those meeting the constraints before those
    that fell short, then those without one."""
    from sessionstore.inspect.best import best_first

    if best is None:
        return best_first(None, None, objective)
    return best_first(best["value"], best["meets_constraints"], objective)

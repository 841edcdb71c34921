"""`sessionstore scan` of a store's sessions, chosen as a listing chooses them.

`--status`, `--label` and `--sort` turn the scan of a store (every entry of
its directory or prefix) into the scan of its sessions only: those chosen,
in the order asked for, each whole. They choose sessions, so they are a
usage error for what is no store: a session, a file, a directory that holds
no session (a scan of it choosing nothing would pass as clean).

Every path printed goes through the scanner's redactor (`display_path`), as
the scan's own paths do: the store's path may hold a secret too.
"""

from __future__ import annotations

import dataclasses
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING

import click

from sessionstore._display import escape
from sessionstore.cli.listing import Listing
from sessionstore.cli.sessions import session_views
from sessionstore.errors import InvalidInput, SessionNotFound
from sessionstore.storage.s3_path import S3Path, s3_root
from sessionstore.store.target import store_root

if TYPE_CHECKING:
    from collections.abc import Iterable, Iterator

    from sessionstore.inspect.best import Objective
    from sessionstore.inspect.summary import SessionView
    from sessionstore.redact.scan import Scanner
    from sessionstore.redact.scan_tree import Event, ScanTotals
    from sessionstore.store.session import Session, Store


def scans_sessions(listing: Listing) -> bool:
    """Whether the options choose sessions of a store (else the scan is of a tree)."""
    return bool(listing.statuses or listing.labels or listing.sort is not None)


def chosen_sessions(
    target: str, store_dir: Path | None, listing: Listing, goal: Objective, scanner: Scanner
) -> Iterator[SessionView]:
    """The sessions of the store `target` the listing chooses, in its order, each read
    when it is next. `--limit` counts findings, not sessions: it is the caller's."""
    store = _store(target, store_dir, scanner)
    found = [s for s in store.sessions() if listing.labelled(s.manifest)]
    return session_views(store, found, dataclasses.replace(listing, limit=None), goal)


def _store(target: str, store_dir: Path | None, scanner: Scanner) -> Store:
    """The store `target` names (a directory or `s3://` prefix holding sessions, or the
    `--store` one); a usage error (`target` shown redacted) for anything else."""
    from sessionstore.store.session import Store

    url = s3_root(target)
    root: Path = url.path() if url is not None else Path(target)
    if url is None and not root.is_dir():
        why = "not a directory" if root.exists() else "no such directory"
        raise _not_a_store(scanner, target, why)
    store = Store(root)
    if _is_session(root if url is None else target):
        raise _not_a_store(scanner, target, "a session")
    if not _same(root, store_root(store_dir)) and not any(
        s.manifest is not None for s in store.sessions()
    ):
        raise _not_a_store(scanner, target, "it holds no session")
    return store


def _is_session(target: Path | str) -> bool:
    """Whether `target` is a session (a directory or prefix with a manifest): in a bucket
    `s3://BUCKET/PREFIX` is also read as the session PREFIX of `s3://BUCKET`, absent there."""
    from sessionstore.store.session import Session

    try:
        return Session.open(target).manifest is not None
    except SessionNotFound:
        return False


def _same(path: Path, root: Path) -> bool:
    if isinstance(path, S3Path) or isinstance(root, S3Path):
        return str(path).rstrip("/") == str(root).rstrip("/")
    try:
        return os.path.samefile(path, root)
    except OSError:
        return False


def _not_a_store(scanner: Scanner, target: str, why: str) -> click.UsageError:
    from sessionstore.redact.scan_tree import display_path

    return click.UsageError(
        escape(
            f"--status, --label and --sort choose which sessions of a store are scanned: "
            f"{display_path(scanner, target)} is no store ({why})"
        )
    )


def session_events(
    views: Iterable[SessionView], scanner: Scanner, totals: ScanTotals, verbose: bool
) -> Iterator[Event]:
    """The events of scanning each session of `views`, whole (`verbose`: each named)."""
    from sessionstore.redact.scan_tree import display_path

    for view in views:
        if verbose:
            path = view.session.path
            shown = display_path(scanner, str(path))
            line = f"scan: session {display_path(scanner, path.name)} ({view.status}): {shown}"
            sys.stderr.write(escape(line) + "\n")
        yield from _session_events(view.session, scanner, totals)


def _session_events(session: Session, scanner: Scanner, totals: ScanTotals) -> Iterator[Event]:
    """The scan of one session, whole: its prefix in a bucket, its directory (not followed)."""
    from sessionstore.redact.scan_tree import ScanError, display_path, scan_path

    if isinstance(session.path, S3Path):
        from sessionstore.redact.scan_remote import scan_objects
        from sessionstore.storage.s3_open import storage_at

        storage, key = storage_at(session.path, 1)
        yield from scan_objects(storage, key, str(session.path), scanner, totals)
        return
    try:
        events = scan_path(session.path, scanner, follow=False, totals=totals)
    except (InvalidInput, OSError) as exc:
        if os.path.lexists(session.path):  # swapped for a symlink, unreadable: not read
            totals.errors += 1
            why = exc.problem if isinstance(exc, InvalidInput) else (exc.strerror or str(exc))
            yield ScanError(display_path(scanner, str(session.path)), why)
        return  # removed since the listing: it was not there
    yield from events

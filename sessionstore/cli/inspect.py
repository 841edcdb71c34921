"""`sessionstore inspect`: sessions and records, as tables or JSON."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

import click

from sessionstore.cli.cells import no_sessions
from sessionstore.cli.common import (
    color_option,
    command,
    library_errors,
    no_store,
    objective_of,
    objective_options,
    target_options,
)
from sessionstore.cli.listing import Listing, listing_options
from sessionstore.cli.plain import emit_json
from sessionstore.cli.sessions import session_rows
from sessionstore.store.target import STORE_ENV, resolve_target, store_root

if TYPE_CHECKING:
    from sessionstore.inspect.best import Objective

STATUSES = ("running", "interrupted", "done", "failed", "unknown")
# The list's CSV columns: the keys of its JSON objects (nested ones as compact JSON).
SUMMARY_COLUMNS = (
    "id",
    "path",
    "name",
    "status",
    "progress",
    "phase",
    "progress_counts",
    "created_at",
    "trial_counts",
    "service",
    "best",
    "constraints",
    "constraints_error",
    "previous",
    "manifest_error",
    "collection_errors",
)


@command()
@target_options(required=False)
@listing_options(
    statuses=STATUSES,
    status_help="Only sessions of this status (repeatable).",
    sorts=("created", "name", "best"),
    labels=True,
    json_help="Print JSON for scripts (the store: one array, a session at a time).",
)
@objective_options
@click.option("--all", "show_all", is_flag=True, help="One session: every trial, not a screenful.")
@color_option
@library_errors
def inspect(
    target: str | None,
    store_dir: Path | None,
    listing: Listing,
    objective: str | None,
    higher: bool,
    show_all: bool,
    color: str,
) -> None:
    """Show the store's sessions, or one session (an id or a session directory path).

    The list shows each session's status and progress, its best trial (`*`
    when no trial met the constraints) and its constraints, newest first;
    --status, --label, --sort and --limit choose the rows, and --json, --nl
    and --csv print them for scripts as they are read. One session adds its
    trials (a screenful: the best, those in flight or torn, and the most
    recent; --all for every one), verification attempts, lineage and a
    spark chart of the objective.

    \b
    Examples:
      sessionstore inspect
      sessionstore inspect --status running --label team=infra --nl
      sessionstore inspect --sort best --limit 5
      sessionstore inspect 1a2b3c4d --objective benchmark.metrics.ttft_ms.p99 --lower
      sessionstore inspect ./workspace --json
    """
    if target is None:
        if show_all:
            raise click.UsageError("--all shows every trial of one session: give its TARGET")
        _store_list(store_dir, listing, lambda: objective_of(objective, higher), color)
        return
    if listing.filtered or listing.fmt in ("nl", "csv") or listing.sort != "created":
        raise click.UsageError(
            "--nl, --csv, --limit, --status, --label and --sort list the store's sessions: "
            "give no TARGET"
        )
    from sessionstore.inspect.summary import SessionView

    view = SessionView.load(
        resolve_target(target, store_dir), objective_of(objective, higher), write_index=True
    )
    if listing.fmt == "json":
        emit_json(view.detail())
        return
    # rich only for tables: `--json` never imports it.
    from sessionstore.cli.views import make_console, session_detail
    from sessionstore.store.lineage import lineage_info

    session_detail(make_console(color), view, lineage_info(view.session), show_all=show_all)


def _store_list(
    store_dir: Path | None, listing: Listing, goal: Callable[[], Objective], color: str
) -> None:
    """The store's sessions, chosen and ordered by `listing`, a row as each is read."""
    from sessionstore.storage.s3_path import S3Path
    from sessionstore.store.session import Store

    root = store_root(store_dir)
    remote = isinstance(root, S3Path)  # a missing bucket is the store's own error
    # A store the user named must exist; the default one not existing yet is empty.
    named = store_dir is not None or bool(os.environ.get(STORE_ENV))
    if not remote and not root.is_dir() and (named or root.exists()):
        raise no_store(root)
    store = Store(root) if remote or root.is_dir() else None
    found = store.sessions() if store is not None else []
    chosen = [s for s in found if listing.labelled(s.manifest)]
    if not chosen and listing.fmt is None:
        # Neither the records' modules nor rich for an empty list: start-up (issue 16).
        click.echo(no_sessions(root, listing.filtered))
        return
    # The table and the data formats list the same summaries (`session_summary`).
    objective = goal()
    rows = session_rows(store, chosen, listing, objective) if store is not None else iter(())
    if listing.fmt is not None:
        listing.emit(rows, SUMMARY_COLUMNS)
        return
    # rich only for tables: the data formats never import it.
    from sessionstore.cli.views import make_console, session_list

    session_list(make_console(color), rows, root, objective, filtered=listing.filtered)

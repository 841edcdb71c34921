"""`sessionstore prune`: remove ended sessions of the store, in bulk."""

from __future__ import annotations

import re
import sys
from pathlib import Path
from typing import TYPE_CHECKING

import click

from sessionstore._display import escape
from sessionstore.cli.common import (
    command,
    library_errors,
    no_store,
    objective_of,
    objective_options,
    store_option,
    summary,
    verbosity_options,
)
from sessionstore.cli.listing import Listing, listing_options, name_order
from sessionstore.errors import SessionNotFound

if TYPE_CHECKING:
    from collections.abc import Iterable, Iterator

    from sessionstore.inspect.best import Objective
    from sessionstore.store.lifecycle_remove import Prunable
    from sessionstore.store.session import Session, Store

_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 7 * 86400}
_DURATION = re.compile(r"(\d+(?:\.\d+)?)([smhdw])")


def parse_duration(ctx: click.Context, param: click.Parameter, value: str | None) -> float | None:
    """`30s`, `15m`, `12h`, `7d`, `2w` (a number and one unit) as seconds; a usage error else."""
    if value is None:
        return None
    match = _DURATION.fullmatch(value.strip())
    if match is None:
        raise click.BadParameter(
            f"{value!r} is not a duration: a number and a unit, s m h d or w (7d, 12h)"
        )
    return float(match.group(1)) * _UNITS[match.group(2)]


def _age(seconds: float) -> str:
    for unit, size in (("w", 7 * 86400), ("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= size:
            return f"{int(seconds // size)}{unit}"
    return f"{int(seconds)}s"


PRUNE_COLUMNS = ("id", "path", "status", "created_at", "age_s")


@command()
@store_option
@click.option(
    "--older-than",
    callback=parse_duration,
    metavar="DURATION",
    help="Only sessions created more than DURATION ago (30s, 15m, 12h, 7d, 2w).",
)
@listing_options(
    statuses=("done", "failed", "interrupted"),
    status_help="Only sessions of this status (repeatable; default: all three).",
    sorts=("created", "name", "best"),
    labels=True,
    json_help="With --dry-run: print one JSON array, a session at a time.",
)
@objective_options
@click.option("--dry-run", "-n", is_flag=True, help="List what would be removed; remove nothing.")
@click.option("--yes", "-y", is_flag=True, help="Remove without asking.")
@verbosity_options(
    verbose="Name each session removed, and each temp entry of a dead process swept.",
)
@library_errors
def prune(
    store_dir: Path | None,
    older_than: float | None,
    listing: Listing,
    objective: str | None,
    higher: bool,
    dry_run: bool,
    yes: bool,
    quiet: bool,
    verbose: bool,
) -> None:
    """Remove the store's ended sessions: done, failed, or interrupted (writer dead).

    A running session is never removed, whatever the filters; nor one whose
    status is unknown. Each session goes whole, as `sessionstore rm` removes
    it. Without --yes it asks first on a terminal, and refuses (exit 2)
    anywhere else: give --yes, or --dry-run to see the list. --status,
    --label, --sort and --limit choose the sessions, for --dry-run and for
    the removal alike: what the dry run lists is what would go (--sort best:
    by the best trial, as `inspect` ranks it). --json, --nl and --csv print
    the dry run's list for scripts, each session as soon as it is judged.

    Prints how many sessions went and their ids (-v: a line for each, with
    its status and path; -q: nothing but errors and warnings).

    \b
    Examples:
      sessionstore prune --dry-run
      sessionstore prune --older-than 7d --yes
      sessionstore prune --status failed --status interrupted --yes
      sessionstore prune --label team=infra --dry-run --csv
    """
    # Imported when the command runs, not when `sessionstore --help` lists it: start-up.
    from sessionstore.storage.s3_path import S3Path
    from sessionstore.store.lifecycle_remove import PRUNABLE, each_prunable
    from sessionstore.store.session import Store
    from sessionstore.store.target import store_root

    if listing.fmt is not None and not dry_run:
        raise click.UsageError("--json, --nl and --csv print the list of --dry-run: give it")
    if not dry_run and not yes and not sys.stdin.isatty():
        raise click.UsageError("refusing to remove sessions unasked: give --yes, or --dry-run")
    root = store_root(store_dir)
    if not isinstance(root, S3Path) and not root.is_dir():
        raise no_store(root)
    store = Store(root)
    found = each_prunable(store, older_than, listing.statuses or PRUNABLE)
    chosen = listing.take(_chosen(store, found, listing, objective_of(objective, higher)))
    if listing.fmt is not None:
        listing.emit((c.to_dict() for c in chosen), PRUNE_COLUMNS)
        return
    candidates = list(chosen)
    if dry_run or not yes:
        for c in candidates:
            click.echo(escape(f"would remove {c.id}  {c.status}  {_age(c.age_s)} old  {c.path}"))
    if dry_run:
        return
    if candidates and not yes and not click.confirm(f"remove these {len(candidates)} sessions?"):
        raise click.exceptions.Exit(1)
    _remove(store, candidates, quiet, verbose)


def _remove(store: Store, candidates: list[Prunable], quiet: bool, verbose: bool) -> None:
    """Remove the candidates still prunable, say what went and what not."""
    from sessionstore.store.lifecycle_remove import prune as prune_sessions
    from sessionstore.store.lifecycle_remove import sweep_removed

    removed, left = prune_sessions(store, candidates)
    for c in removed if verbose else ():
        click.echo(escape(f"removed {c.id}  {c.status}  {c.path}"))
    for _, why in left:
        click.echo(escape(f"Error: not removed: {why}"), err=True)
    # What a removal killed half-way left (a temp entry of a dead process) goes too.
    swept, problems = sweep_removed(store.root)
    for name in swept if verbose else ():
        click.echo(escape(f"swept {store.root / name} (a temp entry of a process that is gone)"))
    for problem in problems:
        click.echo(escape(f"warning: not swept: {problem}"), err=True)
    ids = [c.id for c in removed]
    if not quiet and (ids or not left):  # nothing removed and an error: it says all
        click.echo(escape(summary("pruned", ids, named=not verbose)) if ids else "nothing to prune")
    if left:
        raise click.exceptions.Exit(1)


def _chosen(
    store: Store, found: Iterator[Prunable], listing: Listing, goal: Objective
) -> Iterable[Prunable]:
    """The candidates with `--label`'s labels, in `--sort`'s order (`found` is newest first),
    lazily unless the order needs them all.

    A label, a name or a best trial is the session's own: read once more per
    candidate, only when asked for (a session removed meanwhile is left out).
    """
    if not listing.labels and listing.sort == "created":
        return found
    if listing.sort == "created":
        return (c for c in found if _labelled(store, c, listing) is not None)
    pairs = [(c, s) for c in found if (s := _labelled(store, c, listing)) is not None]
    if listing.sort == "name":
        pairs.sort(key=lambda pair: name_order(pair[1].manifest, pair[0].id))
    else:
        from sessionstore.cli.sessions import best_key
        from sessionstore.inspect.summary import session_summary

        pairs.sort(key=lambda pair: best_key(session_summary(pair[1], goal)["best"], goal))
    return [c for c, _ in pairs]


def _labelled(store: Store, candidate: Prunable, listing: Listing) -> Session | None:
    """The candidate's session if it carries `--label`'s labels (None: not, or gone)."""
    try:
        session = store.open(candidate.id)
    except SessionNotFound:
        return None
    return session if listing.labelled(session.manifest) else None

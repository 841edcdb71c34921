"""`sessionstore prune`: remove ended sessions of the store, in bulk."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import click

from sessionstore._display import escape
from sessionstore.cli.common import command, library_errors, store_option
from sessionstore.errors import InvalidInput

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


@command()
@store_option
@click.option(
    "--older-than",
    callback=parse_duration,
    metavar="DURATION",
    help="Only sessions created more than DURATION ago (30s, 15m, 12h, 7d, 2w).",
)
@click.option(
    "--status",
    "statuses",
    multiple=True,
    type=click.Choice(["done", "failed", "interrupted"]),
    help="Only sessions of this status (repeatable; default: all three).",
)
@click.option("--dry-run", "-n", is_flag=True, help="List what would be removed; remove nothing.")
@click.option("--yes", "-y", is_flag=True, help="Remove without asking.")
@library_errors
def prune(
    store_dir: Path | None,
    older_than: float | None,
    statuses: tuple[str, ...],
    dry_run: bool,
    yes: bool,
) -> None:
    """Remove the store's ended sessions: done, failed, or interrupted (writer dead).

    A running session is never removed, whatever the filters; nor one whose
    status is unknown. Each session goes whole, as `sessionstore rm` removes
    it. Without --yes it asks first on a terminal, and refuses (exit 2)
    anywhere else: give --yes, or --dry-run to see the list.

    \b
    Examples:
      sessionstore prune --dry-run
      sessionstore prune --older-than 7d --yes
      sessionstore prune --status failed --status interrupted --yes
    """
    # Imported when the command runs, not when `sessionstore --help` lists it: start-up.
    from sessionstore.storage.s3_path import S3Path
    from sessionstore.store.lifecycle_remove import PRUNABLE, prunable, sweep_removed
    from sessionstore.store.lifecycle_remove import prune as prune_sessions
    from sessionstore.store.session import Store
    from sessionstore.store.target import store_root

    if not dry_run and not yes and not sys.stdin.isatty():
        raise click.UsageError("refusing to remove sessions unasked: give --yes, or --dry-run")
    root = store_root(store_dir)
    if not isinstance(root, S3Path) and not root.is_dir():
        raise InvalidInput(str(root), "no such store directory")
    store = Store(root)
    candidates = prunable(store, older_than, statuses or PRUNABLE)
    if dry_run or not yes:
        for c in candidates:
            click.echo(escape(f"would remove {c.id}  {c.status}  {_age(c.age_s)} old  {c.path}"))
    if dry_run:
        return
    if candidates and not yes and not click.confirm(f"remove these {len(candidates)} sessions?"):
        raise click.exceptions.Exit(1)
    removed, left = prune_sessions(store, candidates)
    for c in removed:
        click.echo(escape(f"removed {c.id}  {c.status}  {c.path}"))
    for _, why in left:
        click.echo(escape(f"Error: not removed: {why}"), err=True)
    # What a removal killed half-way left (a temp entry of a dead process) goes too.
    for problem in sweep_removed(root)[1]:
        click.echo(escape(f"warning: not swept: {problem}"), err=True)
    if not removed and not left:
        click.echo("nothing to prune")
    if left:
        raise click.exceptions.Exit(1)

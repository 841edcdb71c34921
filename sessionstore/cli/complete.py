"""`sessionstore complete`: write a record's marker, last and atomically."""

from __future__ import annotations

from pathlib import Path

import click

from sessionstore._display import escape
from sessionstore.cli.common import (
    command,
    library_errors,
    print_made,
    record_number_type,
    target_options,
    verbosity_options,
)
from sessionstore.cli.json_option import read_json_object
from sessionstore.store.target import resolve_target


@command()
@target_options()
@click.option("--trial", type=record_number_type, help="Complete trials/N/ (trial.json).")
@click.option("--attempt", type=record_number_type, help="Complete service/K/ (verification.json).")
@click.option(
    "--marker",
    required=True,
    metavar="JSON|@FILE|@-",
    help="The marker: a JSON object, @FILE, or @- for standard input.",
)
@verbosity_options(verbose="Also name each file of the record made durable, and the marker.")
@library_errors
def complete(
    target: str,
    store_dir: Path | None,
    trial: int | None,
    attempt: int | None,
    marker: str,
    quiet: bool,
    verbose: bool,
) -> None:
    """Complete a record of session TARGET by writing its marker, last and atomically.

    The record's files are fsynced first, then the marker is published exactly
    once: a record that has its marker (completed, or torn) is refused, and so
    is one that does not exist (`sessionstore begin` makes it). Exit 1 for
    either, and for a marker that is not a JSON object, that readers would
    read as torn, or whose well-known fields `sessionstore schema trial` (or
    `verification`) rejects: nothing is written.

    \b
    Examples:
      sessionstore complete 1a2b3c4d --trial 1 --marker '{"failed": false}'
      sessionstore complete 1a2b --attempt 2 --marker @verification.json
      sessionstore complete 1a2b3c4d --trial 3 --marker @- < trial.json
    """
    # Imported when the command runs, not when `sessionstore --help` lists it: start-up.
    from sessionstore.format.names import MARKERS, SERVICE, TRIALS
    from sessionstore.store.lifecycle import complete_record

    if (trial is None) == (attempt is None):
        raise click.UsageError("give exactly one of --trial N and --attempt K")
    obj = read_json_object(marker, "--marker")
    session = resolve_target(target, store_dir)
    collection, what = (TRIALS, "trial") if trial is not None else (SERVICE, "attempt")
    n = trial if trial is not None else attempt
    assert n is not None
    record = complete_record(session, collection, n, obj)

    def say() -> None:
        if verbose:
            for name in record.files():
                if name != MARKERS[collection]:
                    click.echo(escape(f"synced {record.path / name}"))
            click.echo(escape(f"wrote {record.path / MARKERS[collection]}"))
        if not quiet:
            click.echo(escape(f"completed {what} {record.n}: {record.path}"))

    print_made(say, f"{what} {record.n} was completed: {record.path}")

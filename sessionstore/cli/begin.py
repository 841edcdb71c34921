"""`sessionstore begin`: allocate the next trial or verification attempt of a session."""

from __future__ import annotations

from pathlib import Path

import click

from sessionstore._display import escape
from sessionstore.cli.common import (
    command,
    json_option,
    library_errors,
    print_made,
    target_options,
)
from sessionstore.cli.plain import emit_json
from sessionstore.store.target import resolve_target


@command()
@target_options()
@click.option("--trial", is_flag=True, help="Allocate the next trial (trials/N/).")
@click.option(
    "--attempt", is_flag=True, help="Allocate the next verification attempt (service/K/)."
)
@json_option
@library_errors
def begin(target: str, store_dir: Path | None, trial: bool, attempt: bool, as_json: bool) -> None:
    """Allocate the next record of session TARGET and print its number and directory.

    The record is made by an atomic mkdir, so two harnesses never get the same
    number, and it stays in flight (no marker) until `sessionstore complete`
    writes its marker. A finished session is refused (exit 1); a torn report.json does
    not finish a session. If the number cannot be printed (stdout closed or full, a
    closed pipe), the record is begun all the same and the error line (exit 1) names it.

    \b
    Examples:
      sessionstore begin 1a2b3c4d --trial
      NEXT=$(sessionstore begin 1a2b3c4d --trial) && DIR=${NEXT#* }
      sessionstore begin 1a2b --attempt --json
    """
    # Imported when the command runs, not when `sessionstore --help` lists it: start-up.
    from sessionstore.format.names import SERVICE, TRIALS
    from sessionstore.store.lifecycle import begin_record

    if trial == attempt:
        raise click.UsageError("give exactly one of --trial and --attempt")
    session = resolve_target(target, store_dir)
    writer = begin_record(session, TRIALS if trial else SERVICE)
    print_made(
        lambda: (
            emit_json({"n": writer.n, "path": str(writer.path)})
            if as_json
            else click.echo(escape(f"{writer.n} {writer.path}"))
        ),
        f"{'trial' if trial else 'attempt'} {writer.n} was begun: {writer.path}",
    )

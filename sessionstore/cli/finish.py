"""`sessionstore finish`: write the session's report, ending it."""

from __future__ import annotations

from pathlib import Path

import click

from sessionstore._display import escape
from sessionstore.cli.common import (
    command,
    library_errors,
    print_made,
    target_options,
    verbosity_options,
)
from sessionstore.cli.json_option import read_json_object
from sessionstore.store.target import resolve_target


@command()
@target_options()
@click.option(
    "--report",
    "report",
    metavar="JSON|@FILE|@-",
    help="The report: a JSON object, @FILE, or @- for standard input (default: {}).",
)
@click.option("--failed", is_flag=True, help="End the session as failed (default: done).")
@verbosity_options(verbose="Also name the report written and the manifest's new status.")
@library_errors
def finish(
    target: str,
    store_dir: Path | None,
    report: str | None,
    failed: bool,
    quiet: bool,
    verbose: bool,
) -> None:
    """Write report.json for session TARGET, ending it as done (or --failed).

    The report is written once: finishing a finished session is refused
    (exit 1), and so is finishing one whose report.json is torn (it did not
    end the session, and is not replaced). Without --failed the status is
    the report's own "status" field if it has one, else done. The manifest's
    status follows the report. A report that `sessionstore schema report`
    rejects, or whose best_trial is not a completed trial of the session, is
    refused (exit 1) and nothing is written. A finish killed between report.json
    and session.json is completed by finishing again: the manifest's status is
    brought to the report's, and the same report exits 0 (another is refused).

    \b
    Examples:
      sessionstore finish 1a2b3c4d --report '{"best_trial": 2}'
      sessionstore finish 1a2b --failed --report @report.json
      sessionstore finish 1a2b3c4d --report @- < report.json
    """
    obj = read_json_object(report, "--report") if report is not None else {}
    session = resolve_target(target, store_dir)
    # Imported when the command runs, not when `sessionstore --help` lists it: start-up.
    from sessionstore.format.names import MANIFEST, REPORT

    wrote = session.finish(obj, "failed" if failed else None)
    final = "failed" if failed else obj.get("status") or "done"

    def say() -> None:
        if verbose:
            # Else this finish completed one cut short, whose report.json this is.
            done = "wrote" if wrote else "found (a finish cut short wrote it)"
            click.echo(escape(f"{done} {session.path / REPORT}"))
            if session.manifest is not None:
                click.echo(escape(f"set status {final} in {session.path / MANIFEST}"))
        if not quiet:
            click.echo(escape(f"finished {session.id or session.path}: {final}"))

    print_made(say, f"session {session.id or session.path} was finished ({final})")

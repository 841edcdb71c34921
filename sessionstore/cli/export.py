"""`sessionstore export`: a self-contained copy of one trial, e.g. the best."""

from __future__ import annotations

from pathlib import Path

import click

from sessionstore._display import escape
from sessionstore.cli.common import (
    PathParam,
    command,
    json_option,
    library_errors,
    record_number_type,
    target_options,
    verbosity_options,
)
from sessionstore.cli.plain import emit_json
from sessionstore.store.target import resolve_target


@command()
@target_options()
@click.argument("dest", type=PathParam())
@click.option("--trial", "n", type=record_number_type, help="The trial to export.")
@click.option("--best", is_flag=True, help="Export the best trial (see `inspect`).")
@json_option
@verbosity_options(verbose="Also name each file copied (and each rewritten to the copies).")
@library_errors
def export(
    target: str,
    store_dir: Path | None,
    dest: Path,
    n: int | None,
    best: bool,
    as_json: bool,
    quiet: bool,
    verbose: bool,
) -> None:
    """Copy one completed trial of TARGET into the new directory DEST.

    File references in its marker and configs are rewritten to the copies, so
    the export reproduces after the session and the agent's workspace are
    deleted. Give exactly one of --trial N and --best. Files that are not
    regular files (symlinks, FIFOs...) are skipped, each named on stderr.

    \b
    Examples:
      sessionstore export 1a2b3c4d ./best-preset --best
      sessionstore export 1a2b3c4d ./trial-3 --trial 3 --json
    """
    # Imported when the command runs, not when `sessionstore --help` lists it: start-up.
    from sessionstore import _json as jsonio
    from sessionstore.inspect.summary import best_trial_number
    from sessionstore.store.export import EXPORT_MANIFEST

    if (n is None) == (not best):
        raise click.UsageError("give exactly one of --trial N and --best")
    session = resolve_target(target, store_dir)
    if n is None:
        n = best_trial_number(session)
    path = session.export(n, dest)
    # What was left out is part of the export's own manifest; a person is told too.
    _, manifest, _ = jsonio.read_object(path / EXPORT_MANIFEST)
    skipped = (manifest or {}).get("skipped", [])
    rewritten = {item["file"] for item in (manifest or {}).get("rewritten", [])}
    for name in (manifest or {}).get("files", []) if verbose else ():
        note = " (its references rewritten to the copies)" if name in rewritten else ""
        click.echo(escape(f"copied {path / name}{note}"), err=as_json)
    for item in skipped:
        click.echo(escape(f"skipped {item['file']}: {item['reason']}"), err=True)
    if as_json:
        emit_json({"trial": n, "path": str(path), "skipped": skipped})
    elif not quiet:
        click.echo(escape(f"trial {n} exported to {path}"))

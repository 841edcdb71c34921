"""`sessionstore export`: a self-contained copy of one trial, e.g. the best."""

from __future__ import annotations

from pathlib import Path

import click

from sessionstore.cli.common import (
    default_store,
    emit_json,
    json_option,
    library_errors,
    store_option,
)
from sessionstore.errors import InvalidInput


@click.command()
@click.argument("target")
@click.argument("dest", type=click.Path(path_type=Path))
@click.option("--trial", "n", type=click.IntRange(min=1), help="The trial to export.")
@click.option("--best", is_flag=True, help="Export the best trial (see `inspect`).")
@store_option
@json_option
@library_errors
def export(
    target: str, dest: Path, n: int | None, best: bool, store_dir: Path | None, as_json: bool
) -> None:
    """Copy one completed trial of TARGET into the new directory DEST.

    File references in its marker and configs are rewritten to the copies, so
    the export reproduces after the session and the agent's workspace are
    deleted. Give exactly one of --trial N and --best.

    \b
    Examples:
      sessionstore export 1a2b3c4d ./best-preset --best
      sessionstore export 1a2b3c4d ./trial-3 --trial 3 --json
    """
    from sessionstore.cli.target import resolve
    from sessionstore.store import Store
    from sessionstore.summary import SessionView

    if (n is None) == (not best):
        raise click.UsageError("give exactly one of --trial N and --best")
    session = resolve(Store(store_dir or default_store()), target)
    if best:
        winner = SessionView.load(session).best
        if winner is None:
            raise InvalidInput(str(session.path), "no completed trial has a benchmark to rank")
        n = winner.n
    assert n is not None
    path = session.export(n, dest)
    if as_json:
        emit_json({"trial": n, "path": str(path)})
    else:
        click.echo(f"trial {n} exported to {path}")

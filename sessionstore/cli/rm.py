"""`sessionstore rm`: remove sessions whole."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import click

from sessionstore._display import escape
from sessionstore.cli.common import (
    command,
    library_errors,
    summary,
    target_options,
    verbosity_options,
)
from sessionstore.cli.plain import os_error_message
from sessionstore.errors import SessionStoreError
from sessionstore.store.target import resolve_target, store_root

if TYPE_CHECKING:
    from sessionstore.store.session import Session


@command()
@target_options(many=True)
@click.option("--force", is_flag=True, help="Remove even a session whose writer is alive.")
@verbosity_options(
    verbose="Name each session removed, and each temp entry of a dead process swept.",
)
@library_errors
def rm(
    targets: tuple[str, ...], store_dir: Path | None, force: bool, quiet: bool, verbose: bool
) -> None:
    """Remove each session TARGET (an id, a unique prefix of one, or a path), whole.

    A session is renamed away inside its store first, then deleted: no reader
    ever sees half a session, and a removal that is killed leaves nothing
    visible (the next rm or prune sweeps what it left). A session whose writer
    is alive (the --pid recorded at `new`, or a mirror daemon) is refused
    unless --force; a mirror daemon then stops, writing nothing more (exit 1,
    docs/daemon.md). A TARGET that is a symlink is refused: nothing is removed
    through a link. Every TARGET is named before any is removed (a prefix
    ambiguous then stays so), and each is tried; exit 1 if any was not removed.

    Prints how many sessions went and their ids (-v: a line for each, with
    its path; -q: nothing but errors and warnings).

    \b
    Examples:
      sessionstore rm 1a2b3c4d
      sessionstore rm 1a2b 5e6f --force
    """
    # Imported when the command runs, not when `sessionstore --help` lists it: start-up.
    from sessionstore.store.lifecycle_remove import remove_session, sweep_removed

    removed: list[str] = []
    # Only the store is swept: a session named by a path may sit in any directory, whose
    # `.sstmp-*` entries (a harness's own marker temp, a build dir) are not the store's.
    root = store_root(store_dir)
    sessions, failed = _resolve_all(targets, store_dir)
    for session in sessions:
        try:
            path = remove_session(session, force=force)
        except (SessionStoreError, OSError) as exc:
            _say_error(exc)
            failed = True
            continue
        removed.append(path.name)
        if verbose:
            click.echo(escape(f"removed {path}"))
    swept, problems = sweep_removed(root)
    for name in swept if verbose else ():
        click.echo(escape(f"swept {root / name} (a temp entry of a process that is gone)"))
    for problem in problems:
        click.echo(escape(f"warning: not swept: {problem}"), err=True)
    if not quiet and (removed or not failed):  # nothing removed and an error: it says all
        click.echo(escape(summary("removed", removed, named=not verbose)))
    if failed:
        raise click.exceptions.Exit(1)


def _resolve_all(targets: tuple[str, ...], store_dir: Path | None) -> tuple[list[Session], bool]:
    """Every TARGET's session, each named as the store was when the command was given, and
    whether one named none (its error printed). All before any is removed: `rm abc1 abc`
    must refuse `abc` as the prefix of abc1 and abc2 it was, not remove abc2 because abc1
    went first."""
    sessions: list[Session] = []
    failed = False
    for target in targets:
        try:
            sessions.append(resolve_target(target, store_dir, follow=False))
        except (SessionStoreError, OSError) as exc:
            _say_error(exc)
            failed = True
    return sessions, failed


def _say_error(exc: SessionStoreError | OSError) -> None:
    """One target's error line; the others are tried all the same."""
    message = escape(str(exc)) if isinstance(exc, SessionStoreError) else os_error_message(exc)
    click.echo(f"Error: {message}", err=True)

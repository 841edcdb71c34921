"""`sessionstore contract`: print the trial contract an agent is given."""

from __future__ import annotations

from pathlib import Path

import click

from sessionstore.cli.common import PathParam, command, library_errors, target_options
from sessionstore.store.target import resolve_target


@command()
@target_options()
@click.option(
    "--template",
    type=PathParam(dir_okay=False),
    help="Template file to render instead of the default (variables: docs/harness.md).",
)
@click.option(
    "--workspace",
    type=PathParam(file_okay=False),
    help="The agent's own directory, mirrored into the session: render every path under it.",
)
@library_errors
def contract(
    target: str, store_dir: Path | None, template: Path | None, workspace: Path | None
) -> None:
    """Print the trial contract of session TARGET: where and in which order to write.

    The text names the absolute path of every file a trial, a verification
    attempt and the final report consist of, and the write order (marker
    last, atomically). Give it to the agent as part of its prompt.

    With --workspace DIR, every path is under DIR, the agent's workspace that
    `sessionstore mirror DIR TARGET` copies into the session, and the agent is
    told that the store's own files (session.json, constraints.json,
    report.json) are not its to write. Without it, the paths are in the
    session directory, for an agent that writes there directly.

    \b
    Examples:
      sessionstore contract 1a2b3c4d --workspace ./workspace > prompt.md
      sessionstore contract 1a2b3c4d > prompt.md
      sessionstore contract ./session --template my_contract.md
    """
    session = resolve_target(target, store_dir)
    click.echo(session.contract(template, workspace=workspace), nl=False)

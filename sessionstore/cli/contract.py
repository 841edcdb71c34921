"""`sessionstore contract`: print the trial contract an agent is given."""

from __future__ import annotations

from pathlib import Path

import click

from sessionstore.cli.common import default_store, library_errors, store_option


@click.command()
@click.argument("target")
@click.option(
    "--template",
    type=click.Path(dir_okay=False, path_type=Path),
    help="Template file to render instead of the default (variables: docs/harness.md).",
)
@store_option
@library_errors
def contract(target: str, template: Path | None, store_dir: Path | None) -> None:
    """Print the trial contract of session TARGET: where and in which order to write.

    The text names the absolute path of every file a trial, a verification
    attempt and the final report consist of, and the write order (marker
    last, atomically). Give it to the agent as part of its prompt.

    \b
    Examples:
      sessionstore contract 1a2b3c4d > prompt.md
      sessionstore contract ./workspace --template my_contract.md
    """
    from sessionstore.cli.target import resolve
    from sessionstore.store import Store

    session = resolve(Store(store_dir or default_store()), target)
    click.echo(session.contract(template), nl=False)

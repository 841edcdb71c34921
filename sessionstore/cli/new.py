"""`sessionstore new`: create a session."""

from __future__ import annotations

import warnings
from pathlib import Path

import click

from sessionstore._proc import PID_MAX
from sessionstore.cli.common import (
    command,
    json_option,
    library_errors,
    print_made,
    record_number_type,
    store_option,
)
from sessionstore.cli.json_option import read_json_object
from sessionstore.cli.plain import emit_json
from sessionstore.errors import LineageWarning
from sessionstore.store.target import store_root


@command()
@store_option
@click.option("--id", "session_id", help="Session id (default: 8 random hex characters).")
@click.option("--name", help="Human-readable name.")
@click.option("--trials", type=record_number_type, help="Planned number of trials.")
@click.option(
    "--constraints", help="Requested constraints: a JSON object, @FILE, or @- (standard input)."
)
@click.option("--previous", multiple=True, help="Earlier session to build on (repeatable).")
@click.option("--label", "labels", multiple=True, help="KEY=VALUE label (repeatable).")
@click.option(
    "--pid", type=click.IntRange(min=1, max=PID_MAX), help="Writer process to track (e.g. $$)."
)
@json_option
@library_errors
def new(
    store_dir: Path | None,
    session_id: str | None,
    name: str | None,
    trials: int | None,
    constraints: str | None,
    previous: tuple[str, ...],
    labels: tuple[str, ...],
    pid: int | None,
    as_json: bool,
) -> None:
    """Create a session and print its id.

    No writer process is recorded unless --pid is given, so the session does
    not read as interrupted just because this command exited. If the id cannot
    be printed (stdout closed or full, a closed pipe), the session is made all
    the same and the error line (exit 1) names it.

    \b
    Examples:
      sessionstore new --name tune --trials 3 --constraints '{"max_ttft_ms": 200}'
      ID=$(sessionstore new --pid $$ --constraints @constraints.json)
    """
    # Imported when the command runs, not when `sessionstore --help` lists it: start-up.
    from sessionstore.store.session import Store

    # `is not None`, not truthiness: `--constraints "$UNSET"` is an empty document, refused
    # as `finish --report ""` is, never a session that silently has no constraints.
    parsed = read_json_object(constraints, "--constraints") if constraints is not None else None
    # The library warns (LineageWarning) about chained sessions left out; a person
    # running `new` must see each one, once, on stderr and not in the printed id.
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", LineageWarning)
        session = Store(store_root(store_dir)).create(
            id=session_id,
            name=name,
            trials=trials,
            constraints=parsed,
            previous=previous,
            labels=_labels(labels),
            pid=pid,
        )
    for warning in caught:
        if issubclass(warning.category, LineageWarning):
            # Escaped already: the library's warnings are printed raw by Python's own
            # `showwarning` too, so their messages escape what an agent named (`escape`
            # is applied once: again, it would double the backslashes of the first).
            click.echo(f"warning: {warning.message}", err=True)
        else:
            warnings.warn_explicit(
                warning.message, warning.category, warning.filename, warning.lineno
            )
    shown = {"id": session.id, "path": str(session.path)}
    made = f"session {session.id} was made: {session.path}"
    print_made(lambda: emit_json(shown) if as_json else click.echo(session.id), made)


def _labels(items: tuple[str, ...]) -> dict[str, str]:
    """The --label KEY=VALUE options as a mapping (a later KEY wins)."""
    found: dict[str, str] = {}
    for item in items:
        key, sep, val = item.partition("=")
        if not sep or not key:
            raise click.BadParameter(f"{item!r} is not KEY=VALUE", param_hint="--label")
        found[key] = val
    return found

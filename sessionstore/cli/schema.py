"""`sessionstore schema`: print the JSON Schemas of `sessionstore.format.schema`."""

from __future__ import annotations

import click

from sessionstore.cli.common import command
from sessionstore.cli.plain import emit_json
from sessionstore.format.schema import json_schema, schema_names


@command()
@click.argument("name", required=False, type=click.Choice(schema_names()))
def schema(name: str | None) -> None:
    """Print the JSON Schema of one file of a session, or of all of them.

    NAME is one of session, constraints, trial, verification, report.
    Without NAME, prints one JSON object mapping each name to its schema.
    Every schema allows fields it does not describe: records are defined by
    the harness.

    \b
    Examples:
      sessionstore schema trial > trial.schema.json
      sessionstore schema | jq 'keys'
    """
    if name is not None:
        emit_json(json_schema(name))
    else:
        emit_json({n: json_schema(n) for n in schema_names()})

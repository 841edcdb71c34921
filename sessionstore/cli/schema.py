"""`sessionstore schema`: the JSON Schema of each file of the format, for other languages."""

from __future__ import annotations

from typing import Any

import click

from sessionstore.cli.common import emit_json

SCHEMA_DIALECT = "https://json-schema.org/draft/2020-12/schema"
# A URN, not a URL: nothing is served there, and a schema id must not pretend otherwise.
ID_PREFIX = "urn:sessionstore:format:"
FILES = {
    "session": "session.json",
    "constraints": "constraints.json",
    "trial": "trials/<n>/trial.json",
    "verification": "service/<k>/verification.json",
    "report": "report.json",
}


def json_schema(name: str) -> dict[str, Any]:
    """The JSON Schema (draft 2020-12) of the model `SCHEMAS[name]`, with `$schema` and `$id`."""
    from sessionstore.format.models import SCHEMAS
    from sessionstore.format.names import FORMAT_VERSION

    body = SCHEMAS[name].model_json_schema(mode="validation")
    return {
        "$schema": SCHEMA_DIALECT,
        "$id": f"{ID_PREFIX}{FORMAT_VERSION}:{name}",
        **body,
        "title": f"sessionstore {FILES.get(name, name)} (format {FORMAT_VERSION})",
    }


def _names() -> list[str]:
    from sessionstore.format.models import SCHEMAS

    return list(SCHEMAS)


@click.command()
@click.argument("name", required=False, type=click.Choice(_names()))
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
        emit_json({n: json_schema(n) for n in _names()})

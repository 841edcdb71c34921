"""The JSON Schema (draft 2020-12) of each file of a session, for tools in other languages.

Built from the pydantic models (`sessionstore.format.models.SCHEMAS`), so a
schema cannot drift from what the library validates. Every schema allows
fields it does not describe: records are defined by the harness.
"""

from __future__ import annotations

from typing import Any

from sessionstore.errors import InvalidInput
from sessionstore.format.models import SCHEMAS
from sessionstore.format.names import FORMAT_VERSION

__all__ = ["FILES", "ID_PREFIX", "SCHEMA_DIALECT", "json_schema", "schema_names"]

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


def schema_names() -> list[str]:
    """The names `json_schema` takes, in the format's order (session first, report last)."""
    return list(SCHEMAS)


def json_schema(name: str) -> dict[str, Any]:
    """The JSON Schema of the model `SCHEMAS[name]`, with `$schema`, `$id` and a title.

    Raises `InvalidInput` for a name not in `schema_names()`.
    """
    model = SCHEMAS.get(name)
    if model is None:
        known = ", ".join(SCHEMAS)
        raise InvalidInput("schema name", f"no schema {name!r}; give one of {known}")
    body = model.model_json_schema(mode="validation")
    return {
        "$schema": SCHEMA_DIALECT,
        "$id": f"{ID_PREFIX}{FORMAT_VERSION}:{name}",
        **body,
        "title": f"sessionstore {FILES.get(name, name)} (format {FORMAT_VERSION})",
    }

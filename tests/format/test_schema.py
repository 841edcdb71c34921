"""`sessionstore schema`: valid, open (extra fields allowed) JSON Schemas of every file."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import jsonschema
import orjson
import pytest
from cli_runner import invoke
from pydantic import ValidationError

from sessionstore.cli.schema import schema
from sessionstore.errors import InvalidInput
from sessionstore.format.models import SCHEMAS
from sessionstore.format.schema import SCHEMA_DIALECT, json_schema
from sessionstore.store.session import Store

NAMES = sorted(SCHEMAS)


def refs(node: Any) -> list[str]:
    if isinstance(node, dict):
        found = [node["$ref"]] if "$ref" in node else []
        return found + [r for value in node.values() for r in refs(value)]
    if isinstance(node, list):
        return [r for value in node for r in refs(value)]
    return []


def objects(node: Any) -> list[dict[str, Any]]:
    """Every sub-schema that describes an object with named properties."""
    if isinstance(node, dict):
        own = [node] if node.get("type") == "object" and "properties" in node else []
        return own + [o for value in node.values() for o in objects(value)]
    if isinstance(node, list):
        return [o for value in node for o in objects(value)]
    return []


@pytest.mark.parametrize("name", NAMES)
def test_each_schema_is_a_well_formed_open_object_schema(name: str) -> None:
    doc = json_schema(name)
    assert doc["$schema"] == SCHEMA_DIALECT
    assert doc["$id"] == f"urn:sessionstore:format:1:{name}"
    assert doc["title"].startswith("sessionstore ") and doc["type"] == "object"
    assert doc["additionalProperties"] is True
    for sub in objects(doc):
        assert sub.get("additionalProperties") is True, sub.get("title")
    for ref in refs(doc):
        assert ref.startswith("#/$defs/") and ref.removeprefix("#/$defs/") in doc["$defs"]
    orjson.dumps(doc)  # plain JSON, nothing Python-only


@pytest.mark.parametrize("name", NAMES)
def test_schemas_pass_the_meta_schema_when_a_validator_is_installed(name: str) -> None:
    jsonschema.Draft202012Validator.check_schema(json_schema(name))


def test_documents_the_library_writes_validate(tmp_path: Path) -> None:
    session = Store(tmp_path).create(name="t", trials=2, constraints={"max_ttft_ms": 200})
    writer = session.trials.begin()
    writer.complete(
        {
            "failed": False,
            "benchmark": {"metrics": {"output_tok_per_s": 812.5}},
            "output_contract": {"log": "run.log"},
            "harness_field": [1, 2],
        }
    )
    session.service.begin().complete({"trial": 1, "status": "verified", "reason": None})
    session.finish({"best_trial": 1, "verified": {"ttft_ms": 150}})
    files = {
        "session": "session.json",
        "constraints": "constraints.json",
        "trial": "trials/1/trial.json",
        "verification": "service/1/verification.json",
        "report": "report.json",
    }
    validator = None
    try:
        import jsonschema

        validator = jsonschema
    except ImportError:
        pass
    for name, rel in files.items():
        document = orjson.loads((session.path / rel).read_bytes())
        model = SCHEMAS[name].model_validate(document)
        assert model.model_dump(mode="json", exclude_unset=True).keys() == document.keys()
        if validator is not None:
            validator.validate(document, json_schema(name))


def test_an_unknown_name_is_invalid_input_naming_the_known_ones() -> None:
    with pytest.raises(InvalidInput, match=r"no schema 'trials'; give one of session, "):
        json_schema("trials")


def test_a_harness_defined_field_is_allowed_and_a_wrong_type_is_not() -> None:
    trial = json_schema("trial")
    jsonschema.validate({"anything": {"nested": True}}, trial)
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate({"failed": "no"}, trial)


@pytest.mark.parametrize(
    "manifest",
    [
        {"id": "../x"},
        {"id": "UPPER"},
        {"id": "a" * 42},
        {"id": "ok", "previous": ["good", "../bad"]},
        # Python's `$` (the jsonschema package's, so check-jsonschema's) also matches
        # before a final newline.
        {"id": "ab12cd34\n"},
        {"id": "ok", "previous": ["good\n"]},
    ],
)
def test_the_session_schema_refuses_the_ids_the_library_refuses(manifest: dict[str, Any]) -> None:
    # The ids are checked by validators, which a JSON Schema does not see: the schema a
    # harness in another language validates with accepted any string.
    with pytest.raises(ValidationError):
        SCHEMAS["session"].model_validate(manifest)
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(manifest, json_schema("session"))
    jsonschema.validate({"id": "a" * 41, "previous": ["0-x"]}, json_schema("session"))


def test_cli_prints_one_or_all() -> None:
    result = invoke("trial", command=schema)
    assert result.exit_code == 0 and orjson.loads(result.stdout) == json_schema("trial")
    result = invoke(command=schema)
    assert result.exit_code == 0
    everything = orjson.loads(result.stdout)
    assert list(everything) == list(SCHEMAS)
    assert everything == {name: json_schema(name) for name in SCHEMAS}
    result = invoke("trials", command=schema)
    assert result.exit_code == 2 and "'trials' is not one of 'session'" in result.stderr


@pytest.mark.parametrize(
    ("field", "value"),
    [("trials", True), ("trials", "3"), ("pid", True), ("pid", "1")],
)
def test_create_refuses_a_manifest_field_the_session_schema_refuses(
    tmp_path: Path, field: str, value: object
) -> None:
    # The manifest was built in pydantic's lax mode, which coerced these: `pid=True`
    # tracked pid 1 (init, never dead), so the session could never read interrupted.
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate({"id": "ab", field: value}, json_schema("session"))
    store = Store(tmp_path)
    with pytest.raises(InvalidInput, match=rf"^session manifest: {field}: Input should be"):
        store.create(**{field: value})  # type: ignore[arg-type]
    assert store.sessions() == []

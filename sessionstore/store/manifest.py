"""A session's manifest: a new one and its constraints, made and checked before anything is
written, and its status brought to the report's once the report ends the session."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from sessionstore import _json as jsonio
from sessionstore.errors import InvalidInput
from sessionstore.format.names import FORMAT_VERSION, MANIFEST
from sessionstore.storage.base import Storage
from sessionstore.store.files import read_object
from sessionstore.store.sealed import refuse_torn, schema_problem
from sessionstore.store.status import report_status


def new_manifest(**fields: Any) -> dict[str, Any]:
    """A new session's manifest (format v1) as JSON data; `InvalidInput` for a bad field."""
    # Imported on use: pydantic costs start-up time every reader would pay.
    from pydantic import ValidationError

    from sessionstore.format.models import Manifest

    # A name or label given as bytes that are not UTF-8 (argv decodes them to lone
    # surrogates) cannot be written as JSON: pydantic would turn a key into U+FFFD
    # silently, and a value would fail only at the write, as a TypeError.
    labels = fields.get("labels") or {}
    texts = [("name", fields.get("name")), *((f"labels.{k}", k) for k in labels)]
    texts += [(f"labels.{k}", v) for k, v in labels.items()]
    for where, text in texts:
        if isinstance(text, str) and not _is_utf8(text):
            raise InvalidInput("session manifest", f"{where}: {text} is not valid UTF-8")
    try:
        # Strict, as markers are checked (`sealed.refuse_unschema`): lax mode coerced what
        # the published schema refuses, `pid=True` into pid 1 (init, never dead).
        manifest = Manifest.model_validate({"format": FORMAT_VERSION, **fields}, strict=True)
        return manifest.model_dump(mode="json")
    except ValidationError as exc:
        raise InvalidInput("session manifest", schema_problem(exc)) from None


def _is_utf8(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def new_constraints(constraints: Mapping[str, Any], manifest: dict[str, Any]) -> dict[str, Any]:
    """The constraints as JSON data, once they and the `manifest` are known to be readable.

    Both are written once and never changed: files every reader would read as
    torn (nested too deeply, too large) are refused (`InvalidInput`), as
    `complete` refuses such a marker.
    """
    obj = jsonio.to_object(constraints, "constraints")
    refuse_torn(obj, "constraints")
    refuse_torn(manifest, "session manifest")
    return obj


def follow_report(storage: Storage, key: str, report: dict[str, Any]) -> dict[str, Any] | None:
    """Set the status of session `key`'s manifest to the one `report` ends it with; return
    the manifest written, or None when none was (it says so already, or is not readable).

    The manifest is read afresh, not taken from a `Session` opened earlier: a finish
    cut short between its report and its manifest (a kill) is completed by the next
    one, which must see what is there now.
    """
    _, manifest, _ = read_object(storage, f"{key}/{MANIFEST}", key)
    status = report_status(report)
    if manifest is None or manifest.get("status") == status:
        return None
    manifest = {**manifest, "status": status}
    storage.put(f"{key}/{MANIFEST}", jsonio.dumps(manifest))
    return manifest

"""What the store writes once and seals (a marker, the report), checked before it is written.

A marker or `report.json` is never replaced, so one that readers would read
as torn, or that breaks the schema `sessionstore schema` publishes for it,
could never be mended: the writer is refused instead, naming the field, and
nothing is written. Every write path checks here (`RecordWriter.complete`,
`Session.finish`, and through them `sessionstore complete` and `finish`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from sessionstore import _json as jsonio
from sessionstore.errors import InvalidInput, RecordNotFound
from sessionstore.format.names import MARKERS, REPORT, SERVICE, TRIALS

if TYPE_CHECKING:
    from pydantic import ValidationError

    from sessionstore.store.collection import Collection

__all__ = ["check_best_trial", "check_sealed", "refuse_torn", "schema_problem", "sealed_object"]

# The published schema (`sessionstore.format.models.SCHEMAS`) of each file written once.
_SCHEMA_OF = {MARKERS[TRIALS]: "trial", MARKERS[SERVICE]: "verification", REPORT: "report"}
# A record's declared output contract (`harness.verdict.CONTRACT_FIELD`, a layer above).
_CONTRACT = "output_contract"


def sealed_object(value: Mapping[str, Any] | Any, source: str, file: str) -> dict[str, Any]:
    """`value` as the JSON object to write as `file` (a marker's name, or `report.json`).

    Raises `InvalidInput` naming `source` for anything that is not a JSON
    object, that readers would read as torn, or whose well-known fields the
    published schema rejects (`best_trial: 0`, `"failed": "no"`).
    """
    obj = jsonio.to_object(value, source)
    check_sealed(obj, source, file)
    return obj


def check_sealed(obj: dict[str, Any], source: str, file: str) -> None:
    """`sealed_object`'s checks of `obj`, already a JSON object (`_json.to_object`'s)."""
    refuse_torn(obj, source)
    refuse_unschema(_SCHEMA_OF[file], obj, source)
    if file != REPORT:
        _refuse_unjudgeable(obj, source)


def _refuse_unjudgeable(obj: dict[str, Any], source: str) -> None:
    """`InvalidInput` for an output contract the verdict (`harness.verdict`) can never
    use: null, or a log that is not a path inside the record. Declared, the record is
    judged by it alone, so sealed so it would stay indeterminate for good."""
    if _CONTRACT not in obj:
        return
    declared = obj[_CONTRACT]
    if declared is None:
        raise InvalidInput(
            source,
            f'{_CONTRACT}: null declares no log; leave the field out, or give {{"log": '
            '"<path>"}; not written',
        )
    from sessionstore.store.records import record_relpath  # records imports this module

    log = declared["log"]  # an object with a string log: the schema said so
    try:
        record_relpath(log, f"{_CONTRACT}.log '{log}'")  # quoted: the CLI escapes it
    except InvalidInput as exc:
        raise InvalidInput(source, f"{exc}; not written") from None


def refuse_torn(obj: dict[str, Any], source: str) -> None:
    """`InvalidInput` for a marker (or report) every reader would read as torn (too large,
    too deep): written once, it would leave a record that can never be completed."""
    data = jsonio.dumps(obj)
    if len(data) > jsonio.MAX_MARKER_BYTES:
        raise InvalidInput(
            source,
            f"would be {len(data)} bytes, over the {jsonio.MAX_MARKER_BYTES} a reader reads "
            "(it would read as torn); not written",
        )
    _, why = jsonio.parse_object(data)
    if why is not None:
        raise InvalidInput(source, f"would read as torn ({why}); not written")


def refuse_unschema(name: str, obj: dict[str, Any], source: str) -> None:
    """`InvalidInput` naming the first well-known field of `obj` that the schema `name`
    rejects. Strict, as a JSON Schema validator is: `"2"` and `true` are no integers.

    Python mode, not JSON: pydantic's JSON parser stops at 200 levels, and a
    record may be nested up to 246 (harness-defined fields are not descended into).
    """
    from pydantic import ValidationError  # imported on use: a reader never pays for it

    from sessionstore.format.models import SCHEMAS

    try:
        SCHEMAS[name].model_validate(obj, strict=True)
    except ValidationError as exc:
        problem = schema_problem(exc)
        raise InvalidInput(
            source, f"{problem} (`sessionstore schema {name}`); not written"
        ) from None


def schema_problem(exc: ValidationError) -> str:
    """The first problem pydantic found, as `field.path: message` (its own text ends in a URL)."""
    first = exc.errors()[0]
    where = ".".join(map(str, first["loc"])) or "the object"
    return f"{where}: {first['msg']}"


def check_best_trial(obj: Mapping[str, Any], trials: Collection, source: str) -> None:
    """`InvalidInput` unless the report's `best_trial` (when not null) names a completed
    trial of the session: readers show it as the session's result."""
    n = obj.get("best_trial")
    if n is None:
        return
    from sessionstore.store.records import RecordState  # records imports this module

    try:
        record = trials.get(n)
    except RecordNotFound as exc:
        why = f"in {exc.collection}" if exc.problem is None else f"({exc})"
        raise InvalidInput(source, f"best_trial: {n} names no trial {why}; not written") from None
    if record.state is not RecordState.COMPLETED:
        raise InvalidInput(
            source, f"best_trial: trial {n} is {record.state}, not completed; not written"
        )

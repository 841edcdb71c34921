"""The JSON document an option gives (`new --constraints`, `complete --marker`,
`finish --report`): a literal, `@FILE`, or `@-` for standard input."""

from __future__ import annotations

import contextlib
import json
import re
import sys
from typing import Any

from sessionstore._fs import read as fsread
from sessionstore._json import MAX_MARKER_BYTES
from sessionstore.errors import InvalidInput


def read_json_value(value: str, option: str) -> object:
    """The JSON document an option gives: a literal, `@FILE` for a file holding one,
    or `@-` for standard input. `InvalidInput` names the file (or the option) and why."""
    from sessionstore._orjson import orjson  # only when a JSON option is given: start-up

    source = option
    data: str | bytes | None = value
    if value == "@-":
        source = f"{option} @- (standard input)"
        data = sys.stdin.buffer.read(MAX_MARKER_BYTES + 1)
        if len(data) > MAX_MARKER_BYTES:
            data = None
    elif value == "@":
        raise InvalidInput(option, "@ names no file: give @FILE, or @- for standard input")
    elif value.startswith("@"):
        source = value[1:]
        data = fsread.read_named(source, MAX_MARKER_BYTES)
    if data is None:
        raise InvalidInput(source, f"is larger than {MAX_MARKER_BYTES} bytes; not read")
    try:
        parsed = orjson.loads(data)
    except orjson.JSONDecodeError as exc:
        raise InvalidInput(source, f"invalid JSON: {exc}") from None
    _check_integers(data, source)
    return parsed


# orjson reads an integer past 64 bits as a double, rounded: stored so, the sealed record
# would hold another number than the one given. The Python API refuses such an integer
# (orjson cannot write it); the options refuse it too. Nineteen digits in a row are where it
# can start (-2**63 - 1 has 19), and only then is the document read a second time, to be sure.
_LONG_DIGITS = re.compile(rb"[0-9]{19}")
_INT_RANGE = (-(2**63), 2**64 - 1)


def _check_integers(data: str | bytes, source: str) -> None:
    """Raise `InvalidInput` if `data` (valid JSON) writes an integer orjson would round."""
    raw = data.encode("utf-8", "surrogatepass") if isinstance(data, str) else data
    if _LONG_DIGITS.search(raw) is None:
        return

    def exact(text: str) -> int:
        if not _INT_RANGE[0] <= int(text) <= _INT_RANGE[1]:
            raise InvalidInput(
                source,
                f"the integer {text[:40]}{'...' if len(text) > 40 else ''} is beyond 64 bits, "
                "which JSON readers round; write it as a string",
            )
        return 0

    # Nested deeper than the stdlib parser goes: orjson's reading stands.
    with contextlib.suppress(RecursionError):
        json.loads(raw, parse_int=exact)


def read_json_object(value: str, option: str) -> dict[str, Any]:
    """`read_json_value`, which must be a JSON object (`InvalidInput` otherwise)."""
    parsed = read_json_value(value, option)
    if not isinstance(parsed, dict):
        source = option
        if value == "@-":
            source = f"{option} @- (standard input)"
        elif value.startswith("@"):
            source = value[1:]
        raise InvalidInput(source, f"must be a JSON object, not {_json_kind(parsed)}")
    return parsed


def _json_kind(value: object) -> str:
    if isinstance(value, list):
        return "an array"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int | float):
        return "a number"
    return "null"

"""JSON encoding and the one rule for reading a JSON object from disk."""

from __future__ import annotations

import math
import os
import re
from collections.abc import Mapping
from typing import Any

from sessionstore._display import escape, escape_json
from sessionstore._fs import read as fsread

# Defined beside the bounded reads: the mirror's walk refuses a marker with no JSON import.
from sessionstore._fs.read import MAX_MARKER_BYTES as MAX_MARKER_BYTES
from sessionstore._orjson import orjson
from sessionstore.errors import InvalidInput

# Levels of JSON that outputs may put around a file's object (with room to spare):
# a file nested deeper than orjson's 254-level limit minus this is torn.
ENVELOPE_DEPTH = 8


def dumps(obj: Any) -> bytes:
    """Indented, key-order-preserving JSON with a trailing newline (people read these files)."""
    return orjson.dumps(obj, option=orjson.OPT_INDENT_2) + b"\n"


def dumps_checked(value: Any, source: str) -> bytes:
    """`dumps` of any JSON value a caller gives, refusing (`InvalidInput` naming `source`)
    what it cannot write as given: a NaN or an infinity (orjson writes null) and a value
    that is not JSON (`to_object`'s rules, for a value that need not be an object)."""
    _refuse_non_finite(value, source)
    try:
        return dumps(value)
    except TypeError as exc:
        raise InvalidInput(source, f"not serializable as JSON: {exc}") from None


def dumps_exact(value: Any) -> bytes:
    """One JSON document for output, indented, with a trailing newline (`dumps_output`).
    What `--json` and the viewer's API send."""
    return dumps_output(value, indent=True) + b"\n"


def dumps_output(value: Any, *, indent: bool) -> bytes:
    """`value` as JSON for output: exact, except that a name that is not UTF-8 (a file
    name's raw bytes, which JSON cannot carry) has its undecodable bytes written `\\xNN`
    (`utf8_safe`), and what a terminal would act on is written as JSON escapes
    (`escape_json`). `indent`: two spaces a level, else compact (one line)."""
    option = orjson.OPT_INDENT_2 if indent else 0
    try:
        data = orjson.dumps(value, option=option)
    except TypeError:
        data = orjson.dumps(utf8_safe(value), option=option)
    return escape_json(data)


# Lone surrogates: os.fsdecode's stand-ins for the bytes of a name that is not UTF-8.
_SURROGATE = re.compile("[\ud800-\udfff]")


def utf8_safe(value: Any) -> Any:
    """`value` with each undecodable byte of a name written `\\xNN` (as tables show it).

    File names are bytes; JSON is UTF-8 and orjson refuses the surrogates that
    stand for the rest. Everything else is returned unchanged, so callers try
    the exact value first and fall back to this only when orjson refuses it.
    """
    if isinstance(value, str):
        return _SURROGATE.sub(lambda match: escape(match.group()), value)
    if isinstance(value, dict):
        return {utf8_safe(k): utf8_safe(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [utf8_safe(v) for v in value]
    return value


def to_object(value: Any, source: str) -> dict[str, Any]:
    """A JSON-ready dict from a Mapping or a pydantic model; anything else is refused, and
    so is a NaN or an infinity anywhere in it: JSON has none, and orjson (pydantic too)
    would write it as null, a record saying something else than its writer did."""
    dump = getattr(value, "model_dump", None)
    if callable(dump):
        _refuse_non_finite(dump(exclude_none=True), source)
        value = dump(mode="json", exclude_none=True)
    if not isinstance(value, Mapping):
        raise InvalidInput(source, f"expected a JSON object, got {type(value).__name__}")
    _refuse_non_finite(value, source)
    try:
        obj: dict[str, Any] = orjson.loads(orjson.dumps(dict(value)))
    except TypeError as exc:
        raise InvalidInput(source, f"not serializable as JSON: {exc}") from None
    return obj


def _refuse_non_finite(obj: Any, source: str) -> None:
    """`InvalidInput` naming where in `obj` a float is NaN or infinite (`metrics.x`, `runs[2]`).

    An explicit stack, not recursion: `obj` may be nested past the recursion limit
    (the caller's `parse_object` check then says it is too deep).
    """
    stack: list[tuple[Any, str]] = [(obj, "")]
    while stack:
        value, where = stack.pop()
        if isinstance(value, float) and not math.isfinite(value):
            at = where or "the value"  # escaped where it is printed, as the whole message
            raise InvalidInput(source, f"{at} is {value}, which JSON cannot hold; not written")
        if isinstance(value, Mapping):
            stack.extend((v, f"{where}.{k}" if where else str(k)) for k, v in value.items())
        elif isinstance(value, list | tuple):
            stack.extend((v, f"{where}[{i}]") for i, v in enumerate(value))


def parse_object(data: bytes) -> tuple[dict[str, Any] | None, str | None]:
    """(object, None) if `data` is a JSON object that can be written back, else (None, why not).

    orjson parses nesting up to 1024 levels but writes at most 254: a marker
    deeper than that would crash every `--json` output that includes it, so
    it is torn like any other marker that is not a usable JSON object. The
    check writes it inside `ENVELOPE_DEPTH` levels, the most any output wraps
    a file in (`inspect --json` puts a marker at trials[i].record).
    """
    if not data:
        return None, "empty file"
    try:
        value = orjson.loads(data)
    except orjson.JSONDecodeError as exc:
        return None, f"invalid JSON: {exc}"
    if not isinstance(value, dict):
        return None, f"not a JSON object (a JSON {type(value).__name__})"
    why = too_deep(value)
    return (None, why) if why else (value, None)


def too_deep(value: Any) -> str | None:
    """Why `value` cannot be written back inside `ENVELOPE_DEPTH` levels; None if it can.

    The one depth rule: what the readers call torn, the mirror never seals.
    """
    wrapped: Any = value
    for _ in range(ENVELOPE_DEPTH):
        wrapped = [wrapped]
    try:
        orjson.dumps(wrapped)
    except TypeError as exc:
        return f"cannot be written back as JSON ({exc}): nested too deeply"
    return None


def read_object(
    path: str | os.PathLike[str], dir_fd: int | None = None
) -> tuple[bool, dict[str, Any] | None, str | None]:
    """Read a JSON object file: (exists, object or None, error or None).

    Opened by the readers' recipe (`fsread.open_file`: no symlink followed, no
    FIFO waited on, only a regular file read), relative to `dir_fd` if given.
    One `open` decides existence, so a listing costs one syscall per missing
    file; a file over `MAX_MARKER_BYTES` by fstat is refused unread.
    """
    try:
        fd, st = fsread.open_file(path, dir_fd)
    except FileNotFoundError:
        return False, None, None
    except OSError as exc:
        return True, None, fsread.problem(exc)
    try:
        data = None if st.st_size > MAX_MARKER_BYTES else fsread.read_capped(fd, MAX_MARKER_BYTES)
    except OSError as exc:
        return True, None, fsread.problem(exc)
    finally:
        os.close(fd)
    if data is None:
        return True, None, f"larger than {MAX_MARKER_BYTES} bytes"
    return (True, *parse_object(data))

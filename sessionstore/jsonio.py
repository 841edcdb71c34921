"""JSON encoding and the one rule for reading a JSON object from disk."""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

import orjson

# A marker is a small document; anything bigger is almost certainly not one and
# reading it whole would let a stray file stall a listing.
MAX_MARKER_BYTES = 64 * 1024 * 1024
_CHUNK = 1 << 16


def dumps(obj: Any) -> bytes:
    """Indented, key-order-preserving JSON with a trailing newline (people read these files)."""
    return orjson.dumps(obj, option=orjson.OPT_INDENT_2) + b"\n"


def to_object(value: Any, source: str) -> dict[str, Any]:
    """A JSON-ready dict from a Mapping or a pydantic model; anything else is refused."""
    from sessionstore.errors import InvalidInput

    dump = getattr(value, "model_dump", None)
    if callable(dump):
        value = dump(mode="json", exclude_none=True)
    if not isinstance(value, Mapping):
        raise InvalidInput(source, f"expected a JSON object, got {type(value).__name__}")
    try:
        obj: dict[str, Any] = orjson.loads(orjson.dumps(dict(value)))
    except TypeError as exc:
        raise InvalidInput(source, f"not serializable as JSON: {exc}") from None
    return obj


def parse_object(data: bytes) -> tuple[dict[str, Any] | None, str | None]:
    """(object, None) if `data` is a JSON object, else (None, why not)."""
    if not data:
        return None, "empty file"
    try:
        value = orjson.loads(data)
    except orjson.JSONDecodeError as exc:
        return None, f"invalid JSON: {exc}"
    if not isinstance(value, dict):
        return None, f"not a JSON object (a JSON {type(value).__name__})"
    return value, None


def read_object(path: str | os.PathLike[str]) -> tuple[bool, dict[str, Any] | None, str | None]:
    """Read a JSON object file: (exists, object or None, error or None).

    One `open` decides existence, so a listing costs one syscall per missing
    file. Reads in 64 KiB chunks: a buffered `read(MAX_MARKER_BYTES + 1)`
    would allocate the whole cap per file, the main cost of listing tens of
    thousands of markers.
    """
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    except FileNotFoundError:
        return False, None, None
    except OSError as exc:
        return True, None, f"unreadable: {exc.strerror}"
    chunks: list[bytes] = []
    total = 0
    try:
        while chunk := os.read(fd, _CHUNK):
            chunks.append(chunk)
            total += len(chunk)
            if total > MAX_MARKER_BYTES:
                return True, None, f"larger than {MAX_MARKER_BYTES} bytes"
    except IsADirectoryError:
        return True, None, "is a directory, not a file"
    except OSError as exc:
        return True, None, f"unreadable: {exc.strerror}"
    finally:
        os.close(fd)
    obj, error = parse_object(chunks[0] if len(chunks) == 1 else b"".join(chunks))
    return True, obj, error

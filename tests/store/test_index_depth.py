"""The summary index's depth rule, decided by its one parse (`store.index._PAD`,
or none for an index with fewer opening brackets than that parse admits levels).

An index whose cached markers are nested too deeply to be written back inside
the levels outputs put around a marker is unusable (ignored, rebuilt), and so
is anything at its name that is not one JSON document, however it parses
inside the padding lists.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson
import pytest
from test_index import _documents, _forged, _indexed, _session, _truth, settled

from sessionstore._json import ENVELOPE_DEPTH, parse_object
from sessionstore.format.names import INDEX
from sessionstore.store import index as index_module

__all__ = ["settled"]  # the fixture, used by name


def _nested(depth: int) -> Any:
    """A JSON object `depth` levels deep (`{"a": {"a": ... {"a": 1}}}`)."""
    value: Any = 1
    for _ in range(depth):
        value = {"a": value}
    return value


def _depth_limits() -> tuple[int, int]:
    """The deepest nesting orjson parses, and the deepest it writes."""
    parsed = max(d for d in (1023, 1024, 1025) if _parses(b"[" * d + b"]" * d))
    written = 0
    for d in range(250, 260):
        try:
            orjson.dumps(_nested(d))
        except TypeError:
            break
        written = d
    return parsed, written


def _parses(data: bytes) -> bool:
    try:
        orjson.loads(data)
    except orjson.JSONDecodeError:
        return False
    return True


def test_the_padding_rests_on_orjsons_limits() -> None:
    assert _depth_limits() == (1024, 254)


def test_a_marker_as_deep_as_the_index_can_hold_is_used_one_deeper_is_not(
    tmp_path: Path, settled: None
) -> None:
    s = _session(tmp_path / "store")
    truth = _indexed(s)
    # The index inside ENVELOPE_DEPTH + _INDEX_DEPTH lists must be writable, and it has
    # _INDEX_DEPTH levels of its own above each marker.
    deepest = 254 - ENVELOPE_DEPTH - 2 * index_module._INDEX_DEPTH
    index = s.path / INDEX
    index.write_bytes(_forged(s, _nested(deepest)))
    used = _indexed(s, write=False)
    assert [t["record"] for t in used["trials"][:5]] == [_nested(deepest)] * 5
    # A marker file this deep is a usable marker: the index may hold what it may.
    assert parse_object(orjson.dumps(_nested(deepest)))[1] is None
    index.write_bytes(_forged(s, _nested(deepest + 1)))
    assert _indexed(s, write=False) == truth


def test_a_small_index_keeps_the_depth_rule_on_both_sides_of_the_bracket_count(
    tmp_path: Path, settled: None
) -> None:
    # An index with fewer opening brackets than `_MAX_DEPTH` is parsed unpadded: one
    # record's marker at each depth around the limit must be judged as the padded parse
    # judges it, whichever way its index is parsed.
    s = _session(tmp_path / "store", trials=1)
    truth = _indexed(s)
    deepest = 254 - ENVELOPE_DEPTH - 2 * index_module._INDEX_DEPTH
    index = s.path / INDEX
    counts = {}
    for depth in range(deepest - 12, deepest + 3):
        body = _forged(s, _nested(depth))
        markers = _documents(body)[1]  # the line the depth rule is about
        counts[depth] = markers.count(b"[") + markers.count(b"{")
        index.write_bytes(body)
        used = _indexed(s, write=False)
        if depth <= deepest:
            assert used["trials"][0]["record"] == _nested(depth), depth
        else:
            assert used == truth, depth
    limit = index_module._MAX_DEPTH
    assert min(counts.values()) < limit <= max(counts.values())  # both parses were taken


@pytest.mark.parametrize(
    "markers",
    [
        b"{M}],[{M}",  # two documents, balanced by the padding
        b"{M}]",
        b"[{M}",
        b"{M}, {M}",
        b"",
        b"[]",
        b"[{M}]",
        b"{M}\n{M}",
    ],
)
def test_what_is_no_single_markers_document_is_ignored(
    tmp_path: Path, settled: None, markers: bytes
) -> None:
    s = _session(tmp_path / "store")
    truth = _truth(s)
    assert _indexed(s) == truth  # written, so that it can be forged
    index = s.path / INDEX
    head, forged = _documents(_forged(s, {"forged": 1}))
    # Forged with its checksum: what is refused is the document, not damage.
    index.write_bytes(index_module.index_bytes(head, markers.replace(b"{M}", forged)))
    assert _indexed(s, write=False) == truth
    assert _indexed(s) == truth
    # Rebuilt as one document per line.
    assert [type(orjson.loads(d)) for d in _documents(index.read_bytes())] == [dict, dict]

"""JSON edge cases in a marker, read through `inspect --json` (the rules in format.md, "Reading").

Strict RFC 8259 as orjson reads it: NaN, Infinity, a number beyond a double,
a lone surrogate escape and a leading byte order mark make the marker torn,
with the reason; of duplicate keys the last wins; an integer beyond 64 bits
reads as a double (as in JavaScript). A marker that is valid JSON but not
an object is torn too.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson
import pytest
from inspect_helpers import run_cli

from sessionstore.store.session import Store

TORN = [
    pytest.param(b'{"x": NaN}', id="nan"),
    pytest.param(b'{"x": Infinity}', id="infinity"),
    pytest.param(b'{"x": 1e400}', id="beyond-a-double"),
    pytest.param(b'{"x": "\\ud800"}', id="lone-surrogate"),
    pytest.param(b'\xef\xbb\xbf{"x": 1}', id="bom"),
    pytest.param(b'{"x": "\xff"}', id="not-utf8"),
    pytest.param(b"[1, 2]", id="array"),
    pytest.param(b'"object"', id="string"),
    pytest.param(b"null", id="null"),
    pytest.param(b'{"x": 1} {"y": 2}', id="two-documents"),
]


def _inspect(tmp_path: Path, marker: bytes) -> dict[str, Any]:
    store = tmp_path / "store"
    session = Store(store).create(id="j", pid=None)
    writer = session.trials.begin()
    (writer.path / "trial.json").write_bytes(marker)
    result = run_cli("inspect", "j", "--json", "--store", str(store))
    assert result.returncode == 0, result.stderr
    record: dict[str, Any] = orjson.loads(result.stdout)["trials"][0]
    return record


@pytest.mark.parametrize("marker", TORN)
def test_markers_outside_strict_json_objects_are_torn_with_a_reason(
    tmp_path: Path, marker: bytes
) -> None:
    record = _inspect(tmp_path, marker)
    assert record["state"] == "torn"
    assert record["error"].startswith("trial.json: ")


def test_duplicate_keys_last_wins_and_huge_integers_read_as_doubles(tmp_path: Path) -> None:
    record = _inspect(
        tmp_path, b'{"x": 1, "x": 2, "big": 18446744073709551616, "u64": 18446744073709551615}'
    )
    assert record["state"] == "completed"
    assert record["record"] == {"x": 2, "big": 1.8446744073709552e19, "u64": 18446744073709551615}

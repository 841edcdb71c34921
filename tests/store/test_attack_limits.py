"""The 64 MiB marker limit at its exact boundary, through the CLI.

A marker of exactly `MAX_MARKER_BYTES` bytes is read (completed); one byte
more is torn, unread, with the limit in its reason. Same for the report.
Padding is JSON whitespace, so both files are valid JSON objects.
"""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest
from inspect_helpers import run_cli

from sessionstore._json import MAX_MARKER_BYTES
from sessionstore.store.session import Store


def _padded(size: int) -> bytes:
    body = b'{"benchmark": {"metrics": {"output_tok_per_s": 7}}, "status": "done"}'
    return body + b" " * (size - len(body))


@pytest.mark.parametrize(
    ("size", "state"),
    [
        pytest.param(MAX_MARKER_BYTES, "completed", id="exactly-64MiB"),
        pytest.param(MAX_MARKER_BYTES + 1, "torn", id="64MiB-plus-1"),
    ],
)
def test_the_marker_limit_is_inclusive(tmp_path: Path, size: int, state: str) -> None:
    store = tmp_path / "store"
    session = Store(store).create(id="edge", pid=None)
    writer = session.trials.begin()
    data = _padded(size)
    (writer.path / "trial.json").write_bytes(data)
    (session.path / "report.json").write_bytes(data)
    del data
    detail = orjson.loads(run_cli("inspect", "edge", "--json", "--store", str(store)).stdout)
    waited = run_cli(
        "wait", "edge", "--trial", "1", "--json", "--timeout", "5", "--store", str(store)
    )
    record = orjson.loads(waited.stdout)
    for found in (detail["trials"][0], detail["report"], record):
        assert found["state"] == state, found["error"]
    if state == "torn":
        assert record["error"] == f"trial.json: larger than {MAX_MARKER_BYTES} bytes"
        assert waited.returncode == 1
    else:
        assert record["record"]["benchmark"]["metrics"]["output_tok_per_s"] == 7
        assert detail["status"] == "done" and waited.returncode == 0

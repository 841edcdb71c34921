"""Law: whatever JSON an agent leaves in a session's files, reading it never raises.

Hypothesis writes arbitrary JSON (deep nesting, big numbers, wrong types for
every well-known manifest field) as the manifest, constraints, report and
markers; the list and detail views, their JSON and their tables are built
each time; FIFOs, symlinks to an outside file and directories are planted
in their place too. Nothing may raise or hang, every status is one of the
documented ones, the JSON always serializes, and nothing outside is read.
"""

from __future__ import annotations

import itertools
import os
from pathlib import Path
from typing import Any

import orjson
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from inspect_helpers import render

from sessionstore.cli.views import session_detail, session_list
from sessionstore.inspect.best import Objective
from sessionstore.inspect.summary import SessionView
from sessionstore.store.session import Session, Store
from sessionstore.store.status import STATUSES

scalars: st.SearchStrategy[bool | int | float | str | None]
scalars = st.none() | st.booleans() | st.integers(-(2**63), 2**64 - 1) | st.text(max_size=8)
scalars |= st.floats(allow_nan=False, allow_infinity=False)
json_values = st.recursive(
    scalars,
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner, max_size=3)
    ),
    max_leaves=12,
)
MANIFEST_KEYS = [
    "format",
    "id",
    "name",
    "created_at",
    "trials",
    "status",
    "pid",
    "pid_started_at",
    "previous",
    "labels",
]
manifests = st.dictionaries(st.sampled_from(MANIFEST_KEYS), json_values, max_size=6)
deep = st.integers(200, 1100).map(lambda d: b'{"x": ' + b"[" * d + b"]" * d + b"}")
# Bytes to write, or the kind of entry to plant instead of a file.
KINDS = ("fifo", "symlink-out", "directory")
documents = json_values.map(orjson.dumps) | deep | st.binary(max_size=20) | st.sampled_from(KINDS)

_counter = itertools.count()


def planted(root: Path, manifest: dict[str, Any], files: dict[str, bytes | str]) -> Store:
    store = Store(root / f"case{next(_counter)}")
    session = store.create(id="s", pid=None)
    session.trials.begin().complete({"benchmark": {"metrics": {"output_tok_per_s": 1}}})
    session.trials.begin()
    (session.path / "session.json").write_bytes(orjson.dumps({"id": "s", **manifest}))
    outside = root / "outside.json"
    outside.write_bytes(b'{"secret": "OUTSIDE"}')
    for rel, data in files.items():
        path = session.path / rel
        path.unlink(missing_ok=True)
        if data == "fifo":
            os.mkfifo(path)
        elif data == "symlink-out":
            path.symlink_to(outside)
        elif data == "directory":
            path.mkdir()
        else:
            assert isinstance(data, bytes)
            path.write_bytes(data)
    return store


# Each example builds its own store under tmp_path (a fresh name from _counter).
@settings(suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    manifest=manifests,
    constraints=documents,
    report=documents,
    marker=documents,
)
def test_reading_any_json_never_raises(
    tmp_path: Path,
    manifest: dict[str, Any],
    constraints: bytes | str,
    report: bytes | str,
    marker: bytes | str,
) -> None:
    files: dict[str, bytes | str] = {
        "constraints.json": constraints,
        "report.json": report,
        "trials/2/trial.json": marker,
    }
    store = planted(tmp_path, manifest, files)
    views = [SessionView.load(s) for s in store.sessions()]
    assert [v.status in STATUSES for v in views] == [True]
    orjson.loads(orjson.dumps([v.summary() for v in views]))
    view = SessionView.load(Session.open(store.root / "s"))
    detail = view.detail()
    assert b"OUTSIDE" not in orjson.dumps(detail)
    render(session_list, [v.summary() for v in views], store.root, Objective(), width=80)
    render(session_detail, view, detail["lineage"], width=80)

"""The engine reaches stored bytes through the storage seam, and keeps its rules there."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import orjson
import pytest

from sessionstore import _json as jsonio
from sessionstore.errors import CorruptFile, RecordCompleted, StorageError
from sessionstore.format.names import CONSTRAINTS, MANIFEST
from sessionstore.storage.base import Listed
from sessionstore.storage.local import LocalStorage
from sessionstore.store.contract import contract_variables
from sessionstore.store.session import RecordState, Session, Store
from sessionstore.store.status import planned_trials, read_constraints


class Spy:
    """A Storage that records each call, then does it on a LocalStorage."""

    def __init__(self, root: Path) -> None:
        self.inner = LocalStorage(root)
        self.calls: list[tuple[str, str, Any]] = []

    def create(self, key: str, data: bytes) -> bool:
        self.calls.append(("create", key, None))
        return self.inner.create(key, data)

    def put(self, key: str, data: bytes, *, mode: int | None = None) -> None:
        self.calls.append(("put", key, mode))
        self.inner.put(key, data, mode=mode)

    def get(self, key: str, limit: int) -> bytes | None:
        self.calls.append(("get", key, limit))
        return self.inner.get(key, limit)

    def get_each(
        self, prefix: str, names: Sequence[str], leaf: str, limit: int
    ) -> list[bytes | StorageError | None]:
        self.calls.extend(("get_each", f"{prefix}/{name}/{leaf}", limit) for name in names)
        return self.inner.get_each(prefix, names, leaf, limit)

    def list(self, prefix: str) -> Iterator[Listed]:
        self.calls.append(("list", prefix, None))
        return self.inner.list(prefix)

    def remove_tree(self, prefix: str) -> None:
        self.calls.append(("remove_tree", prefix, None))
        self.inner.remove_tree(prefix)

    def claim(self, prefix: str) -> bool:
        self.calls.append(("claim", prefix, None))
        return self.inner.claim(prefix)


def test_records_and_reports_go_through_the_seam(tmp_path: Path) -> None:
    Store(tmp_path).create(id="s", trials=2, pid=None)
    spy = Spy(tmp_path)
    session = Session(tmp_path / "s", {"id": "s"}, None, storage=spy, key="s")
    writer = session.trials.begin()
    writer.write_text("task.yml", "x: 1\n")
    writer.complete({"failed": False})
    assert [r.state for r in session.trials.records()] == [RecordState.COMPLETED]
    session.finish({"status": "done"})
    ops = [(op, key) for op, key, _ in spy.calls]
    assert ("claim", "s/trials/1") in ops
    assert ("put", "s/trials/1/task.yml") in ops
    assert ("create", "s/trials/1/trial.json") in ops
    assert ("list", "s/trials") in ops
    assert ("create", "s/report.json") in ops
    assert ("put", f"s/{MANIFEST}") in ops
    reads = [
        limit for op, key, limit in spy.calls if op == "get_each" and key.endswith("trial.json")
    ]
    assert reads and set(reads) == {jsonio.MAX_MARKER_BYTES}  # the marker limit is the seam's


def test_a_record_completes_once(tmp_path: Path) -> None:
    session = Store(tmp_path).create(id="s", pid=None)
    writer = session.trials.begin()
    other = type(writer)(writer.n, writer.path, writer.marker)  # a second writer, same record
    writer.complete({"by": "first"})
    with pytest.raises(RecordCompleted):
        other.complete({"by": "second"})
    session.finish({})
    with pytest.raises(RecordCompleted):
        session.finish({})
    assert session.trials.get(1).data == {"by": "first"}


COMPLETER = """
import sys, os, time
from sessionstore.store.session import RecordWriter
from pathlib import Path
from sessionstore.errors import RecordCompleted
path, me, go = Path(sys.argv[1]), sys.argv[2], sys.argv[3]
deadline = time.monotonic() + 20
while not os.path.exists(go) and time.monotonic() < deadline:
    time.sleep(0.001)
try:
    RecordWriter(1, path, "trial.json").complete({"by": me})
    print("won")
except RecordCompleted:
    print("lost")
"""


@pytest.mark.timeout(60)
def test_two_processes_completing_one_record_exactly_one_wins(tmp_path: Path) -> None:
    session = Store(tmp_path / "store").create(id="s", pid=None)
    path = session.trials.begin().path
    go = tmp_path / "go"
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", COMPLETER, str(path), f"w{i}", str(go)],
            stdout=subprocess.PIPE,
            text=True,
        )
        for i in range(2)
    ]
    go.touch()
    results = [p.communicate(timeout=30)[0].strip() for p in procs]
    assert sorted(results) == ["lost", "won"]
    assert session.trials.get(1).data == {"by": f"w{results.index('won')}"}


def test_planned_trials_is_one_rule_and_a_boolean_is_none(tmp_path: Path) -> None:
    session = Store(tmp_path).create(id="s", pid=None)
    (session.path / MANIFEST).write_bytes(
        orjson.dumps({**(session.manifest or {}), "trials": True})
    )
    session = Session.open(session.path)
    assert planned_trials(session) is None
    assert contract_variables(session)["planned_trials"] == ""


def test_torn_constraints_one_reader_each_caller_its_documented_answer(tmp_path: Path) -> None:
    session = Store(tmp_path).create(id="s", pid=None)
    (session.path / CONSTRAINTS).write_bytes(b"[1]")
    with pytest.raises(CorruptFile, match="not a JSON object"):
        session.constraints()
    assert read_constraints(session) == ({}, "constraints.json: not a JSON object (a JSON list)")
    assert contract_variables(session)["constraints"] == ""

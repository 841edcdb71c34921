"""A record page is served only for a record its collection lists, as `inspect` lists them.

Before, a session whose `trials/` (or `service/`) was a symlink, a regular
file or a FIFO answered 200 with a "torn" page for any record number,
although `inspect --json` listed no records there. A real `sessionstore
view` process on 127.0.0.1 answers real requests.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable, Iterator
from pathlib import Path

import orjson
import pytest
from inspect_helpers import attempt, run_cli, trial
from view_helpers import Viewer, viewer

from sessionstore.format.names import SERVICE, TRIALS
from sessionstore.store.session import Store


def _symlink(path: Path, outside: Path) -> None:
    os.symlink(outside / path.name, path)  # to records that look real, outside the session


def _regular_file(path: Path, _outside: Path) -> None:
    path.write_text("not a directory\n")


def _fifo(path: Path, _outside: Path) -> None:
    os.mkfifo(path)


ODD: dict[str, Callable[[Path, Path], None]] = {
    "symlink1": _symlink,
    "regfile1": _regular_file,
    "fifo0001": _fifo,
}


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Viewer, Path]]:
    base = tmp_path_factory.mktemp("phantom")
    outside = base / "outside"
    for name in (TRIALS, SERVICE):
        (outside / name / "1").mkdir(parents=True)
    (outside / TRIALS / "1" / "trial.json").write_text('{"failed": false}')
    (outside / SERVICE / "1" / "verification.json").write_text('{"status": "verified"}')
    store = Store(base / "store")
    real = store.create(id="real0001", pid=None)
    trial(real, {"failed": False}, {"run.log": "PASS\n"})
    attempt(real, {"trial": 1, "status": "verified"})
    for session_id, make in ODD.items():
        session = store.create(id=session_id, pid=None)
        for name in (TRIALS, SERVICE):
            shutil.rmtree(session.path / name, ignore_errors=True)
            make(session.path / name, outside)
    with viewer(store.root) as running:
        yield running, store.root


def listed(root: Path, session_id: str) -> dict[str, list[int]]:
    """The record numbers `inspect --json` lists in each collection."""
    result = run_cli("inspect", session_id, "--json", "--store", str(root))
    assert result.returncode == 0, result.stderr
    detail = orjson.loads(result.stdout)
    return {name: [r["n"] for r in detail[name]] for name in (TRIALS, SERVICE)}


@pytest.mark.parametrize("session_id", sorted(ODD))
def test_an_unlistable_collection_serves_no_record_pages(
    site: tuple[Viewer, Path], session_id: str
) -> None:
    running, root = site
    assert listed(root, session_id) == {TRIALS: [], SERVICE: []}
    for name in (TRIALS, SERVICE):
        for n in ("1", "42", "999999999"):
            status, _, _ = running.get(f"/s/{session_id}/{name}/{n}")
            assert status == 404, f"{session_id}/{name}/{n}"
        status, _, _ = running.get(f"/s/{session_id}/{name}/1/files/run.log")
        assert status == 404
    status, _, body = running.get(f"/s/{session_id}")
    assert status == 200 and session_id.encode() in body  # the session itself is shown


def test_a_listed_record_is_served_and_an_unlisted_one_is_not(site: tuple[Viewer, Path]) -> None:
    running, root = site
    assert listed(root, "real0001") == {TRIALS: [1], SERVICE: [1]}
    for name in (TRIALS, SERVICE):
        status, _, body = running.get(f"/s/real0001/{name}/1")
        assert status == 200 and b"completed" in body
        status, _, _ = running.get(f"/s/real0001/{name}/2")
        assert status == 404
    status, _, body = running.get("/s/real0001/trials/1/files/run.log")
    assert (status, body) == (200, b"PASS\n")

"""A collection that cannot be listed is shown as such, never as an empty, healthy session.

`trials/` or `service/` planted as a symlink (to a real collection), a file, a
FIFO or, for a user other than root, a directory without read permission
holds no records (nothing is read through it), and every view says so:
`collection_errors` in `inspect --json` (list and detail) and CSV, a note in
both tables, the viewer's pages. The summary index, whose key is the records
listed, must not hide it: an empty collection and one that cannot be listed
both list no records, so a summary kept for one answers for the other, and
the error is not part of it.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import orjson
import pytest
from inspect_helpers import metrics, run_cli, trial
from view_helpers import viewer

from sessionstore.format.names import INDEX
from sessionstore.inspect.summary import session_summary
from sessionstore.store import index as index_module
from sessionstore.store.session import Session, Store

SYMLINK = "is a symlink (never followed), not a directory"


def _store(tmp_path: Path) -> tuple[Store, Session]:
    store = Store(tmp_path / "store")
    session = store.create(id="s1", name="planted", pid=None, trials=3)
    trial(session, metrics(100.0))
    return store, session


def _list_row(store: Store) -> dict[str, object]:
    result = run_cli("inspect", "--json", "--store", str(store.root))
    assert result.returncode == 0, result.stderr
    (row,) = orjson.loads(result.stdout)
    assert isinstance(row, dict)
    return row


def _detail(store: Store) -> dict[str, object]:
    result = run_cli("inspect", "s1", "--json", "--store", str(store.root))
    assert result.returncode == 0, result.stderr
    value = orjson.loads(result.stdout)
    assert isinstance(value, dict)
    return value


def test_a_collection_planted_as_a_symlink_is_named_in_every_view(tmp_path: Path) -> None:
    store, session = _store(tmp_path)
    assert _list_row(store)["collection_errors"] == {}
    trials = session.path / "trials"
    trials.rename(session.path / "elsewhere")
    trials.symlink_to("elsewhere")

    row = _list_row(store)
    assert row["collection_errors"] == {"trials": SYMLINK}
    assert row["trial_counts"] == {"completed": 0, "in_flight": 0, "torn": 0}
    detail = _detail(store)
    assert detail["collection_errors"] == {"trials": SYMLINK}
    assert detail["trials"] == []

    table = run_cli("inspect", "--store", str(store.root))
    assert "(not read: trials/)" in table.stdout
    text = run_cli("inspect", "s1", "--store", str(store.root))
    assert f"trials/: {SYMLINK}; none of its records was read" in text.stdout
    csv = run_cli("inspect", "--csv", "--store", str(store.root))
    assert csv.stdout.splitlines()[0].endswith(",collection_errors")
    assert "never followed" in csv.stdout.splitlines()[1]

    # Put back, every view converges: the records are read again and nothing is flagged.
    trials.unlink()
    (session.path / "elsewhere").rename(trials)
    row = _list_row(store)
    assert row["collection_errors"] == {}
    assert row["trial_counts"] == {"completed": 1, "in_flight": 0, "torn": 0}
    assert "not read" not in run_cli("inspect", "--store", str(store.root)).stdout


@pytest.mark.parametrize("plant", ["file", "fifo"])
def test_an_empty_collection_replaced_is_not_taken_from_the_summary_index(
    tmp_path: Path, plant: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # `service/` empty: its listing and the one of a file in its place are alike (no
    # numbers, no identities), so a summary kept for the first would answer the second.
    monkeypatch.setattr(index_module, "SETTLE_NS", 0)  # markers cacheable at once
    _, session = _store(tmp_path)

    def summary() -> dict[str, object]:
        return session_summary(Session.open(session.path), write_index=True)

    assert summary()["collection_errors"] == {}
    assert b'"summary"' in (session.path / INDEX).read_bytes()  # kept, to be taken next
    service = session.path / "service"
    service.rmdir()
    if plant == "file":
        service.write_bytes(b"not a collection\n")
        problem = "is a regular file, not a directory"
    else:
        os.mkfifo(service)
        problem = "is a FIFO, not a directory"
    for _ in range(2):  # the summary kept for the empty one, then rewritten
        assert summary()["collection_errors"] == {"service": problem}
    service.unlink()
    service.mkdir()
    assert summary()["collection_errors"] == {}


@pytest.mark.skipif(os.geteuid() == 0, reason="root lists a directory whatever its mode")
def test_an_unreadable_collection_is_named(tmp_path: Path) -> None:
    store, session = _store(tmp_path)
    trials = session.path / "trials"
    trials.chmod(0)
    try:
        errors = _list_row(store)["collection_errors"]
        assert isinstance(errors, dict)
        assert list(errors) == ["trials"]
        assert "Permission denied" in errors["trials"]
        doctor = run_cli("doctor", "s1", "--store", str(store.root))
        assert doctor.returncode == 1
        assert (
            f"{trials}: unreadable: Permission denied; none of its records was read"
            in doctor.stdout
        )
    finally:
        trials.chmod(0o755)
    assert _list_row(store)["collection_errors"] == {}


def test_the_viewer_names_a_collection_it_cannot_list(tmp_path: Path) -> None:
    store, session = _store(tmp_path)
    trials = session.path / "trials"
    shutil.move(trials, session.path / "elsewhere")
    trials.symlink_to("elsewhere")
    with viewer(store.root) as served:
        _, _, listed_body = served.get("/")
        _, _, page_body = served.get("/s/s1")
    listed, page = listed_body.decode(), page_body.decode()
    assert "(not read: trials/)" in listed
    assert "none of its records was read" in page

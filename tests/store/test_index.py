"""The summary index (`store.index`): used when it matches the markers, never trusted over them.

Every test compares what readers show with the index against what they show
without one (the markers alone): lost, corrupt, stale, unwritable, a symlink
in its place, concurrent writers. Markers are cached only once their ctime is
`SETTLE_NS` old; in-process tests set it to 0 where they need a cache at once,
and wait past a clock tick before editing a marker behind the index's back.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
import zlib
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import cli_runner
import orjson
import pytest
from inspect_helpers import attempt, metrics, torn_trial, trial

from sessionstore.format.names import INDEX
from sessionstore.inspect.summary import SessionView
from sessionstore.storage.local import LocalStorage
from sessionstore.store import index as index_module
from sessionstore.store.session import Session, Store

T = TypeVar("T")

# Longer than any timestamp tick of the filesystems tests run on (a jiffy).
_TICK = 0.05


@pytest.fixture
def settled(monkeypatch: pytest.MonkeyPatch) -> None:
    """Markers are cacheable as soon as they are written (the tests' own clock discipline)."""
    monkeypatch.setattr(index_module, "SETTLE_NS", 0)


def _session(root: Path, trials: int = 5) -> Session:
    store = Store(root)
    s = store.create(id="s1", name="one", trials=trials + 2, constraints={"max_ttft_ms": 200})
    for k in range(trials):
        trial(s, metrics(100.0 + k, 150.0 + k))
    trial(s, None)
    torn_trial(s)
    attempt(s, {"trial": 2, "status": "verified"})
    return s


def _truth(session: Session) -> dict[str, Any]:
    """What the markers say, read with no index at all."""
    return without_index(session, lambda: SessionView.load(Session.open(session.path)).detail())


def without_index(session: Session, read: Callable[[], T]) -> T:
    """`read()` with the session's index moved away (and back after)."""
    index = session.path / INDEX
    aside = session.path.parent / "index-aside"
    present = os.path.lexists(index)
    if present:
        os.rename(index, aside)
    try:
        return read()
    finally:
        if present:
            os.rename(aside, index)


def _indexed(session: Session, write: bool = True) -> dict[str, Any]:
    return SessionView.load(Session.open(session.path), write_index=write).detail()


def _documents(data: bytes) -> tuple[bytes, bytes]:
    """An index's two JSON documents, each checked against the checksum before it on its line
    (docs/format.md, "Summary index": 8 lowercase hex digits of its CRC-32, a space)."""
    lines = data.split(b"\n")
    assert len(lines) == 2
    for line in lines:
        assert line[:9] == b"%08x " % zlib.crc32(line[9:]), line[:9]
    return lines[0][9:], lines[1][9:]


def _lines(session: Session) -> tuple[dict[str, Any], dict[str, Any]]:
    """The index's two lines, parsed: the head (format, kept summary) and the markers."""
    head, body = _documents((session.path / INDEX).read_bytes())
    data = orjson.loads(head)
    assert data["format"] == 3
    return data, orjson.loads(body)


def _entries(session: Session) -> dict[str, Any]:
    markers = _lines(session)[1]
    return {name: sorted(markers[name], key=int) for name in ("trials", "service")}


def _reads(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Every marker name read through the storage seam from now on (a spy on the real reads:
    `get_each` is `read_each` too)."""
    seen: list[str] = []
    real = LocalStorage.read_each

    def spy(self: LocalStorage, prefix: str, names: Any, leaf: str, limit: int) -> Any:
        seen.extend(f"{prefix}/{n}" for n in names)
        return real(self, prefix, names, leaf, limit)

    monkeypatch.setattr(LocalStorage, "read_each", spy)
    return seen


def test_an_index_caches_completed_markers_and_is_used_when_they_are_unchanged(
    tmp_path: Path, settled: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    s = _session(tmp_path / "store")
    truth = _truth(s)
    assert _indexed(s) == truth
    # Completed records only: the in-flight trial 6 and the torn trial 7 are read every time.
    assert _entries(s) == {"trials": ["1", "2", "3", "4", "5"], "service": ["1"]}
    reads = _reads(monkeypatch)
    mtime = (s.path / INDEX).stat().st_mtime_ns
    assert _indexed(s) == truth
    assert reads == ["s1/trials/6", "s1/trials/7"]
    assert (s.path / INDEX).stat().st_mtime_ns == mtime  # up to date: not rewritten


def test_a_fresh_marker_is_not_cached_until_it_settles(tmp_path: Path) -> None:
    """A marker changed within one clock tick of its read could change again unseen: the
    default settling time keeps every just-written marker out of the index."""
    s = _session(tmp_path / "store")
    assert _indexed(s) == _truth(s)
    assert not (s.path / INDEX).exists()  # nothing settled, nothing to write
    marker = s.trials.path / "1" / "trial.json"
    before = marker.read_bytes()
    marker.write_bytes(before.replace(b"100.0", b"999.0"))  # same size, same tick
    assert _indexed(s)["trials"][0]["record"]["benchmark"]["metrics"]["output_tok_per_s"] == 999


def test_a_lost_index_is_rebuilt(tmp_path: Path, settled: None) -> None:
    s = _session(tmp_path / "store")
    truth = _indexed(s)
    (s.path / INDEX).unlink()
    assert _indexed(s) == truth
    assert _entries(s)["trials"] == ["1", "2", "3", "4", "5"]


def _forged(session: Session, data: Any) -> bytes:
    """The real index with each trial's cached marker replaced by `data`."""
    head, markers = _lines(session)
    for entry in markers["trials"].values():
        entry[1] = data
    return _index(head, markers)


def _index(head: Any, markers: Any) -> bytes:
    """An index's bytes: its two lines, each with its checksum (a forgery, not damage)."""
    return index_module.index_bytes(orjson.dumps(head), orjson.dumps(markers))


_HEAD = {"format": index_module.INDEX_FORMAT}
_HEAD_BYTES = orjson.dumps(_HEAD)


@pytest.mark.parametrize(
    "corrupt",
    [
        pytest.param(lambda s, b: b"\x00garbage\xff", id="garbage"),
        pytest.param(lambda s, b: b"", id="empty"),
        pytest.param(lambda s, b: b[: len(b) // 2], id="truncated"),
        pytest.param(lambda s, b: b"[1, 2, 3]", id="an-array"),
        pytest.param(lambda s, b: b.replace(b"\n", b" "), id="one-line"),
        pytest.param(lambda s, b: b.split(b"\n")[1], id="no-head"),
        pytest.param(lambda s, b: b'{"format": 1, "trials": {}}', id="format-1"),
        pytest.param(lambda s, b: _index({"format": 4}, _lines(s)[1]), id="format-4"),
        pytest.param(lambda s, b: _index(_HEAD, {"trials": [1], "service": 7}), id="wrong-shape"),
        pytest.param(lambda s, b: _index(_HEAD, [1]), id="markers-not-an-object"),
        pytest.param(
            lambda s, b: index_module.index_bytes(_HEAD_BYTES, b"\x00" * 40), id="markers-zeroed"
        ),
        pytest.param(lambda s, b: _forged(s, "not an object"), id="entry-not-an-object"),
        pytest.param(
            lambda s, b: _index(
                _HEAD, {"trials": {n: [[0, 0, 0, 0, 0], {"x": 1}] for n in "12345"}}
            ),
            id="wrong-identities",
        ),
        pytest.param(
            lambda s, b: _index(_HEAD, {"trials": {n: 5 for n in "12345"}}),
            id="entries-not-lists",
        ),
        pytest.param(
            lambda s, b: index_module.index_bytes(
                _HEAD_BYTES, b'{"trials": {"1": ' + b"[" * 300 + b"]" * 300 + b"}}"
            ),
            id="nested-too-deeply",
        ),
    ],
)
def test_a_corrupt_index_is_ignored_and_rebuilt(
    tmp_path: Path, settled: None, corrupt: Any
) -> None:
    s = _session(tmp_path / "store")
    truth = _indexed(s)
    index = s.path / INDEX
    index.write_bytes(corrupt(s, index.read_bytes()))
    assert _indexed(s, write=False) == truth
    assert _indexed(s) == truth
    assert _entries(s)["trials"] == ["1", "2", "3", "4", "5"]  # rebuilt whole


def test_a_stale_index_never_hides_what_the_records_say(tmp_path: Path, settled: None) -> None:
    s = _session(tmp_path / "store")
    _indexed(s)
    time.sleep(_TICK)
    # A record added, a marker appearing in the in-flight trial, a record removed, a
    # marker edited in place to the same size, one replaced by rename, one torn.
    trial(s, metrics(555.0))
    (s.trials.path / "6" / "trial.json").write_bytes(orjson.dumps(metrics(777.0)))
    shutil.rmtree(s.trials.path / "2")
    marker = s.trials.path / "1" / "trial.json"
    marker.write_bytes(marker.read_bytes().replace(b"100.0", b"999.0"))
    (s.trials.path / "3" / "new.json").write_bytes(orjson.dumps(metrics(333.0)))
    os.replace(s.trials.path / "3" / "new.json", s.trials.path / "3" / "trial.json")
    (s.trials.path / "4" / "trial.json").write_bytes(b'{"torn": ')
    (s.service.path / "1" / "verification.json").write_bytes(b'{"trial": 2, "status": "failed"}')
    truth = _truth(s)
    assert _indexed(s, write=False) == truth
    assert _indexed(s) == truth
    values = {t["n"]: t["record"] for t in truth["trials"]}
    assert 2 not in values and values[1]["benchmark"]["metrics"]["output_tok_per_s"] == 999.0
    assert values[6]["benchmark"]["metrics"]["output_tok_per_s"] == 777.0
    assert values[4] is None and truth["service"][0]["record"]["status"] == "failed"
    assert _entries(s)["trials"] == ["1", "3", "5", "6", "8"]
    assert _indexed(s) == truth


def test_a_record_swapped_for_a_symlink_is_foreign_whatever_the_index_says(
    tmp_path: Path, settled: None
) -> None:
    s = _session(tmp_path / "store")
    _indexed(s)
    outside = tmp_path / "outside"
    os.rename(s.trials.path / "2", outside)  # the very marker the index holds, moved out
    os.symlink(outside, s.trials.path / "2")
    truth = _truth(s)
    assert _indexed(s) == truth
    assert [t["n"] for t in truth["trials"]] == [1, 3, 4, 5, 6, 7]
    assert truth["foreign"] == {"trials": ["2"]}


def test_a_symlink_in_place_of_the_index_is_never_followed_and_is_replaced(
    tmp_path: Path, settled: None
) -> None:
    s = _session(tmp_path / "store")
    _indexed(s)
    # Outside the session: an index that matches every marker but lies about each.
    forged = _forged(s, metrics(1e9))
    outside = tmp_path / "forged.json"
    outside.write_bytes(forged)
    (s.path / INDEX).unlink()
    os.symlink(outside, s.path / INDEX)
    truth = _truth(s)
    assert _indexed(s, write=False) == truth
    assert (s.path / INDEX).is_symlink()  # a read-only reader leaves it
    assert _indexed(s) == truth
    assert not (s.path / INDEX).is_symlink() and _entries(s)["trials"] == ["1", "2", "3", "4", "5"]
    assert outside.read_bytes() == forged  # the target is never written


@pytest.mark.parametrize("kind", ["directory", "fifo"])
def test_an_index_name_that_is_not_a_file_changes_nothing(
    tmp_path: Path, settled: None, kind: str
) -> None:
    s = _session(tmp_path / "store")
    truth = _truth(s)
    if kind == "directory":
        (s.path / INDEX).mkdir()
    else:
        os.mkfifo(s.path / INDEX)
    assert _indexed(s) == truth  # never blocks on the FIFO, never fails on the directory
    assert _indexed(s) == truth


def test_readers_that_do_not_write_leave_no_index(tmp_path: Path, settled: None) -> None:
    s = _session(tmp_path / "store")
    assert _indexed(s, write=False) == _truth(s)
    assert not os.path.lexists(s.path / INDEX)


def test_a_raw_workspace_gets_no_index(tmp_path: Path, settled: None) -> None:
    s = _session(tmp_path / "store")
    (s.path / "session.json").unlink()
    raw = Session.open(s.path)
    assert SessionView.load(raw, write_index=True).detail() == _truth(s)
    assert not os.path.lexists(s.path / INDEX)


def test_a_large_marker_is_read_every_time(tmp_path: Path, settled: None) -> None:
    s = _session(tmp_path / "store", trials=1)
    trial(s, metrics(1.0, padding="x" * index_module.MAX_CACHED_BYTES))
    assert _indexed(s) == _truth(s)
    assert _entries(s)["trials"] == ["1"]


def test_inspect_agrees_with_and_without_the_index(tmp_path: Path, settled: None) -> None:
    """The list and the detail view, JSON and tables, as `inspect` prints them."""
    root = tmp_path / "store"
    s = _session(root)
    commands = [
        ("inspect", "--json", "--store", root),
        ("inspect", "--store", root),
        ("inspect", "s1", "--store", root),
        ("inspect", "s1", "--all", "--store", root),
        ("inspect", "s1", "--json", "--store", root),
    ]
    without = [cli_runner.invoke(*c, terminal_width=120).outcome for c in commands]
    assert (s.path / INDEX).exists()  # the first command wrote it
    with_index = [cli_runner.invoke(*c, terminal_width=120).outcome for c in commands]
    assert with_index == without
    assert all(code == 0 for code, _, _ in without)
    # And a real process reading the index the in-process runs wrote.
    proc = cli_runner.run("inspect", "s1", "--json", "--store", root)
    assert (proc.returncode, proc.stdout) == (0, without[-1][1])


def test_a_reader_without_write_permission_works_and_writes_nothing(
    tmp_path: Path, settled: None
) -> None:
    """A real reader process that may read the session but not write into it: the session
    directory made read-only (for root, which mode bits do not stop, immutable)."""
    root = tmp_path / "store"
    s = _session(root)
    _indexed(s)
    (s.path / INDEX).write_bytes(b"stale garbage")  # so the reader wants to rewrite it
    expected = cli_runner.invoke("inspect", "s1", "--json", "--store", root).stdout
    (s.path / INDEX).write_bytes(b"stale garbage")
    where = str(s.path)
    lock = ["chattr", "+i", where] if os.geteuid() == 0 else ["chmod", "0500", where]
    unlock = ["chattr", "-i", where] if os.geteuid() == 0 else ["chmod", "0700", where]
    subprocess.run(lock, check=True, timeout=cli_runner.TIMEOUT)
    try:
        with pytest.raises(PermissionError):  # the directory really is unwritable
            (s.path / "probe").write_bytes(b"")
        proc = cli_runner.run("inspect", "s1", "--json", "--store", root)
        listing = cli_runner.run("inspect", "--json", "--store", root)
    finally:
        subprocess.run(unlock, check=True, timeout=cli_runner.TIMEOUT)
    assert (proc.returncode, proc.stderr) == (0, "")
    assert proc.stdout == expected
    assert listing.returncode == 0 and orjson.loads(listing.stdout)[0]["id"] == "s1"
    assert (s.path / INDEX).read_bytes() == b"stale garbage"
    assert not [p for p in s.path.iterdir() if p.name.startswith(".sstmp-")]


def test_concurrent_writers_leave_an_index_that_says_what_the_records_say(
    tmp_path: Path,
) -> None:
    """Real processes: inspects rewriting the index while another completes trials."""
    root = tmp_path / "store"
    s = _session(root, trials=30)
    time.sleep(index_module.SETTLE_NS / 1e9 + _TICK)  # the markers settle: all cacheable
    script = (
        "import sys\n"
        "from sessionstore.store.session import Store\n"
        "s = Store(sys.argv[1]).open('s1')\n"
        "for k in range(20):\n"
        "    s.trials.begin().complete({'benchmark': {'metrics': {'output_tok_per_s': k}}})\n"
    )
    adder = subprocess.Popen([sys.executable, "-c", script, str(root)])
    readers = [
        cli_runner.popen("inspect", "--json", "--store", root, stdout=subprocess.PIPE)
        for _ in range(4)
    ]
    for proc in readers:
        out, _ = proc.communicate(timeout=cli_runner.TIMEOUT)
        assert proc.returncode == 0 and orjson.loads(out)[0]["id"] == "s1"
    assert adder.wait(timeout=cli_runner.TIMEOUT) == 0
    truth = _truth(s)
    assert len(truth["trials"]) == 52
    assert _indexed(s, write=False) == truth
    final = cli_runner.run("inspect", "s1", "--json", "--store", root)
    assert orjson.loads(final.stdout) == orjson.loads(orjson.dumps(truth))
    assert not [p for p in s.path.iterdir() if p.name.startswith(".sstmp-")]


def test_a_mirror_never_writes_or_deletes_the_index(tmp_path: Path, settled: None) -> None:
    """The index is a store-owned name: a workspace file of that name is skipped, and
    `--delete` leaves the session's own index in place."""
    root = tmp_path / "store"
    s = _session(root)
    _indexed(s)
    index = (s.path / INDEX).read_bytes()
    workspace = tmp_path / "ws"
    (workspace / "trials" / "9").mkdir(parents=True)
    (workspace / "trials" / "9" / "trial.json").write_bytes(orjson.dumps(metrics(9.0)))
    (workspace / INDEX).write_bytes(orjson.dumps({"format": 1, "trials": {}}))
    for _ in range(2):
        proc = cli_runner.run("mirror", workspace, "s1", "--store", root, "--once", "--delete")
        assert proc.returncode == 0, proc.stderr
        (workspace / INDEX).unlink(missing_ok=True)
    assert (s.path / INDEX).read_bytes() == index
    assert _indexed(s) == _truth(s)
    assert 9 in [t["n"] for t in _truth(s)["trials"]]

"""The summary a listing keeps in the index's first line (`session_summary`): taken only
while every record, and every other input it was derived from, is what it was.

Each test compares `session_summary` against `SessionView.load(...).summary()`
with no index at all, after changing one input behind the index's back.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import cli_runner
import orjson
import pytest
from inspect_helpers import attempt, metrics, trial
from test_index import _TICK, _entries, _index, _lines, _reads, settled, without_index

from sessionstore._fs.atomic import write_atomic
from sessionstore.format.names import CONSTRAINTS, INDEX, MANIFEST
from sessionstore.inspect.best import Objective
from sessionstore.inspect.summary import SessionView, session_summary
from sessionstore.store import index as index_module
from sessionstore.store.session import Session, Store

__all__ = ["settled"]  # the fixture, used by name


def _session(root: Path) -> Session:
    """A session whose every record is complete: the kind that keeps a summary."""
    s = Store(root).create(id="s1", name="one", trials=6, constraints={"max_ttft_ms.mean": 200})
    for k in range(4):
        trial(s, metrics(100.0 + k, 150.0 + 10 * k))
    attempt(s, {"trial": 2, "status": "verified"})
    return s


def _truth(session: Session, objective: Objective | None = None) -> dict[str, Any]:
    """The summary the records say, read with no index at all."""
    return without_index(
        session, lambda: SessionView.load(Session.open(session.path), objective).summary()
    )


def _summary(
    session: Session, objective: Objective | None = None, write: bool = True
) -> dict[str, Any]:
    return session_summary(Session.open(session.path), objective, write_index=write)


def _kept(session: Session) -> Any:
    return _lines(session)[0].get("summary")


def test_a_summary_is_kept_and_then_taken_without_a_marker_read(
    tmp_path: Path, settled: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    s = _session(tmp_path / "store")
    truth = _truth(s)
    assert _summary(s) == truth
    kept = _kept(s)
    assert kept["fields"]["best"] == truth["best"] and kept["fields"]["service"] == 1
    reads = _reads(monkeypatch)
    mtime = (s.path / INDEX).stat().st_mtime_ns
    assert _summary(s) == truth
    assert reads == [] and (s.path / INDEX).stat().st_mtime_ns == mtime  # nothing rewritten
    # The same bytes as the listing printed them before there was a summary to keep.
    assert orjson.dumps(_summary(s)) == orjson.dumps(truth)


def test_a_kept_summary_is_all_that_is_parsed(tmp_path: Path, settled: None) -> None:
    """The markers line is not parsed while the summary holds: a forged field shows, a
    zeroed markers line does not matter (it is what the key and the records vouch for)."""
    s = _session(tmp_path / "store")
    _summary(s)
    head, _ = _lines(s)
    head["summary"]["fields"]["best"]["value"] = 1e9
    (s.path / INDEX).write_bytes(index_module.index_bytes(orjson.dumps(head), b"\x00" * 64))
    assert _summary(s, write=False)["best"]["value"] == 1e9
    # The detail view reads the markers line, finds it unusable, and reads the markers.
    assert SessionView.load(Session.open(s.path)).summary() == _truth(s)


def _edit_marker(s: Session) -> None:
    marker = s.trials.path / "1" / "trial.json"
    marker.write_bytes(marker.read_bytes().replace(b"100.0", b"999.0"))  # the same size


def _replace_marker(s: Session) -> None:
    new = s.trials.path / "3" / "new.json"
    new.write_bytes(orjson.dumps(metrics(1e6)))
    os.replace(new, s.trials.path / "3" / "trial.json")


def _renumber(s: Session) -> None:
    """A record directory renamed: its marker keeps its identity, under another number."""
    os.rename(s.trials.path / "4", s.trials.path / "9")  # the best trial, the last


def _constraints(value: Any) -> Callable[[Session], None]:
    def change(s: Session) -> None:
        write_atomic(s.path / CONSTRAINTS, orjson.dumps({"max_ttft_ms.mean": value}))

    return change


def _manifest(**fields: Any) -> Callable[[Session], None]:
    def change(s: Session) -> None:
        manifest = orjson.loads((s.path / MANIFEST).read_bytes())
        write_atomic(s.path / MANIFEST, orjson.dumps({**manifest, **fields}))

    return change


def _report(s: Session) -> None:
    s.finish({"status": "done"})


def _failed_attempt(s: Session) -> None:
    attempt(s, {"trial": 1, "status": "failed"})


@pytest.mark.parametrize(
    "change",
    [
        pytest.param(_edit_marker, id="marker-edited-in-place"),
        pytest.param(_replace_marker, id="marker-replaced"),
        pytest.param(lambda s: trial(s, metrics(5e5)), id="trial-added"),
        pytest.param(lambda s: trial(s, None), id="trial-in-flight"),
        pytest.param(lambda s: (s.trials.path / "2" / "trial.json").unlink(), id="marker-gone"),
        pytest.param(_renumber, id="record-renumbered"),
        pytest.param(_failed_attempt, id="attempt-added"),
        pytest.param(_constraints(100), id="constraints-changed"),
        pytest.param(_constraints(200.0), id="constraints-200.0"),
        pytest.param(_constraints(True), id="constraints-true"),
        pytest.param(lambda s: (s.path / CONSTRAINTS).write_bytes(b"{"), id="constraints-torn"),
        pytest.param(lambda s: (s.path / CONSTRAINTS).unlink(), id="constraints-gone"),
        pytest.param(_manifest(trials=2), id="planned-changed"),
        pytest.param(_manifest(trials=None), id="planned-none"),
        pytest.param(_manifest(status="failed"), id="status-changed"),
        pytest.param(_manifest(name="renamed", previous=["s0"]), id="name-changed"),
        pytest.param(_manifest(pid="x"), id="manifest-invalid"),
        pytest.param(_report, id="report-written"),
    ],
)
def test_any_changed_input_is_seen_through_a_kept_summary(
    tmp_path: Path, settled: None, change: Callable[[Session], Any]
) -> None:
    s = _session(tmp_path / "store")
    before = _summary(s)
    assert _kept(s) is not None
    time.sleep(_TICK)  # past a tick of the clock: a change has a new ctime
    change(s)
    # As bytes: 200 and 200.0 are equal in Python, not in the listing.
    truth = orjson.dumps(_truth(s))
    assert truth != orjson.dumps(before)  # the change is one a summary shows
    assert orjson.dumps(_summary(s, write=False)) == truth
    assert orjson.dumps(_summary(s)) == truth
    assert orjson.dumps(_summary(s)) == truth  # and what it keeps now, taken


def test_constraints_python_thinks_equal_are_different_inputs(
    tmp_path: Path, settled: None
) -> None:
    """`1 == True` in Python; in constraints.json one is a limit, the other no number."""
    s = _session(tmp_path / "store")
    _constraints(1)(s)
    assert _summary(s)["best"]["meets_constraints"] is False
    assert _kept(s) is not None
    _constraints(True)(s)
    assert orjson.dumps(_summary(s)) == orjson.dumps(_truth(s))
    assert _truth(s)["best"]["meets_constraints"] is True


@pytest.mark.parametrize(
    "objective",
    [Objective(direction="lower"), Objective("benchmark.metrics.ttft_ms.mean")],
    ids=["direction", "path"],
)
def test_another_objective_is_not_answered_by_the_kept_summary(
    tmp_path: Path, settled: None, objective: Objective
) -> None:
    s = _session(tmp_path / "store")
    default = _summary(s)
    truth = _truth(s, objective)
    assert truth["best"] != default["best"]
    assert _summary(s, objective) == truth
    assert _summary(s) == default


def test_fresh_markers_keep_no_summary(tmp_path: Path) -> None:
    """The racily-clean rule covers the summary: a marker younger than `SETTLE_NS` when
    read could change again within its tick unseen, and so could what it ranks."""
    s = _session(tmp_path / "store")
    assert index_module.SETTLE_NS > 1_000_000_000
    assert _summary(s) == _truth(s)
    assert not os.path.lexists(s.path / INDEX)  # nothing settled, nothing written


def test_one_fresh_marker_keeps_no_summary(
    tmp_path: Path, settled: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    s = _session(tmp_path / "store")
    _summary(s)
    time.sleep(_TICK)
    monkeypatch.setattr(index_module, "SETTLE_NS", 10**12)
    _edit_marker(s)
    assert _summary(s) == _truth(s)
    head, markers = _lines(s)
    assert "summary" not in head and sorted(markers["trials"], key=int) == ["2", "3", "4"]


def test_a_session_judged_by_logs_keeps_no_summary(tmp_path: Path, settled: None) -> None:
    """A verdict comes from a log that no marker identity covers: read every time."""
    s = _session(tmp_path / "store")
    contract = {"output_contract": {"log": "run.log"}}
    n = trial(s, metrics(1e6, 1.0, **contract), files={"run.log": "PASS\n"})
    assert _summary(s)["best"]["n"] == n
    assert "summary" not in _lines(s)[0]
    (s.trials.path / str(n) / "run.log").write_bytes(b"FAIL: oom\n")
    assert _summary(s)["best"]["n"] != n
    assert _summary(s) == _truth(s)


@pytest.mark.parametrize(
    "forge",
    [
        pytest.param(lambda kept: kept["fields"].pop("best"), id="a-field-missing"),
        pytest.param(lambda kept: kept["fields"].update(extra=1), id="a-field-more"),
        pytest.param(lambda kept: kept.update(fields=[1]), id="fields-not-an-object"),
        pytest.param(lambda kept: kept.update(key=kept["key"][:-1]), id="key-shorter"),
        pytest.param(lambda kept: kept["key"].__setitem__(2, 7), id="key-planned-other"),
        pytest.param(lambda kept: kept["fields"].update(best="#4"), id="best-not-an-object"),
        pytest.param(lambda kept: kept["fields"]["best"].pop("n"), id="best-without-n"),
        pytest.param(
            lambda kept: kept["fields"]["best"].update(value="1e9"), id="best-value-a-string"
        ),
        pytest.param(
            lambda kept: kept["fields"]["best"].update(meets_constraints=1), id="meets-not-bool"
        ),
        pytest.param(lambda kept: kept["fields"].update(progress=None), id="progress-null"),
        pytest.param(lambda kept: kept["fields"].update(trial_counts=[4]), id="counts-a-list"),
        pytest.param(lambda kept: kept["fields"].update(service=True), id="service-a-bool"),
        pytest.param(lambda kept: kept["fields"]["best"].update(value=103), id="best-value-an-int"),
    ],
)
def test_a_kept_summary_of_another_shape_or_key_is_not_used(
    tmp_path: Path, settled: None, forge: Callable[[dict[str, Any]], Any]
) -> None:
    s = _session(tmp_path / "store")
    truth = _summary(s)
    head, markers = _lines(s)
    forge(head["summary"])
    (s.path / INDEX).write_bytes(_index(head, markers))
    # As bytes: `1 == True` in Python, not in the JSON a script reads.
    assert orjson.dumps(_summary(s, write=False)) == orjson.dumps(truth)
    assert orjson.dumps(_summary(s)) == orjson.dumps(truth)
    assert _kept(s)["fields"] == _lines(s)[0]["summary"]["fields"]
    assert _kept(s)["key"][2] == 6  # rewritten with the real key


def test_the_table_shows_the_records_through_a_kept_summary_of_another_shape(
    tmp_path: Path, settled: None
) -> None:
    """`inspect`'s table is laid out from the kept summaries: one whose key holds but
    whose best trial is not an object of ours is recomputed, never printed or a crash."""
    s = _session(tmp_path / "store")
    truth = _summary(s)
    head, markers = _lines(s)
    head["summary"]["fields"]["best"] = {"n": "4", "value": None}
    (s.path / INDEX).write_bytes(_index(head, markers))
    listed = cli_runner.invoke("inspect", "--store", tmp_path / "store")
    assert listed.exit_code == 0, listed.output
    assert f"#{truth['best']['n']} {truth['best']['value']:g}" in listed.stdout
    assert _kept(s)["fields"]["best"] == truth["best"]  # and the index is mended


def test_the_table_escapes_a_kept_progress(tmp_path: Path, settled: None) -> None:
    """A kept summary's text is a file's: control bytes in it print escaped, on one line."""
    s = _session(tmp_path / "store")
    _summary(s)
    head, markers = _lines(s)
    head["summary"]["fields"]["progress"] = "trialing \x1b]0;PWNED\x07\x1b[2J\nFORGED (2/2)"
    (s.path / INDEX).write_bytes(_index(head, markers))
    listed = cli_runner.run("inspect", "--store", tmp_path / "store", "--color", "never")
    assert listed.returncode == 0, listed.stderr
    assert "\x1b" not in listed.stdout and "\x07" not in listed.stdout
    assert "\\x1b]0;PWNED\\x07" in listed.stdout.replace("\n", "")
    assert not any(line.startswith("FORGED") for line in listed.stdout.splitlines())


def test_the_listing_formats_agree_with_and_without_kept_summaries(
    tmp_path: Path, settled: None
) -> None:
    """`inspect`'s rows as JSON, lines and CSV, sorted and filtered, are the same bytes
    with no index, with indexes written, and with their summaries taken."""
    root = tmp_path / "store"
    store = Store(root)
    for k, tok in enumerate([300.0, 100.0, 200.0]):
        s = store.create(id=f"s{k}", name=f"n{2 - k}", trials=3, pid=None)
        for j in range(2):
            trial(s, metrics(tok + j, 100.0 * (k + 1)))
    store.open("s1").finish({"status": "done"})
    commands = [
        ("inspect", "--json", "--store", root),
        ("inspect", "--nl", "--sort", "best", "--store", root),
        ("inspect", "--csv", "--sort", "name", "--store", root),
        ("inspect", "--json", "--status", "done", "--store", root),
        (
            "inspect",
            "--json",
            "--objective",
            "benchmark.metrics.ttft_ms.mean",
            "--lower",
            "--sort",
            "best",
            "--store",
            root,
        ),
    ]
    without = []
    for command in commands:
        for path in root.glob(f"*/{INDEX}"):
            path.unlink()
        without.append(cli_runner.invoke(*command).outcome)
    assert all(code == 0 for code, _, _ in without)
    written = [cli_runner.invoke(*c).outcome for c in commands]
    taken = [cli_runner.invoke(*c).outcome for c in commands]
    assert written == without and taken == without
    assert [orjson.loads(row)["id"] for row in without[1][1].splitlines()] == ["s0", "s2", "s1"]
    assert all(_kept(store.open(f"s{k}")) is not None for k in range(3))


def test_constraints_larger_than_a_cached_marker_keep_no_summary(
    tmp_path: Path, settled: None
) -> None:
    """The key holds the constraints: ones over `MAX_CACHED_BYTES` would make every index
    as large (a 40 MB file, an 80 MB index read and rewritten by each listing)."""
    s = _session(tmp_path / "store")
    large = {"max_ttft_ms.mean": 200, "note": "x" * index_module.MAX_CACHED_BYTES}
    write_atomic(s.path / CONSTRAINTS, orjson.dumps(large))
    assert _summary(s) == _truth(s)
    assert _kept(s) is None and _entries(s)["trials"] == ["1", "2", "3", "4"]
    assert (s.path / INDEX).stat().st_size < index_module.MAX_CACHED_BYTES

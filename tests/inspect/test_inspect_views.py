"""The rich views: reviewed snapshots at 60/80/120 columns, the spark chart, colour rules.

Snapshots live in tests/inspect/snapshots/; after an intended change, regenerate with
`SNAPSHOT_UPDATE=1 pytest tests/inspect/test_inspect_views.py`, then review the diff
by eye before committing it.
"""

from __future__ import annotations

import io
import os
import re
from pathlib import Path

import orjson
import pytest
from cli_runner import invoke
from inspect_helpers import SNAPSHOTS, WIDTHS, demo_store, metrics, render, trial
from rich.cells import cell_len
from rich.console import Console

from sessionstore.cli.grid import fit_widths
from sessionstore.cli.views import best_cell, session_detail, session_list
from sessionstore.format.names import INDEX
from sessionstore.inspect.best import Best, Objective, Score
from sessionstore.inspect.spark import BLOCKS, bars
from sessionstore.inspect.summary import SessionView, session_summary
from sessionstore.store import index as index_module
from sessionstore.store.session import Store


@pytest.fixture
def store(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Store:
    # A relative store root keeps printed paths identical on every machine.
    monkeypatch.chdir(tmp_path)
    return demo_store(Path("store"))


def check_snapshot(name: str, text: str) -> None:
    path = SNAPSHOTS / name
    if os.environ.get("SNAPSHOT_UPDATE"):
        path.parent.mkdir(exist_ok=True)
        path.write_text(text, encoding="utf-8")
    assert path.exists(), f"missing snapshot {path}; run with SNAPSHOT_UPDATE=1 and review it"
    assert text == path.read_text(encoding="utf-8")


@pytest.mark.parametrize("width", WIDTHS)
def test_session_list_snapshot(store: Store, width: int) -> None:
    rows = [session_summary(s) for s in store.sessions()]
    text = render(session_list, rows, store.root, Objective(), width=width)
    assert max(len(line) for line in text.splitlines()) <= width
    check_snapshot(f"list_{width}.txt", text)


@pytest.mark.parametrize("width", WIDTHS)
@pytest.mark.parametrize("session_id", ["trialing", "verified", "all-failed", "crashed"])
def test_session_detail_snapshot(store: Store, session_id: str, width: int) -> None:
    view = SessionView.load(store.open(session_id))
    text = render(session_detail, view, view.detail()["lineage"], width=width)
    assert max(len(line) for line in text.splitlines()) <= width
    check_snapshot(f"detail_{session_id}_{width}.txt", text)


def test_list_keeps_every_id_and_creation_time_whole(store: Store) -> None:
    rows = [session_summary(s) for s in store.sessions()]
    for width in WIDTHS:
        text = render(session_list, rows, store.root, Objective(), width=width)
        for row in rows:
            assert f"{row['id']} " in text
            assert (row["created_at"] or "")[5:16].replace("T", " ") in text


def test_list_name_truncates_with_ellipsis(store: Store) -> None:
    rows = [session_summary(s) for s in store.sessions()]
    text = render(session_list, rows, store.root, Objective(), width=80)
    assert "llama-3…" in text and "tensor-parallel" not in text


def test_list_shows_what_the_json_summaries_say(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The table is laid out from `inspect --json`'s objects, the summary index's kept
    fields included: each row says the status, progress and best of its summary."""
    monkeypatch.setattr(index_module, "SETTLE_NS", 0)  # markers cacheable at once
    for run in range(2):
        listed = invoke("inspect", "--store", store.root, env={"COLUMNS": "200"})
        data = invoke("inspect", "--store", store.root, "--json")
        assert listed.exit_code == data.exit_code == 0, listed.output + data.output
        lines = listed.stdout.splitlines()
        rows = orjson.loads(data.stdout)
        assert [line.split()[0] for line in lines[1 : len(rows) + 1]] == [r["id"] for r in rows]
        for row, line in zip(rows, lines[1:], strict=False):
            assert f"{row['status']} {row['progress']}" in line
            assert best_cell(row["best"]) in line
        # The first run kept the summaries of the sessions whose records are all complete;
        # the second lists from them.
        first = (store.root / "verified" / INDEX).read_bytes().split(b"\n")[0]
        head = orjson.loads(first.partition(b" ")[2])  # after the line's checksum
        assert head["summary"]["fields"]["best"]["n"] == 2, run


@pytest.mark.parametrize("width", (40, *WIDTHS))
def test_list_lines_fit_the_width_and_keep_no_trailing_spaces(tmp_path: Path, width: int) -> None:
    """Wide characters, escaped control bytes and long unbroken cells: every line fits in
    `width` terminal cells, columns stay aligned, and nothing trails a line. Narrower than
    every column's least (40 here), ID and CREATED still stay whole: a cut id is no use."""
    store = Store(tmp_path)
    names = ["日本語のセッション名前がとても長い", "a\x1b[31mred\tb", "x" * 90, "emoji 🚀🚀🚀 run"]
    for i, name in enumerate(names):
        s = store.create(id=f"s{i}", name=name, constraints={"max_" + "k" * 40: i}, pid=None)
        trial(s, metrics(100.0 + i))
    rows = [session_summary(s) for s in store.sessions()]
    text = render(session_list, rows, store.root, Objective(), width=width)
    lines = text.splitlines()
    table = lines[: lines.index(next(line for line in lines if line.startswith("BEST:")))]
    assert width < 60 or max(cell_len(line) for line in table) <= width
    assert "\x1b" not in text and "\t" not in text
    created = table[0].index("CREATED")
    for row in rows:
        line = next(line for line in table if line.startswith(f"{row['id']} "))
        # CREATED is never cut: each row's sits under its header, as many cells in.
        stamp = (row["created_at"] or "")[:16].replace("T", " ")
        stamp = stamp[5:] if width < 80 else stamp
        assert line.endswith(stamp)
        assert cell_len(line) - len(stamp) == created
    raw = io.StringIO()
    session_list(Console(file=raw, width=width), rows, store.root, Objective())
    assert not any(line.endswith(" ") for line in raw.getvalue().splitlines()[: len(table)])


def test_list_measures_wide_characters_in_cells(tmp_path: Path) -> None:
    """A name and constraints in wide characters, on a wide terminal: each is whole and
    on one line (their widths are counted in cells, as they are drawn)."""
    store = Store(tmp_path)
    s = store.create(id="wide", name="日本語の名前", constraints={"最大値": "長い文字列です"})
    trial(s, metrics(5.0))
    rows = [session_summary(s) for s in store.sessions()]
    lines = render(session_list, rows, store.root, Objective(), width=200).splitlines()
    assert lines[1].startswith("wide  日本語の名前  ") and "最大値=長い文字列です  " in lines[1]
    assert lines[2].startswith("BEST:")  # no row folded onto a second line


def test_a_name_cut_short_keeps_its_escapes_whole(tmp_path: Path) -> None:
    """A NAME cut with an ellipsis is cut between escapes, never inside one (`\\x1…`, or
    `\\u20…`: another character or none to the reader), whatever the width."""
    store = Store(tmp_path)
    store.create(id="esc", name="n" + "\x1b\u202e\\" * 20, pid=None)
    rows = [session_summary(s) for s in store.sessions()]
    for width in range(40, 80):
        line = render(session_list, rows, store.root, Objective(), width=width).splitlines()[1]
        cell = line.split()[1]
        assert cell.endswith("…"), (width, line)
        assert re.fullmatch(r"n(\\x1b|\\u202e|\\\\)*…", cell), (width, cell)


def test_list_styles_the_status_word_only_on_a_terminal(store: Store) -> None:
    rows = [session_summary(s) for s in store.sessions()]
    buffer = io.StringIO()
    console = Console(file=buffer, width=120, force_terminal=True, color_system="256")
    session_list(console, rows, store.root, Objective())
    out = buffer.getvalue()
    assert "\x1b[36mrunning\x1b[0m trialing (3/3)" in out  # cyan word, plain progress
    assert "\x1b[32mdone\x1b[0m verified (2/2)" in out
    assert "\x1b[1;31minterrupted\x1b[0m trialing (2/5)" in out
    assert "\x1b[1mCREATED\x1b[0m" in out  # headers bold, not their padding
    assert not any(line.endswith((" ", " \x1b[0m")) for line in out.splitlines())
    buffer = io.StringIO()
    session_list(Console(file=buffer, width=120), rows, store.root, Objective())
    assert "\x1b[" not in buffer.getvalue()


def test_fit_widths_shares_the_shrinking() -> None:
    assert fit_widths([10, 40, 30], [10, 5, 8], 60) == [10, 25, 25]
    assert fit_widths([10, 40, 30], [10, 5, 8], 60, first={1: 12}) == [10, 20, 30]
    assert fit_widths([3, 3], [3, 3], 4) == [3, 3]  # cannot go below the minimums


# --- spark ----------------------------------------------------------------------


def best(n: int, meets: bool) -> Best:
    return Best(n, 1.0, Objective(), meets, not meets, ())


def test_spark_bars_scale_from_zero() -> None:
    scores = [Score(1, 50.0, True), Score(2, 100.0, True), Score(3, 25.0, True)]
    chars = [b.char for b in bars(scores, best(2, True))]
    # Heights compare as the numbers do: 100 is twice 50 is twice 25.
    assert chars == [BLOCKS[4], BLOCKS[8], BLOCKS[2]]


def test_spark_tiny_positive_value_stays_visible_and_missing_is_marked() -> None:
    scores = [Score(1, 0.001, True), Score(2, 1000.0, True), Score(3, None, None)]
    assert [b.char for b in bars(scores, None)] == [BLOCKS[1], BLOCKS[8], "·"]


def test_spark_failed_red_best_gold_only_when_nothing_meets() -> None:
    scores = [Score(1, 5.0, False), Score(2, 9.0, False)]
    assert [b.kind for b in bars(scores, best(2, False))] == ["failed", "best"]
    scores = [Score(1, 5.0, True), Score(2, 9.0, False), Score(3, 7.0, True)]
    assert [b.kind for b in bars(scores, best(3, True))] == ["ok", "failed", "ok"]


def test_spark_colours_on_a_terminal(tmp_path: Path) -> None:
    session = Store(tmp_path).create(id="s", pid=None)
    trial(session, metrics(5.0) | {"failed": True})
    trial(session, metrics(9.0) | {"failed": True})
    view = SessionView.load(session)
    buffer = io.StringIO()
    console = Console(file=buffer, width=80, force_terminal=True, color_system="256")
    session_detail(console, view, [])
    out = buffer.getvalue()
    assert "\x1b[31m" + BLOCKS[4] in out  # trial 1: failed, red
    # trial 2: best while nothing meets, gold (bright yellow where rich downgrades gold1)
    assert re.search(r"\x1b\[1;(?:38;5;220|93)m" + BLOCKS[8], out)


def test_spark_fits_its_line_or_is_left_out(tmp_path: Path) -> None:
    """On a narrow terminal the spark shows fewer bars, and none at all when not one fits
    beside its label and caption: a chart folded onto a second line reads as neither."""
    session = Store(tmp_path).create(id="s", pid=None)
    for value in (1.0, 5.0, 9.0, 3.0):
        trial(session, metrics(value))
    view = SessionView.load(session)
    # label "output_tok_per_s " (17) + caption " 0 to 9, trials 4-4" (19) + one bar
    for width in (1, 20, 35, 36, 37, 40, 80):
        out = render(session_detail, view, [], width=width)
        sparks = [line for line in out.splitlines() if any(b in line for b in BLOCKS[1:])]
        if width < 37:
            assert sparks == [], width
            continue
        assert len(sparks) == 1 and cell_len(sparks[0]) <= width, (width, sparks)
        assert sparks[0].endswith(("trial 4", "trials 1-4", "trials 2-4", "trials 3-4"))


def test_no_colour_when_not_a_terminal(tmp_path: Path) -> None:
    session = Store(tmp_path).create(id="s", pid=None)
    trial(session, metrics(5.0) | {"failed": True})
    buffer = io.StringIO()
    session_detail(Console(file=buffer, width=80), SessionView.load(session), [])
    assert "\x1b[" not in buffer.getvalue()

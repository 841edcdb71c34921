"""A long field costs time linear in its length: the detail's folded lines, the tables' widths.

`inspect ID` took time quadratic in the length of constraints.json (2 MB: 3 s, 8 MB:
43 s): rich crops each printed line to the width by splitting the text's one segment at
every line break, copying the rest each time. The store list (and the record tables)
shrank a column a megabyte wide one character at a time, several calls per character.
Measured by counting, never by a clock: the characters rich's crop step copies, and
the calls made (Python and C functions, `sys.setprofile`), at two sizes.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from inspect_helpers import metrics, render, trial
from rich.segment import Segment

from sessionstore.cli.grid import fit_widths
from sessionstore.cli.views import session_detail, session_list
from sessionstore.inspect.best import Objective
from sessionstore.inspect.summary import SessionView, session_summary
from sessionstore.store.session import Store

SIZE = 64 * 1024  # characters of the constraint value at the smaller size
WIDTH = 80


@dataclass
class Work:
    calls: int = 0  # function calls, Python and C
    copied: int = 0  # characters rich's crop step copied splitting lines


@contextmanager
def counting(monkeypatch: pytest.MonkeyPatch) -> Iterator[Work]:
    """Count the work done inside the block (see the module docstring)."""
    work = Work()
    split = Segment.split_and_crop_lines

    def spied(segments: Iterable[Segment], *args: Any, **kwargs: Any) -> Any:
        listed = list(segments)
        for segment in listed:
            if "\n" in segment.text and not segment.control:
                # Its loop `_, _, rest = rest.partition("\n")` copies what follows each
                # line break once per line.
                text = segment.text
                work.copied += sum(len(text) - i - 1 for i, c in enumerate(text) if c == "\n")
        return split(listed, *args, **kwargs)

    def profile(_frame: Any, event: str, _arg: Any) -> None:
        if event in ("call", "c_call"):
            work.calls += 1

    monkeypatch.setattr(Segment, "split_and_crop_lines", spied)
    sys.setprofile(profile)
    try:
        yield work
    finally:
        sys.setprofile(None)
        monkeypatch.undo()


def measured(
    monkeypatch: pytest.MonkeyPatch, show: Callable[[int], str], size: int
) -> tuple[Work, str]:
    with counting(monkeypatch) as work:
        text = show(size)
    return work, text


CONSTRAINTS: dict[str, Callable[[int], dict[str, Any]]] = {
    "one long word": lambda size: {"x": "A" * size},
    "many short pairs": lambda size: {f"k{i}": i for i in range(size // 8)},
}


@pytest.mark.parametrize("shape", sorted(CONSTRAINTS))
def test_the_detail_costs_time_linear_in_the_constraints(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, shape: str
) -> None:
    def show(size: int) -> str:
        store = Store(tmp_path / str(size))
        session = store.create(id="b1", constraints=CONSTRAINTS[shape](size), pid=None)
        trial(session, metrics(100.0))
        view = SessionView.load(session)
        return render(session_detail, view, [], width=WIDTH)

    small, text = measured(monkeypatch, show, SIZE)
    large, bigger = measured(monkeypatch, show, 2 * SIZE)
    assert len(text) > SIZE and len(bigger) > 2 * SIZE  # the whole value is shown
    assert max(len(line) for line in bigger.splitlines()) <= WIDTH
    # Quadratic, the crop step copied ~SIZE^2 / WIDTH characters: 50 MB here.
    assert large.copied <= len(bigger) and small.copied <= len(text)
    assert large.calls <= 2.5 * small.calls


def one_character_at_a_time(
    natural: list[int], minimum: list[int], available: int, first: dict[int, int] | None
) -> list[int]:
    """`fit_widths` as it was written first: the rule it keeps, however it takes its steps."""
    widths = [max(n, m) for n, m in zip(natural, minimum, strict=True)]
    for index, floor in (first or {}).items():
        excess = sum(widths) - available
        if excess > 0:
            widths[index] = max(widths[index] - excess, floor, minimum[index])
    while sum(widths) > available:
        slack = [(w - m, w, i) for i, (w, m) in enumerate(zip(widths, minimum, strict=True))]
        gain, _, index = max(slack, key=lambda item: (item[0] > 0, item[1], item[0]))
        if gain <= 0:
            break
        widths[index] -= 1
    return widths


@st.composite
def layouts(draw: st.DrawFn) -> tuple[list[int], list[int], int, dict[int, int] | None]:
    n = draw(st.integers(1, 7))
    natural = draw(st.lists(st.integers(0, 400), min_size=n, max_size=n))
    minimum = draw(st.lists(st.integers(0, 30), min_size=n, max_size=n))
    first = draw(st.none() | st.dictionaries(st.integers(0, n - 1), st.integers(0, 12), max_size=1))
    return natural, minimum, draw(st.integers(0, 300)), first


@given(layouts())
def test_fit_widths_keeps_the_one_character_at_a_time_rule(
    layout: tuple[list[int], list[int], int, dict[int, int] | None],
) -> None:
    assert fit_widths(*layout) == one_character_at_a_time(*layout)


def test_fit_widths_work_does_not_grow_with_a_columns_width(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    def calls(wide: int) -> int:
        with counting(monkeypatch) as work:
            assert fit_widths([wide, wide, 20, 9], [16, 16, 5, 9], 80) == [25, 26, 20, 9]
        return work.calls

    # One character at a time: ~10 calls a character, a million for 100,000 characters.
    assert calls(100_000) == calls(1_000) < 500


def test_the_store_list_costs_a_bounded_work_per_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def show(size: int) -> str:
        store = Store(tmp_path / str(size))
        session = store.create(id="b1", constraints={"x": "A" * size}, pid=None)
        trial(session, metrics(100.0))
        return render(
            session_list, [session_summary(session)], store.root, Objective(), width=WIDTH
        )

    small, _ = measured(monkeypatch, show, SIZE)
    large, bigger = measured(monkeypatch, show, 2 * SIZE)
    rows = bigger.splitlines()[1:]  # below the headers
    assert sum(line.count("A") for line in rows) == 2 * SIZE  # all of it, folded
    assert large.calls <= 2.5 * small.calls
    # Laying out a line of the table takes a few calls (its cells, their padding);
    # shrinking the column a character at a time took ~10 a character, ~200 a line.
    assert large.calls <= 40 * len(bigger.splitlines())

"""A long field costs time linear in its length: the detail's folded lines.

`inspect ID` took time quadratic in the length of constraints.json (2 MB: 3 s, 8 MB:
43 s): rich crops each printed line to the width by splitting the text's one segment at
every line break, copying the rest each time. Measured by counting, never by a clock:
the characters rich's crop step copies, and the calls made (Python and C functions,
`sys.setprofile`), at two sizes.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from inspect_helpers import metrics, render, trial
from rich.segment import Segment

from sessionstore.cli.views import session_detail
from sessionstore.inspect.summary import SessionView
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

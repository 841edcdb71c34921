"""A one-line spark chart of the objective across trials, as data (the CLI colours it).

Bars scale from zero, so their heights compare as the numbers do (a bar twice
as tall is a value twice as large): level = value / max * 8, at least one
eighth for any positive value so it stays visible. Values at or below zero
and trials without a value (torn, in flight, no benchmark) are blank-ish.
Kinds: `failed` for a completed trial that does not meet the constraints,
`best` for the winner only while no trial meets them (then it is the one a
reader must notice), `missing` without a value, else `ok`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from sessionstore.inspect.best import Best, Score

BLOCKS = " ▁▂▃▄▅▆▇█"
MISSING = "·"


@dataclass(frozen=True)
class Bar:
    """One trial's bar: its number, the block character and its kind."""

    n: int
    char: str
    kind: str  # ok | failed | best | missing


def bars(scores: Sequence[Score], best: Best | None, last: int | None = None) -> list[Bar]:
    """One bar per score in order, or per each of the `last` scores only (a long session
    shows its most recent trials); every score sets the scale (module docstring)."""
    top = max((s.value for s in scores if s.value is not None and s.value > 0), default=0.0)
    gold = best.n if best is not None and not best.meets_constraints else None
    shown = scores if last is None else scores[len(scores) - last :] if last > 0 else []
    result: list[Bar] = []
    for score in shown:
        if score.value is None:
            result.append(Bar(score.n, MISSING, "missing"))
            continue
        level = 0
        if score.value > 0 and top > 0:
            level = max(1, round(score.value / top * (len(BLOCKS) - 1)))
        if score.n == gold:
            kind = "best"
        elif score.meets_constraints is False:
            kind = "failed"
        else:
            kind = "ok"
        result.append(Bar(score.n, BLOCKS[level], kind))
    return result

"""Inline SVG charts of a metric across trials: no script, no library, hover by `<title>`.

One point per trial that has a value, joined by a line in trial order;
failed trials (not meeting the constraints) red, the best trial ringed and
labelled, each constraint's limit a dashed red line. The y axis includes
zero when every value is positive, so heights compare as the numbers do.
"""

from __future__ import annotations

import math
import sys
from collections.abc import Sequence
from dataclasses import dataclass

from sessionstore.view.html import number, text

_WIDTH, _HEIGHT = 960, 220
_LEFT, _RIGHT, _TOP, _BOTTOM = 64, 16, 16, 30


@dataclass(frozen=True)
class Point:
    """One trial's value; `kind` is ok | failed (the class it is drawn with)."""

    n: int
    value: float
    kind: str
    note: str = ""


def _ticks(low: float, high: float, count: int = 5) -> list[float]:
    """Round tick values covering [low, high] (1, 2, 5 steps).

    Spans are computed halved (`high / 2 - low / 2`): any two finite values have a
    finite half-span, while `high - low` overflows to infinity past 1.8e308.
    """
    half = high / 2 - low / 2
    if half <= 0:
        return [low]
    raw = half / (count / 2)
    step = 10.0 ** math.floor(math.log10(raw))
    for factor in (1, 2, 5, 10):
        if raw <= step * factor:
            step *= factor
            break
    if not 0 < step < math.inf:  # a span below the smallest float's precision
        return [low, high]
    first = math.ceil(low / step)  # in steps: `i * step` alone can overflow
    return [(first + i) * step for i in range(int(high / step - first + 1e-9) + 1)]


@dataclass(frozen=True)
class _Frame:
    """The plot's scales: trial numbers `first..last` across, values `low..high` up."""

    first: int
    last: int
    low: float
    high: float

    def x(self, n: float) -> float:
        plot_w = _WIDTH - _LEFT - _RIGHT
        if self.last == self.first:
            return _LEFT + plot_w / 2
        return _LEFT + plot_w * (n - self.first) / (self.last - self.first)

    def y(self, v: float) -> float:
        # Halved, as in `_ticks`: the differences of extreme values overflow.
        share = (self.high / 2 - v / 2) / (self.high / 2 - self.low / 2)
        return _TOP + (_HEIGHT - _TOP - _BOTTOM) * share


def _frame(
    points: Sequence[Point], limits: Sequence[tuple[str, float]], span: tuple[int, int]
) -> _Frame:
    values = [p.value for p in points] + [v for _, v in limits]
    low, high = min(min(values), 0.0), max(values)
    if high == low:
        high = low + (abs(low) or 1.0)
    return _Frame(span[0], span[1], low, min(high + (high / 2 - low / 2) * 0.1, sys.float_info.max))


def _axes(frame: _Frame) -> list[str]:
    out = []
    for tick in _ticks(frame.low, frame.high):
        ty = frame.y(tick)
        out.append(
            f'<line class="grid" x1="{_LEFT}" x2="{_WIDTH - _RIGHT}" y1="{ty:.1f}" y2="{ty:.1f}"/>'
            f'<text x="{_LEFT - 6}" y="{ty + 4:.1f}" text-anchor="end">{number(tick)}</text>'
        )
    for tick in _ticks(frame.first, frame.last, 8) if frame.last > frame.first else [frame.first]:
        if float(tick).is_integer():
            out.append(
                f'<text x="{frame.x(tick):.1f}" y="{_HEIGHT - 10}" text-anchor="middle">'
                f"{int(tick)}</text>"
            )
    bottom = _HEIGHT - _BOTTOM
    out.append(
        f'<line class="axis" x1="{_LEFT}" x2="{_LEFT}" y1="{_TOP}" y2="{bottom}"/>'
        f'<line class="axis" x1="{_LEFT}" x2="{_WIDTH - _RIGHT}" y1="{bottom}" y2="{bottom}"/>'
    )
    return out


def _limit(frame: _Frame, label: str, limit: float) -> str:
    ly = frame.y(limit)
    return (
        f'<line class="limit" x1="{_LEFT}" x2="{_WIDTH - _RIGHT}" y1="{ly:.1f}" '
        f'y2="{ly:.1f}"><title>{text(label)} {number(limit)}</title></line>'
        f'<text class="limit-label" x="{_WIDTH - _RIGHT - 4}" y="{ly - 4:.1f}" '
        f'text-anchor="end">{text(label)} {number(limit)}</text>'
    )


def _point(frame: _Frame, p: Point, radius: float, best: bool) -> str:
    cx, cy = frame.x(p.n), frame.y(p.value)
    note = f" ({text(p.note)})" if p.note else ""
    hover = f"{'best: ' if best else ''}trial {p.n}: {number(p.value)}{note}"
    if not best:
        return (
            f'<circle class="pt-{p.kind}" cx="{cx:.1f}" cy="{cy:.1f}" r="{radius}">'
            f"<title>{hover}</title></circle>"
        )
    anchor = "start" if cx < _LEFT + 40 else "end" if cx > _WIDTH - _RIGHT - 40 else "middle"
    return (
        f'<circle class="pt-best" cx="{cx:.1f}" cy="{cy:.1f}" r="7"><title>{hover}</title>'
        f'</circle><text x="{cx:.1f}" y="{max(cy - 11, 11):.1f}" text-anchor="{anchor}" '
        f'class="best">best #{p.n}</text>'
    )


def chart(
    title: str,
    points: Sequence[Point],
    limits: Sequence[tuple[str, float]] = (),
    best: int | None = None,
    span: tuple[int, int] | None = None,
) -> str:
    """A captioned `<svg>` of `points` (in trial order), limits drawn, `best` marked.

    `span` is the range of trial numbers across (default: the points'), so
    trials without a value keep their place.
    """
    caption = f"<figcaption>{text(title)}</figcaption>"
    if not points:
        return (
            f'<figure class="chart">{caption}<p class="dim">No trial has a value yet.</p></figure>'
        )
    frame = _frame(points, limits, span or (points[0].n, points[-1].n))
    out = [
        f'<figure class="chart">{caption}<svg class="chart" viewBox="0 0 {_WIDTH} {_HEIGHT}" '
        f'width="{_WIDTH}" height="{_HEIGHT}" role="img" aria-label="{text(title)}">',
        *_axes(frame),
    ]
    if len(points) > 1:
        path = " ".join(f"{frame.x(p.n):.1f},{frame.y(p.value):.1f}" for p in points)
        out.append(f'<polyline class="line" points="{path}"/>')
    out.extend(_limit(frame, label, limit) for label, limit in limits)
    radius = 3.5 if len(points) <= 200 else 2
    # The best last: drawn on top of its neighbours.
    out.extend(_point(frame, p, radius, False) for p in points if p.n != best)
    out.extend(_point(frame, p, radius, True) for p in points if p.n == best)
    out.append("</svg></figure>")
    return "".join(out)

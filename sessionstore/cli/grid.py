"""A plain table for long record lists, laid out in one pass: a row costs microseconds.

rich's Table measures and wraps every cell through its renderables, which
for the 10,000 trials of a long session is seconds (issue 16); these tables
need less: text cells, some right-justified, some folding, at most a few
styles. Widths come from `fit_widths` as the session list's do; the look is
rich's `box=None` table (one leading space, two between columns, bold
headers), so the detail view reads as one.

Cells are escaped text (see `display.escape`); styles are a handful of
names written as SGR codes only when the console styles at all.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from rich.cells import cell_len, chop_cells
from rich.console import Console

_SGR = {
    "bold": "1",
    "dim": "2",
    "red": "31",
    "green": "32",
    "yellow": "33",
    "bold red": "1;31",
}

Cell = str | tuple[str, str]  # text, or (text, one of _SGR's style names)


@dataclass(frozen=True)
class Column:
    """A column: its header, right-justified or not, and whether long cells fold
    onto more lines (else they are cut with an ellipsis; a no-wrap column keeps
    its widest cell whole unless the terminal is narrower than every minimum)."""

    header: str
    right: bool = False
    wrap: bool = False
    min_width: int = 0


def fit_widths(
    natural: list[int], minimum: list[int], available: int, first: dict[int, int] | None = None
) -> list[int]:
    """Shrink column widths from `natural` toward `minimum` until they fit `available`.

    Columns in `first` (index -> floor) give way first, down to their floor;
    then the widest column that can still give way loses one character at a
    time, so every column keeps a fair share instead of one starving the rest.
    """
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


def _text(cell: Cell) -> str:
    return cell if isinstance(cell, str) else cell[0]


def _len(text: str) -> int:
    """Terminal cells of `text`: its length when ASCII (most cells here: the fast path)."""
    return len(text) if text.isascii() else cell_len(text)


def _fold(text: str, width: int) -> list[str]:
    """`text` in lines of at most `width` cells: broken at spaces, a longer word folded."""
    if _len(text) <= width:
        return [text]
    lines: list[str] = []
    line = ""
    for word in text.split(" "):
        candidate = f"{line} {word}" if line else word
        if _len(candidate) <= width:
            line = candidate
            continue
        if line:
            lines.append(line)
        pieces = chop_cells(word, width) if _len(word) > width else [word]
        lines.extend(pieces[:-1])
        line = pieces[-1] if pieces else ""
    lines.append(line)
    return lines


def _cut(text: str, width: int) -> str:
    if _len(text) <= width:
        return text
    return chop_cells(text, max(width - 1, 1))[0] + "…" if width > 1 else "…"


def _widths(
    console: Console, columns: Sequence[Column], rows: Sequence[Sequence[Cell]]
) -> list[int]:
    natural = [_len(c.header) for c in columns]
    longest_word = [0] * len(columns)
    for row in rows:
        for i, cell in enumerate(row):
            text = cell if isinstance(cell, str) else cell[0]
            size = _len(text)
            if size > natural[i]:
                natural[i] = size
            # A word is never longer than its cell: most cells need no split.
            if size > longest_word[i] and columns[i].wrap:
                longest_word[i] = max(longest_word[i], *map(_len, text.split(" ")))
    minimum = [
        max(_len(c.header), c.min_width, min(longest_word[i], 16) if c.wrap else natural[i])
        for i, c in enumerate(columns)
    ]
    natural = [max(n, m) for n, m in zip(natural, minimum, strict=True)]
    available = console.width - 1 - 2 * (len(columns) - 1)
    floors = [min(m, n) for m, n in zip(minimum, natural, strict=True)]
    return fit_widths(natural, floors, available)


def render_grid(
    console: Console, title: str, columns: Sequence[Column], rows: Sequence[Sequence[Cell]]
) -> None:
    """Print `title`, the headers and `rows` (one cell per column) at the console's width."""
    styled = console.color_system is not None and not console.no_color
    widths = _widths(console, columns, rows)
    layout = [(c.wrap, c.right, w) for c, w in zip(columns, widths, strict=True)]

    def line_of(parts: list[tuple[str, str, int]]) -> str:
        out = []
        for (_, right, width), (text, style, size) in zip(layout, parts, strict=True):
            pad = " " * (width - size)
            padded = pad + text if right else text + pad
            out.append(
                f"\x1b[{_SGR[style]}m{padded}\x1b[0m" if styled and style and text else padded
            )
        return (" " + "  ".join(out)).rstrip()

    def lines_of(cells: Sequence[Cell], header: bool) -> list[str]:
        parts: list[tuple[str, str, int]] = []
        fits = True
        for (_, _, width), cell in zip(layout, cells, strict=True):
            text, style = (cell, "") if isinstance(cell, str) else cell
            size = _len(text)
            fits = fits and size <= width
            parts.append((text, "bold" if header else style, size))
        if fits:  # the common row: one line, nothing to fold or cut
            return [line_of(parts)]
        folded = [
            _fold(text, width) if wrap else [_cut(text, width)]
            for (wrap, _, width), (text, _, _) in zip(layout, parts, strict=True)
        ]
        return [
            line_of(
                [
                    (f[k], style, _len(f[k])) if k < len(f) else ("", style, 0)
                    for f, (_, style, _) in zip(folded, parts, strict=True)
                ]
            )
            for k in range(max(map(len, folded)))
        ]

    output = [title, *lines_of([c.header for c in columns], header=True)]
    for row in rows:
        output += lines_of(row, header=False)
    console.file.write("\n".join(output) + "\n")
    console.file.flush()

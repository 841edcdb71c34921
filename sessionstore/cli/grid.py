"""A plain table for long record lists, laid out in one pass: a row costs microseconds.

rich's Table measures and wraps every cell through its renderables, which
for the 10,000 trials of a long session is seconds (issue 16); these tables
need less: text cells, some right-justified, some folding, at most a few
styles. Widths come from `fit_widths` as the session list's do; the look is
rich's `box=None` table (one leading space, two between columns, bold
headers), so the detail view reads as one.

The session list is laid out here too (`inspect` of a store of 10,000 sessions
spent 5 of its 8 seconds in rich's Table): it brings its own widths, no
leading space and its own gap, and styles only the status word of a cell.

Cells are escaped text (see `display.escape`); styles are a handful of
names written as SGR codes only when the console styles at all.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from rich.cells import cell_len, chop_cells
from rich.console import Console

from sessionstore._display import cut_point

_SGR = {
    "bold": "1",
    "dim": "2",
    "red": "31",
    "green": "32",
    "yellow": "33",
    "cyan": "36",
    "bold red": "1;31",
    "bold yellow": "1;33",
}

# Text; (text, one of _SGR's style names); or (text, style, n): the style covers only the
# first n characters, which must not hold a space (they stay whole on the first line).
Cell = str | tuple[str, str] | tuple[str, str, int]


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
    while (excess := sum(widths) - available) > 0:
        giving = [i for i, (w, m) in enumerate(zip(widths, minimum, strict=True)) if w > m]
        if not giving:
            break
        # One character at a time, the widest columns would take turns, each losing one
        # a turn, until they are down to the next widest: as many whole turns are taken
        # at once. Character by character, a cell of megabytes cost seconds per megabyte.
        top = max(widths[i] for i in giving)
        tied = [i for i in giving if widths[i] == top]
        below = max((widths[i] for i in giving if widths[i] < top), default=0)
        turns = min(top - below, *(widths[i] - minimum[i] for i in tied), excess // len(tied))
        if turns > 0:
            for i in tied:
                widths[i] -= turns
            continue
        # Fewer characters left to lose than tied columns: one at a time, by the rule
        # (the widest, then the one with the most to give, then the first).
        slack = [(w - m, w, i) for i, (w, m) in enumerate(zip(widths, minimum, strict=True))]
        _, _, index = max(slack, key=lambda item: (item[0] > 0, item[1], item[0]))
        widths[index] -= 1
    return widths


def cells_of(text: str) -> int:
    """Terminal cells of `text`: its length when ASCII (most cells here: the fast path)."""
    return len(text) if text.isascii() else cell_len(text)


def _fold(text: str, width: int) -> list[str]:
    """`text` in lines of at most `width` cells: broken at spaces, a longer word folded."""
    if cells_of(text) <= width:
        return [text]
    lines: list[str] = []
    line = ""
    for word in text.split(" "):
        candidate = f"{line} {word}" if line else word
        if cells_of(candidate) <= width:
            line = candidate
            continue
        if line:
            lines.append(line)
        pieces = chop_cells(word, width) if cells_of(word) > width else [word]
        lines.extend(pieces[:-1])
        line = pieces[-1] if pieces else ""
    lines.append(line)
    return lines


def _cut(text: str, width: int) -> str:
    """`text` (escaped) in `width` cells, its end cut off with an ellipsis if it is wider;
    never inside an escape (`\\x1…` would read as another character)."""
    if cells_of(text) <= width:
        return text
    if width <= 1:
        return "…"
    kept = chop_cells(text, width - 1)[0]
    return text[: cut_point(text, len(kept))] + "…"


def _widths(
    console: Console, columns: Sequence[Column], rows: Sequence[Sequence[Cell]], spacing: int
) -> list[int]:
    natural = [cells_of(c.header) for c in columns]
    longest_word = [0] * len(columns)
    for row in rows:
        for i, cell in enumerate(row):
            text = cell if isinstance(cell, str) else cell[0]
            size = cells_of(text)
            if size > natural[i]:
                natural[i] = size
            # A word is never longer than its cell: most cells need no split.
            if size > longest_word[i] and columns[i].wrap:
                longest_word[i] = max(longest_word[i], *map(cells_of, text.split(" ")))
    minimum = [
        max(cells_of(c.header), c.min_width, min(longest_word[i], 16) if c.wrap else natural[i])
        for i, c in enumerate(columns)
    ]
    natural = [max(n, m) for n, m in zip(natural, minimum, strict=True)]
    floors = [min(m, n) for m, n in zip(minimum, natural, strict=True)]
    return fit_widths(natural, floors, console.width - spacing)


# A cell as laid out: its text, style, width in cells, and how many leading characters
# the style covers (None: all of it).
_Part = tuple[str, str, int, int | None]


def render_grid(
    console: Console,
    title: str | None,
    columns: Sequence[Column],
    rows: Sequence[Sequence[Cell]],
    *,
    widths: list[int] | None = None,
    lead: str = " ",
    gap: int = 2,
) -> None:
    """Print `title` (if any), the headers and `rows` (one cell per column).

    Each line starts with `lead` and has `gap` spaces between columns (rich's `box=None`
    look by default); `widths` are the columns' (else fitted to the console's width).
    """
    styled = console.color_system is not None and not console.no_color
    if widths is None:
        widths = _widths(console, columns, rows, len(lead) + gap * (len(columns) - 1))
    layout = [(c.wrap, c.right, w) for c, w in zip(columns, widths, strict=True)]
    between = " " * gap

    def line_of(parts: list[_Part]) -> str:
        out = [_paint(p, w, right, styled) for (_, right, w), p in zip(layout, parts, strict=True)]
        return (lead + between.join(out)).rstrip()

    def lines_of(cells: Sequence[Cell], header: bool) -> list[str]:
        parts: list[_Part] = []
        fits = True
        for (_, _, width), cell in zip(layout, cells, strict=True):
            text, style, n = _styled(cell)
            size = cells_of(text)
            fits = fits and size <= width
            parts.append((text, "bold", size, None) if header else (text, style, size, n))
        if fits:  # the common row: one line, nothing to fold or cut
            return [line_of(parts)]
        folded = [
            _fold(text, width) if wrap else [_cut(text, width)]
            for (wrap, _, width), (text, _, _, _) in zip(layout, parts, strict=True)
        ]
        return [
            line_of(
                [
                    # A style on the first characters stays on the first line.
                    (f[k], style if k == 0 or n is None else "", cells_of(f[k]), n)
                    if k < len(f)
                    else ("", style, 0, n)
                    for f, (_, style, _, n) in zip(folded, parts, strict=True)
                ]
            )
            for k in range(max(map(len, folded)))
        ]

    output = [] if title is None else [title]
    output += lines_of([c.header for c in columns], header=True)
    for row in rows:
        output += lines_of(row, header=False)
    console.file.write("\n".join(output) + "\n")
    console.file.flush()


def _paint(part: _Part, width: int, right: bool, styled: bool) -> str:
    """One cell of a line, padded to `width`, its text (not the padding: a line's end
    is then stripped of it) in SGR codes when `styled`."""
    text, style, size, n = part
    pad = " " * (width - size)
    if styled and style and text:
        n = len(text) if n is None else n
        text = f"\x1b[{_SGR[style]}m{text[:n]}\x1b[0m{text[n:]}"
    return pad + text if right else text + pad


def _styled(cell: Cell) -> tuple[str, str, int | None]:
    if isinstance(cell, str):
        return cell, "", None
    if len(cell) == 2:
        return cell[0], cell[1], None
    return cell

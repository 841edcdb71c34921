"""Rich tables for people; scripts use `--json` instead.

Every renderer takes the Console to print on, so tests render at fixed widths
into a string. Colour is decided by the Console (see `make_console`): none
when the output is not a terminal or NO_COLOR is set.

Names and fields come from files an agent wrote, so they are data, never
control: every one passes through `display.escape` (no terminal escape, no
line break) and reaches rich as `Text`, never as a markup string (a name
`[/x]` would otherwise be a markup error, `:smile:` an emoji).
"""

from __future__ import annotations

import functools
import os
from collections.abc import Iterable
from pathlib import Path, PurePosixPath
from typing import Any

from rich.console import Console
from rich.text import Text

from sessionstore._display import escape, fmt_number, scalar
from sessionstore.cli.cells import no_sessions
from sessionstore.cli.grid import Cell, Column, cells_of, fit_widths, render_grid
from sessionstore.cli.records import attempts_table, trials_table
from sessionstore.inspect.best import Objective
from sessionstore.inspect.spark import bars
from sessionstore.inspect.summary import SessionView, not_read
from sessionstore.store.session import Record, RecordState

_STATUS_STYLE = {
    "running": "cyan",
    "interrupted": "bold red",
    "done": "green",
    "failed": "red",
    "unknown": "bold yellow",
}
_BAR_STYLE = {"ok": "green", "failed": "red", "best": "bold gold1", "missing": "dim"}
_STAR_NOTE = "* no trial met the constraints; the best trial that fell short is shown"


def make_console(color: str = "auto", width: int | None = None) -> Console:
    """A Console for stdout, styled per `color`: `auto`, `always` or `never`.

    `auto` styles only a terminal, and nothing at all (bold included: rich's
    own NO_COLOR handling keeps bold and dim) when NO_COLOR is set and not
    empty (no-color.org). `always` is an explicit request, so it overrides
    NO_COLOR, as no-color.org allows, and TERM=dumb, as `ls --color=always` does.
    """
    # No automatic highlighting: colour carries meaning here (failed red, best gold). No
    # markup or emoji codes either: every cell is Text, and a stray str must print as is.
    make = functools.partial(Console, width=width, highlight=False, markup=False, emoji=False)
    if color == "always":
        console = make(force_terminal=True, no_color=False)
        if console.color_system is None:  # rich's answer to TERM=dumb, even forced
            # The 8 colours every terminal that shows colour at all has.
            console = make(force_terminal=True, no_color=False, color_system="standard")
    elif color == "never" or os.environ.get("NO_COLOR"):
        console = make(color_system=None, no_color=True)
    else:
        console = make()  # rich checks isatty itself
    if console.width < 1:
        # COLUMNS=0 (a terminal of unknown size): rich takes it and prints no line of text
        # at all, so the detail's header vanished. 80 is rich's own answer to a terminal
        # reporting 0 columns.
        console.width = 80
    return console


def _created(created_at: str | None, compact: bool) -> str:
    text = escape((created_at or "")[:16].replace("T", " "))
    return text[5:] if compact else text


def best_cell(best: dict[str, Any] | None) -> str:
    """`#3 1234.5` or `#2 980*` (the star: no trial met the constraints); empty without one.

    `best` is a summary's (`Best.to_dict()`)."""
    if best is None:
        return ""
    mark = "" if best["meets_constraints"] else "*"
    return f"#{best['n']} {fmt_number(best['value'])}{mark}"


def constraints_cell(constraints: dict[str, Any], error: str | None = None) -> str:
    if error:  # torn, or not read at all (a symlink, no permission): the detail says which
        return "unreadable constraints.json"
    return ", ".join(f"{escape(k)}={scalar(v)}" for k, v in constraints.items())


def status_text(view: SessionView) -> Text:
    """`running: trialing (2/3)`, styled by status; wraps only at its spaces."""
    text = Text()
    text.append(view.status, style=_STATUS_STYLE.get(view.status, ""))
    text.append(f" {view.progress}")
    return text


def _longest_word(cells: list[str], cap: int) -> int:
    return min(max((cells_of(w) for cell in cells for w in cell.split()), default=1), cap)


_HEADERS = ["ID", "NAME", "STATUS", "BEST", "CONSTRAINTS", "CREATED"]


def _list_widths(width: int, texts: list[list[str]], compact: bool, gap: int) -> list[int]:
    """The session list's column widths: ID and CREATED whole, NAME giving way first,
    STATUS, BEST and CONSTRAINTS keeping room for their longest word up to a cap."""
    # Terminal cells, as `render_grid` draws them (a wide character takes two).
    natural = [max(len(h), *(cells_of(r[i]) for r in texts)) for i, h in enumerate(_HEADERS)]
    minimum = [
        natural[0],
        min(natural[1], 5),
        _longest_word([r[2] for r in texts], 12),
        _longest_word([r[3] for r in texts], 7 if compact else 10),
        _longest_word([r[4] for r in texts], 10 if compact else 16),
        natural[5],
    ]
    minimum = [max(m, len(h)) for m, h in zip(minimum, _HEADERS, strict=True)]
    available = width - gap * (len(_HEADERS) - 1)
    # Truncating NAME loses less than wrapping the data columns, so it gives way first.
    return fit_widths(natural, minimum, available, first={1: max(5, width // 8)})


def session_list(
    console: Console,
    rows: Iterable[dict[str, Any]],
    root: Path,
    objective: Objective,
    *,
    filtered: bool = False,
) -> None:
    """One row per session summary (`inspect --json`'s objects, `SessionView.summary`),
    newest first. Long cells wrap or truncate; none starves the rest.

    Only each row's cells are kept while the rest are read, not its summary: a list of
    10,000 sessions then holds 10,000 short lists for the collector to look through.

    ID and CREATED never wrap; NAME truncates with an ellipsis; STATUS, BEST
    and CONSTRAINTS wrap (at spaces when they can) and keep room for their
    longest word up to a cap, so a narrow terminal gets taller rows.
    """
    compact = console.width < 80
    gap = 1 if compact else 2
    texts: list[list[str]] = []  # plain escaped text: widths are measured on it
    statuses: list[str] = []
    starred = False
    for row in rows:
        best = row["best"]
        starred = starred or (best is not None and not best["meets_constraints"])
        # Escaped like every cell: a summary index's kept progress is a file's text.
        status = escape(row["status"])
        statuses.append(status)
        texts.append(
            [
                # The directory's name, which `inspect ID` and `rm ID` open: a manifest
                # naming another session's id must not show as that session.
                escape(PurePosixPath(row["path"]).name),
                escape(row["name"] or ""),
                f"{status} {escape(row['progress'])}{_not_read(row['collection_errors'])}",
                best_cell(best),
                constraints_cell(row["constraints"], row["constraints_error"]),
                _created(row["created_at"], compact),
            ]
        )
    if not texts:
        console.print(Text(no_sessions(root, filtered)))
        return
    widths = _list_widths(console.width, texts, compact, gap)
    # Laid out by `render_grid`, not rich's Table, which measured and wrapped each cell
    # through its renderables: 5 of the 8 seconds of a store of 10,000 sessions. ID and
    # CREATED whole, NAME cut, the rest folding; only the status word of STATUS styled.
    columns = [Column(h, wrap=h in ("STATUS", "BEST", "CONSTRAINTS")) for h in _HEADERS]
    cells: list[list[Cell]] = [
        [*text[:2], (text[2], _STATUS_STYLE.get(status, ""), len(status)), *text[3:]]
        for status, text in zip(statuses, texts, strict=True)
    ]
    render_grid(console, None, columns, cells, widths=widths, lead="", gap=gap)
    console.print(
        Text(f"BEST: {escape(objective.path)}, {objective.direction} is better", style="dim")
    )
    if starred:
        console.print(_STAR_NOTE, style="dim")


def _not_read(errors: dict[str, str]) -> str:
    """The list's note on collections that could not be listed (`summary.not_read`)."""
    return f" {escape(not_read(errors))}" if errors else ""


def _spark(console: Console, view: SessionView) -> Text | None:
    """The objective across trials on one line; a long session shows its latest trials.
    None on a terminal too narrow for a bar beside the label and the caption: a spark
    folded onto two lines reads as neither."""
    if not view.trials:
        return None
    label = f"{escape(view.objective.name)} "
    values = [s.value for s in view.scores if s.value is not None]
    scale = f"0 to {fmt_number(max(values))}" if values else "no values"
    # Room for the widest possible caption, so the line never wraps.
    last = view.scores[-1].n
    caption_room = len(f" {scale}, trials {last}-{last}")
    room = console.width - cells_of(label) - caption_room
    if room < 1:
        return None
    shown = bars(view.scores, view.best, room)
    text = Text()
    text.append(label, style="bold")
    for bar in shown:
        text.append(bar.char, style=_BAR_STYLE[bar.kind])
    span = f"trial {shown[0].n}" if len(shown) == 1 else f"trials {shown[0].n}-{shown[-1].n}"
    text.append(f" {scale}, {span}", style="dim")
    return text


def _best_line(view: SessionView) -> str:
    best = view.best
    if best is None:
        return "best: none (no completed trial has a value)"
    verdict = (
        "meets the constraints" if best.meets_constraints else "* no trial met the constraints"
    )
    return f"best: #{best.n} {escape(view.objective.name)}={fmt_number(best.value)} ({verdict})"


def session_detail(
    console: Console, view: SessionView, lineage: list[dict[str, Any]], *, show_all: bool = False
) -> None:
    """Header, spark, trials (a screenful unless `show_all`: see `records.screenful`),
    verification attempts, lineage, foreign entries and problems."""
    session = view.session
    head = Text(escape(session.id or "(no manifest)"), style="bold")
    if view.name:
        head.append(f"  {escape(view.name)}")
    _line(console, head)
    _line(console, Text(f"path: {escape(str(session.path))}"))
    _line(console, Text("status: ").append_text(status_text(view)))
    if view.created_at:
        _line(console, Text(f"created: {_created(view.created_at, False)} UTC"))
    constraints = constraints_cell(view.constraints, view.constraints_error) or "none"
    _line(console, Text(f"constraints: {constraints}"))
    _line(console, Text(_best_line(view)))
    if lineage:
        parts = [f"{escape(str(item['id']))} ({_lineage_state(item)})" for item in lineage]
        _line(console, Text(f"previous: {', '.join(parts)}"))
    if view.manifest_error:
        _line(console, Text(f"manifest: {escape(view.manifest_error)}", style="bold red"))
    if view.constraints_error:
        _line(console, Text(f"constraints: {escape(view.constraints_error)}", style="bold red"))
    for name, problem in view.collection_errors.items():
        line = f"{name}/: {escape(problem)}; none of its records was read"
        _line(console, Text(line, style="bold red"))
    _report_lines(console, view.report)
    spark = _spark(console, view)
    if spark is not None:
        console.print()
        _line(console, spark)
    console.print()
    trials_table(console, view, show_all)
    if view.service:
        console.print()
        attempts_table(console, view.service, view.verdicts(view.service))
    for collection, names in view.foreign.items():
        names_line = f"foreign entries in {collection}/: {', '.join(map(escape, names))}"
        _line(console, Text(names_line, style="yellow"))


def _report_lines(console: Console, report: Record) -> None:
    if report.state is RecordState.TORN:
        _line(console, Text(f"report: {escape(report.error or '')}", style="bold red"))
        return
    if report.data is None:
        return
    line = f"report: {escape(str(report.data.get('status', 'done')))}"
    if type(report.data.get("best_trial")) is int:  # not a bool: `true` names no trial
        line += f", best trial {report.data['best_trial']}"
    _line(console, Text(line))
    for key in ("constraints", "verified"):
        value = report.data.get(key)
        if isinstance(value, dict):
            _line(console, Text(f"  {key}: {constraints_cell(value) or 'none'}"))


def _line(console: Console, text: Text) -> None:
    """Print `text` folded at the console's width, in time linear in its length.

    rich crops each printed line to the width (`crop`), splitting the text's one
    segment at every line break with a copy of the rest: quadratic in the length of
    a long text (8 MB of constraints took 43 s). A folded text has no line wider than
    the console: there is nothing to crop.
    """
    console.print(text, overflow="fold", crop=False)


def _lineage_state(item: dict[str, Any]) -> str:
    if item["copied"]:
        return f"{item['trials']} trials"
    problem = item.get("problem")
    return f"not copied: {escape(str(problem))}" if problem else "not copied"

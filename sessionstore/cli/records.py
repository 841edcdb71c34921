"""The detail view's record tables: trials and verification attempts.

A long session shows a screenful of trials by default (`screenful`): the
best, those in flight or torn (what a person watching or resuming needs),
then the most recent; one line says how many more there are and that
`--all` shows them. Tables are laid out by `grid` (one pass over the rows),
so `--all` of 10,000 trials prints in a fraction of a second.
"""

from __future__ import annotations

from collections.abc import Sequence

from rich.console import Console

from sessionstore._display import escape, fmt_number, scalar
from sessionstore.cli.grid import Cell, Column, render_grid
from sessionstore.harness.verdict import Verdict
from sessionstore.inspect.best import Best, Score, as_number, lookup
from sessionstore.inspect.summary import SessionView
from sessionstore.store.session import Record, RecordState

# Trials the default view shows at most: with the header lines, one screen.
SCREENFUL = 20
# Extra metric columns in the trials table besides the objective (kept few for 60 columns).
_EXTRA_METRICS = 2
_STATE_STYLE = {
    RecordState.COMPLETED: "green",
    RecordState.IN_FLIGHT: "yellow",
    RecordState.TORN: "bold red",
}
_VERDICT_STYLE = {"pass": "green", "fail": "red", "indeterminate": "yellow"}


def screenful(view: SessionView, limit: int = SCREENFUL) -> list[int]:
    """Indexes into `view.trials` of the trials shown by default, in number order.

    The best trial, then the in-flight and torn ones (the most recent first
    when they alone are more than `limit`), then the most recent others,
    up to `limit` in all.
    """
    trials = view.trials
    if len(trials) <= limit:
        return list(range(len(trials)))
    chosen: dict[int, None] = {}  # ordered set
    if view.best is not None:
        chosen[next(i for i, r in enumerate(trials) if r.n == view.best.n)] = None
    unfinished = [i for i, r in enumerate(trials) if r.state is not RecordState.COMPLETED]
    for i in reversed(unfinished):
        if len(chosen) >= limit:
            break
        chosen.setdefault(i)
    for i in range(len(trials) - 1, -1, -1):
        if len(chosen) >= limit:
            break
        chosen.setdefault(i)
    return sorted(chosen)


def trials_table(console: Console, view: SessionView, show_all: bool) -> None:
    """The trials table (a screenful unless `show_all`), then how many were left out."""
    shown = range(len(view.trials)) if show_all else screenful(view)
    extra = view.metric_paths(_EXTRA_METRICS)
    verdicts = view.verdicts(view.trials)
    metrics = [escape(p.removeprefix("benchmark.metrics.")) for p in [view.objective.path, *extra]]
    columns = _columns(
        [
            *(Column(h, right=True, wrap=True, min_width=min(len(h), 16)) for h in metrics),
            Column("FAILED"),
        ],
        bool(verdicts),
        "NOTE",
    )
    rows: list[Sequence[Cell]] = []
    for i in shown:
        record, score = view.trials[i], view.scores[i]
        data = record.data or {}
        values = [fmt_number(score.value) if score.value is not None else ""]
        for path in extra:
            number = as_number(lookup(data, path))
            values.append(fmt_number(number) if number is not None else "")
        failed = ""
        if record.state is RecordState.COMPLETED:
            failed = "yes" if data.get("failed") is True else "no"
        verdict = [_verdict_cell(verdicts.get(record.n))] if verdicts else []
        rows.append(
            [
                str(record.n),
                (str(record.state), _STATE_STYLE[record.state]),
                *values,
                (failed, "red" if failed == "yes" else ""),
                *verdict,
                _note(record, score, view.best),
            ]
        )
    render_grid(console, "trials", columns, rows)
    hidden = len(view.trials) - len(rows)
    if hidden:
        noun = "trial" if hidden == 1 else "trials"
        console.file.write(f"{hidden} more {noun}; --all to show them\n")


def _columns(middle: list[Column], verdicts: bool, last: str) -> list[Column]:
    """A record table's columns: N, STATE, `middle`, LOG when a record declares an output
    contract, and `last` (the free text, folding)."""
    log = [Column("LOG", wrap=True)] if verdicts else []
    return [Column("N", right=True), Column("STATE"), *middle, *log, Column(last, wrap=True)]


def _verdict_cell(verdict: Verdict | None) -> Cell:
    """The output-contract verdict: what the record's log says, not its status field."""
    if verdict is None:
        return ""
    return (escape(str(verdict)), _VERDICT_STYLE[str(verdict.outcome)])


def _note(record: Record, score: Score, best: Best | None) -> Cell:
    """The best marker, a torn record's error, or the constraints a trial violates."""
    if record.error:
        return (escape(record.error), "red")
    parts = []
    if best is not None and record.n == best.n:
        parts.append(f"best{best.mark}")
    for check in score.checks:
        if not check.ok:
            op = "< min" if check.key.startswith("min_") else "> max"
            name = escape(check.path.removeprefix("benchmark.metrics."))
            parts.append(f"{name} {fmt_number(check.value)} {op} {fmt_number(check.limit)}")
    return "; ".join(parts)


def attempts_table(console: Console, records: list[Record], verdicts: dict[int, Verdict]) -> None:
    """Every verification attempt: its trial, result, log verdict and reason."""
    columns = _columns([Column("TRIAL", right=True), Column("RESULT")], bool(verdicts), "REASON")
    rows: list[Sequence[Cell]] = []
    for record in records:
        data = record.data or {}
        trial = data.get("trial")
        result = data.get("status")
        reason = record.error or data.get("reason")
        rows.append(
            [
                str(record.n),
                (str(record.state), _STATE_STYLE[record.state]),
                str(trial) if isinstance(trial, int) and not isinstance(trial, bool) else "",
                escape(result) if isinstance(result, str) else "",
                *([_verdict_cell(verdicts.get(record.n))] if verdicts else []),
                # A JSON value (`{"oom":true}`), not Python's repr of it; none: empty.
                (
                    "" if reason is None else scalar(reason),
                    "red" if record.error or result == "failed" else "",
                ),
            ]
        )
    render_grid(console, "verification attempts", columns, rows)

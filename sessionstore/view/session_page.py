"""One session as HTML: what `inspect TARGET` shows, with a real chart and links.

Built from a `SessionView` (what `inspect --json` prints, so the page and
`/api/sessions/<id>` never disagree) and its lineage (`lineage_info`, the
`lineage` of the JSON). `Links` says where a
record or another session is: pages of the server, or anchors of the report.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from sessionstore._display import scalar
from sessionstore.harness.verdict import Verdict
from sessionstore.inspect.best import Score, as_number, lookup
from sessionstore.inspect.summary import SessionView
from sessionstore.store.session import Record, RecordState
from sessionstore.view.chart import Point, chart
from sessionstore.view.html import number, text

# Metric columns of the trials table besides the objective.
EXTRA_METRICS = 4


@dataclass(frozen=True)
class Links:
    """Where the page links to: a record (collection, n) and a session id; None: no link."""

    record: Callable[[str, int], str | None]
    session: Callable[[str], str | None]


def link(href: str | None, label: str) -> str:
    """`label` (HTML) as a link to `href`, or as it is without one."""
    return f'<a href="{text(href, whole=True)}">{label}</a>' if href else label


def live_signature(status: str, trials: list[Record], service: list[Record]) -> str:
    """The state a page was drawn from, as the live script computes it from the JSON
    (`status|n:state,...|n:state,...`): a change means a record completed or tore."""

    def states(records: list[Record]) -> str:
        return ",".join(f"{r.n}:{r.state}" for r in records)

    return f"{status}|{states(trials)}|{states(service)}"


def _facts(rows: list[tuple[str, str]]) -> str:
    return '<dl class="facts">' + "".join(f"<dt>{k}</dt><dd>{v}</dd>" for k, v in rows) + "</dl>"


def _constraints(values: dict[str, Any]) -> str:
    if not values:
        return '<span class="dim">none</span>'
    return ", ".join(f"<code>{text(k)}</code> = {text(scalar(v))}" for k, v in values.items())


def labels_html(labels: Any) -> str:
    """A manifest's labels as chips (`key=value`); anything but an object of strings: none."""
    if not isinstance(labels, dict):
        return ""
    return "".join(
        f'<span class="label">{text(k)}={text(v)}</span>'
        for k, v in labels.items()
        if isinstance(v, str)
    )


def header(view: SessionView, lineage: list[dict[str, Any]], links: Links) -> str:
    """Title and facts: status, progress, created, labels, constraints, best, report, lineage."""
    session = view.session
    title = text(view.name) if view.name else '<span class="dim">(no name)</span>'
    rows = [
        ("id", f"<code>{text(session.id or '(no manifest)')}</code>"),
        ("status", f'<span class="{text(view.status)}">{text(view.status)}</span>'),
        ("progress", text(view.progress)),
        ("created", text(view.created_at or "")),
        ("labels", labels_html((session.manifest or {}).get("labels"))),
        ("constraints", _constraints(view.constraints)),
        ("objective", f"<code>{text(view.objective.path)}</code>, {view.objective.direction}"),
        ("best", best_html(view, links)),
    ]
    problems = [("manifest", view.manifest_error), ("constraints", view.constraints_error)]
    problems += [
        (f"{name}/", f"{problem}; none of its records was read")
        for name, problem in view.collection_errors.items()
    ]
    for label, problem in problems:
        if problem:
            rows.append((label, f'<span class="bad">{text(problem)}</span>'))
    report = _report_html(view.report)
    if report:
        rows.append(("report", report))
    if lineage:
        rows.append(("previous", _lineage(lineage, links)))
    return f"<h1>{title}</h1>{_facts(rows)}"


def best_html(view: SessionView, links: Links) -> str:
    """The best trial and why: the constraints it met, or the `*` fallback and what it missed."""
    best = view.best
    if best is None:
        return '<span class="dim">none: no completed trial has a value for the objective</span>'
    label = f"#{best.n} {text(view.objective.name)} = {number(best.value)}{best.mark}"
    head = link(links.record("trials", best.n), f'<span class="best">{label}</span>')
    if best.meets_constraints:
        why = "meets the constraints"
    else:
        why = "* no trial met the constraints; this is the best that fell short"
    checks = [
        f'<span class="{"ok" if c.ok else "bad"}">{text(c.path)} {number(c.value)} '
        f"{'≥' if c.key.startswith('min_') else '≤'} {number(c.limit)}"
        f"{'' if c.ok else ' (violated)'}</span>"
        for c in best.checks
    ]
    if best.failed:
        checks.append('<span class="bad">the trial says failed</span>')
    if best.verdict is not None:
        kind = str(best.verdict.outcome)
        checks.append(f'<span class="{kind}">log: {text(best.verdict)}</span>')
    return f"{head} ({why}{': ' if checks else ''}{', '.join(checks)})"


def _report_html(report: Record) -> str:
    if report.state is RecordState.TORN:
        return f'<span class="bad">{text(report.error or "torn")}</span>'
    if report.data is None:
        return ""
    data = report.data
    parts = [text(data.get("status", "done"))]
    if type(data.get("best_trial")) is int:  # not a bool: `true` names no trial
        parts.append(f"best trial {data['best_trial']}")
    for key in ("constraints", "verified"):
        if isinstance(data.get(key), dict):
            parts.append(f"{key}: {_constraints(data[key])}")
    return "; ".join(parts)


def _lineage(items: list[dict[str, Any]], links: Links) -> str:
    out = []
    for item in items:
        name = f"<code>{text(item['id'])}</code>"
        if item["copied"]:
            state = f"{item['trials']} trials, {item['service']} attempts copied"
        else:
            state = "not copied" + (f": {text(item['problem'])}" if item.get("problem") else "")
        out.append(f"<li>{link(links.session(str(item['id'])), name)} ({state})</li>")
    return f'<ul class="lineage">{"".join(out)}</ul>'


def charts(view: SessionView) -> str:
    """The objective across trials, then each checked constraint's metric with its limit."""
    best = view.best.n if view.best else None
    points = [
        Point(s.n, s.value, "failed" if s.meets_constraints is False else "ok", _why(s))
        for s in view.scores
        if s.value is not None
    ]
    limits = [
        (key, as_number(limit) or 0.0)
        for key, limit in view.constraints.items()
        if key[4:] in (view.objective.path, view.objective.path.removeprefix("benchmark.metrics."))
        and key[:4] in ("min_", "max_")
        and as_number(limit) is not None
    ]
    span = (view.trials[0].n, view.trials[-1].n) if view.trials else None
    title = f"{view.objective.path} ({view.objective.direction} is better)"
    out = [chart(title, points, limits, best, span)]
    by_key: dict[str, tuple[str, float, list[Point]]] = {}
    for score in view.scores:
        for check in score.checks:
            if check.path == view.objective.path:
                continue
            entry = by_key.setdefault(check.key, (check.path, check.limit, []))
            kind = "failed" if score.meets_constraints is False else "ok"
            entry[2].append(Point(score.n, check.value, kind, _why(score)))
    for key, (path, limit, found) in by_key.items():
        out.append(chart(f"{path} (constraint {key})", found, [(key, limit)], best, span))
    return "".join(out)


def _why(score: Score) -> str:
    if score.meets_constraints is False:
        missed = [c.key for c in score.checks if not c.ok]
        return "fails " + ", ".join(missed) if missed else "does not meet the constraints"
    return ""


def trials_table(view: SessionView, links: Links) -> str:
    """Every trial: number, state, objective, metrics, failed, log verdict, note."""
    extra = view.metric_paths(EXTRA_METRICS)
    verdicts = view.verdicts(view.trials)
    heads = ["N", "state", text(view.objective.name)]
    heads += [text(p.removeprefix("benchmark.metrics.")) for p in extra]
    heads += ["failed", *(["log"] if verdicts else []), "note"]
    numeric = {0, *range(2, 3 + len(extra))}
    head = "".join(
        f'<th class="num">{h}</th>' if i in numeric else f"<th>{h}</th>"
        for i, h in enumerate(heads)
    )
    best = view.best
    rows = []
    for record, score in zip(view.trials, view.scores, strict=True):
        data = record.data or {}
        cells = [
            _num(record.n, link(links.record("trials", record.n), str(record.n))),
            f'<td class="{record.state}">{record.state}</td>',
            _num(score.value, number(score.value)),
        ]
        for path in extra:
            found = as_number(lookup(data, path))
            cells.append(_num(found, number(found)))
        failed = ""
        if record.state is RecordState.COMPLETED:
            failed = '<span class="bad">yes</span>' if data.get("failed") is True else "no"
        cells.append(f"<td>{failed}</td>")
        if verdicts:
            cells.append(verdict_cell(verdicts.get(record.n)))
        note = _note(record, score, best.n if best else None, best.mark if best else "")
        cells.append(f"<td>{note}</td>")
        rows.append(f'<tr id="t{record.n}">{"".join(cells)}</tr>')
    if not rows:
        return '<h2>Trials</h2><p class="dim">No trials yet.</p>'
    return (
        f'<h2>Trials</h2><table class="sortable trials"><thead><tr>{head}</tr></thead>'
        f"<tbody>{''.join(rows)}</tbody></table>"
    )


def _num(value: float | None, html_value: str) -> str:
    key = "" if value is None else f' data-v="{value!r}"'
    return f'<td class="num"{key}>{html_value}</td>'


def verdict_cell(verdict: Verdict | None) -> str:
    """The output-contract verdict: what the record's log says, not its status field."""
    if verdict is None:
        return "<td></td>"
    return f'<td class="{verdict.outcome}">{text(verdict)}</td>'


def _note(record: Record, score: Score, best: int | None, mark: str) -> str:
    if record.error:
        return f'<span class="bad">{text(record.error)}</span>'
    parts = [f'<span class="best">best{mark}</span>'] if record.n == best else []
    for check in score.checks:
        if not check.ok:
            op = "< min" if check.key.startswith("min_") else "> max"
            name = text(check.path.removeprefix("benchmark.metrics."))
            parts.append(
                f'<span class="bad">{name} {number(check.value)} {op} {number(check.limit)}</span>'
            )
    learned = (record.data or {}).get("learned")
    if isinstance(learned, str):
        parts.append(f'<span class="note">{text(learned)}</span>')
    return "; ".join(parts)


def attempts_table(view: SessionView, links: Links) -> str:
    """Verification attempts: number, state, trial verified, result, log verdict, reason."""
    if not view.service:
        return ""
    verdicts = view.verdicts(view.service)
    heads = ["N", "state", "trial", "result", *(["log"] if verdicts else []), "reason"]
    rows = []
    for record in view.service:
        data = record.data or {}
        trial = data.get("trial")
        trial_cell = ""
        if isinstance(trial, int) and not isinstance(trial, bool):
            trial_cell = link(links.record("trials", trial), str(trial))
        result = data.get("status")
        reason = record.error or data.get("reason")
        # A JSON value (`{"oom":true}`), not Python's repr of it; none: empty.
        shown = "" if reason is None else text(scalar(reason))
        bad = record.error or result == "failed"
        cells = [
            f"<td>{link(links.record('service', record.n), str(record.n))}</td>",
            f'<td class="{record.state}">{record.state}</td>',
            f"<td>{trial_cell}</td>",
            f'<td class="{text(result) if isinstance(result, str) else ""}">'
            f"{text(result) if isinstance(result, str) else ''}</td>",
            *([verdict_cell(verdicts.get(record.n))] if verdicts else []),
            f'<td class="{"bad" if bad else ""}">{shown}</td>',
        ]
        rows.append(f'<tr id="v{record.n}">{"".join(cells)}</tr>')
    head = "".join(f"<th>{h}</th>" for h in heads)
    return (
        f'<h2>Verification attempts</h2><table class="sortable service"><thead><tr>{head}'
        f"</tr></thead><tbody>{''.join(rows)}</tbody></table>"
    )


def foreign_html(view: SessionView) -> str:
    """Entries of `trials/` and `service/` that are not records (shown, never read)."""
    if not view.foreign:
        return ""
    items = "".join(
        f"<li><code>{text(collection)}/</code>: "
        + ", ".join(f"<code>{text(name)}</code>" for name in names)
        + "</li>"
        for collection, names in view.foreign.items()
    )
    return f'<h2>Foreign entries</h2><ul class="foreign">{items}</ul>'


def session_body(view: SessionView, lineage: list[dict[str, Any]], links: Links) -> str:
    """The whole session section: header, charts, trials, attempts, foreign entries."""
    return (
        header(view, lineage, links)
        + "<h2>Objective across trials</h2>"
        + charts(view)
        + trials_table(view, links)
        + attempts_table(view, links)
        + foreign_html(view)
    )

"""`sessionstore resume`: the plan for a harness restarting a session after a crash."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from sessionstore._display import escape
from sessionstore.cli.common import (
    command,
    library_errors,
    objective_of,
    objective_options,
    target_options,
)
from sessionstore.cli.listing import Listing, listing_options
from sessionstore.cli.plain import emit_json
from sessionstore.store.target import resolve_target

if TYPE_CHECKING:
    from collections.abc import Iterable, Iterator

    from sessionstore.inspect.best import Objective
    from sessionstore.store.lifecycle import Writer
    from sessionstore.store.lifecycle_resume import CollectionPlan, ResumePlan
    from sessionstore.store.session import Session


def _numbers(numbers: list[int]) -> str:
    return " ".join(map(str, numbers)) if numbers else "none"


def _writer(writer: Writer | None, what: str) -> str:
    if writer is None:
        return f"{what}: none recorded"
    pid = f"pid {writer.pid}" if writer.pid is not None else "pid unknown"
    alive = {True: "alive", False: "not alive", None: "cannot be told"}[writer.alive]
    return f"{what}: {pid}, {alive}"


def _collection(title: str, plan: CollectionPlan) -> list[str]:
    lines = [
        f"{title}: completed (keep) {_numbers(plan.completed)}; failed {_numbers(plan.failed)}; "
        f"next {'none left (start a new session)' if plan.next is None else plan.next}"
    ]
    for redo in plan.redo:
        state = redo.state.replace("_", " ")
        why = f" ({redo.error})" if redo.error else ""
        files = ", ".join(redo.files) if redo.files else "no files"
        lines.append(f"  redo {redo.n}: {state}{why}; holds {files}; {redo.path}")
    for name in plan.foreign:
        lines.append(f"  foreign entry {name} (not a record; ignored)")
    return lines


def render(plan: ResumePlan) -> list[str]:
    """The plan as lines for a person (escaped by the caller)."""
    ended = "finished (report.json written)" if plan.finished else "not finished"
    lines = [f"session {plan.id}: {plan.status}, {ended}; {plan.path}"]
    lines.append(_writer(plan.writer, "writer"))
    if plan.mirror is not None:
        lines.append(_writer(plan.mirror, "mirror daemon"))
    lines += _collection("trials", plan.trials)
    lines += _collection("attempts", plan.service)
    return lines


RECORD_STATUSES = ("completed", "failed", "in_flight", "torn")
RECORD_COLUMNS = ("collection", "n", "status", "action", "path", "files", "error")


def rows(plan: ResumePlan) -> Iterator[dict[str, Any]]:
    """One row per record, trials then attempts, in number order: its status (`failed`
    is a completed record that failed), whether to keep or redo it, and where it is."""
    for name, collection in (("trials", plan.trials), ("service", plan.service)):
        failed = set(collection.failed)
        redo = {r.n: r for r in collection.redo}
        for n in sorted({*collection.completed, *redo}):
            item = redo.get(n)
            if item is not None:
                status, action = item.state, "redo"
                path, files, error = item.path, item.files, item.error
            else:
                status, action = "failed" if n in failed else "completed", "keep"
                path, files, error = collection.path / str(n), None, None
            yield {
                "collection": name,
                "n": n,
                "status": status,
                "action": action,
                "path": str(path),
                "files": files,
                "error": error,
            }


def sorted_rows(
    found: Iterable[dict[str, Any]], sort: str | None, session: Session, goal: Objective
) -> Iterable[dict[str, Any]]:
    """The rows in `--sort`'s order: as begun (not given), newest first (`created`), by
    collection and number (`name`: a record's number is its name), or `best`: the
    completed trials by the objective (those meeting the constraints first), then every
    other row as begun."""
    if sort is None:
        return found
    found = list(found)
    if sort == "created":
        return sorted(found, key=lambda row: row["n"], reverse=True)
    if sort == "name":
        return sorted(found, key=lambda row: (row["collection"], row["n"]))
    from sessionstore.inspect.best import best_first
    from sessionstore.inspect.summary import SessionView

    scores = {s.n: s for s in SessionView.load(session, goal).scores}

    def rank(row: dict[str, Any]) -> tuple[int, float]:
        score = scores.get(row["n"]) if row["collection"] == "trials" else None
        if score is None:
            return best_first(None, None, goal)
        return best_first(score.value, score.meets_constraints, goal)

    return sorted(found, key=rank)  # stable: the rest stay as begun


@command()
@target_options()
@listing_options(
    statuses=RECORD_STATUSES,
    status_help="With --nl or --csv: only records of this status (repeatable).",
    json_help="Print the plan as one JSON object.",
    labels=True,
    sorts=("created", "name", "best"),
    sort_help="With --nl or --csv: the rows' order (default: as begun)",
    sort_default=False,
)
@objective_options
@library_errors
def resume(
    target: str, store_dir: Path | None, listing: Listing, objective: str | None, higher: bool
) -> None:
    """Show what a harness restarting session TARGET after a crash keeps and redoes.

    Completed records are kept (they are immutable); in-flight records (no
    marker) and torn ones (a marker that is not a JSON object) are to redo,
    each with its directory and the files it holds; failed ones are those a
    completed marker says failed. "next" is the number `sessionstore begin`
    allocates (null in --json when none is left: begin refuses); the recorded
    writer is shown alive or not, so a harness can tell whether the old run is
    still going.

    --json prints the whole plan as one object; --nl and --csv one row per
    record (collection, n, status, action keep or redo, path, files,
    error), which --status and --limit choose, in the order they were begun
    unless --sort says otherwise (`best`: the completed trials by
    --objective, those meeting the constraints first). The rows are one
    session's records, which carry no labels of their own: --label K=V keeps
    them only if the session carries every label given (else there are none).

    \b
    Examples:
      sessionstore resume 1a2b3c4d
      sessionstore resume 1a2b --json | jq '.trials.redo[].n'
      sessionstore resume 1a2b --nl --status torn --status in_flight
      sessionstore resume 1a2b --csv --sort best --objective metrics.loss --lower
    """
    # Imported when the command runs, not when `sessionstore --help` lists it: start-up.
    from sessionstore.store.lifecycle_resume import resume_plan

    if (listing.filtered or listing.sort is not None) and listing.fmt not in ("nl", "csv"):
        raise click.UsageError(
            "--status, --label, --limit and --sort choose the rows of --nl or --csv"
        )
    session = resolve_target(target, store_dir)
    plan = resume_plan(session)
    if listing.fmt == "json":
        emit_json(plan.to_dict())
        return
    if listing.fmt is not None:
        # Labels are the session's: its rows are all there, or none.
        labelled = listing.labelled(session.manifest)
        chosen = (row for row in rows(plan) if labelled and listing.wants(row["status"]))
        ordered = sorted_rows(chosen, listing.sort, session, objective_of(objective, higher))
        listing.emit(listing.take(ordered), RECORD_COLUMNS)
        return
    for line in render(plan):
        click.echo(escape(line))

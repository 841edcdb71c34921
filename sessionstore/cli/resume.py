"""`sessionstore resume`: the plan for a harness restarting a session after a crash."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import click

from sessionstore._display import escape
from sessionstore.cli.common import command, emit_json, json_option, library_errors, target_options
from sessionstore.store.target import resolve_target

if TYPE_CHECKING:
    from sessionstore.store.lifecycle import Writer
    from sessionstore.store.lifecycle_resume import CollectionPlan, ResumePlan


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
        f"next {plan.next}"
    ]
    for redo in plan.redo:
        state = redo.state.replace("_", " ")
        why = f" ({redo.error})" if redo.error else ""
        files = ", ".join(redo.files) if redo.files else "no files"
        lines.append(f"  redo {redo.n}: {state}{why}; holds {files}; {redo.path}")
    for name in plan.foreign:
        lines.append(f"  foreign entry {name!r} (not a record; ignored)")
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


@command()
@target_options()
@json_option
@library_errors
def resume(target: str, store_dir: Path | None, as_json: bool) -> None:
    """Show what a harness restarting session TARGET after a crash keeps and redoes.

    Completed records are kept (they are immutable); in-flight records (no
    marker) and torn ones (a marker that is not a JSON object) are to redo,
    each with its directory and the files it holds; failed ones are those a
    completed marker says failed. "next" is the number `sessionstore begin`
    allocates; the recorded writer is shown alive or not, so a harness can
    tell whether the old run is still going.

    \b
    Examples:
      sessionstore resume 1a2b3c4d
      sessionstore resume 1a2b --json | jq '.trials.redo[].n'
    """
    # Imported when the command runs, not when `sessionstore --help` lists it: start-up.
    from sessionstore.store.lifecycle_resume import resume_plan

    plan = resume_plan(resolve_target(target, store_dir))
    if as_json:
        emit_json(plan.to_dict())
        return
    for line in render(plan):
        click.echo(escape(line))

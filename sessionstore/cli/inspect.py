"""`sessionstore inspect`: sessions and records, as tables or JSON."""

from __future__ import annotations

from pathlib import Path

import click

from sessionstore.cli.common import (
    command,
    emit_json,
    json_option,
    library_errors,
    objective_of,
    objective_options,
    target_options,
)
from sessionstore.store.target import resolve_target, store_root


@command()
@target_options(required=False)
@json_option
@objective_options
@click.option(
    "--color/--no-color",
    "color",
    default=None,
    help="Force colour on or off (default: only on a terminal without NO_COLOR).",
)
@library_errors
def inspect(
    target: str | None,
    store_dir: Path | None,
    as_json: bool,
    objective: str | None,
    higher: bool,
    color: bool | None,
) -> None:
    """Show the store's sessions, or one session (an id or a session directory path).

    The list shows each session's status and progress, its best trial (`*`
    when no trial met the constraints) and its constraints; one session adds
    its trials, verification attempts, lineage and a spark chart of the
    objective.

    \b
    Examples:
      sessionstore inspect
      sessionstore inspect 1a2b3c4d
      sessionstore inspect 1a2b3c4d --objective benchmark.metrics.ttft_ms.p99 --lower
      sessionstore inspect ./workspace --json
    """
    # Imported when the command runs, not when `sessionstore --help` lists it: start-up.
    from sessionstore.inspect.summary import SessionView, load_views
    from sessionstore.store.session import Store

    goal = objective_of(objective, higher)
    if target is None:
        store = Store(store_root(store_dir))
        views = load_views(store, goal)
        if as_json:
            emit_json([v.summary() for v in views])
            return
        # rich only for tables: `--json` never imports it.
        from sessionstore.cli.views import make_console, session_list

        session_list(make_console(color), views, store.root)
        return
    view = SessionView.load(resolve_target(target, store_dir), goal)
    detail = view.detail()
    if as_json:
        emit_json(detail)
        return
    # rich only for tables: `--json` never imports it.
    from sessionstore.cli.views import make_console, session_detail

    session_detail(make_console(color), view, detail["lineage"])

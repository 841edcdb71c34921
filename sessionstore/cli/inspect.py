"""`sessionstore inspect`: sessions and records, as tables or JSON."""

from __future__ import annotations

from pathlib import Path

import click

from sessionstore.cli.common import (
    default_store,
    emit_json,
    json_option,
    library_errors,
    store_option,
)


@click.command()
@click.argument("target", required=False)
@store_option
@json_option
@library_errors
def inspect(target: str | None, store_dir: Path | None, as_json: bool) -> None:
    """Show the store's sessions, or one session (an id or a session directory path).

    \b
    Examples:
      sessionstore inspect
      sessionstore inspect 1a2b3c4d
      sessionstore inspect ./workspace --json
    """
    from sessionstore.cli.target import resolve
    from sessionstore.store import Store
    from sessionstore.summary import SessionView

    store = Store(store_dir or default_store())
    if target is None:
        views = [SessionView.load(s) for s in store.sessions()]
        if as_json:
            emit_json([v.summary() for v in views])
        else:
            from sessionstore.cli.views import print_session_list

            print_session_list(views, store.root)
        return
    view = SessionView.load(resolve(store, target))
    if as_json:
        emit_json(view.detail())
    else:
        from sessionstore.cli.views import print_session_detail

        print_session_detail(view)

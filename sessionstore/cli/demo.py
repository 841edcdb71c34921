"""`sessionstore demo`: the first command to run."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import click

from sessionstore.cli.common import color_option, command, library_errors, store_option
from sessionstore.store.target import default_store_root

if TYPE_CHECKING:
    from rich.console import Console

    from sessionstore.store.session import Session


@command()
@store_option
@click.option(
    "--keep-workspace", is_flag=True, help="Keep the fake agent's scratch workspace for a look."
)
@color_option
@library_errors
def demo(store_dir: Path | None, keep_workspace: bool, color: str) -> None:
    """Run a fake agent session, mirrored into the store by the real daemon.

    A fake agent writes trials into a scratch workspace (CRLF configs, a binary
    patch, logs holding a secret from its environment, a file rewritten in
    place mid-flight, one torn marker, one trial still in flight, and a
    verification attempt) while the mirror daemon copies it into a new
    session, redacting the secret. Then the workspace is deleted, the session
    is finished as a harness finishes one (a report naming the best trial,
    status done) and shown as `sessionstore inspect` shows it, and `sessionstore
    view` and `sessionstore report` are offered to see it in a browser.

    \b
    Examples:
      sessionstore demo
      sessionstore demo --store /tmp/demo-store --keep-workspace
    """
    # Imported when the command runs, not when `sessionstore --help` lists it: start-up.
    from rich.text import Text

    from sessionstore.cli.views import make_console, session_detail
    from sessionstore.demo import TOKEN_ENV, run_demo
    from sessionstore.inspect.best import DEFAULT_OBJECTIVE, Objective
    from sessionstore.inspect.summary import SessionView

    root = store_dir or default_store_root()
    console = make_console(color)
    console.soft_wrap = True  # paths stay whole (copyable), however long
    console.print(Text.assemble(("sessionstore demo", "bold"), f": store {root}"))
    result = run_demo(root, keep_workspace=keep_workspace)
    session = result.session
    console.print(
        Text.assemble(
            f"A fake agent wrote 4 trials and 1 verification attempt into {result.workspace};\n"
            "the mirror daemon copied them into session ",
            (str(session.id), "bold"),
            f" ({session.path}).",
        )
    )
    for item in result.held_back:
        console.print(f"  held back by the mirror: {item['path']} ({item['reason']})")
    verdict = "nowhere" if not result.token_found_in_session else "STILL PRESENT (a bug!)"
    console.print(
        f"The agent's ${TOKEN_ENV} appears {verdict} in the session; "
        f"trials/1/run.log reads: {result.token_line!r}"
    )
    if keep_workspace:
        console.print(f"The workspace is kept at {result.workspace}.")
    else:
        console.print("The workspace is deleted: the session stands on its own.")
    console.print()
    view = SessionView.load(session, Objective(DEFAULT_OBJECTIVE, "higher"))
    session_detail(console, view, view.detail()["lineage"])
    console.print()
    _look_next(console, session, root, store_dir is not None)


def _look_next(console: Console, session: Session, root: Path, own_store: bool) -> None:
    """The commands to try next, `sessionstore view` and `report` among them."""
    store_flag = f" --store {root}" if own_store else ""
    console.print(
        "Look next:\n"
        f"  sessionstore inspect {session.id}{store_flag}          # this view\n"
        f"  sessionstore inspect {session.id}{store_flag} --json   # the same, for scripts\n"
        f"  sessionstore view{store_flag}   # in a browser, live\n"
        f"  sessionstore report {session.id}{store_flag} -o report.html   # one file\n"
        f"  ls -R {session.path}"
    )

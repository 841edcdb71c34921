"""Rich tables for people; scripts use `--json` instead."""

from __future__ import annotations

from pathlib import Path

from rich.console import Console
from rich.table import Table

from sessionstore.store import Record, RecordState
from sessionstore.summary import SessionView

_STATE_STYLE = {
    RecordState.COMPLETED: "green",
    RecordState.IN_FLIGHT: "yellow",
    RecordState.TORN: "bold red",
}


def _console() -> Console:
    # rich honours NO_COLOR and drops colour when stdout is not a terminal.
    return Console()


def print_session_list(views: list[SessionView], root: Path) -> None:
    """One row per session, newest first."""
    console = _console()
    if not views:
        console.print(f"no sessions in {root}")
        return
    table = Table(box=None, header_style="bold")
    table.add_column("ID", no_wrap=True)
    table.add_column("NAME", no_wrap=True, overflow="ellipsis", max_width=24)
    table.add_column("STATUS")
    table.add_column("TRIALS", justify="right")
    table.add_column("CREATED", no_wrap=True)
    for view in views:
        summary = view.summary()
        counts = summary["trial_counts"]
        table.add_row(
            summary["id"] or Path(summary["path"]).name,
            summary["name"] or "",
            f"{view.status} {view.progress}",
            f"{counts['completed']}/{len(view.trials)}",
            (summary["created_at"] or "")[:19].replace("T", " "),
        )
    console.print(table)


def _records_table(title: str, records: list[Record]) -> Table:
    table = Table(title=title, title_justify="left", box=None, header_style="bold")
    table.add_column("N", justify="right")
    table.add_column("STATE")
    table.add_column("DETAIL", overflow="fold")
    for record in records:
        detail = record.error or ""
        if record.data is not None:
            detail = ", ".join(
                f"{k}={v}" for k, v in record.data.items() if not isinstance(v, dict)
            )
        table.add_row(str(record.n), f"[{_STATE_STYLE[record.state]}]{record.state}[/]", detail)
    return table


def print_session_detail(view: SessionView) -> None:
    """Header, trials, verification attempts, foreign entries and problems."""
    console = _console()
    session = view.session
    console.print(f"[bold]{session.id or '(no manifest)'}[/]  {session.path}")
    console.print(f"status: {view.status}  progress: {view.progress}")
    if session.manifest_error:
        console.print(f"[bold red]manifest:[/] {session.manifest_error}")
    if view.report.state is RecordState.TORN:
        console.print(f"[bold red]report:[/] {view.report.error}")
    console.print(_records_table("trials", view.trials))
    if view.service:
        console.print(_records_table("verification attempts", view.service))
    for collection, names in view.foreign.items():
        console.print(f"[yellow]foreign entries in {collection}/:[/] {', '.join(names)}")

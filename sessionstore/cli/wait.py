"""`sessionstore wait`: block until a trial, an attempt or the report is written."""

from __future__ import annotations

from pathlib import Path

import click

from sessionstore._display import escape
from sessionstore.cli.common import (
    command,
    emit_json,
    json_option,
    library_errors,
    record_number_type,
    target_options,
)
from sessionstore.errors import WaitTimedOut
from sessionstore.store.target import resolve_target

EXIT_TORN = 1
EXIT_TIMED_OUT = 3


class _TimedOut(click.ClickException):
    # click declares exit_code a ClassVar: a subclass per code, as click's own UsageError.
    exit_code = EXIT_TIMED_OUT


@command()
@target_options()
@click.option("--trial", type=record_number_type, help="Wait for trials/N/trial.json.")
@click.option("--attempt", type=record_number_type, help="Wait for service/K/verification.json.")
@click.option("--report", is_flag=True, help="Wait for report.json (the end of the session).")
@click.option(
    "--timeout",
    type=click.FloatRange(min=0),
    default=None,
    metavar="SECONDS",
    help="Give up after SECONDS (exit 3). Default: wait forever.",
)
@json_option
@library_errors
def wait(
    target: str,
    store_dir: Path | None,
    trial: int | None,
    attempt: int | None,
    report: bool,
    timeout: float | None,
    as_json: bool,
) -> None:
    """Wait until a record of session TARGET is completed, and print it.

    The record and its directory need not exist yet. Exit status: 0 the
    record is completed; 1 its marker is torn (not a JSON object) or an
    error; 3 --timeout passed first. There is no default timeout: a job that
    takes an hour to start is not a failure.

    \b
    Examples:
      sessionstore wait 1a2b3c4d --trial 1 --timeout 3600
      sessionstore wait ./workspace --attempt 2 --json
      sessionstore wait 1a2b3c4d --report
    """
    # Imported when the command runs, not when `sessionstore --help` lists it: start-up.
    from sessionstore.store.session import RecordState
    from sessionstore.store.wait import wait_report

    if sum((trial is not None, attempt is not None, report)) != 1:
        raise click.UsageError("give exactly one of --trial N, --attempt K, --report")
    session = resolve_target(target, store_dir)
    if trial is not None:
        what, collection, n = f"trial {trial}", session.trials, trial
    elif attempt is not None:
        what, collection, n = f"attempt {attempt}", session.service, attempt
    else:
        what, collection, n = "report", None, 0
    try:
        record = collection.wait(n, timeout) if collection else wait_report(session, timeout)
    except WaitTimedOut as exc:
        raise _TimedOut(escape(f"{what}: {exc}")) from None
    if as_json:
        emit_json(record.to_dict())
    if record.state is RecordState.TORN:
        # exit_code of ClickException is 1 == EXIT_TORN
        raise click.ClickException(escape(f"{what} is torn: {record.path}/{record.error}"))
    if not as_json:
        click.echo(escape(f"{what} completed: {record.path}"))

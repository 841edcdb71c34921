"""`sessionstore check`: judge a record by the last line of its log (PASS / FAIL:<detail>)."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from sessionstore._display import escape
from sessionstore.cli.common import (
    command,
    errors_exit,
    json_option,
    record_number_type,
    target_options,
    verbosity_options,
)
from sessionstore.cli.plain import emit_json, pacify
from sessionstore.errors import InvalidInput
from sessionstore.store.target import resolve_target

# outcome -> exit status; anything but pass is non-zero, so `check && deploy` is safe.
EXIT_CODES = {"pass": 0, "fail": 1, "indeterminate": 4}


class _Indeterminate(click.ClickException):
    # click declares exit_code a ClassVar: a subclass per code, as click's own UsageError.
    exit_code = EXIT_CODES["indeterminate"]


@command()
@target_options()
@click.option("--trial", type=record_number_type, help="Judge trials/N.")
@click.option("--attempt", type=record_number_type, help="Judge service/K.")
@click.option(
    "--log",
    metavar="FILE",
    help="Log path relative to the record directory (default: the marker's output_contract).",
)
@json_option
@verbosity_options(
    verbose="Also name the log judged and the marker's contract it came from (stderr).",
    quiet="Print nothing (errors aside): the exit status is the verdict.",
)
@errors_exit(_Indeterminate)  # an error that prevents judging (no such session) exits 4
def check(
    target: str,
    store_dir: Path | None,
    trial: int | None,
    attempt: int | None,
    log: str | None,
    as_json: bool,
    quiet: bool,
    verbose: bool,
) -> None:
    """Judge a completed record of session TARGET by its log's last non-empty line.

    `PASS` passes (exit 0); `FAIL` or `FAIL:<detail>` fails (exit 1); anything
    else - an empty or missing log, a record in flight or torn - is
    indeterminate (exit 4). The marker's status fields are never consulted.
    An error that prevents judging (no such session) also exits 4, so exit 1
    always means the log says FAIL.

    \b
    Examples:
      sessionstore check 1a2b3c4d --trial 1 --log run.log
      sessionstore check ./workspace --attempt 2 --json
    """
    # Imported when the command runs, not when `sessionstore --help` lists it: start-up.
    from sessionstore.harness.verdict import judge_session

    if (trial is None) == (attempt is None):
        raise click.UsageError("give exactly one of --trial N, --attempt K")
    session = resolve_target(target, store_dir)
    try:
        judged = judge_session(session, trial=trial, attempt=attempt, log=log)
    except InvalidInput as exc:  # only a malformed --log is left: the options were checked
        raise click.BadParameter(exc.problem, param_hint=f"--log {log!r}") from None
    if verbose:
        where = judged.verdict.log
        source = f"--log {log}" if log is not None else "the marker's output_contract"
        read = f"judged {where} (from {source})" if where else f"no log judged ({source})"
        click.echo(escape(read), err=True)
    try:
        if as_json:
            emit_json(judged.to_dict())
        elif not quiet:
            click.echo(escape(str(judged.verdict)))  # the detail is the log's own text
    except BrokenPipeError:
        # Its reader gone (`| head -0`): click exits 1, which here says the log said FAIL.
        # The verdict went unread, as when stdout cannot be written at all: exit 4, and in
        # silence, as a closed pipe is everywhere.
        pacify()
        sys.exit(EXIT_CODES["indeterminate"])
    sys.exit(EXIT_CODES[str(judged.verdict.outcome)])

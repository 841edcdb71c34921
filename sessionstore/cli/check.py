"""`sessionstore check`: judge a record by the last line of its log (PASS / FAIL:<detail>)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING

import click

from sessionstore._display import escape
from sessionstore.cli.common import (
    default_store,
    emit_json,
    json_option,
    os_error_message,
    record_number_type,
    store_option,
)
from sessionstore.errors import InvalidInput, SessionStoreError

if TYPE_CHECKING:
    from sessionstore.harness.verdict import Verdict
    from sessionstore.store.session import Collection

# outcome -> exit status; anything but pass is non-zero, so `check && deploy` is safe.
EXIT_CODES = {"pass": 0, "fail": 1, "indeterminate": 4}


class _Indeterminate(click.ClickException):
    # click declares exit_code a ClassVar: a subclass per code, as click's own UsageError.
    exit_code = EXIT_CODES["indeterminate"]


@click.command()
@click.argument("target")
@click.option("--trial", type=record_number_type, help="Judge trials/N.")
@click.option("--attempt", type=record_number_type, help="Judge service/K.")
@click.option(
    "--log",
    metavar="FILE",
    help="Log path relative to the record directory (default: the marker's output_contract).",
)
@store_option
@json_option
def check(
    target: str,
    trial: int | None,
    attempt: int | None,
    log: str | None,
    store_dir: Path | None,
    as_json: bool,
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
    if (trial is None) == (attempt is None):
        raise click.UsageError("give exactly one of --trial N, --attempt K")
    try:
        collection, n, verdict = _judge(target, trial, attempt, log, store_dir)
    except InvalidInput as exc:
        raise click.BadParameter(exc.problem, param_hint=f"--log {log!r}") from None
    except SessionStoreError as exc:
        raise _Indeterminate(escape(str(exc))) from None
    except OSError as exc:
        raise _Indeterminate(os_error_message(exc)) from None
    if as_json:
        emit_json({"collection": collection.name, "n": n, **verdict.to_dict()})
    else:
        click.echo(escape(str(verdict)))  # the detail is the log's own text
    sys.exit(EXIT_CODES[str(verdict.outcome)])


def _judge(
    target: str, trial: int | None, attempt: int | None, log: str | None, store_dir: Path | None
) -> tuple[Collection, int, Verdict]:
    from sessionstore.cli.target import resolve
    from sessionstore.harness.verdict import judge
    from sessionstore.store.session import Store

    session = resolve(Store(store_dir or default_store()), target)
    collection, n = (session.trials, trial) if trial is not None else (session.service, attempt)
    assert n is not None
    return collection, n, judge(collection, n, log)

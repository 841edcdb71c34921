"""`sessionstore wait`: block until a trial, an attempt or the report is written."""

from __future__ import annotations

import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from sessionstore._display import escape
from sessionstore.cli.common import (
    a_number,
    command,
    json_option,
    library_errors,
    record_number_type,
    target_options,
    verbosity_options,
)
from sessionstore.cli.plain import emit_json
from sessionstore.errors import SessionNotFound, WaitTimedOut
from sessionstore.store.target import resolve_target, store_root

if TYPE_CHECKING:
    from sessionstore.store.collection import Collection
    from sessionstore.store.lifecycle import Writer
    from sessionstore.store.records import Record
    from sessionstore.store.session import Session
    from sessionstore.store.wait import SessionIdentity

EXIT_TORN = 1
EXIT_TIMED_OUT = 3
# How often a wait looks at its writer: each slice is one wait of the store's (its own
# watcher), so a dead writer is told within this long.
WRITER_CHECK = 2.0


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
    callback=a_number,
    metavar="SECONDS",
    help="Give up after SECONDS (exit 3; inf: never). Default: wait forever.",
)
@json_option
@verbosity_options(verbose="Also say what is waited for, where, and on which writer (stderr).")
@library_errors
def wait(
    target: str,
    store_dir: Path | None,
    trial: int | None,
    attempt: int | None,
    report: bool,
    timeout: float | None,
    as_json: bool,
    quiet: bool,
    verbose: bool,
) -> None:
    """Wait until a record of session TARGET is completed, and print it.

    The record and its directory need not exist yet. A wait stops early when the session's
    recorded writer (the --pid of `new`) is dead and no mirror daemon is copying into it:
    nothing will ever complete the record. It stops with an error when the session is
    removed or replaced by a new one of the same id: nothing will complete the record
    either. Exit status: 0 the record is completed; 1 its marker is torn (not a JSON object)
    or an error (the session is gone); 3 --timeout passed first, or the writer is dead. With
    --json, a completed or torn record prints as `inspect` shows records; a timeout or a
    dead writer prints {"n", "state": "timed_out" or "writer_dead", "path", "timeout",
    "writer", "error"}. There is no default timeout: a job that takes an hour to start is
    not a failure.

    \b
    Examples:
      sessionstore wait 1a2b3c4d --trial 1 --timeout 3600
      sessionstore wait ./workspace --attempt 2 --json
      sessionstore wait 1a2b3c4d --report
    """
    # Imported when the command runs, not when `sessionstore --help` lists it: start-up.
    from sessionstore.store.session import RecordState
    from sessionstore.store.wait import identify

    if sum((trial is not None, attempt is not None, report)) != 1:
        raise click.UsageError("give exactly one of --trial N, --attempt K, --report")
    session = resolve_target(target, store_dir)
    try:
        # Taken before anything else: the whole wait, every slice of it, is on this session.
        identity = identify(session)
        what, collection, n = _waited_for(session, trial, attempt)
        path = collection.path / str(n) if collection else session.path
        if verbose:
            _say_waiting(session, what, path, timeout)
        record = _wait(session, identity, collection, n, timeout)
    except SessionNotFound as exc:
        # Named as the user named it, as when the session is missing at the start.
        raise SessionNotFound(target, store_root(store_dir), hint=exc.hint) from None
    except (WaitTimedOut, _WriterDead) as exc:
        message = f"{what}: {exc}"
        if as_json:
            emit_json(_gave_up(exc, n, path, timeout, message))
        raise _TimedOut(escape(message)) from None
    if as_json:
        emit_json(record.to_dict())
    if record.state is RecordState.TORN:
        # exit_code of ClickException is 1 == EXIT_TORN
        raise click.ClickException(escape(f"{what} is torn: {record.path}/{record.error}"))
    if not as_json and not quiet:
        click.echo(escape(f"{what} completed: {record.path}"))


def _waited_for(
    session: Session, trial: int | None, attempt: int | None
) -> tuple[str, Collection | None, int]:
    """(what it is called, its collection or None for the report, its number or 0)."""
    if trial is not None:
        return f"trial {trial}", session.trials, trial
    if attempt is not None:
        return f"attempt {attempt}", session.service, attempt
    return "report", None, 0


def _say_waiting(session: Session, what: str, path: Path, timeout: float | None) -> None:
    from sessionstore.store.lifecycle import recorded_writer

    limit = "no timeout" if timeout is None else f"timeout {timeout:g} s"
    writer = recorded_writer(session)
    watched = (
        f"stops early if pid {writer.pid} dies" if writer is not None else "no writer recorded"
    )
    click.echo(escape(f"waiting for {what}: {path} ({limit}; {watched})"), err=True)


def _gave_up(
    exc: WaitTimedOut | _WriterDead, n: int, path: Path, timeout: float | None, message: str
) -> dict[str, Any]:
    """What `--json` prints when the wait ends without the record (exit 3)."""
    return {
        "n": n or None,
        "state": "timed_out" if isinstance(exc, WaitTimedOut) else "writer_dead",
        "path": str(path),
        "timeout": timeout,
        "writer": exc.writer.to_dict() if isinstance(exc, _WriterDead) else None,
        "error": message,
    }


class _WriterDead(Exception):
    def __init__(self, writer: Writer) -> None:
        self.writer = writer
        super().__init__(
            f"the session's writer (pid {writer.pid}) is dead and no mirror daemon writes into "
            "it: nothing will complete it"
        )


def _wait(
    session: Session,
    identity: SessionIdentity | None,
    collection: Collection | None,
    n: int,
    timeout: float | None,
) -> Record:
    """The record once completed or torn; `WaitTimedOut` past `timeout`, `_WriterDead` as
    soon as the writer is seen dead with the record still in flight (read once more then:
    a writer that completed it and exited is no dead writer); `SessionNotFound` once the
    session is gone or replaced."""
    from sessionstore.store.lifecycle import mirror_daemon, recorded_writer
    from sessionstore.store.records import RecordState
    from sessionstore.store.wait import wait_report

    def once(seconds: float) -> Record:
        if collection is None:
            return wait_report(session, seconds, identity=identity)
        return collection.wait(n, seconds, identity=identity)

    deadline = None if timeout is None else time.monotonic() + timeout
    while True:
        writer = recorded_writer(session)
        dead = writer is not None and writer.alive is False and mirror_daemon(session) is None
        left = WRITER_CHECK if deadline is None else max(deadline - time.monotonic(), 0.0)
        seconds = 0.0 if dead else min(left, WRITER_CHECK)
        end = time.monotonic() + seconds
        try:
            record = once(seconds)
        except WaitTimedOut as exc:
            if dead:
                assert writer is not None
                raise _WriterDead(writer) from None
            if deadline is not None and time.monotonic() >= deadline:
                assert timeout is not None
                raise WaitTimedOut(exc.path, timeout) from None
            continue
        # A slice returns a torn marker at its own deadline, settled or not; a marker
        # written in place may still become whole, so only the wait's deadline is final
        # for it. The next slice (longer than SETTLE) returns it once it has settled.
        last = dead or (deadline is not None and seconds >= left)
        if record.state is RecordState.TORN and not last and time.monotonic() >= end:
            continue
        return record

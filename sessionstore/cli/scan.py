"""`sessionstore scan`: audit a store, a session or any directory for leaked secrets.

Renders `sessionstore.redact.scan_tree.scan_path`: one line per finding on
stdout (`path:offset kind source`), skipped entries, errors and the counts
on stderr; `--json` streams the events as one JSON array instead. No value
is ever printed: a finding names its source, and every path is shown
redacted.
"""

from __future__ import annotations

import contextlib
import sys
from pathlib import Path
from typing import TYPE_CHECKING

import click

from sessionstore._display import escape
from sessionstore.cli.common import (
    CONTEXT_SETTINGS,
    PathParam,
    complete_target,
    counted,
    library_errors,
    objective_of,
    objective_options,
    store_option,
    verbosity_options,
)
from sessionstore.cli.listing import Listing, listing_options
from sessionstore.cli.plain import secrets_file_input
from sessionstore.cli.scan_sessions import chosen_sessions, scans_sessions, session_events
from sessionstore.cli.secret_command import HidesSecrets
from sessionstore.errors import InvalidInput, SessionNotFound
from sessionstore.store.target import resolve_destination, resolve_target, store_root

EVENT_COLUMNS = ("type", "path", "offset", "in", "kind", "source", "reason", "error")

if TYPE_CHECKING:
    from collections.abc import Iterator

    from sessionstore.inspect.best import Objective
    from sessionstore.redact.scan import Scanner
    from sessionstore.redact.scan_tree import Event, ScanTotals


@click.command(cls=HidesSecrets, context_settings=CONTEXT_SETTINGS)
@click.argument("target", metavar="PATH|TARGET", shell_complete=complete_target)
@click.option(
    "--secret-env", multiple=True, metavar="VAR", help="Look for the value of $VAR (repeatable)."
)
@click.option(
    "--secrets-file",
    type=PathParam(dir_okay=False),
    metavar="F",
    help="Look for every secret of F (its lines, or KEY=VALUE values; `-`: standard input).",
)
@click.option("--patterns", is_flag=True, help="Look for well-known token shapes too.")
@store_option
@listing_options(
    statuses=("running", "interrupted", "done", "failed", "unknown"),
    status_help="A store: scan only its sessions of this status (repeatable).",
    sorts=("created", "name", "best"),
    labels=True,
    json_help="Print one JSON array of the events, each as it is found.",
    sort_help="A store: scan its sessions only, in this order",
    sort_default=False,
    limit_help="Stop after N findings.",
)
@objective_options
@verbosity_options(
    verbose="Also say what is looked for, and each session scanned (stderr).",
    quiet="Print the findings only: no skipped entries, errors or counts on stderr.",
)
@library_errors
def scan(
    target: str,
    secret_env: tuple[str, ...],
    secrets_file: Path | None,
    patterns: bool,
    store_dir: Path | None,
    listing: Listing,
    objective: str | None,
    higher: bool,
    quiet: bool,
    verbose: bool,
) -> None:
    """Look for leaked secrets in a store, a session, any directory or a file.

    PATH is a directory or a file; TARGET a session id of the store (see
    --store), or a unique prefix of one. Every spelling the mirror's
    redactor removes is looked for (raw, hex, base64, base64url, URL, JSON
    and XML escapes, each line of a multi-line secret) in file contents,
    names and symlink targets; --patterns adds well-known token shapes
    (AWS, GitHub, Hugging Face, Slack, private keys). Symlinks, FIFOs,
    sockets and devices are never followed or opened: they are reported
    skipped.

    Each finding is one line, `path:offset kind source`: the byte offset
    (`name`: in the entry's name, `path`: spelled by the names above it and
    its own across a `/`, `link-target`: in a symlink's target), the
    spelling found, and where the secret came from (the variable's name,
    FILE:LINE of the secrets file, or `patterns`), never its value. Every
    path shown has its secrets redacted, the part given as PATH too. With
    --json, one JSON array of objects: findings (type "finding": path,
    offset, in, kind, source), skipped entries (type "skipped": path,
    reason) and errors (type "error": path, error); --nl prints them one a
    line, --csv as rows. --limit N stops after N findings.

    A store (a directory of sessions, s3://BUCKET/PREFIX) is scanned whole;
    --status, --label and --sort scan only its sessions chosen so, in that
    order (default: newest first). For anything else they are a usage error.

    Exit status: 0 when nothing was found, 1 on any finding or error
    (unreadable files, an unset variable, nothing to look for), 2 for bad
    usage.

    \b
    Examples:
      sessionstore scan ~/.sessionstore --secret-env HF_TOKEN
      sessionstore scan 1a2b3c4d --secrets-file .env --patterns
      sessionstore scan ./workspace --patterns --json
      sessionstore scan ~/.sessionstore --patterns --status done --label team=ml
    """
    # Imported when the command runs: the redactor and its automaton are not start-up.
    from sessionstore.redact.scan_tree import ScanTotals

    if listing.limit == 0:
        raise click.UsageError("--limit must be at least 1: a scan of nothing is no audit")
    scanner = _scanner(secret_env, secrets_file, patterns, verbose)
    totals, goal = ScanTotals(), objective_of(objective, higher)
    with _errors_redacted(scanner):  # they may name TARGET as typed (a bucket, a key)
        events = _events(target, store_dir, listing, goal, scanner, totals, verbose)
        _render(_limited(events, listing.limit), listing, quiet)
    _summary(totals, listing.limit, quiet)


@contextlib.contextmanager
def _errors_redacted(scanner: Scanner) -> Iterator[None]:
    """Raise what the body raises with the scanner's secrets redacted from its message."""
    try:
        yield
    except Exception as exc:
        from sessionstore.cli.mirror_secrets import redact_error

        redact_error(exc, scanner.redactor)
        raise


def _scanner(
    secret_env: tuple[str, ...], secrets_file: Path | None, patterns: bool, verbose: bool
) -> Scanner:
    """The scanner for the secrets given (`verbose`: said on stderr); nothing given is bad
    input, as an unset variable is (one line, exit 1): an audit that looks for nothing must
    never pass as clean."""
    from sessionstore.redact.scan import Scanner

    if not (secret_env or secrets_file or patterns):
        raise InvalidInput(
            "scan", "nothing to look for: give --secret-env, --secrets-file or --patterns"
        )
    named = secrets_file_input((secrets_file,) if secrets_file is not None else ())
    name, data = named[0] if named else (None, None)
    scanner = Scanner.from_sources(secret_env, name, patterns=patterns, secrets_data=data)
    if verbose:
        sought = [escape(source) for source in scanner.sources]
        if scanner.patterns:
            sought.append("well-known token shapes (--patterns)")
        sys.stderr.write(f"scan: looking for {', '.join(sought)}\n")
    return scanner


def _remote_events(
    target: str, store_dir: Path | None, scanner: Scanner, totals: ScanTotals
) -> Iterator[Event] | None:
    """The scan of an `s3://` TARGET (every object below it), or of a session TARGET of an
    `s3://` store; None for a local one."""
    from sessionstore.storage.s3_path import S3Path, s3_root

    url = s3_root(target)
    if url is None and not isinstance(store_root(store_dir), S3Path):
        return None
    from sessionstore.redact.scan_remote import scan_objects
    from sessionstore.storage.s3_open import open_store, storage_at

    if url is not None:
        return scan_objects(open_store(url), "", str(url), scanner, totals)
    session = resolve_target(target, store_dir)
    assert isinstance(session.path, S3Path)
    storage, key = storage_at(session.path, 1)
    return scan_objects(storage, key, str(session.path), scanner, totals)


def _events(
    target: str,
    store_dir: Path | None,
    listing: Listing,
    goal: Objective,
    scanner: Scanner,
    totals: ScanTotals,
    verbose: bool,
) -> Iterator[Event]:
    """What the scan of TARGET finds: the sessions `listing` chooses, or the whole tree."""
    if scans_sessions(listing):
        views = chosen_sessions(target, store_dir, listing, goal, scanner)
        return session_events(views, scanner, totals, verbose)
    remote = _remote_events(target, store_dir, scanner, totals)
    return remote if remote is not None else _local_events(target, store_dir, scanner, totals)


def _local_events(
    target: str, store_dir: Path | None, scanner: Scanner, totals: ScanTotals
) -> Iterator[Event]:
    from sessionstore.redact.scan_tree import scan_path

    root, follow = _root(target, store_dir, scanner)
    return scan_path(root, scanner, follow=follow, totals=totals)


def _root(target: str, store_dir: Path | None, scanner: Scanner) -> tuple[str, bool]:
    """What TARGET names, as it is shown (redacted, as every path), and whether a symlink
    there is followed (a path the user gave; a session of the store is its directory, not
    followed)."""
    try:
        path = resolve_destination(target, store_dir)
    except SessionNotFound:
        where = store_root(store_dir)
        raise InvalidInput(
            scanner.display_name(target),
            f"no such file or directory, nor a session of the store "
            f"{scanner.display_name(str(where))}",
        ) from None
    if path == Path(target):
        return target, True
    return str(path), False


def _render(events: Iterator[Event], listing: Listing, quiet: bool) -> None:
    """The events as data (`listing`'s format) or as lines, as they come; a reader that
    closes the pipe early stops the scan (exit 1: it was not finished)."""
    try:
        if listing.fmt is not None:
            listing.emit((event.to_dict() for event in events), EVENT_COLUMNS)
        else:
            _render_lines(events, quiet)
    except BrokenPipeError:
        sys.stderr.write("scan: output closed early; scan stopped\n")
        sys.exit(1)


def _render_lines(events: Iterator[Event], quiet: bool) -> None:
    """Findings on stdout, one line each; skipped entries and errors on stderr (not `quiet`)."""
    from sessionstore.redact.scan_tree import Finding, Skipped

    for event in events:
        if isinstance(event, Finding):
            at = event.offset if event.where == "content" else event.where.replace(" ", "-")
            line = f"{escape(event.path)}:{at} {event.kind} {escape(event.source)}\n"
            sys.stdout.write(line)
            sys.stdout.flush()  # each finding as it is found, to a pipe too
        elif quiet:
            continue
        elif isinstance(event, Skipped):
            sys.stderr.write(f"scan: skipped {escape(event.path)} ({event.reason})\n")
        else:
            sys.stderr.write(f"scan: {escape(event.path)}: {escape(event.error)}\n")
    sys.stdout.flush()


def _limited(events: Iterator[Event], limit: int | None) -> Iterator[Event]:
    """`events` up to and including the `limit`th finding (all of them without one)."""
    from sessionstore.redact.scan_tree import Finding

    found = 0
    for event in events:
        yield event
        found += isinstance(event, Finding)
        if found == limit:
            return


def _summary(totals: ScanTotals, limit: int | None, quiet: bool) -> None:
    """The counts on stderr (unless `quiet`); exit 1 on any finding or error."""
    counts = f"{counted(totals.findings, 'finding')} in {counted(totals.files, 'file')}"
    if limit is not None and totals.findings >= limit:
        counts += f", stopped at --limit {limit}"
    extra = [f"{totals.skipped} skipped"]
    extra += [counted(totals.errors, "error")] if totals.errors else []
    if not quiet:
        sys.stderr.write(f"scan: {counts} ({', '.join(extra)})\n")
    if totals.findings or totals.errors:
        sys.exit(1)

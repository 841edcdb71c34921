"""`sessionstore doctor`: check a session against the format; sweep provably garbage temps.

Renders `sessionstore.store.doctor.doctor`: one line per problem on
stdout, the verdict on stderr.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING

import click

from sessionstore._display import escape
from sessionstore.cli.common import (
    command,
    counted,
    library_errors,
    target_options,
    verbosity_options,
)
from sessionstore.store.target import resolve_target

if TYPE_CHECKING:
    from sessionstore.store.doctor import Checkup

# Each check `doctor` makes, by the kinds of problem it reports (store.doctor.Problem);
# the last two walk the directory tree, which an object store does not have.
CHECKS = (
    (
        "session.json: present, parses, fields of the right types, status the report's",
        ("manifest",),
    ),
    ("constraints.json: present and parses", ("constraints",)),
    ("report.json: not torn", ("report",)),
    ("trials/ and service/: directories", ("collection",)),
    ("markers: none torn", ("torn",)),
    ("trials/ and service/: no foreign entries", ("foreign",)),
    (
        "previous/: each pinned session's copy readable (as inspect reads it), there if due",
        ("lineage",),
    ),
    ("temp files (.sstmp-*): none of dead writers", ("temp",)),
    ("modes and readability of every entry", ("mode", "unreadable")),
)


@command()
@target_options()
@click.option(
    "--repair",
    is_flag=True,
    help="Remove leftover temp files whose writer is provably dead (nothing else).",
)
@verbosity_options(
    verbose="Also say each check made and what it found, on stderr.",
    quiet="Leave out the closing verdict line (stderr): the exit status tells.",
)
@library_errors
def doctor(target: str, store_dir: Path | None, repair: bool, quiet: bool, verbose: bool) -> None:
    """Check session TARGET: one line per problem, `path: kind: detail`.

    Looked for: a manifest that is missing, does not parse, has fields of
    the wrong type, or a status other than report.json's (a finish cut
    short: finishing again mends it); a missing or torn constraints.json; a torn report.json;
    missing or symlinked collections; torn markers; foreign entries in trials/ and
    service/; a lineage copy in previous/ that inspect shows a problem for (a
    symlink or not a directory), or that is missing while the pinned session,
    still in the store, has records to copy; a pinned id that is no id; leftover temp
    files (.sstmp-*); modes other than the format's (0700 directories, 0644
    store files). Temps of live writers are writes in progress, not problems.

    --repair removes only what is provably garbage: temp files whose writer
    is dead (no process has the pid in the temp's name, or the process that
    has it started after the temp was last changed), and temps that name no
    writer once unchanged for an hour while no writer of the session is
    alive. A temp right in previous/ while a pinned id has no copy there is
    kept: it may be that copy, moved aside by a replace cut short. Nothing
    else is ever removed, and nothing is followed.

    -q leaves out the closing verdict line (stderr); -v says, before it,
    each check made and how many problems it found.

    Exit status: 0 when the session is healthy (or every problem found was
    repaired), 1 when a problem remains or TARGET cannot be read, 2 for bad
    usage.

    \b
    Examples:
      sessionstore doctor 1a2b3c4d
      sessionstore doctor 1a2b3c4d --repair
      sessionstore doctor ~/.sessionstore/1a2b3c4d
    """
    # Imported when the command runs, not when `sessionstore --help` lists it: start-up.
    from sessionstore.storage.s3_path import S3Path
    from sessionstore.store.doctor import doctor as check

    session = resolve_target(target, store_dir)
    checkup = check(session, repair=repair)
    for problem in checkup.problems:
        click.echo(escape(str(problem)))
    if verbose:
        _checks(checkup, local=not isinstance(session.path, S3Path))
    left = sum(1 for p in checkup.problems if not p.repaired)
    repaired = len(checkup.problems) - left
    if not checkup.problems:
        verdict = "healthy"
    else:
        verdict = counted(left, "problem")
        if repaired:
            verdict += f" left, {repaired} repaired"
    writes = len(checkup.in_progress)
    busy = f" ({counted(writes, 'write')} in progress)" if writes else ""
    if not quiet:
        click.echo(escape(f"doctor: {session.path}: {verdict}{busy}"), err=True)
    if not checkup.healthy:
        sys.exit(1)


def _checks(checkup: Checkup, *, local: bool) -> None:
    """One line per check made (stderr): what it looks at and how many problems it found."""
    for n, (what, kinds) in enumerate(CHECKS):
        if n >= len(CHECKS) - 2 and not local:
            result = "not made (an object store has no temp files or modes)"
        else:
            found = sum(1 for p in checkup.problems if p.kind in kinds)
            result = "ok" if not found else counted(found, "problem")
            if kinds == ("temp",) and checkup.in_progress:
                result += f" ({counted(len(checkup.in_progress), 'write')} in progress, kept)"
        click.echo(f"doctor: checked {what}: {result}", err=True)

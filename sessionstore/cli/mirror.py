"""`sessionstore mirror`: one atomic, redacted pass from a workspace to a session directory.

The command as click declares it; what it does is `cli.mirror_run.run`, which
`cli.early_mirror` also calls for the plainest `--once` spellings before click
is imported (start-up is part of every no-op pass a harness runs, issue 16):
an option added here must be added to `cli.early_mirror` or declined there
(a test compares the two parsers on generated command lines).
"""

from __future__ import annotations

from typing import Any

import click

from sessionstore.cli.common import (
    CONTEXT_SETTINGS,
    PathParam,
    a_number,
    json_option,
    library_errors,
    not_empty,
    store_option,
)
from sessionstore.cli.mirror_run import DEBOUNCE, FULL_EVERY, MAX_WAIT, run
from sessionstore.cli.secret_command import HidesSecrets


@click.command(cls=HidesSecrets, context_settings=CONTEXT_SETTINGS)
@click.argument("src", type=PathParam())
@click.argument("dst", callback=not_empty)
@click.option("--once", is_flag=True, help="Run one pass and exit (default: run as a daemon).")
@click.option(
    "--secret",
    "secret_values",
    multiple=True,
    metavar="VALUE",
    help="Redact VALUE (visible in `ps`: prefer --secret-env or --secrets-file).",
)
@click.option("--secret-env", multiple=True, metavar="NAME", help="Redact the value of $NAME.")
@click.option(
    "--secrets-file",
    multiple=True,
    type=PathParam(dir_okay=False),
    help="Redact every line (or KEY=VALUE value) of FILE (`-`: standard input).",
)
@click.option(
    "--allow-short-secrets",
    is_flag=True,
    help="Accept secrets under 8 bytes (redacted only where a file is exactly the secret).",
)
@click.option("--no-fsync", is_flag=True, help="Skip fsync: faster, not crash-proof.")
@click.option("--delete", is_flag=True, help="Remove files this mirror wrote whose source is gone.")
@click.option(
    "--exclude",
    "exclude",
    multiple=True,
    metavar="PATTERN",
    help="Never read, copy or delete source paths matching PATTERN (gitignore syntax).",
)
@click.option(
    "--exclude-from",
    multiple=True,
    metavar="FILE",
    help="Exclude the gitignore patterns of FILE (- for stdin), before the --exclude ones.",
)
@click.option(
    "-n",
    "--dry-run",
    is_flag=True,
    help="One pass that writes nothing: itemize what would be copied, deleted, held back.",
)
@click.option(
    "--full-every",
    type=click.FloatRange(min=0.05),
    default=FULL_EVERY,
    callback=a_number,
    show_default=True,
    metavar="SECONDS",
    help="Daemon: full re-list this often, whatever the events say.",
)
@click.option(
    "--debounce",
    type=click.FloatRange(min=0),
    default=DEBOUNCE,
    callback=a_number,
    show_default=True,
    metavar="SECONDS",
    help="Daemon: quiet time before a pass over changed directories.",
)
@click.option(
    "--max-wait",
    type=click.FloatRange(min=0),
    default=MAX_WAIT,
    callback=a_number,
    show_default=True,
    metavar="SECONDS",
    help="Daemon: longest wait after a change, however busy the source.",
)
@click.option("-q", "--quiet", is_flag=True, help="Print nothing but errors.")
@click.option("-v", "--verbose", is_flag=True, help="Itemize every change of a pass on stdout.")
@store_option
@json_option
@library_errors
def mirror(**params: Any) -> None:
    """Mirror SRC into DST: changed files copied whole, redacted, atomically.

    DST: a session id in the store (--store), a directory or
    s3://BUCKET/PREFIX/ID. A file changing while read is never committed
    (reported unstable, retried); markers are committed last, and a record
    whose marker is in DST is sealed (a later change in SRC is reported as
    diverged). The store's files in a session are never mirrored. --delete
    removes only files this mirror wrote. --exclude/--exclude-from: gitignore
    patterns over paths from SRC's top; an excluded path is never read, copied
    or deleted. --once: one pass; else a daemon (one per DST) watching SRC,
    fully re-listing it every --full-every seconds, with a final pass on
    SIGINT, SIGTERM or SIGHUP. --dry-run: one pass writing nothing. -v and -n print a
    line per change or problem on stdout: A new, M replaced, D deleted, U
    unstable, H held back, S skipped, X diverged, E error.

    Exit status: 0 when the (final) pass ran, 1 when a file failed, SRC is
    not a directory (--once: or missing) or DST is locked, 2 for bad usage.

    \b
    Examples:
      sessionstore mirror ./workspace 1a2b3c4d --once
      sessionstore mirror ./ws ./out --once --secret-env HF_TOKEN --json
      sessionstore mirror ./ws ./out -n --exclude '*.tmp' --exclude .venv/
      sessionstore mirror ./workspace ~/.sessionstore/1a2b3c4d --secret-env HF_TOKEN
    """
    run(**params)  # typed there, by name: cli.mirror_run.run

"""`sessionstore mirror`: one atomic, redacted pass from a workspace to a session directory.

Kept import-light on purpose: the no-op pass is benchmarked against `rsync -a`
including interpreter start-up, so this module pulls in neither rich nor
pydantic (nor the store engine: `store.target` resolves DST from names
only), and the redactor only when a secret is given. Every name printed for people goes through
`sessionstore._display.escape`: one problem, one line.
"""

from __future__ import annotations

import contextlib
import gc
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from sessionstore._display import escape
from sessionstore.cli.common import (
    command,
    emit_json,
    json_option,
    library_errors,
    secrets_file_input,
    store_option,
)
from sessionstore.cli.mirror_output import NORMAL, QUIET, VERBOSE, print_summary
from sessionstore.errors import InvalidInput, SessionNotFound
from sessionstore.store.target import STORE_ENV, resolve_destination

if TYPE_CHECKING:
    import threading

    from sessionstore.mirror.mirror import Mirror, PassReport
    from sessionstore.redact.redactor import Redactor
    from sessionstore.storage.s3_tree_io import S3Dest


@command()
@click.argument("src", type=click.Path(path_type=Path))
@click.argument("dst")
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
    type=click.Path(dir_okay=False, path_type=Path),
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
    default=30.0,
    show_default=True,
    metavar="SECONDS",
    help="Daemon: full re-list this often, whatever the events say.",
)
@click.option(
    "--debounce",
    type=click.FloatRange(min=0),
    default=0.02,
    show_default=True,
    metavar="SECONDS",
    help="Daemon: quiet time before a pass over changed directories.",
)
@click.option(
    "--max-wait",
    type=click.FloatRange(min=0),
    default=0.25,
    show_default=True,
    metavar="SECONDS",
    help="Daemon: longest wait after a change, however busy the source.",
)
@click.option("-q", "--quiet", is_flag=True, help="Print nothing but errors.")
@click.option("-v", "--verbose", is_flag=True, help="Itemize every change of a pass on stdout.")
@store_option
@json_option
@library_errors
def mirror(
    src: Path,
    dst: str,
    once: bool,
    secret_values: tuple[str, ...],
    secret_env: tuple[str, ...],
    secrets_file: tuple[Path, ...],
    allow_short_secrets: bool,
    no_fsync: bool,
    delete: bool,
    exclude: tuple[str, ...],
    exclude_from: tuple[str, ...],
    dry_run: bool,
    full_every: float,
    debounce: float,
    max_wait: float,
    quiet: bool,
    verbose: bool,
    store_dir: Path | None,
    as_json: bool,
) -> None:
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
    SIGINT or SIGTERM. --dry-run: one pass writing nothing. -v and -n print a
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
    from sessionstore.mirror.mirror import Mirror, check_source  # import-light: see above

    level, once = _level(quiet, verbose), once or dry_run  # -n: one pass (nothing to watch)
    patterns = _patterns(exclude, exclude_from)
    redactor = _redactor(secret_values, secret_env, secrets_file, allow_short_secrets)
    dest = _destination(dst, store_dir, dry_run)
    check_source(src, missing_ok=not once)  # the daemon waits for a source to appear
    the_mirror = Mirror(src, dest, redactor, durable=not no_fsync, delete=delete, exclude=patterns)
    if once:
        report = _run_once(the_mirror, level, as_json, dry_run)
    else:
        report = _run_daemon(the_mirror, (debounce, max_wait, full_every), level, as_json)
    if not report.ok:
        sys.exit(1)


def _level(quiet: bool, verbose: bool) -> int:
    if quiet and verbose:
        raise click.UsageError("-q/--quiet and -v/--verbose cannot be combined")
    return QUIET if quiet else VERBOSE if verbose else NORMAL


def _patterns(exclude: tuple[str, ...], exclude_from: tuple[str, ...]) -> list[str]:
    """The --exclude-from files' patterns, then the --exclude ones (so those win)."""
    if not (exclude or exclude_from):
        return []
    from sessionstore.mirror.exclude import check_pattern, read_exclude_file  # with patterns

    patterns = [line for path in exclude_from for line in read_exclude_file(path)]
    for pattern in exclude:
        try:
            check_pattern(pattern, "--exclude")
        except InvalidInput as exc:
            raise click.BadParameter(escape(exc.problem), param_hint="'--exclude'") from None
    return patterns + list(exclude)


def _run_once(the_mirror: Mirror, level: int, as_json: bool, dry_run: bool) -> PassReport:
    """One pass: its summary on stderr (items on stdout with -v or -n), or JSON on stdout."""
    # One pass, then the process exits: its objects (a cache entry and a few stats
    # per file) hold no cycles worth collecting, and the collector's scans of them
    # cost ~15% of a 10,000-file no-op pass (benchmarks/bench_mirror.py).
    gc.disable()
    report = the_mirror.run_once(dry_run=dry_run)
    summary = report.to_dict()
    itemized = not as_json and level != QUIET and (dry_run or level == VERBOSE)
    print_summary(summary, level, itemized)
    if as_json:
        emit_json(summary)
    return report


def _destination(dst: str, store_dir: Path | None, dry_run: bool) -> Path | S3Dest:
    """DST as `store.target.resolve_destination` reads it; a likely mistyped id is bad usage.

    `s3://BUCKET/PREFIX/ID`, or an id of an `s3://` store, is a bucket destination
    (a dry run's is opened without the probe, which writes).
    """
    # str, not fspath: an s3:// store is an S3Path, which is no local path.
    store = str(store_dir) if store_dir is not None else os.environ.get(STORE_ENV, "")
    if dst[:3].lower() == "s3:" or store[:3].lower() == "s3:":  # before importing obstore
        from sessionstore.mirror.remote import remote_store, resolve_remote  # s3 only

        remote = resolve_remote(dst, remote_store(store), probe=not dry_run)
        if remote is not None:
            return remote
        if not Path(dst).is_dir():  # an s3:// store holds no local session to fall back on
            raise click.BadParameter(
                escape(f"{dst}: no session of that id in {store}, nor a directory"),
                param_hint="DST",
            )
        return Path(dst)
    try:
        return resolve_destination(dst, store_dir)
    except SessionNotFound as exc:
        raise click.BadParameter(str(exc), param_hint="DST") from None


def _run_daemon(
    the_mirror: Mirror, timing: tuple[float, float, float], level: int, as_json: bool
) -> PassReport:
    """Run the daemon in this thread until SIGINT or SIGTERM; returns the final pass.

    `timing`: --debounce, --max-wait and --full-every.
    """
    # A daemon only: `--once` imports none of this (see the module docstring).
    import threading

    from sessionstore.cli.mirror_output import Progress
    from sessionstore.mirror.daemon import Daemon, WatchConfig

    debounce, max_wait, full_every = timing
    config = WatchConfig(debounce=debounce, max_wait=max_wait, full_every=full_every)
    stop = threading.Event()
    progress = Progress(level, as_json)
    daemon = Daemon(the_mirror, config, progress)

    stop_on_signals(stop, daemon.wake)
    threading.excepthook = _thread_error_line  # this process is ours: one line, not a traceback
    return daemon.run(stop)


def stop_on_signals(*events: threading.Event) -> None:
    """Set every event on SIGINT or SIGTERM, from a thread: the handler itself takes no lock.

    A Python signal handler runs in the main thread between any two bytecodes,
    also while that thread holds an event's internal lock (inside `wait` or
    `clear`); a handler that called `set` then waited for its own lock forever,
    and a Ctrl-C hung the daemon (seen in CI, about once in a few hundred
    stops). So the handler only writes a byte to a pipe, and a relay thread
    that reads it sets the events.
    """
    import signal
    import threading

    wake_r, wake_w = os.pipe()
    os.set_blocking(wake_w, False)

    def relay() -> None:
        os.read(wake_r, 1)
        for event in events:
            event.set()

    def on_signal(signum: int, frame: object) -> None:
        with contextlib.suppress(BlockingIOError):  # a byte is already waiting
            os.write(wake_w, b"\0")

    threading.Thread(target=relay, name="sessionstore-signal-relay", daemon=True).start()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, on_signal)


def _thread_error_line(args: Any) -> None:
    """A watcher thread that dies (the daemon notices and restarts it) says so in one line."""
    exc = args.exc_value
    sys.stderr.write(
        f"mirror: a watcher thread stopped: {escape(f'{type(exc).__name__}: {exc}')}\n"
    )


def _redactor(
    values: tuple[str, ...], envs: tuple[str, ...], files: tuple[Path, ...], allow_short: bool
) -> Redactor | None:
    """A Redactor holding every secret given, or None (then redact is never imported)."""
    if not (values or envs or files):
        return None
    from sessionstore.redact.redactor import Redactor  # only when a secret is given

    redactor = Redactor()
    for value in values:
        redactor.add(value, allow_short=allow_short)
    for name in envs:
        redactor.add_env(name, allow_short=allow_short)
    for name, data in secrets_file_input(files):
        redactor.add_file(name, allow_short=allow_short, data=data)
    return redactor

"""What `sessionstore mirror` does once its arguments are read, without click.

`cli.mirror` declares the command for click and calls `run`; `cli.early_mirror`
calls the same `run` for the plainest `--once` spellings before click is
imported (start-up is part of every no-op pass a harness runs, issue 16). A
bad argument found here is a `cli.plain.Usage`, always raised before anything
is written; the early path takes no spelling that reads standard input, so it
can hand the whole command line back to click, which says it as it says every
usage error.

Kept import-light on purpose: neither rich nor pydantic nor the store engine
(`store.target` resolves DST from names only), and the redactor only when a
secret is given. Every name printed for people goes through
`sessionstore._display.escape`: one problem, one line.
"""

from __future__ import annotations

import contextlib
import gc
import os
import sys
from pathlib import Path

from sessionstore._display import escape
from sessionstore.cli.mirror_output import NORMAL, QUIET, VERBOSE, print_summary
from sessionstore.cli.mirror_secrets import redact_error
from sessionstore.cli.plain import Usage, emit_json, secrets_file_input
from sessionstore.errors import InvalidInput, SessionNotFound
from sessionstore.format.names import is_id
from sessionstore.store.target import STORE_ENV, mistyped_id, resolve_destination, store_root

TYPE_CHECKING = False  # typing's, without importing typing (mypy reads it as such)
if TYPE_CHECKING:
    import threading
    from collections.abc import Iterator
    from typing import Any

    from sessionstore.mirror.exclude import Exclude
    from sessionstore.mirror.mirror import Mirror, PassReport
    from sessionstore.redact.redactor import Redactor
    from sessionstore.storage.s3_tree_io import S3Dest

# The daemon's timings when not given (click shows them in --help as these defaults).
FULL_EVERY, DEBOUNCE, MAX_WAIT = 30.0, 0.02, 0.25


def run(
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
    """Mirror `src` into `dst` as `sessionstore mirror` was asked to (the parameters are
    the command's, by name); exits 1 when the (final) pass did not run clean.

    Raises `Usage` for a bad argument, library errors as they come.
    """
    from sessionstore.mirror.mirror import Mirror, check_source  # import-light: see above

    level, once = _level(quiet, verbose), once or dry_run  # -n: one pass (nothing to watch)
    redactor = _redactor(secret_values, secret_env, secrets_file, allow_short_secrets)
    try:  # every error from here on may name a path the user typed: redacted below
        patterns = _patterns(exclude, exclude_from)
        dest = _destination(dst, store_dir, dry_run)
        check_source(src, missing_ok=not once)  # the daemon waits for a source to appear
        the_mirror = Mirror(
            src, dest, redactor, durable=not no_fsync, delete=delete, exclude=patterns
        )
        if once:
            report = _run_once(the_mirror, level, as_json, dry_run)
        else:
            report = _run_daemon(the_mirror, (debounce, max_wait, full_every), level, as_json)
    except Exception as exc:
        if redactor is not None:
            redact_error(exc, redactor)
        raise
    if not report.ok:
        sys.exit(1)


def _level(quiet: bool, verbose: bool) -> int:
    if quiet and verbose:
        raise Usage("-q/--quiet and -v/--verbose cannot be combined")
    return QUIET if quiet else VERBOSE if verbose else NORMAL


def _patterns(exclude: tuple[str, ...], exclude_from: tuple[str, ...]) -> Exclude | tuple[()]:
    """The --exclude-from files' patterns, then the --exclude ones (so those win), compiled.

    Compiled here, not by `Mirror`, so that an error names the file and line (or the option).
    """
    if not (exclude or exclude_from):
        return ()
    from sessionstore.mirror.exclude import Exclude, read_named_patterns  # with patterns

    named = [pair for path in exclude_from for pair in read_named_patterns(path)]
    named += [("--exclude", pattern) for pattern in exclude]
    try:
        return Exclude([pattern for _, pattern in named], [origin for origin, _ in named])
    except InvalidInput as exc:
        if exc.source != "--exclude":
            raise
        raise Usage(escape(exc.problem), "'--exclude'") from None


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
        if Path(dst).is_dir():
            return Path(dst)
        if dst[:3].lower() == "s3:":  # a mistyped URL: never a local directory named `s3:`
            raise Usage(escape(f"{dst}: not an s3://BUCKET/PREFIX/ID URL, nor a directory"), "DST")
        if is_id(dst):  # a mistyped id, as for a local store (`resolve_destination`)
            raise Usage(escape(str(mistyped_id(dst, store_root(store)))), "DST")
        return Path(dst)  # a path, as for a local store
    try:
        return resolve_destination(dst, store_dir)
    except SessionNotFound as exc:
        raise Usage(str(exc), "DST") from None


def _run_daemon(
    the_mirror: Mirror, timing: tuple[float, float, float], level: int, as_json: bool
) -> PassReport:
    """Run the daemon in this thread until SIGINT, SIGTERM or SIGHUP; returns the final pass.

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
    one_line_diagnostics()
    if level == QUIET:
        # Errors only: a watcher thread's death is none (the daemon restarts the watcher).
        threading.excepthook = _thread_stopped_quietly
    with _stamped_log(Daemon.__module__, level):
        return daemon.run(stop)


@contextlib.contextmanager
def _stamped_log(name: str, level: int) -> Iterator[None]:
    """The daemon's own lines (logger `name`: `cannot watch the source (...); polling
    only`, `watching the source again`) on stderr, stamped as its pass lines are.

    Logging's last-resort handler printed them bare, among stamped lines. With
    QUIET none: they are no errors.
    """
    import logging

    logger = logging.getLogger(name)
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("%(asctime)s %(message)s", "%H:%M:%S"))
    was = logger.level
    logger.setLevel(logging.ERROR if level == QUIET else logging.INFO)
    logger.addHandler(handler)
    try:
        yield
    finally:  # as it was: in-process callers (tests) run many daemons
        logger.removeHandler(handler)
        logger.setLevel(was)


def stop_on_signals(*events: threading.Event) -> None:
    """Set every event on SIGINT, SIGTERM or SIGHUP (the terminal closed), from a thread:
    the handler itself takes no lock. A signal ignored when the daemon starts stays
    ignored: `nohup` ignores SIGHUP, and a script's `&` job SIGINT, so that the
    terminal's hangup or Ctrl-C is not for it.

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
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        if signal.getsignal(sig) != signal.SIG_IGN:
            signal.signal(sig, on_signal)


def one_line_diagnostics() -> None:
    """Make what threads and libraries print on their own one line each, none of their text.

    This process is ours (the daemon's), and such text may spell source paths in
    forms no redaction can promise to catch: watchdog's warnings and errors hold
    reprs of bytes paths, where a name with a secret `pässwort-...` reads
    `p\\xc3\\xa4sswort-...`. So a line says only the kind of problem (the exception's
    or the warning's class) and, for a warning, the code that raised it.
    """
    import threading
    import warnings

    threading.excepthook = _thread_error_line
    sys.unraisablehook = _unraisable_line
    warnings.showwarning = _warning_line


def _thread_error_line(args: Any) -> None:
    """A watcher thread that dies (the daemon notices and restarts it) says so in one line."""
    sys.stderr.write(f"mirror: a watcher thread stopped: {args.exc_type.__name__}\n")


def _thread_stopped_quietly(args: Any) -> None:
    """`-q`: a watcher thread's death is said by nothing (the daemon restarts it)."""


def _unraisable_line(args: Any) -> None:
    """An exception Python could only ignore (in a finalizer, say), in one line."""
    sys.stderr.write(f"mirror: an error was ignored: {args.exc_type.__name__}\n")


def _warning_line(
    message: Warning | str,
    category: type[Warning],
    filename: str,
    lineno: int,
    file: Any = None,
    line: Any = None,
) -> None:
    """A warning, in one line: its class and the code that raised it (`warnings.showwarning`)."""
    where = escape(f"{filename}:{lineno}")
    sys.stderr.write(f"mirror: warning: {category.__name__} at {where}\n")


def _redactor(
    values: tuple[str, ...], envs: tuple[str, ...], files: tuple[Path, ...], allow_short: bool
) -> Redactor | None:
    """A Redactor holding every secret given, or None (then redact is never imported)."""
    if not (values or envs or files):
        return None
    from sessionstore.redact.redactor import Redactor  # only when a secret is given

    redactor = Redactor()
    for value in values:
        if not value.strip():
            # `--secret "$TOKEN"` with TOKEN unset: the library ignores an empty value,
            # which here would mirror unredacted what the user asked to protect.
            problem = "empty or only whitespace: it protects nothing (is its variable unset?)"
            raise Usage(problem, "'--secret'")
        redactor.add(value, allow_short=allow_short)
    for name in envs:
        redactor.add_env(name, allow_short=allow_short)
    for name, data in secrets_file_input(files):
        redactor.add_file(name, allow_short=allow_short, data=data)
    return redactor

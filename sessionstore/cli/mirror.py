"""`sessionstore mirror`: one atomic, redacted pass from a workspace to a session directory.

Kept import-light on purpose: the no-op pass is benchmarked against `rsync -a`
including interpreter start-up, so this module pulls in neither rich nor
pydantic (nor the store engine: `store.target` resolves DST from names
only), and the redactor only when a secret is given. Every name printed for people goes through
`sessionstore._display.escape`: one problem, one line.
"""

from __future__ import annotations

import gc
import os
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from sessionstore._display import escape
from sessionstore.cli.common import command, emit_json, json_option, library_errors, store_option
from sessionstore.errors import SessionNotFound
from sessionstore.store.target import STORE_ENV, resolve_destination

if TYPE_CHECKING:
    from sessionstore.mirror.daemon import WatchConfig
    from sessionstore.mirror.mirror import Mirror, PassReport
    from sessionstore.redact.redactor import Redactor
    from sessionstore.storage.s3_tree_io import S3Dest

_LABELS = (("unstable", "unstable"), ("held_back", "held back"), ("skipped", "skipped"))


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
    help="Redact every line (or KEY=VALUE value) of FILE.",
)
@click.option(
    "--allow-short-secrets",
    is_flag=True,
    help="Accept secrets under 8 bytes (redacted only where a file is exactly the secret).",
)
@click.option("--no-fsync", is_flag=True, help="Skip fsync: faster, not crash-proof.")
@click.option("--delete", is_flag=True, help="Remove files this mirror wrote whose source is gone.")
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
@click.option("-q", "--quiet", is_flag=True, help="Daemon: no progress on stderr.")
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
    full_every: float,
    debounce: float,
    max_wait: float,
    quiet: bool,
    store_dir: Path | None,
    as_json: bool,
) -> None:
    """Mirror SRC into DST: changed files copied whole, redacted, atomically.

    DST is a session id in the store (see --store), a directory path, or
    s3://BUCKET/PREFIX/ID (a session in an s3:// store; see
    docs/object-storage.md). A
    file that changes while it is read is never committed (it is reported
    unstable and retried); record markers are committed last, and a record
    whose marker is in DST is sealed: never written again (a later change in
    SRC is reported as diverged). In a session, session.json,
    constraints.json and report.json are the store's and never mirrored.
    --delete removes only files this mirror wrote. With --once, one pass;
    otherwise a daemon that watches SRC (waiting for it to appear), re-lists
    it fully every --full-every seconds, and on SIGINT or SIGTERM runs a
    final full pass and exits. One daemon per DST.

    Exit status: 0 when the (final) pass ran, 1 when a file failed with an
    error or another daemon holds DST, 2 for bad usage. With --json the
    daemon prints one JSON line per pass.

    \b
    Examples:
      sessionstore mirror ./workspace 1a2b3c4d --once
      sessionstore mirror ./workspace ~/.sessionstore/1a2b3c4d --once
      sessionstore mirror ./ws ./out --once --secret-env HF_TOKEN --json
      sessionstore mirror ./workspace ~/.sessionstore/1a2b3c4d --secret-env HF_TOKEN
    """
    from sessionstore.mirror.mirror import Mirror  # import-light: see the module docstring

    redactor = _redactor(secret_values, secret_env, secrets_file, allow_short_secrets)
    dest = _destination(dst, store_dir)
    the_mirror = Mirror(src, dest, redactor, durable=not no_fsync, delete=delete)
    if not once:
        from sessionstore.mirror.daemon import WatchConfig  # import-light: see the module docstring

        config = WatchConfig(debounce=debounce, max_wait=max_wait, full_every=full_every)
        report = _run_daemon(the_mirror, config, quiet, as_json)
    else:
        report = _run_once(the_mirror, as_json)
    if not report.ok:
        sys.exit(1)


def _run_once(the_mirror: Mirror, as_json: bool) -> PassReport:
    """One pass: its summary on stderr, and as JSON on stdout with --json."""
    # One pass, then the process exits: its objects (a cache entry and a few stats
    # per file) hold no cycles worth collecting, and the collector's scans of them
    # cost ~15% of a 10,000-file no-op pass (benchmarks/bench_mirror.py).
    gc.disable()
    report = the_mirror.run_once()
    summary = report.to_dict()
    _print_summary(summary)
    if as_json:
        emit_json(summary)
    return report


def _destination(dst: str, store_dir: Path | None) -> Path | S3Dest:
    """DST as `store.target.resolve_destination` reads it; a likely mistyped id is bad usage.

    `s3://BUCKET/PREFIX/ID`, or an id of an `s3://` store, is a bucket destination.
    """
    store = os.fspath(store_dir) if store_dir is not None else os.environ.get(STORE_ENV, "")
    if dst[:3].lower() == "s3:" or store[:3].lower() == "s3:":  # before importing obstore
        from sessionstore.mirror.remote import remote_store, resolve_remote  # s3 only

        remote = resolve_remote(dst, remote_store(store))
        if remote is not None:
            return remote
    try:
        return resolve_destination(dst, store_dir)
    except SessionNotFound as exc:
        raise click.BadParameter(str(exc), param_hint="DST") from None


def _run_daemon(the_mirror: Mirror, config: WatchConfig, quiet: bool, as_json: bool) -> PassReport:
    """Run the daemon in this thread until SIGINT or SIGTERM; returns the final pass."""
    # A daemon only: `--once` imports none of this (see the module docstring).
    import signal
    import threading

    from sessionstore.mirror.daemon import Daemon

    stop = threading.Event()
    progress = _Progress(quiet, as_json)
    daemon = Daemon(the_mirror, config, progress)

    def on_signal(signum: int, frame: object) -> None:
        stop.set()
        daemon.wake.set()

    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, on_signal)
    threading.excepthook = _thread_error_line  # this process is ours: one line, not a traceback
    return daemon.run(stop)


def _thread_error_line(args: Any) -> None:
    """A watcher thread that dies (the daemon notices and restarts it) says so in one line."""
    exc = args.exc_value
    sys.stderr.write(
        f"mirror: a watcher thread stopped: {escape(f'{type(exc).__name__}: {exc}')}\n"
    )


class _Progress:
    """Per-pass output: a JSON line on stdout (--json) and/or rich lines on stderr.

    A diverged record is said once per daemon run, not on every pass that still sees it.
    """

    SHOWN = 10  # copied paths listed per pass before "and N more"

    def __init__(self, quiet: bool, as_json: bool) -> None:
        self.as_json = as_json
        self.console = None
        self.diverged_said: set[str] = set()
        if not quiet:
            from rich.console import Console  # the daemon's progress only

            # soft_wrap: a long path stays on its line (one problem, one line).
            self.console = Console(stderr=True, highlight=False, soft_wrap=True)

    def __call__(self, report: PassReport, kind: str) -> None:
        summary = report.to_dict()
        if self.as_json:
            import orjson  # --json only

            sys.stdout.buffer.write(orjson.dumps({"pass": kind, **summary}) + b"\n")
            sys.stdout.flush()
        if self.console is not None:
            self._show(summary, kind)

    def _show(self, summary: dict[str, Any], kind: str) -> None:
        assert self.console is not None
        from rich.markup import escape as markup  # the daemon's progress only

        def text(value: str) -> str:  # control characters, then rich's own markup
            return markup(escape(value))

        stamp = time.strftime("%H:%M:%S")
        if summary["source_missing"]:
            self.console.print(f"{stamp} [dim]waiting for the source to appear[/]")
            return
        copied = summary["copied"]
        if kind in ("initial", "final") or copied or summary["errors"]:
            counts = f"{len(copied)} copied, {summary['unchanged']} unchanged"
            self.console.print(f"{stamp} [bold]{kind} pass[/]: {counts}")
        for path in copied[: self.SHOWN]:
            self.console.print(f"{stamp} [green]copied[/] {text(path)}")
        if len(copied) > self.SHOWN:
            self.console.print(f"{stamp} [green]copied[/] and {len(copied) - self.SHOWN} more")
        kinds = [("unstable", "unstable", "yellow"), ("held_back", "held back", "yellow")]
        if kind in ("initial", "final"):  # symlinks and the like do not change: say it twice
            kinds.append(("skipped", "skipped", "dim"))
        for key, label, style in kinds:
            for item in summary[key]:
                line = f"{text(item['path'])} ({text(item['reason'])})"
                self.console.print(f"{stamp} [{style}]{label}[/] {line}")
        for item in summary["diverged"]:
            if item["path"] not in self.diverged_said:
                self.diverged_said.add(item["path"])
                self.console.print(f"{stamp} [bold yellow]diverged[/] {text(_diverged(item))}")
        for item in summary["errors"]:
            line = f"{text(item['path'])}: {text(item['error'])}"
            self.console.print(f"{stamp} [bold red]error[/] {line}")


def _diverged(item: dict[str, Any]) -> str:
    """One line for a sealed record whose source changed (a few of its files named)."""
    prefix = item["path"] + "/"
    files = [f[len(prefix) :] if f.startswith(prefix) else f for f in item["files"]]
    shown = ", ".join(files[:3]) + (f" and {len(files) - 3} more" if len(files) > 3 else "")
    return f"{item['path']}: {item['reason']} ({shown})"


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
    for path in files:
        redactor.add_file(path, allow_short=allow_short)
    return redactor


def _print_summary(summary: dict[str, Any]) -> None:
    """One line of counts, then one line per problem, on stderr (stdout is for --json)."""
    if summary["source_missing"]:
        sys.stderr.write("mirror: the source does not exist; nothing to do\n")
        return
    counts = [f"{len(summary['copied'])} copied", f"{summary['unchanged']} unchanged"]
    counts += [f"{len(summary[key])} {label}" for key, label in _LABELS]
    counts.append(f"{len(summary['errors'])} errors")
    if summary["diverged"]:
        counts.append(f"{len(summary['diverged'])} diverged")
    if summary["deleted"]:
        counts.append(f"{len(summary['deleted'])} deleted")
    lines = ["mirror: " + ", ".join(counts)]
    for key, label in _LABELS:
        lines += [f"  {label}: {escape(i['path'])}: {escape(i['reason'])}" for i in summary[key]]
    lines += [f"  diverged: {escape(_diverged(item))}" for item in summary["diverged"]]
    lines += [f"  error: {escape(i['path'])}: {escape(i['error'])}" for i in summary["errors"]]
    if summary["delete_skipped"]:
        lines.append(f"  delete skipped: {escape(summary['delete_skipped'])}")
    sys.stderr.write("\n".join(lines) + "\n")

"""`sessionstore mirror`: one atomic, redacted pass from a workspace to a session directory.

Kept import-light on purpose: the no-op pass is benchmarked against `rsync -a`
including interpreter start-up, so this module pulls in neither rich nor
pydantic, and the redactor only when a secret is given.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from sessionstore.cli.common import emit_json, json_option, library_errors

if TYPE_CHECKING:
    from sessionstore.redact import Redactor

_LABELS = (("unstable", "unstable"), ("held_back", "held back"), ("skipped", "skipped"))


@click.command()
@click.argument("src", type=click.Path(path_type=Path))
@click.argument("dst", type=click.Path(path_type=Path))
@click.option("--once", is_flag=True, help="Run one pass and exit (required for now).")
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
@click.option("--delete", is_flag=True, help="Remove destination files whose source is gone.")
@json_option
@library_errors
def mirror(
    src: Path,
    dst: Path,
    once: bool,
    secret_values: tuple[str, ...],
    secret_env: tuple[str, ...],
    secrets_file: tuple[Path, ...],
    allow_short_secrets: bool,
    no_fsync: bool,
    delete: bool,
    as_json: bool,
) -> None:
    """Mirror SRC into DST: changed files copied whole, redacted, atomically.

    A file that changes while it is read is never committed (it is reported
    unstable and retried next pass); record markers are committed last.
    Exit status: 0 when the pass ran, 1 when a file failed with an error,
    2 for bad usage.

    \b
    Examples:
      sessionstore mirror ./workspace ~/.sessionstore/1a2b3c4d --once
      sessionstore mirror ./ws ./out --once --secret-env HF_TOKEN --json
    """
    if not once:
        raise click.UsageError("the daemon is not available yet; pass --once")
    from sessionstore.mirror import Mirror

    redactor = _redactor(secret_values, secret_env, secrets_file, allow_short_secrets)
    report = Mirror(src, dst, redactor, durable=not no_fsync, delete=delete).run_once()
    summary = report.to_dict()
    _print_summary(summary)
    if as_json:
        emit_json(summary)
    if not report.ok:
        sys.exit(1)


def _redactor(
    values: tuple[str, ...], envs: tuple[str, ...], files: tuple[Path, ...], allow_short: bool
) -> Redactor | None:
    """A Redactor holding every secret given, or None (then redact is never imported)."""
    if not (values or envs or files):
        return None
    from sessionstore.redact import Redactor

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
    if summary["deleted"]:
        counts.append(f"{len(summary['deleted'])} deleted")
    lines = ["mirror: " + ", ".join(counts)]
    for key, label in (*_LABELS, ("errors", "error")):
        detail = "error" if key == "errors" else "reason"
        lines += [f"  {label}: {item['path']}: {item[detail]}" for item in summary[key]]
    if summary["delete_skipped"]:
        lines.append(f"  delete skipped: {summary['delete_skipped']}")
    sys.stderr.write("\n".join(lines) + "\n")

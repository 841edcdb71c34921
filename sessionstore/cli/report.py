"""`sessionstore report`: one session as a self-contained HTML file."""

from __future__ import annotations

import os
import stat
import sys
from pathlib import Path

import click

from sessionstore._display import escape
from sessionstore.cli.common import (
    command,
    library_errors,
    local_file,
    objective_of,
    objective_options,
    target_options,
    verbosity_options,
)
from sessionstore.store.target import resolve_target, store_root


@command()
@target_options()
@click.option(
    "-o",
    "--output",
    "output",
    required=True,
    metavar="FILE.html",
    callback=local_file,
    help="Where to write the report; '-' writes it to standard output.",
)
@objective_options
@verbosity_options("Also say how many bytes the report holds.")
@library_errors
def report(
    target: str,
    store_dir: Path | None,
    output: str,
    objective: str | None,
    higher: bool,
    quiet: bool,
    verbose: bool,
) -> None:
    """Write one self-contained HTML report of TARGET (an id or a session directory).

    The file holds the session's status, constraints, best trial and why, a
    chart of the objective across trials, the trials and verification
    attempts with their verdicts, lineage, and every record's marker. It
    refers to nothing outside itself (no CDN, no web font): it opens from
    file:// offline, and everything shows with JavaScript disabled.

    \b
    Examples:
      sessionstore report 1a2b3c4d -o report.html
      sessionstore report 1a2b3c4d -o - > report.html
      sessionstore report 1a2b3c4d -o r.html --objective benchmark.metrics.ttft_ms.p99 --lower
    """
    # Imported when the command runs, not when `sessionstore --help` lists it: start-up.
    from sessionstore.inspect.summary import SessionView
    from sessionstore.view.report import render_report

    session = resolve_target(target, store_dir)
    if output != "-":
        _refuse_inside_sessions(Path(output), session.path, store_root(store_dir))
    view = SessionView.load(session, objective_of(objective, higher))
    data = render_report(view).encode("utf-8", "surrogateescape")
    if output == "-":
        sys.stdout.buffer.write(data)
        sys.stdout.flush()
        return
    _write(Path(output), data)
    if not quiet:
        size = f" ({len(data)} bytes)" if verbose else ""
        click.echo(escape(f"report written to {Path(output).absolute()}{size}"), err=True)


def _refuse_inside_sessions(path: Path, session: Path, root: Path) -> None:
    """`InvalidInput` when the report would land in the session it reports or in any
    session of the local store (a directory of the store named as an id, as the store
    lists them): `-o session.json` there would replace the session's manifest, and any
    other name would be a foreign file of it. Where it lands is the real directory of
    `path` (its links followed): a link named FILE is replaced, not written through."""
    from sessionstore.errors import InvalidInput
    from sessionstore.format.names import is_id
    from sessionstore.storage.s3_path import S3Path

    where = Path(os.path.realpath(path.parent))
    if not isinstance(session, S3Path):
        top = Path(os.path.realpath(session))
        if where == top or top in where.parents:
            raise InvalidInput(str(path), "is inside the session it reports; write it elsewhere")
    if not isinstance(root, S3Path):
        top = Path(os.path.realpath(root))
        if top in where.parents and is_id(name := where.relative_to(top).parts[0]):
            # A session, or a directory named as one: where a session of that id would be.
            raise InvalidInput(
                str(path),
                f"is inside {name}/ of the store {root}, where sessions are; write it elsewhere",
            )


def _write(path: Path, data: bytes) -> None:
    """Write the report to `path`: atomically (a temp file renamed over it), or into it
    when it is a FIFO or a device (`/dev/stdout`), as a shell's `>` does: renaming over
    one would replace the node itself."""
    from sessionstore._fs.atomic import write_atomic
    from sessionstore.errors import InvalidInput

    try:
        mode = path.stat().st_mode
    except FileNotFoundError:
        mode = None
    if mode is not None and stat.S_ISDIR(mode):
        raise InvalidInput(str(path), "is a directory; give a file name")
    try:
        if mode is not None and not stat.S_ISREG(mode):
            with path.open("wb") as out:
                out.write(data)
        else:
            write_atomic(path, data)
    except OSError as exc:
        # A failed write (no space left, an I/O error) names no file, a failed rename the
        # temp file: the file to name is the one the user gave.
        raise OSError(exc.errno, exc.strerror, str(path)) from None

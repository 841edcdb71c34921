"""`sessionstore view`: browse the store in a web browser, served read-only on loopback."""

from __future__ import annotations

from pathlib import Path

import click

from sessionstore._display import escape
from sessionstore.cli.common import (
    command,
    library_errors,
    objective_of,
    objective_options,
    store_option,
)


@command()
@store_option
@click.option(
    "--host",
    default="127.0.0.1",
    show_default=True,
    help="Address to listen on; anything but loopback shows the store to the network.",
)
@click.option(
    "--port",
    type=click.IntRange(0, 65535),
    default=8765,
    show_default=True,
    help="Port to listen on; 0 picks a free one.",
)
@objective_options
@library_errors
def view(store_dir: Path | None, host: str, port: int, objective: str | None, higher: bool) -> None:
    """Serve the store's sessions as web pages, read-only, and print the URL.

    Pages: / (sessions), /s/ID (one session), /s/ID/trials/N and
    /s/ID/service/K (one record with its files); the same data as JSON under
    /api/sessions and /api/sessions/ID (the `inspect --json` shapes). A
    running session's pages update by themselves. Only GET and HEAD are
    answered; nothing outside the store is ever read. Stop with Ctrl-C.

    \b
    Examples:
      sessionstore view
      sessionstore view --store /tmp/demo-store --port 0
    """
    # Imported when the command runs, not when `sessionstore --help` lists it: start-up.
    from sessionstore.errors import InvalidInput
    from sessionstore.storage.s3_path import S3Path
    from sessionstore.store.session import Store
    from sessionstore.store.target import store_root
    from sessionstore.view.server import serve

    root = store_root(store_dir)
    if not isinstance(root, S3Path) and not root.is_dir():
        raise InvalidInput(str(root), "is not a directory; no store to view")
    if isinstance(root, S3Path):
        # One listing: a missing bucket or refused credentials is this one line, as
        # `inspect` says it, not a 500 on every page with the reason in the log.
        Store(root).storage.list("")

    def announce(url: str, loopback: bool) -> None:
        # Decided by the address bound, not by how `--host` spells it: `127.1` or a name
        # resolving to 127.0.0.1 is loopback, `0` is every interface.
        if not loopback:
            click.echo(
                escape(
                    f"warning: listening on {host}: the store {root} becomes visible to the "
                    "network, to anyone who can reach this address"
                ),
                err=True,
            )
        click.echo(url)

    try:
        serve(root, host, port, objective_of(objective, higher), announce)
    except OSError as exc:
        if exc.filename is None:  # the socket's: the address, the port or the name
            raise InvalidInput(
                f"--host {host} --port {port}", f"cannot listen: {exc.strerror or exc}"
            ) from None
        raise

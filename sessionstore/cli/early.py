"""`sessionstore inspect` of an empty local store, answered before click is imported.

Start-up is paid by every call a harness makes, and click, pathlib and the
store engine cost ~100 ms before a store with nothing in it is found empty
(issue 16). `empty_listing` recognises only the plainest spelling of that
call (`inspect`, with at most a `--store DIR` before or after the command)
and only a store that is a directory with no entry at all, or the default
store not existing yet; for anything else it answers None and click decides
as ever. What it prints is what the click path prints, from the same
`no_sessions`; a test runs both on the same stores, hostile ones included.
"""

from __future__ import annotations

import os

from sessionstore.cli.cells import no_sessions

# store.target.STORE_ENV (not imported: that module imports pathlib).
STORE_ENV = "SESSIONSTORE_HOME"


def empty_listing(args: list[str]) -> str | None:
    """The line `sessionstore ARGS` prints when it lists a local store with nothing in it;
    None when that is not sure (click then parses `args` and answers)."""
    group_store, rest = leading_store(args)
    if rest[:1] != ["inspect"]:
        return None
    store, rest = leading_store(rest[1:])
    if rest:
        return None
    value = store if store is not None else group_store
    if value is None:
        value = os.environ.get(STORE_ENV) or None
        named = value is not None
        if value is None:
            home = os.path.expanduser("~")
            value = home if home.startswith("~") else os.path.join(home, ".sessionstore")
    else:
        named = True
    root = _plain_root(value)
    if root is None:
        return None
    try:
        with os.scandir(root) as entries:
            if next(entries, None) is not None:
                return None
    except FileNotFoundError:
        if named:
            return None  # a store the user named must exist: click's path says so
    except OSError:
        return None
    line = no_sessions(root) + "\n"
    return line if line.isascii() else None  # else click.echo's encoding rules decide


def leading_store(args: list[str]) -> tuple[str | None, list[str]]:
    """A leading `--store VALUE` or `--store=VALUE` of `args`, and the arguments after it."""
    if args[:1] == ["--store"] and len(args) > 1:
        return args[1], args[2:]
    if args and args[0].startswith("--store="):
        return args[0][len("--store=") :], args[1:]
    return None, args


def _plain_root(value: str) -> str | None:
    """`str(store.target.store_root(value))` when it is sure to be `value` with `~`
    expanded (a local path that pathlib leaves as it is), else None."""
    if value.startswith("~"):
        value = os.path.expanduser(value)
    if value.startswith(("~", "-")) or "://" in value or value[:3].lower() == "s3:":
        return None
    if value == "/":
        return value
    parts = value.split("/")
    # pathlib drops empty and `.` components (`a//b`, `a/./b`, `a/`) and keeps `..`.
    if not value or "" in parts[1:] or "." in parts:
        return None
    return value

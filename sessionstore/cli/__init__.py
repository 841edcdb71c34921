"""The `sessionstore` command: a thin click layer over the library.

`main` is the entry point; the click group (`cli`, in `cli.group`) and the
table of subcommands (`COMMANDS`) are imported on first use, so that
`sessionstore --version` answers without importing click at all (issue 16:
start-up is paid by every call a harness makes), and so do `inspect` of an
empty local store (`cli.early`) and `mirror --once` (`cli.early_mirror`).
"""

from __future__ import annotations

import sys

from sessionstore import TYPE_CHECKING, __version__

if TYPE_CHECKING:
    from typing import Any

    from sessionstore.cli.group import COMMANDS, LazyGroup, cli
    from sessionstore.cli.plain import EXIT_INTERRUPTED

__all__ = ["COMMANDS", "EXIT_INTERRUPTED", "LazyGroup", "cli", "main"]

# What click's version option prints (a test checks that the two agree).
VERSION_LINE = f"sessionstore, version {__version__}\n"


def main(argv: list[str] | None = None) -> Any:
    """Console-script entry point."""
    args = sys.argv[1:] if argv is None else argv
    if args == ["--version"]:
        sys.stdout.write(VERSION_LINE)
        return 0
    if "inspect" in args:
        from sessionstore.cli.early import empty_listing

        line = empty_listing(args)
        if line is not None:
            sys.stdout.write(line)
            sys.stdout.flush()
            return 0
    if "mirror" in args:
        from sessionstore.cli.early_mirror import run_early

        code = run_early(args)
        if code is not None:
            return code
    from sessionstore.cli.group import cli

    return cli.main(args=args, prog_name="sessionstore")


def __getattr__(name: str) -> Any:
    if name in ("COMMANDS", "EXIT_INTERRUPTED", "LazyGroup", "cli"):
        from sessionstore.cli import group

        return getattr(group, name)
    raise AttributeError(f"module 'sessionstore.cli' has no attribute {name!r}")

"""Write docs/cli.md from every command's `--help`, so the reference cannot go stale.

    python scripts/cli_reference.py          # rewrite docs/cli.md
    python scripts/cli_reference.py --check  # exit 1 if docs/cli.md differs (CI runs this)

The help is rendered at a fixed width with no terminal, so the output depends
only on the code, not on who runs it.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import click

from sessionstore.cli import COMMANDS, cli

DOC = Path(__file__).resolve().parent.parent / "docs" / "cli.md"
WIDTH = 88

HEADER = """\
# Command-line reference

Generated from each command's `--help` by `python scripts/cli_reference.py`;
do not edit by hand (CI checks that it is current). Every command also takes
`-h`. Errors are one line naming the file and the problem, exit 1; usage
errors exit 2; Ctrl-C exits 130.
"""


def help_text(command: click.Command, name: str, parent: click.Context | None) -> str:
    """What `sessionstore NAME --help` prints, at WIDTH columns."""
    ctx = click.Context(
        command,
        info_name=name,
        parent=parent,
        terminal_width=WIDTH,
        max_content_width=WIDTH,
        **command.context_settings,
    )
    return command.get_help(ctx).rstrip() + "\n"


def render() -> str:
    """The whole reference: the group's help, then one section per command."""
    root = click.Context(
        cli, info_name="sessionstore", terminal_width=WIDTH, **cli.context_settings
    )
    parts = [HEADER, "## sessionstore\n", "```\n" + help_text(cli, "sessionstore", None) + "```\n"]
    for name in sorted(COMMANDS):
        command = cli.get_command(root, name)
        assert command is not None, name
        parts.append(f"## sessionstore {name}\n")
        parts.append("```\n" + help_text(command, name, root) + "```\n")
    return "\n".join(parts)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="fail if docs/cli.md is stale")
    args = parser.parse_args()
    text = render()
    if args.check:
        if not DOC.exists() or DOC.read_text(encoding="utf-8") != text:
            print(f"{DOC}: stale; run python scripts/cli_reference.py", file=sys.stderr)
            return 1
        return 0
    DOC.write_text(text, encoding="utf-8")
    print(f"wrote {DOC}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

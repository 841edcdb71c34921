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

from sessionstore.cli import cli

DOC = Path(__file__).resolve().parent.parent / "docs" / "cli.md"
WIDTH = 88

HEADER = """\
# Command-line reference

Generated from each command's `--help` by `python scripts/cli_reference.py`;
do not edit by hand (CI checks that it is current). Every command also takes
`-h`. Errors are one line naming the file and the problem, exit 1; usage
errors exit 2; Ctrl-C exits 130. A standard stream closed before the command
starts (`>&-`, `2>&-`, `<&-`) is no crash: output to a closed stdout or input
from a closed stdin fails as on the descriptor (`Error: stdout: Bad file
descriptor`, exit 1), diagnostics with no stderr are dropped (a pass that
worked exits 0), and /dev/null holds the descriptor meanwhile, so no file the
command opens takes its number. Output that cannot be written (a full disk,
`>/dev/full`) is one line naming stdout (`Error: stdout: No space left on
device`, exit 1), and a closed pipe (`| head`) exits 1 in silence, except
that `new`, `begin`, `complete` and `finish`, which have made a session or a
record, or written a marker or a report by then, say which in that one line
(`Error: stdout: Bad file descriptor; session 1a2b3c4d was made: PATH`); a
diagnostic that stderr cannot take is dropped as if it were closed, so the
exit status stays the command's. An empty path (`--store ""`, an empty SRC or
DST) is a usage error, never the current directory that pathlib reads in it.

`--store` and `--color` may also come before the command (`sessionstore
--store X inspect`); the command's own option wins when both are given.
Colour is off when the output is not a terminal or `NO_COLOR` is set (no
bold or dim either), unless `--color always` asks for it. The listings
(`inspect` of a store, `resume`, `scan`, `prune --dry-run`) print `--json`
(one array), `--nl` (one JSON object a line) or `--csv`, each row as soon as
it is read. CSV is RFC 4180 (CRLF line ends, a header row), one line a
row, and safe to print and to open in a spreadsheet: a text cell has its
control characters escaped as the tables show them (`\\x1b`, `\\n`, `\\t`, `\\\\`,
`\\u202e`), so no name an agent chose breaks a row or reaches the terminal as
a command, and one starting with `=`, `+`, `-` or `@`, which a spreadsheet
would run as a formula (OWASP "CSV injection"), is written with a `'` before
it; numbers, negative ones included, and text that is exactly a number stay
as they are. `--json` and `--nl` are always exact. Shell completion (bash,
zsh, fish) completes commands, options and session ids: see the README's
"Shell completion".

`-q/--quiet` and `-v/--verbose` mean the same on every command that has
them, and cannot be combined (a usage error). Quiet prints errors, warnings
and what a script needs only: no confirmation, summary or verdict line (the
exit status still tells). Verbose adds a line for each thing done: `rm -v`
and `prune -v` name each session removed and each leftover swept, `doctor
-v` each check made, `complete -v` each file made durable and the marker,
`export -v` each file copied, `finish -v` the files written, `wait -v` what
it waits for, `check -v` the log judged, `scan -v` what it looks for and
each session scanned, `mirror -v` each change, `report -v` the report's
size. Verbose lines go to stdout with the confirmations, or to stderr where
stdout carries the command's data (`doctor`, `scan`, `wait`, `check`,
`export --json`). Left off where they would mean nothing: `begin` and `new`
print only the line a script needs (quiet changes nothing; there is no step
to tell); `inspect`, `resume`, `contract` and `schema` print the data asked
for, nothing else; `demo` is a show to watch; `view` serves until stopped
(its URL is the line a script needs).
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


def walk(
    command: click.Command, path: tuple[str, ...], parent: click.Context | None
) -> list[tuple[tuple[str, ...], click.Command, click.Context | None]]:
    """`command` and every command below it: (path of names, command, parent context).

    A group's subcommands come sorted by name, each right after its group,
    so a nested group gets its own sections too.
    """
    found = [(path, command, parent)]
    if isinstance(command, click.Group):
        ctx = click.Context(
            command,
            info_name=path[-1],
            parent=parent,
            terminal_width=WIDTH,
            **command.context_settings,
        )
        for name in sorted(command.list_commands(ctx)):
            sub = command.get_command(ctx, name)
            assert sub is not None, name
            found += walk(sub, (*path, name), ctx)
    return found


def render() -> str:
    """The whole reference: the group's help, then one section per command."""
    parts = [HEADER]
    for path, command, parent in walk(cli, ("sessionstore",), None):
        parts.append(f"## {' '.join(path)}\n")
        parts.append("```\n" + help_text(command, path[-1], parent) + "```\n")
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

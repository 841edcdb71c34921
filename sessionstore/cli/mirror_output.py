"""What `sessionstore mirror` prints: the pass summary, itemized lines, the daemon's progress.

Import-light like `cli/mirror_run.py` (rich only for the daemon's progress).
Every name goes through `sessionstore._display.escape`: one item, one line.

Itemized lines (`-v`, `--dry-run`), one per change or problem, in path order,
`CODE PATH` or `CODE PATH: REASON`:

    A  copied, new in the destination (a directory: `PATH/`, the root `./`)
    M  copied over a different destination file
    D  deleted (--delete: a file this mirror wrote, gone from the source)
    U  unstable: not copied this pass (retried)
    H  held back: a marker not committed yet
    S  skipped (symlink, special file, reserved name, the store's file, not deleted)
    X  diverged: a sealed record whose source changed (not applied)
    E  error
"""

from __future__ import annotations

import sys
import time

from sessionstore._display import escape

TYPE_CHECKING = False  # typing's, without importing typing (mypy reads it as such)
if TYPE_CHECKING:
    from typing import Any

    from sessionstore.mirror.report import PassReport

QUIET, NORMAL, VERBOSE = -1, 0, 1

_LABELS = (("unstable", "unstable"), ("held_back", "held back"), ("skipped", "skipped"))
_CODES = (("unstable", "U"), ("held_back", "H"), ("skipped", "S"))


def diverged_line(item: dict[str, Any]) -> str:
    """One line for a sealed record whose source changed (a few of its files named)."""
    prefix = item["path"] + "/"
    files = [f[len(prefix) :] if f.startswith(prefix) else f for f in item["files"]]
    shown = ", ".join(files[:3]) + (f" and {len(files) - 3} more" if len(files) > 3 else "")
    return f"{item['path']}: {item['reason']} ({shown})"


def items(summary: dict[str, Any], *, changes_only: bool = False) -> list[str]:
    """The itemized lines of a pass (see the module docstring), escaped, in path order.

    `changes_only`: the A, M and D lines alone (the daemon says problems itself).
    """
    new = set(summary["new"])
    rows = [(p, "A", f"{p}/" if p else "./") for p in summary["created_dirs"]]
    rows += [(p, "A" if p in new else "M", p) for p in summary["copied"]]
    rows += [(p, "D", p) for p in summary["deleted"]]
    if not changes_only:
        for key, code in _CODES:
            rows += [(i["path"], code, f"{i['path']}: {i['reason']}") for i in summary[key]]
        rows += [(i["path"], "X", diverged_line(i)) for i in summary["diverged"]]
        rows += [(i["path"], "E", f"{i['path']}: {i['error']}") for i in summary["errors"]]
    rows.sort(key=lambda row: (row[0].split("/"), row[1]))
    return [f"{code} {escape(text)}" for _, code, text in rows]


def write_out(text: str) -> None:
    """`text` on stdout, flushed. (A stdout that cannot encode a name, ASCII as
    PYTHONIOENCODING=ascii makes it, writes it as backslash escapes: `cli.main`.)"""
    sys.stdout.write(text)
    sys.stdout.flush()


def print_summary(summary: dict[str, Any], level: int, itemized: bool) -> None:
    """A `--once` pass for people: counts and problems on stderr (stdout is for --json).

    `itemized`: the items are printed on stdout, so stderr gets the counts alone;
    QUIET prints nothing but errors.
    """
    if itemized:
        write_out("".join(f"{line}\n" for line in items(summary)))
    errors = [f"{escape(i['path'])}: {escape(i['error'])}" for i in summary["errors"]]
    if level == QUIET:
        sys.stderr.write("".join(f"mirror: error: {line}\n" for line in errors))
        return
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
    head = "mirror (dry run, nothing written): " if summary["dry_run"] else "mirror: "
    lines = [head + ", ".join(counts)]
    if not itemized:
        for key, label in _LABELS:
            lines += [
                f"  {label}: {escape(i['path'])}: {escape(i['reason'])}" for i in summary[key]
            ]
        lines += [f"  diverged: {escape(diverged_line(item))}" for item in summary["diverged"]]
        lines += [f"  error: {line}" for line in errors]
    if summary["delete_skipped"]:
        lines.append(f"  delete skipped: {escape(summary['delete_skipped'])}")
    sys.stderr.write("\n".join(lines) + "\n")


class Progress:
    """The daemon's per-pass output: a JSON line on stdout (--json) and/or lines on stderr.

    QUIET: errors only; VERBOSE: every change itemized on stdout (unless --json),
    instead of the first few copied paths on stderr. A diverged record is said
    once per daemon run, not on every pass that still sees it.
    """

    SHOWN = 10  # copied paths listed per pass before "and N more"

    def __init__(self, level: int, as_json: bool) -> None:
        from rich.console import Console  # the daemon's progress only

        self.level = level
        self.as_json = as_json
        self.diverged_said: set[str] = set()
        # soft_wrap: a long path stays on its line (one problem, one line). emoji off:
        # a name's `:red_heart:` is no code (rich's markup escape leaves it alone).
        self.console = Console(stderr=True, highlight=False, soft_wrap=True, emoji=False)

    def __call__(self, report: PassReport, kind: str) -> None:
        summary = report.to_dict()
        if self.as_json:
            from sessionstore._json import dumps_output  # --json only: orjson

            sys.stdout.buffer.write(dumps_output({"pass": kind, **summary}, indent=False) + b"\n")
            sys.stdout.flush()
        elif self.level == VERBOSE:
            write_out("".join(f"{line}\n" for line in items(summary, changes_only=True)))
        self._show(summary, kind)

    def _show(self, summary: dict[str, Any], kind: str) -> None:
        stamp = time.strftime("%H:%M:%S")
        if self.level != QUIET:
            self._passes(summary, kind, stamp)
        for item in summary["errors"]:
            self._say(stamp, "[bold red]error[/]", f"{item['path']}: {item['error']}")

    def _say(self, stamp: str, label: str, text: str) -> None:
        """One line: the stamp, `label` (rich markup), then `text` escaped and printed as
        it is. Never as markup: rich's markup escape doubles a name's trailing backslash
        (a tag may follow it), and emoji codes (`:red_heart:`) would be rendered."""
        from rich.text import Text  # the daemon's progress only

        self.console.print(f"{stamp} {label}", Text(escape(text)))

    def _passes(self, summary: dict[str, Any], kind: str, stamp: str) -> None:
        """Everything but the errors: counts, copied paths, unstable, held back, diverged."""
        if summary["source_missing"]:
            self.console.print(f"{stamp} [dim]waiting for the source to appear[/]")
            return
        copied = summary["copied"]
        if kind in ("initial", "final") or copied or summary["errors"]:
            counts = f"{len(copied)} copied, {summary['unchanged']} unchanged"
            self.console.print(f"{stamp} [bold]{kind} pass[/]: {counts}")
        if self.level != VERBOSE:  # verbose: itemized on stdout instead
            for path in copied[: self.SHOWN]:
                self._say(stamp, "[green]copied[/]", path)
            if len(copied) > self.SHOWN:
                more = len(copied) - self.SHOWN
                self.console.print(f"{stamp} [green]copied[/] and {more} more")
        kinds = [("unstable", "unstable", "yellow"), ("held_back", "held back", "yellow")]
        if kind in ("initial", "final"):  # symlinks and the like do not change: say it twice
            kinds.append(("skipped", "skipped", "dim"))
        for key, label, style in kinds:
            for item in summary[key]:
                self._say(stamp, f"[{style}]{label}[/]", f"{item['path']} ({item['reason']})")
        for item in summary["diverged"]:
            if item["path"] not in self.diverged_said:
                self.diverged_said.add(item["path"])
                self._say(stamp, "[bold yellow]diverged[/]", diverged_line(item))

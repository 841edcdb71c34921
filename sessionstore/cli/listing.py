"""The options and output every listing shares: `--json`, `--nl`, `--csv`, `--limit`,
`--status`, `--label` and `--sort` (inspect of a store, resume, scan, prune --dry-run).

Rows are written as they come: a JSON array an element at a time, one JSON
object per line (`--nl`), or CSV (RFC 4180: CRLF line ends) with a header, so a script reading a big
listing sees its first row before the last record is read (except where the
order needs every row first: `--sort best`). Values are exact in `--json` and
`--nl`; a nested value is one CSV cell of compact JSON.

CSV is read by people too (`--csv` on a terminal, `cut`, `grep`): a text cell
is written as the tables show it, its control characters escaped (`\\x1b`,
`\\n`: `_display.escape`), so that a row is one line and no name an agent
chose reaches the terminal as a command.

CSV is safe to open in a spreadsheet: a text cell that starts with `=`, `+`,
`-` or `@` (which spreadsheets run as a formula: OWASP "CSV injection"; a
leading tab or carriage return is escaped already) is written with a `'`
before it. Numbers stay numbers,
negative ones included; so does a text cell that is exactly a number.
"""

from __future__ import annotations

import csv
import functools
import itertools
import re
import sys
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal, TypeVar

import click

from sessionstore._display import escape

F = TypeVar("F", bound=Callable[..., Any])
T = TypeVar("T")

Format = Literal["json", "nl", "csv"]
_SORT_HELP = {"created": "created (newest first)", "name": "name", "best": "best (best first)"}


@dataclass(frozen=True)
class Listing:
    """What a listing's options asked for: the output format (None: text for people),
    the filters, the order and how many rows at most."""

    fmt: Format | None = None
    limit: int | None = None
    statuses: tuple[str, ...] = ()
    labels: tuple[tuple[str, str], ...] = ()
    sort: str | None = "created"  # None: not given, where the command has no default

    @property
    def filtered(self) -> bool:
        """Whether any row-selecting option (`--limit`, `--status`, `--label`) was given."""
        return self.limit is not None or bool(self.statuses) or bool(self.labels)

    def labelled(self, manifest: Mapping[str, Any] | None) -> bool:
        """Whether a session's manifest carries every `--label K=V` (all must match)."""
        labels = (manifest or {}).get("labels")
        if not self.labels:
            return True
        if not isinstance(labels, dict):
            return False
        return all(labels.get(key) == value for key, value in self.labels)

    def wants(self, status: str) -> bool:
        """Whether a row of this status is listed (every status when `--status` is not given)."""
        return not self.statuses or status in self.statuses

    def take(self, rows: Iterable[T]) -> Iterator[T]:
        """At most `--limit` of `rows`, taken lazily: the rest are never computed."""
        return iter(rows) if self.limit is None else itertools.islice(rows, self.limit)

    def emit(self, rows: Iterable[Mapping[str, Any]], columns: Sequence[str]) -> None:
        """Write `rows` to stdout in `fmt`, each as soon as it comes; `columns` are CSV's."""
        out = sys.stdout.buffer
        if self.fmt == "csv":
            _write_csv(rows, columns)
        elif self.fmt == "nl":
            for row in rows:
                out.write(_dumps(row, indent=False) + b"\n")
                out.flush()
        else:
            _write_array(rows)
        out.flush()


def name_order(manifest: Mapping[str, Any] | None, ident: str) -> tuple[bool, str, str]:
    """The key of `--sort name`: named sessions by name, then the unnamed; ties by id."""
    name = (manifest or {}).get("name")
    if isinstance(name, str):
        return (False, name, ident)
    return (True, "", ident)


def _dumps(value: Any, *, indent: bool) -> bytes:
    # Imported on use: listings as data only, a table never loads orjson here.
    from sessionstore._json import dumps_output

    return dumps_output(value, indent=indent)


def _write_array(rows: Iterable[Mapping[str, Any]]) -> None:
    """One JSON array, byte for byte what dumping the whole list indented would give."""
    out = sys.stdout.buffer
    sep = b"[\n  "
    for row in rows:
        # JSON strings hold no raw line break, so indenting every line is exact.
        out.write(sep + _dumps(row, indent=True).replace(b"\n", b"\n  "))
        out.flush()
        sep = b",\n  "
    out.write(b"[]\n" if sep == b"[\n  " else b"\n]\n")


# What a spreadsheet takes for the start of a formula (OWASP, "CSV Injection"); a tab or
# a carriage return in a cell is escaped before it is looked at.
_FORMULA_START = ("=", "+", "-", "@")
_NUMBER = re.compile(r"-?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][-+]?\d+)?")


def _cell(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return str(value)
    if isinstance(value, str):
        # Escaped first: an escaped tab or carriage return starts no formula.
        return _inert(escape(value))
    return _dumps(value, indent=False).decode()


def _inert(text: str) -> str:
    """`text` as a spreadsheet shows it and never runs it: a formula gets a `'` first."""
    if text.startswith(_FORMULA_START) and not _NUMBER.fullmatch(text):
        return "'" + text
    return text


def _write_csv(rows: Iterable[Mapping[str, Any]], columns: Sequence[str]) -> None:
    out = sys.stdout
    # RFC 4180 line ends. No cell holds a line break (`_cell` escapes them).
    writer = csv.writer(out, lineterminator="\r\n")
    writer.writerow(columns)
    for row in rows:
        writer.writerow([_cell(row.get(column)) for column in columns])
        out.flush()


def _label(ctx: click.Context, param: click.Parameter, value: tuple[str, ...]) -> Any:
    pairs = []
    for item in value:
        key, sep, wanted = item.partition("=")
        if not sep or not key:
            raise click.BadParameter(f"{item!r} is not KEY=VALUE")
        pairs.append((key, wanted))
    return tuple(pairs)


def listing_options(
    *,
    statuses: Sequence[str] | None = None,
    status_help: str = "Only rows of this status (repeatable).",
    sorts: Sequence[str] = (),
    labels: bool = False,
    json_help: str = "Print one JSON array, a row at a time.",
    sort_help: str = "Order of the rows",
    sort_default: bool = True,
    limit_help: str = "At most N rows.",
) -> Callable[[F], F]:
    """Add the listing options a command takes; it receives them as one `listing: Listing`.

    `--json`, `--nl`, `--csv` and `--limit` always; `--status` with `statuses`
    (its choices), `--sort` with `sorts` (the first is the default, unless
    not `sort_default`: then None when not given), `--label` with `labels`
    (sessions only: it matches the manifest's `labels`).
    """
    options = _options(json_help, limit_help, statuses, status_help, labels)
    if sorts:
        options.append(
            click.option(
                "--sort",
                "listing_sort",
                type=click.Choice(list(sorts)),
                default=sorts[0] if sort_default else None,
                show_default=sort_default,
                help=f"{sort_help}: " + ", ".join(_SORT_HELP[s] for s in sorts) + ".",
            )
        )

    def decorate(func: F) -> F:
        decorated: Any = _packed(func)
        for option in reversed(options):
            decorated = option(decorated)
        return decorated  # type: ignore[no-any-return]

    return decorate


def _packed(func: F) -> F:
    """`func` called with the listing options packed into `listing`."""

    @functools.wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        chosen = [fmt for fmt in ("json", "nl", "csv") if kwargs.pop(f"listing_{fmt}")]
        if len(chosen) > 1:
            raise click.UsageError("give at most one of --json, --nl and --csv")
        kwargs["listing"] = Listing(
            fmt=chosen[0] if chosen else None,  # type: ignore[arg-type]
            limit=kwargs.pop("listing_limit"),
            statuses=kwargs.pop("listing_statuses", ()),
            labels=kwargs.pop("listing_labels", ()),
            sort=kwargs.pop("listing_sort", "created"),
        )
        return func(*args, **kwargs)

    return wrapper  # type: ignore[return-value]


def _options(
    json_help: str,
    limit_help: str,
    statuses: Sequence[str] | None,
    status_help: str,
    labels: bool,
) -> list[Callable[[Any], Any]]:
    options = [
        click.option("--json", "listing_json", is_flag=True, help=json_help),
        click.option("--nl", "listing_nl", is_flag=True, help="Print one JSON object a line."),
        click.option(
            "--csv",
            "listing_csv",
            is_flag=True,
            help="Print CSV with a header, safe in a spreadsheet (a formula gets a ' first).",
        ),
        click.option(
            "--limit", "listing_limit", type=click.IntRange(min=0), metavar="N", help=limit_help
        ),
    ]
    if statuses is not None:
        choice = click.Choice(list(statuses))
        options.append(
            click.option(
                "--status", "listing_statuses", multiple=True, type=choice, help=status_help
            )
        )
    if labels:
        options.append(
            click.option(
                "--label",
                "listing_labels",
                multiple=True,
                metavar="K=V",
                callback=_label,
                help="Only sessions labelled K=V (repeatable: all must match).",
            )
        )
    return options

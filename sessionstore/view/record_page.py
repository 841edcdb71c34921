"""One record's page: its marker, its files with sizes and contents, a config diff.

Files are found by listing the record through the storage seam and read by
bounded gets (`view.files`); contents are rendered by `view.render`. The
configuration diff compares this trial's top-level config files (`*.json`,
`*.yml`, `*.yaml`, `*.toml`, the marker left out) with another trial's.
"""

from __future__ import annotations

from dataclasses import dataclass

from sessionstore.errors import RecordNotFound
from sessionstore.format.names import MARKERS, TRIALS
from sessionstore.harness.verdict import output_verdict
from sessionstore.storage.base import Storage
from sessionstore.store.session import Record, Session
from sessionstore.view.files import (
    Content,
    file_size,
    is_listed,
    list_files,
    read_file,
    record_key,
    tail,
)
from sessionstore.view.html import text, url_name
from sessionstore.view.render import (
    CONFIG_SUFFIXES,
    DIFF_LIMIT,
    SHOW_LIMIT,
    binary_diff,
    binary_note,
    config_diff,
    is_binary,
    kind,
    render,
    too_large_to_diff,
)

# Files whose contents one page shows; the rest are listed with their sizes, never read.
MAX_RENDERED = 200
# Characters of contents (files shown, configuration diffs) one page holds; past them the
# rest are listed or counted the same way. A file shows at most `SHOW_LIMIT` bytes, but
# its escapes and markup multiply them (a diff of `+` lines 15 times): 200 such files made
# one page of 760 MB, which took the server to 2.7 GB and 71 s.
PAGE_LIMIT = 4 * 1024 * 1024


@dataclass(frozen=True)
class RecordRef:
    """Which record a page is about: the session, `trials` or `service`, and the number."""

    session: Session
    collection: str
    n: int

    @property
    def key(self) -> str:
        return record_key(self.session.key, self.collection, self.n)

    @property
    def base(self) -> str:
        """The URL of this record's page."""
        return f"/s/{url_name(self.session.key)}/{self.collection}/{self.n}"

    def file_url(self, path: str) -> str:
        return f"{self.base}/files/" + "/".join(url_name(p) for p in path.split("/"))


def _size(content: Content) -> str:
    if content.size is None:
        return f'<span class="bad">{text(content.problem or "")}</span>'
    return f'<span data-v="{content.size}">{content.size}</span>'


def _row(ref: RecordRef, i: int | None, path: str, content: Content, label: str, link: str) -> str:
    """One file's row of the files table: name (a link to its section `f{i}`, if it has
    one), size, kind, raw link."""
    if i is None:
        name = f'<span class="mono">{text(path)}</span>'
    else:
        name = f'<a class="mono" href="#f{i}">{text(path)}</a>'
    return (
        f"<tr><td>{name}</td>"
        f'<td class="num">{_size(content)}</td><td>{label}</td>'
        f'<td><a href="{text(ref.file_url(path), whole=True)}">{link}</a></td></tr>'
    )


def _large(storage: Storage, key: str, path: str, content: Content) -> tuple[Content, str]:
    """A file past the read limit: its size and, for a log, its tail (never read whole)."""
    found = tail(storage, key, SHOW_LIMIT + 1)
    if found is None:
        return content, ""
    size, data = found
    sized = Content(None, size, None, large=True)
    if kind(path) != "log" or is_binary(data, tail=True):
        return sized, f'<p class="dim">{text(size)} bytes: too large to show; see raw</p>'
    return sized, render(path, data, size)


def _unread(storage: Storage, key: str) -> Content:
    """A file past the first `MAX_RENDERED` shown: its size alone, its bytes never read
    (a page of a thousand 16 MiB files read them all just to label them)."""
    found = file_size(storage, key)
    return Content(None, found, "unreadable or removed; not read" if found is None else None)


def _files(ref: RecordRef, room: int = PAGE_LIMIT) -> str:
    """The files table, then each text file's contents (binary ones: download only).

    Past `MAX_RENDERED` files shown, or `room` characters of them, the rest are
    listed by size, not read."""
    storage = ref.session.storage
    listing = list_files(storage, ref.key)
    rows: list[str] = []
    sections: list[str] = []
    for i, path in enumerate(listing.files):
        key = f"{ref.key}/{path}"
        if len(sections) >= MAX_RENDERED or room <= 0:
            rows.append(_row(ref, None, path, _unread(storage, key), "not shown", "raw"))
            continue
        content = read_file(storage, key)
        data, shown = content.data, ""
        if content.large:
            content, shown = _large(storage, key, path, content)
        binary = data is not None and is_binary(data)
        label = "binary" if binary else ("text" if data is not None else "")
        label = "large" if content.large and content.size is not None else label
        link = "download" if binary else "raw"
        if data is None and not shown:  # unreadable: no section to link to
            rows.append(_row(ref, None, path, content, label, link))
            continue
        rows.append(_row(ref, i, path, content, label, link))
        if data is not None:
            shown = binary_note(len(data)) if binary else render(path, data)
        sections.append(f'<h3 id="f{i}" class="mono">{text(path)}</h3>{shown}')
        room -= len(sections[-1])
    skipped = "".join(
        f"<li><code>{text(path)}</code>: {text(why)}</li>" for path, why in listing.skipped
    )
    if not rows:
        table = '<p class="dim">No files.</p>'
    else:
        table = (
            '<table class="sortable files"><thead><tr><th>file</th><th class="num">bytes</th>'
            f"<th>kind</th><th></th></tr></thead><tbody>{''.join(rows)}</tbody></table>"
        )
    if skipped:
        table += f'<p>Not entered:</p><ul class="skipped">{skipped}</ul>'
    return f"<h2>Files</h2>{table}{''.join(sections)}"


def _config_names(ref: RecordRef) -> set[str]:
    """The record's top-level configuration files (the marker left out)."""
    marker = MARKERS[ref.collection]
    return {
        path
        for path in list_files(ref.session.storage, ref.key).files
        if "/" not in path and path.endswith(CONFIG_SUFFIXES) and path != marker
    }


def _config(ref: RecordRef, name: str, names: set[str]) -> Content | None:
    """The configuration file `name` read up to `DIFF_LIMIT` (past it: `large`, not
    held); None when the record has none of that name."""
    if name not in names:
        return None
    return read_file(ref.session.storage, f"{ref.key}/{name}", DIFF_LIMIT)


def _diff_form(ref: RecordRef, numbers: list[int], against: int | None) -> str:
    """Pick another trial and see how its configuration differs from this one's."""
    options = "".join(
        f'<option value="{n}"{" selected" if n == against else ""}>trial {n}</option>'
        for n in numbers
        if n != ref.n
    )
    if not options:
        return ""
    return (
        '<h2>Configuration diff</h2><form class="bar" method="get">'
        f'<label>trial {ref.n} against <select name="against">{options}</select></label>'
        '<button type="submit">show diff</button></form>'
    )


def config_diff_html(ref: RecordRef, other: RecordRef) -> str:
    """Each configuration file that differs between `other` and `ref` (other first).

    At most `MAX_RENDERED` names are compared, one pair held at a time, until the
    differences pass `PAGE_LIMIT` characters: the rest are counted, never read. A
    side that is binary is not diffed (never shown, as on the record page). With
    every file of both held at once and diffed, two records of 4,000 sparse 64 KiB
    configs took 2 GiB and over five minutes (each NUL shown as four characters)."""
    mine, theirs = _config_names(ref), _config_names(other)
    names = sorted(mine | theirs)
    parts: list[str] = []
    compared = held = 0
    for name in names[:MAX_RENDERED]:
        if held >= PAGE_LIMIT:
            break
        compared += 1
        old, new = _config(other, name, theirs), _config(ref, name, mine)
        a, b = (old.data if old else None), (new.data if new else None)
        if (old is not None and old.large) or (new is not None and new.large):
            diff = too_large_to_diff()
        elif any(side is not None and is_binary(side) for side in (a, b)):
            diff = "" if a == b else binary_diff()
        else:
            diff = config_diff(f"trials/{other.n}/{name}", a, f"trials/{ref.n}/{name}", b)
        if diff:
            parts.append(f'<h3 class="mono">{text(name)}</h3>{diff}')
            held += len(parts[-1])
    if len(names) > compared:
        parts.append(
            f'<p class="dim">{len(names) - compared} more configuration files not '
            f"compared (at most {MAX_RENDERED} a page, and {PAGE_LIMIT // (1024 * 1024)} MiB "
            "of differences); compare the raw files</p>"
        )
    if not parts:
        return f'<p class="dim">No configuration difference with trial {other.n}.</p>'
    return "".join(parts)


def record_body(
    ref: RecordRef, record: Record, numbers: list[int], against: RecordRef | None
) -> str:
    """The page body of one record (`numbers`: the session's trials, for the diff picker)."""
    session_url = f"/s/{url_name(ref.session.key)}"
    what = "trial" if ref.collection == "trials" else "verification attempt"
    facts = [
        f'<dt>session</dt><dd><a href="{text(session_url, whole=True)}">'
        f"{text(ref.session.id or ref.session.key)}</a></dd>",
        f'<dt>state</dt><dd class="{record.state}">{record.state}</dd>',
    ]
    if record.error:
        facts.append(f'<dt>problem</dt><dd class="bad">{text(record.error)}</dd>')
    verdict = output_verdict(record)
    if verdict is not None:
        facts.append(f'<dt>log verdict</dt><dd class="{verdict.outcome}">{text(verdict)}</dd>')
    body = f'<h1>{what} {ref.n}</h1><dl class="facts">{"".join(facts)}</dl>'
    diff = ""
    if ref.collection == "trials":
        body += _diff_form(ref, numbers, against.n if against else None)
        if against is not None:
            diff = config_diff_html(ref, against)
    return body + diff + _files(ref, PAGE_LIMIT - len(diff))  # one page's room for both


def listed_record(ref: RecordRef) -> tuple[Record, list[int]] | None:
    """The record and the session's trial numbers (the diff picker's), or None when its
    collection does not list the record: the page is then 404.

    Asked of the listing `inspect` uses first: `Collection.get` reads a record
    of a collection it cannot list (a symlink, a regular file, a FIFO) for
    any number, as torn, which would serve a page for a record that is not.
    """
    trials = ref.session.trials.numbers()
    collection = ref.session.trials if ref.collection == TRIALS else ref.session.service
    if ref.n not in (trials if ref.collection == TRIALS else collection.numbers()):
        return None
    try:
        return collection.get(ref.n), trials
    except RecordNotFound:  # removed since it was listed
        return None


def file_parts(ref: RecordRef, parts: list[str]) -> str | None:
    """The storage key of the record file `parts` names, if the record lists it; else None."""
    if not is_listed(ref.session.storage, ref.key, parts):
        return None
    return f"{ref.key}/" + "/".join(parts)

"""`sessionstore report`: one session as a single self-contained HTML file.

The session page (`view.session_page`) with every record's marker inline,
links as anchors within the file, the style and the one script inline: no
URL outside the file anywhere, so it opens from `file://` offline and can be
mailed or attached to an issue. Without JavaScript everything shows; the
script only sorts tables.
"""

from __future__ import annotations

from datetime import UTC, datetime

from sessionstore import __version__
from sessionstore._json import MAX_MARKER_BYTES
from sessionstore.errors import StorageError
from sessionstore.format.names import MARKERS
from sessionstore.inspect.summary import SessionView
from sessionstore.store.lineage import lineage_info
from sessionstore.store.session import Record
from sessionstore.view.files import record_key
from sessionstore.view.html import page, text, text_lines
from sessionstore.view.render import indented_json
from sessionstore.view.session_page import Links, session_body

_PREFIX = {"trials": "trial", "service": "attempt"}


def _anchor(collection: str, n: int) -> str:
    return f"#{_PREFIX[collection]}-{n}"


_LINKS = Links(record=_anchor, session=lambda _id: None)


def _markers(view: SessionView, collection: str, records: list[Record]) -> str:
    """Each record's marker (or why it has none), folded, as the anchors' targets."""
    out = []
    for record in records:
        inner = f'<p class="{record.state}">{text(record.error or record.state)}</p>'
        if record.data is not None:
            inner = _marker(view, collection, record.n)
        out.append(
            f'<details id="{_anchor(collection, record.n)[1:]}"><summary>'
            f"{_PREFIX[collection]} {record.n} ({record.state})</summary>{inner}</details>"
        )
    return "".join(out)


def _marker(view: SessionView, collection: str, n: int) -> str:
    """A completed record's marker as the record page shows it: each token as the file
    spells it (parsed and dumped again, two duplicate keys would show as one, `1.10` as
    `1.1`, `\\u00e9` as `é`), read again through the storage seam (a sealed file)."""
    session = view.session
    key = f"{record_key(session.key, collection, n)}/{MARKERS[collection]}"
    try:
        data = session.storage.get(key, MAX_MARKER_BYTES)
    except StorageError as exc:
        return f'<p class="torn">{text(exc.problem)}</p>'
    if data is None:
        return '<p class="torn">removed since the session was read</p>'
    shown = indented_json(data)
    return f"<pre>{text_lines(data.decode('utf-8', 'replace') if shown is None else shown)}</pre>"


def render_report(view: SessionView) -> str:
    """The report of a loaded session, as one HTML document."""
    stamp = datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC")
    title = f"{view.name or view.session.id or 'session'}: sessionstore report"
    body = (
        f'<header><span class="dim">sessionstore {text(__version__)} report, {stamp}</span>'
        "</header>"
        + session_body(view, lineage_info(view.session), _LINKS)
        + "<h2>Records</h2>"
        + _markers(view, "trials", view.trials)
        + _markers(view, "service", view.service)
    )
    return page(title, body, served=False)

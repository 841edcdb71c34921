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
from sessionstore._json import utf8_safe
from sessionstore._orjson import orjson
from sessionstore.inspect.summary import SessionView
from sessionstore.store.lineage import lineage_info
from sessionstore.store.session import Record
from sessionstore.view.html import page, text, text_lines
from sessionstore.view.session_page import Links, session_body

_PREFIX = {"trials": "trial", "service": "attempt"}


def _anchor(collection: str, n: int) -> str:
    return f"#{_PREFIX[collection]}-{n}"


_LINKS = Links(record=_anchor, session=lambda _id: None)


def _markers(collection: str, records: list[Record]) -> str:
    """Each record's marker (or why it has none), folded, as the anchors' targets."""
    out = []
    for record in records:
        if record.data is not None:
            shown = orjson.dumps(utf8_safe(record.data), option=orjson.OPT_INDENT_2).decode()
            inner = f"<pre>{text_lines(shown)}</pre>"
        else:
            inner = f'<p class="{record.state}">{text(record.error or record.state)}</p>'
        out.append(
            f'<details id="{_anchor(collection, record.n)[1:]}"><summary>'
            f"{_PREFIX[collection]} {record.n} ({record.state})</summary>{inner}</details>"
        )
    return "".join(out)


def render_report(view: SessionView) -> str:
    """The report of a loaded session, as one HTML document."""
    stamp = datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC")
    title = f"{view.name or view.session.id or 'session'}: sessionstore report"
    body = (
        f'<header><span class="dim">sessionstore {text(__version__)} report, {stamp}</span>'
        "</header>"
        + session_body(view, lineage_info(view.session), _LINKS)
        + "<h2>Records</h2>"
        + _markers("trials", view.trials)
        + _markers("service", view.service)
    )
    return page(title, body, served=False)

"""The sessions page: filter by status and label, sort, and page through thousands.

Only the shown page is loaded in full (`SessionView.load`: every record of
each session); filtering and sorting read what they need of every session
and no more: the manifests (which `Store.sessions` reads anyway) and, to
filter or sort by status, each report.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlencode

from sessionstore.inspect.best import Objective
from sessionstore.inspect.summary import SessionView, not_read
from sessionstore.store.session import Session, Store
from sessionstore.store.status import STATUSES, session_status
from sessionstore.view.html import number, text, url_name
from sessionstore.view.session_page import labels_html

PER_PAGE = 50
SORTS = ("created", "name", "status")


@dataclass(frozen=True)
class ListQuery:
    """What the sessions page shows: a status, a label (`key` or `key=value`), an order, a page."""

    status: str = ""
    label: str = ""
    sort: str = "created"
    ascending: bool = False
    page: int = 1

    @classmethod
    def parse(cls, params: dict[str, list[str]]) -> ListQuery:
        """From a query string's values; an unknown value reads as the default."""

        def one(name: str) -> str:
            return params.get(name, [""])[-1]

        status = one("status") if one("status") in STATUSES else ""
        sort = one("sort") if one("sort") in SORTS else "created"
        # ASCII digits only: `str.isdigit` also takes `²` and `٣`, which `int` refuses or reads.
        page = int(one("page")) if re.fullmatch(r"[0-9]{1,8}", one("page")) else 1
        return cls(status, one("label"), sort, one("order") == "asc", max(page, 1))

    def url(self, **changes: Any) -> str:
        fields = {
            "status": self.status,
            "label": self.label,
            "sort": self.sort,
            "order": "asc" if self.ascending else "desc",
            "page": self.page,
        }
        fields.update(changes)
        return "/?" + urlencode({k: v for k, v in fields.items() if v not in ("", None)})


def _has_label(session: Session, label: str) -> bool:
    labels = (session.manifest or {}).get("labels")
    if not isinstance(labels, dict):
        return False
    if label in labels:  # `key`, even one holding '='
        return True
    # `key=value`, where a key may hold '=' too: each label spelled so and compared.
    # Splitting the query at each of its '=' in turn cost a copy of it per '=': 65,000
    # of them took a second for each session.
    return any(isinstance(v, str) and label == f"{k}={v}" for k, v in labels.items())


def select(store: Store, query: ListQuery) -> tuple[list[Session], int]:
    """The sessions of the page `query` asks for, and how many match in all."""
    sessions = store.sessions()  # newest first
    if query.label:
        sessions = [s for s in sessions if _has_label(s, query.label)]
    if query.status or query.sort == "status":
        statuses = {id(s): session_status(s) for s in sessions}
        if query.status:
            sessions = [s for s in sessions if statuses[id(s)] == query.status]
        if query.sort == "status":
            sessions.sort(key=lambda s: statuses[id(s)])
    if query.sort == "name":
        sessions.sort(key=lambda s: str((s.manifest or {}).get("name") or ""))
    if query.sort == "created":
        if query.ascending:
            sessions.reverse()
    elif not query.ascending:
        sessions.reverse()
    start = (_page_of(query, len(sessions)) - 1) * PER_PAGE
    return sessions[start : start + PER_PAGE], len(sessions)


def _page_of(query: ListQuery, total: int) -> int:
    """The page shown: the one asked for, or the last one past the end."""
    return min(query.page, max((total + PER_PAGE - 1) // PER_PAGE, 1))


def _controls(query: ListQuery) -> str:
    statuses = "".join(
        f'<option value="{s}"{" selected" if s == query.status else ""}>{s or "any"}</option>'
        for s in ("", *STATUSES)
    )
    sorts = "".join(
        f'<option value="{s}"{" selected" if s == query.sort else ""}>{s}</option>' for s in SORTS
    )
    order = "".join(
        f'<option value="{o}"{" selected" if (o == "asc") == query.ascending else ""}>{o}</option>'
        for o in ("desc", "asc")
    )
    return (
        '<form class="bar" method="get" action="/">'
        f'<label>status <select name="status">{statuses}</select></label>'
        f'<label>label <input name="label" value="{text(query.label, whole=True)}" '
        'placeholder="key or key=value"></label>'
        f'<label>sort <select name="sort">{sorts}</select></label>'
        f'<select name="order" aria-label="order">{order}</select>'
        '<button type="submit">apply</button></form>'
    )


def _row(view: SessionView) -> str:
    # The directory's name, which the link opens (a torn manifest has no id; a manifest
    # naming another session's id must not show as that session).
    sid = view.session.key
    best = ""
    if view.best is not None:
        best = f"#{view.best.n} {number(view.best.value)}{view.best.mark}"
    return (
        f'<tr><td><a class="mono" href="/s/{url_name(view.session.key)}">{text(sid)}</a></td>'
        f"<td>{text(view.name or '')}</td>"
        f'<td class="{view.status}">{view.status}</td>'
        f"<td>{text(view.progress)}{_not_read(view)}</td>"
        f'<td class="num">{text(best)}</td>'
        f"<td>{text((view.created_at or '')[:19].replace('T', ' '))}</td>"
        f"<td>{labels_html((view.session.manifest or {}).get('labels'))}</td></tr>"
    )


def _not_read(view: SessionView) -> str:
    """The collections that could not be listed (the progress counts none of their records)."""
    if not view.collection_errors:
        return ""
    return f' <span class="bad">{text(not_read(view.collection_errors))}</span>'


def _pager(query: ListQuery, total: int) -> str:
    pages = max((total + PER_PAGE - 1) // PER_PAGE, 1)
    page = _page_of(query, total)
    parts = [f"<span>page {page} of {pages} ({total} sessions)</span>"]
    if page > 1:
        parts.append(f'<a href="{text(query.url(page=page - 1), whole=True)}">previous</a>')
    if page < pages:
        parts.append(f'<a href="{text(query.url(page=page + 1), whole=True)}">next</a>')
    return f'<p class="pager">{"".join(parts)}</p>'


def list_body(store: Store, query: ListQuery, objective: Objective) -> str:
    """The sessions page body: the controls, one page of sessions, the pager."""
    shown, total = select(store, query)
    views = [SessionView.load(s, objective) for s in shown]
    head = "".join(
        f"<th>{h}</th>"
        for h in ("id", "name", "status", "progress", "best", "created (UTC)", "labels")
    )
    rows = "".join(_row(v) for v in views)
    table = (
        f'<table class="sortable sessions"><thead><tr>{head}</tr></thead><tbody>{rows}</tbody>'
        "</table>"
        if views
        else '<p class="dim">No sessions match.</p>'
    )
    return f"<h1>Sessions</h1>{_controls(query)}{table}{_pager(query, total)}"

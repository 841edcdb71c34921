"""`sessionstore view`: the store served read-only over HTTP (the standard library's server).

Rules (docs/viewer.md, "Safety"):
- GET and HEAD only: any other method is 405, whatever the path.
- The request path is split into segments before any decoding, then each is
  percent-decoded on its own: a segment that decodes to empty, `.`, `..`, or
  holds `/` or NUL (`%2e%2e`, `%2f`, `//`) is 404 before anything is read.
  A session is opened by id (`Store.open`: validated, never followed), a
  record only if its collection lists it, a file only if each level of its
  record lists it (`view.files.is_listed`), and read through the storage
  seam, which refuses symlinks and non-regular files: 404, never read.
- Every response carries `X-Content-Type-Options: nosniff` and a
  Content-Security-Policy; a file's contents are `text/plain` (or a download)
  under a policy that forbids everything (`html.FILE_CSP`).
- A connection idle for `TIMEOUT` seconds is closed, and one that has not sent
  its whole request head within `HEAD_TIMEOUT` is cut off, 408 (`view.watchdog`):
  a stalled or dribbling client holds one thread for a while, never the
  server. At most `MAX_CONNECTIONS` are handled at once (`view.limits`); the
  kernel queues `BACKLOG` more while the accepting thread is busy or waits,
  so a burst that fits is never dropped (a dropped SYN costs a client a
  second or more), and an accept short of descriptors backs off rather than
  spinning.
- On loopback, a request whose `Host` names anything but loopback is 403: a
  page of another site whose name was rebound to 127.0.0.1 (DNS rebinding)
  reads nothing. A non-loopback `--host` serves any `Host`: the user chose it.
- Malformed requests (a bad request line, a target with a byte that is not
  printable ASCII, huge or too many headers, HTTP/0.9 but GET) get a plain-text
  error with the same headers as any answer.
"""

from __future__ import annotations

import io
import re
import socket
import sys
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, unquote_to_bytes

from sessionstore._display import escape
from sessionstore._json import dumps_exact
from sessionstore.errors import InvalidId, SessionNotFound
from sessionstore.format.names import SERVICE, TRIALS, record_number, validate_id
from sessionstore.inspect.best import Objective
from sessionstore.inspect.summary import SessionView, session_summary
from sessionstore.store.lineage import lineage_info
from sessionstore.store.session import Session, Store
from sessionstore.store.status import session_status
from sessionstore.view.files import Stream, raw_file
from sessionstore.view.hosts import is_loopback, is_loopback_host, single_host
from sessionstore.view.html import FILE_CSP, page, page_csp, text, url_name
from sessionstore.view.limits import BoundedServer
from sessionstore.view.list_page import ListQuery, list_body
from sessionstore.view.record_page import RecordRef, file_parts, listed_record, record_body
from sessionstore.view.session_page import Links, live_signature, session_body
from sessionstore.view.watchdog import HEAD_TIMEOUT, HeadDeadlines, HeadReader

TIMEOUT = 30.0
BACKLOG = 128
_ALLOWED = "GET, HEAD"
_PAGE_CSP = page_csp(served=True, header=True)
_HTML = "text/html; charset=utf-8"
_PRINTABLE_ASCII = re.compile(r"[!-~]+")
# (status, content type, Content-Security-Policy, body, extra headers); a file past the
# read limit is a `Stream`, sent in chunks.
Response = tuple[int, str, str, bytes | Stream, dict[str, str]]


class NotFound(Exception):
    """The path names nothing the viewer serves (or something it refuses to read)."""


def segments(target: str) -> tuple[list[str], dict[str, list[str]]]:
    """The decoded path segments and query of a request target; `NotFound` for a path
    that is not plainly inside the site (see the module docstring)."""
    path, _, query = target.partition("?")
    if not path.startswith("/"):
        raise NotFound
    raw = path[1:].split("/")
    if raw[-1] == "" and len(raw) > 1:
        raw.pop()  # one trailing slash: /s/ID/ is /s/ID
    parts = []
    for item in raw:
        name = unquote_to_bytes(item).decode("utf-8", "surrogateescape")
        if name in (".", "..") or "/" in name or "\0" in name or (not name and raw != [""]):
            raise NotFound
        parts.append(name)
    try:
        fields = parse_qs(query, max_num_fields=20)
    except ValueError:  # more fields than any page takes
        raise NotFound from None
    return [p for p in parts if p], fields


class Site:
    """The pages and JSON of one store; `respond` maps a path to (status, type, CSP, body)."""

    def __init__(self, root: Path, objective: Objective | None = None) -> None:
        self.store = Store(root)
        self.objective = objective or Objective()

    def _session(self, key: str) -> Session:
        try:
            return self.store.open(key)
        except (InvalidId, SessionNotFound):
            raise NotFound from None

    def _links(self, session: Session) -> Links:
        base = f"/s/{url_name(session.key)}"

        def other(session_id: str) -> str | None:
            try:
                return f"/s/{url_name(validate_id(session_id))}"
            except InvalidId:
                return None

        return Links(record=lambda c, n: f"{base}/{c}/{n}", session=other)

    def respond(self, target: str) -> Response:
        """What a GET of `target` answers; `NotFound` for anything else."""
        parts, query = segments(target)
        if not parts:
            body = list_body(self.store, ListQuery.parse(query), self.objective)
            return 200, _HTML, _PAGE_CSP, self._page("Sessions", body), {}
        if parts[0] == "api" and len(parts) in (2, 3) and parts[1] == "sessions":
            if len(parts) == 2:
                value: Any = [session_summary(s, self.objective) for s in self.store.sessions()]
            else:
                value = SessionView.load(self._session(parts[2]), self.objective).detail()
            return 200, "application/json", FILE_CSP, dumps_exact(value), {}
        if parts[0] != "s" or len(parts) < 2:
            raise NotFound
        session = self._session(parts[1])
        if len(parts) == 2:
            return 200, _HTML, _PAGE_CSP, self._session_page(session), {}
        if parts[2] not in (TRIALS, SERVICE) or len(parts) < 4:
            raise NotFound
        n = record_number(parts[3])
        if n is None:
            raise NotFound
        ref = RecordRef(session, parts[2], n)
        if len(parts) == 4:
            return 200, _HTML, _PAGE_CSP, self._record_page(ref, query), {}
        if parts[4] != "files" or len(parts) < 6:
            raise NotFound
        return self._file(ref, parts[5:])

    def _page(self, title: str, body: str, live: tuple[str, str] | None = None) -> bytes:
        nav = f'<header><a href="/">sessions</a><span class="dim">{text(self.store.root)}</span>'
        return page(title, f"{nav}</header>{body}", served=True, live=live).encode(
            "utf-8", "surrogateescape"
        )

    def _live(
        self, session: Session, status: str, view: SessionView | None
    ) -> tuple[str, str] | None:
        """The live-reload target of a running session's page, else None."""
        if status != "running":
            return None
        trials = view.trials if view else session.trials.records()
        service = view.service if view else session.service.records()
        return f"/api/sessions/{url_name(session.key)}", live_signature(status, trials, service)

    def _session_page(self, session: Session) -> bytes:
        view = SessionView.load(session, self.objective)
        body = session_body(view, lineage_info(session), self._links(session))
        live = self._live(session, view.status, view)
        return self._page(view.name or session.key, body, live)

    def _record_page(self, ref: RecordRef, query: dict[str, list[str]]) -> bytes:
        found = listed_record(ref)
        if found is None:
            raise NotFound
        record, numbers = found
        against = record_number(query.get("against", [""])[-1])
        other = RecordRef(ref.session, TRIALS, against) if against in numbers else None
        body = record_body(ref, record, numbers, other)
        live = self._live(ref.session, session_status(ref.session), None)
        return self._page(f"{ref.session.key} {ref.collection}/{ref.n}", body, live)

    def _file(self, ref: RecordRef, parts: list[str]) -> Response:
        key = file_parts(ref, parts)
        if key is None:
            raise NotFound
        found = raw_file(ref.session.storage, key)
        if found is None:
            raise NotFound
        body, binary = found
        if not binary:
            return 200, "text/plain; charset=utf-8", FILE_CSP, body, {}
        disposition = f"attachment; filename*=UTF-8''{url_name(parts[-1])}"
        return 200, "application/octet-stream", FILE_CSP, body, {"Content-Disposition": disposition}


class Handler(BaseHTTPRequestHandler):
    """GET and HEAD through `Site.respond`; every other method 405."""

    site: Site  # set on the subclass `make_server` builds
    deadlines: HeadDeadlines  # likewise
    any_host = False  # bound beyond loopback: every Host header is served
    own_host = "localhost"  # the `--host` that was bound, a name for it in `Host` too
    timeout = TIMEOUT
    server_version = "sessionstore-view"
    # A request line without a version (HTTP/0.9) is still answered with a status line
    # and headers: an answer without them would carry no policy and no nosniff.
    default_request_version = "HTTP/1.0"

    def setup(self) -> None:
        super().setup()
        self.deadlines.start(self.connection)

    def parse_request(self) -> bool:
        rfile = self.rfile
        if len(str(self.raw_requestline, "iso-8859-1").rstrip("\r\n").split()) == 2:  # as stdlib
            # HTTP/0.9 has no headers, but the standard library reads them all the same:
            # the client would wait for an answer the server waits for a blank line to send.
            self.rfile = io.BytesIO(b"\r\n")
        else:
            self.rfile = HeadReader(rfile)
        try:
            parsed = super().parse_request()
        finally:
            self.rfile = rfile
            late = self.deadlines.done(self.connection)  # the head is read (or refused)
        if not parsed:
            return False
        if late:  # what was read by the deadline is no whole request: never served
            self.send_error(408, f"request head not complete within {HEAD_TIMEOUT} s")
            return False
        # The target as sent: the standard library reduces a leading `//` to `/`
        # (against open redirects, which a server that never redirects has none
        # of), and an empty segment is 404 here like any other.
        self.path = self.requestline.split()[1]
        if not _PRINTABLE_ASCII.fullmatch(self.path):
            # A raw byte past ASCII (or a control) is no URL: RFC 9112 answers 400, not
            # a guess. Read as Latin-1 (as the standard library decodes the line), raw
            # `\xff` named the file `ÿ` (bytes c3 bf), not the one `%FF` names.
            self.send_error(400, "request target holds bytes that are not printable ASCII")
            return False
        return True

    def finish(self) -> None:
        self.deadlines.done(self.connection)  # no request line came
        super().finish()

    def version_string(self) -> str:
        return self.server_version  # no Python version: nothing to fingerprint

    def __getattr__(self, name: str) -> Any:
        # `do_<METHOD>` for any method but GET and HEAD (BaseHTTPRequestHandler answers
        # an unknown one 501): read-only means 405, with Allow.
        if name.startswith("do_"):
            return self._not_allowed
        raise AttributeError(name)

    def _not_allowed(self) -> None:
        self._send(
            405, "text/plain; charset=utf-8", FILE_CSP, b"405: read-only\n", {"Allow": _ALLOWED}
        )

    def do_GET(self) -> None:
        self._answer(head=False)

    def do_HEAD(self) -> None:
        self._answer(head=True)

    def send_error(self, code: int, message: str | None = None, explain: str | None = None) -> None:
        # What the standard library sends for a malformed request (400, 414, 431, 505):
        # plain text with every header of `_send`, the client's bytes escaped.
        self.log_error("code %d, message %s", code, message)
        reason = escape(message or self.responses.get(code, ("error",))[0])
        body = f"{code}: {reason}\n".encode("utf-8", "backslashreplace")
        self.close_connection = True
        extra = {"Connection": "close"}
        self._send(
            code, "text/plain; charset=utf-8", FILE_CSP, body, extra, head=self.command == "HEAD"
        )

    def _answer(self, *, head: bool) -> None:
        try:
            host = single_host(self.headers)
        except ValueError as exc:
            self.send_error(400, str(exc))
            return
        if not self.any_host and host is not None and not is_loopback_host(host, self.own_host):
            self.send_error(403, "Host is not a loopback name (DNS rebinding?)")
            return
        try:
            status, kind, csp, body, extra = self.site.respond(self.path)
        except NotFound:
            status, kind, csp, extra = 404, _HTML, _PAGE_CSP, {}
            body = page(
                "Not found", '<h1>Not found</h1><p><a href="/">sessions</a></p>', served=True
            ).encode()
        except Exception as exc:  # one bad page must not stop the server; say why, escaped
            self.log_message("error: %s", f"{type(exc).__name__}: {exc}")  # escaped there
            status, kind, csp, extra = 500, "text/plain; charset=utf-8", FILE_CSP, {}
            body = b"500: internal error (see the server's log)\n"
        self._send(status, kind, csp, body, extra, head=head)

    def _send(
        self,
        status: int,
        kind: str,
        csp: str,
        body: bytes | Stream,
        extra: dict[str, str],
        *,
        head: bool = False,
    ) -> None:
        """The response: the headers every answer carries, then the body (none for HEAD);
        a `Stream` is written chunk by chunk and closed whether or not it was read."""
        size = len(body) if isinstance(body, bytes) else body.size
        try:
            self.send_response(status)
            headers = {
                "Content-Type": kind,
                "Content-Security-Policy": csp,
                "X-Content-Type-Options": "nosniff",
                "X-Frame-Options": "DENY",
                "Referrer-Policy": "no-referrer",
                "Cache-Control": "no-store",
                "Content-Length": str(size),
                **extra,
            }
            for name, value in headers.items():
                self.send_header(name, value)
            self.end_headers()
            if head:
                return
            if isinstance(body, bytes):
                self.wfile.write(body)
                return
            self.wfile.write(body.first)
            for chunk in body.rest:
                self.wfile.write(chunk)
        finally:
            if isinstance(body, Stream):
                body.close()

    def log_message(self, format: str, *args: Any) -> None:
        # Request lines are the client's bytes: one escaped line each, never terminal control.
        line = escape(format % args)
        sys.stderr.write(f"{self.address_string()} {line}\n")


class _Server(BoundedServer):
    request_queue_size = BACKLOG

    def handle_error(self, request: Any, client_address: Any) -> None:
        # The standard library prints a whole traceback for whatever a connection raised
        # outside `_answer`: mostly a client that left (a reset, a broken pipe), mid-answer
        # or before its request ended. One escaped line instead, as every line of the log.
        exc = sys.exception()
        what = "the client left" if isinstance(exc, ConnectionError) else "error"
        sys.stderr.write(f"{client_address[0]} {what}: {escape(f'{type(exc).__name__}: {exc}')}\n")


def make_server(root: Path, host: str, port: int, objective: Objective) -> ThreadingHTTPServer:
    """A server of the store at `root` bound to (host, port); port 0 picks a free one.
    `[::1]` is `::1`, as a URL spells it."""
    if len(host) > 2 and host.startswith("[") and host.endswith("]"):  # `[]` is no address
        host = host[1:-1]
    attrs = {"site": Site(root, objective), "own_host": host, "deadlines": HeadDeadlines()}
    handler: type[Handler] = type("SiteHandler", (Handler,), attrs)
    server_class: type[ThreadingHTTPServer] = _Server
    if ":" in host:
        server_class = type("_Server6", (_Server,), {"address_family": socket.AF_INET6})
    server = server_class((host, port), handler)
    # Loopback is the address bound, however `--host` spelled it: `127.1`, `localhost.`
    # or a host name resolving to 127.0.1.1 keep the Host check (DNS rebinding) on.
    handler.any_host = not is_loopback(str(server.server_address[0]))
    return server


def url_of(server: ThreadingHTTPServer) -> str:
    """The URL a person opens for `server`."""
    host, port = server.server_address[:2]
    name = host.decode() if isinstance(host, bytes) else host
    shown = f"[{name}]" if ":" in name else name
    return f"http://{shown}:{port}/"


def serve(
    root: Path, host: str, port: int, objective: Objective, announce: Callable[[str, bool], None]
) -> None:
    """Serve until interrupted, ranking trials by `objective`; `announce` gets the URL and
    whether the address bound is loopback, once the socket listens and before any
    request is answered."""
    server = make_server(root, host, port, objective)
    try:
        announce(url_of(server), is_loopback(str(server.server_address[0])))
        server.serve_forever()
    finally:
        server.server_close()

"""The page shell and the escaping every view uses: text is data, never markup.

`text()` is the one way a value reaches HTML: control and reordering
characters are written as visible escapes (`_display.escape`, as the
terminal views do), then `html.escape` makes `<script>` text. The style
sheet and the one script are constants, allowed by their SHA-256 in the
Content-Security-Policy, so nothing else inline can run even if a bug let
markup through; no page refers to anything outside itself or the server.
"""

from __future__ import annotations

import base64
import hashlib
import html
from urllib.parse import quote

from sessionstore._display import escape, escape_lines, fmt_number

__all__ = [
    "FILE_CSP",
    "VALUE_LIMIT",
    "number",
    "page",
    "page_csp",
    "text",
    "text_lines",
    "url_name",
]

_STYLE = """
:root{--fg:#1d232a;--dim:#6a737d;--line:#d8dee4;--ok:#1a7f37;--bad:#cf222e;--warn:#9a6700;
--best:#bf8700;--link:#0969da;--bg2:#f6f8fa}
body{font:14px/1.45 system-ui,sans-serif;color:var(--fg);margin:0 auto;max-width:1200px;
padding:0 16px 48px}
header{display:flex;gap:16px;align-items:baseline;border-bottom:1px solid var(--line);
margin-bottom:12px}
h1{font-size:20px;margin:14px 0 8px}h2{font-size:16px;margin:22px 0 6px}
a{color:var(--link);text-decoration:none}a:hover{text-decoration:underline}
table{border-collapse:collapse;margin:4px 0}th,td{padding:3px 10px 3px 0;text-align:left;
vertical-align:top;border-bottom:1px solid var(--line)}th{font-weight:600;white-space:nowrap}
th.sort{cursor:pointer}td.num,th.num{text-align:right;font-variant-numeric:tabular-nums}
code,pre,.mono{font:12.5px/1.4 ui-monospace,SFMono-Regular,Menlo,monospace}
pre{background:var(--bg2);padding:8px;overflow:auto;max-height:70vh;margin:4px 0}
dl.facts{display:grid;grid-template-columns:max-content 1fr;gap:2px 16px;margin:0}
dl.facts dt{color:var(--dim)}dl.facts dd{margin:0}
.dim,.note{color:var(--dim)}.completed,.ok,.done,.verified,.pass{color:var(--ok)}
.torn,.bad,.failed,.interrupted,.fail{color:var(--bad)}
.in_flight,.running,.unknown,.indeterminate{color:var(--warn)}
.best{color:var(--best);font-weight:600}.label{background:var(--bg2);border:1px solid
var(--line);border-radius:8px;padding:0 6px;margin-right:4px;white-space:nowrap}
form.bar{display:flex;gap:10px;flex-wrap:wrap;align-items:center;margin:8px 0}
figure.chart{margin:8px 0 14px}figcaption{color:var(--dim);font-size:12.5px}
svg.chart{display:block;max-width:100%;height:auto;background:#fff}
svg .axis{stroke:#8c959f;stroke-width:1}svg .grid{stroke:#eaeef2;stroke-width:1}
svg text{font:11px system-ui,sans-serif;fill:#57606a}svg .line{fill:none;stroke:#8c959f;
stroke-width:1}svg .pt-ok{fill:#0969da}svg .pt-failed{fill:#cf222e}
svg .pt-best{fill:#bf8700;stroke:#1d232a;stroke-width:1.5}svg .limit{stroke:#cf222e;
stroke-width:1.5;stroke-dasharray:6 4}svg text.limit-label{fill:#cf222e}svg text.best{fill:#9a6700}
.d-add{color:#1a7f37;background:#e6ffec}.d-del{color:#cf222e;background:#ffebe9}
.d-hunk{color:#8250df}.d-file{font-weight:600}.verdict-line{font-weight:700}
.verdict-line.pass{background:#dafbe1}.verdict-line.fail{background:#ffebe9}
.key{color:#0550ae}.pager a,.pager span{margin-right:10px}
"""

# Table sorting (click a header; empty cells stay last), and a running session's live
# reload: poll the JSON the page was drawn from, reload when a record's state or the
# status changed.
_SCRIPT = """
(function(){
function key(td){var v=td.getAttribute('data-v');if(v===null)v=td.textContent.trim();
if(v==='')return null;var n=Number(v);return isNaN(n)?[1,v.toLowerCase()]:[0,n];}
document.querySelectorAll('table.sortable').forEach(function(t){
t.querySelectorAll('th').forEach(function(th,i){th.classList.add('sort');
th.addEventListener('click',function(){var b=t.tBodies[0],rows=[].slice.call(b.rows);
var up=th.getAttribute('data-dir')!=='asc';th.setAttribute('data-dir',up?'asc':'desc');
rows.sort(function(a,c){var x=key(a.cells[i]),y=key(c.cells[i]);
if(x===null||y===null)return (x===null)-(y===null);
var r=x[0]-y[0]||(x[1]<y[1]?-1:x[1]>y[1]?1:0);return up?r:-r;});
rows.forEach(function(r){b.appendChild(r);});});});});
var live=document.body.getAttribute('data-live');if(!live)return;
var sig=document.body.getAttribute('data-sig');
function state(rs){return rs.map(function(r){return r.n+':'+r.state;}).join(',');}
function poll(){fetch(live,{cache:'no-store'}).then(function(r){return r.ok?r.json():null;})
.then(function(d){if(!d)return setTimeout(poll,4000);
var now=d.status+'|'+state(d.trials)+'|'+state(d.service);
if(now!==sig)location.reload();else if(d.status==='running')setTimeout(poll,2000);})
.catch(function(){setTimeout(poll,4000);});}
setTimeout(poll,2000);})();
"""


def _sha256(source: str) -> str:
    digest = hashlib.sha256(source.encode()).digest()
    return f"'sha256-{base64.b64encode(digest).decode()}'"


_POLICY = (
    f"default-src 'none'; script-src {_sha256(_SCRIPT)}; style-src {_sha256(_STYLE)}; img-src data:"
)
# A file's contents, served as text: nothing in it may run or load anything.
FILE_CSP = "default-src 'none'; sandbox"
# Characters of one value (a name, a label, a note, an error) a page shows: a trial's
# 40 MB `learned` note made a session page of 160 MB, the server's peak 680 MB.
VALUE_LIMIT = 4096


def page_csp(*, served: bool, header: bool = False) -> str:
    """The Content-Security-Policy of a page: only its own style and script.

    A served page may also fetch its JSON and submit its forms to the server;
    the report (`served=False`) reaches nothing at all. The HTTP header
    (`header`) adds `frame-ancestors`, which a `<meta>` policy cannot carry.
    """
    if not served:
        return f"{_POLICY}; form-action 'none'; base-uri 'none'"
    policy = f"{_POLICY}; connect-src 'self'; form-action 'self'; base-uri 'none'"
    return f"{policy}; frame-ancestors 'none'" if header else policy


def text(value: object, *, whole: bool = False) -> str:
    """Any value as HTML text on one line: control characters visible, markup escaped.

    Past `VALUE_LIMIT` characters it is cut, saying how many more (plain text: it
    may be an attribute's value); `whole` never cuts, for a URL.
    """
    shown = value if isinstance(value, str) else str(value)
    if whole or len(shown) <= VALUE_LIMIT:
        return html.escape(escape(shown))
    more = len(shown) - VALUE_LIMIT
    return f"{html.escape(escape(shown[:VALUE_LIMIT]))}… ({more} more characters)"


def text_lines(value: str) -> str:
    """A file's contents as HTML text, line breaks and tabs kept (`escape_lines`)."""
    return html.escape(escape_lines(value))


def number(value: float | None) -> str:
    """`fmt_number`, or empty for no value."""
    return "" if value is None else fmt_number(float(value))


def url_name(name: str) -> str:
    """One path segment of a URL for a name (a file name's raw bytes kept: surrogateescape)."""
    return quote(name.encode("utf-8", "surrogateescape"), safe="")


def page(title: str, body: str, *, served: bool, live: tuple[str, str] | None = None) -> str:
    """A whole HTML document. `title` is plain text; `body` is HTML built by the views.

    `live` is (the JSON URL to poll, the current state signature) for a
    running session's page: the script reloads it when the state changes;
    without JavaScript a meta refresh does.
    """
    attrs = ""
    refresh = ""
    if live is not None:
        attrs = f' data-live="{html.escape(live[0])}" data-sig="{html.escape(live[1])}"'
        refresh = '<noscript><meta http-equiv="refresh" content="5"></noscript>'
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        f'<meta http-equiv="Content-Security-Policy" content="{page_csp(served=served)}">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f'<meta name="referrer" content="no-referrer">{refresh}'
        '<link rel="icon" href="data:,">'
        f"<title>{text(title)}</title><style>{_STYLE}</style></head>"
        f"<body{attrs}>{body}<script>{_SCRIPT}</script></body></html>\n"
    )

"""A file's contents as HTML: JSON and YAML pretty, diffs coloured, logs tailed.

Every line is data (`html.text_lines`): an agent's `<script>` is text and a
terminal escape is shown as `\\x1b`. A file with a NUL byte or that is not
UTF-8 is binary: offered for download, never shown. Shown text is capped
(`SHOW_LIMIT`): a log shows its tail (where the PASS/FAIL line is, the last
non-empty line, highlighted), anything else its head.
"""

from __future__ import annotations

import codecs
import difflib
import re
from collections.abc import Iterable

from sessionstore._orjson import orjson
from sessionstore.harness.verdict import Outcome, last_line_outcome
from sessionstore.view.html import text, text_lines

SHOW_LIMIT = 256 * 1024
_YAML_KEY = re.compile(r"^(\s*(?:- )?)([^\s:#][^:#]*?)(:)(?=\s|$)")
CONFIG_SUFFIXES = (".json", ".yml", ".yaml", ".toml")
# Tokens of text already known to be JSON: a string, a structural character, or the
# rest (a number, true, false, null) up to the next of those or whitespace.
_JSON_TOKEN = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"|[{}\[\],:]|[^\s{}\[\],:"]+')
_OPENERS, _CLOSERS = ("{", "["), ("}", "]")
_INDENTED_LIMIT = 4 * SHOW_LIMIT  # characters
# A configuration diff's inputs: difflib is quadratic on lines that half match (two
# 8,000-line files: minutes of one thread holding the GIL, every other page waiting).
DIFF_LIMIT = 64 * 1024
DIFF_LINES = 1000


def is_binary(data: bytes, *, head: bool = False, tail: bool = False) -> bool:
    """A NUL anywhere in `data`, or bytes that are not UTF-8.

    `head`: `data` is the start of a larger file (a character cut at its end is
    fine); `tail`: its end (a character cut at its start is fine). Checked whole,
    not sniffed: a file whose first 8 KiB are text and whose next byte is `\\xff`
    would be shown with U+FFFD where the file holds `\\xff`.
    """
    if b"\0" in data:
        return True
    start = 0
    if tail:  # skip the continuation bytes (at most 3) of a character cut at the start
        while start < min(3, len(data)) and 0x80 <= data[start] < 0xC0:
            start += 1
    try:
        codecs.utf_8_decode(memoryview(data)[start:], "strict", not head)
    except UnicodeDecodeError:
        return True
    return False


def is_binary_chunks(chunks: Iterable[bytes]) -> bool:
    """`is_binary` of the bytes `chunks` make, one chunk held at a time (a character may
    be cut between two): a large download is checked whole, never held whole."""
    left = b""
    for chunk in chunks:
        if b"\0" in chunk:
            return True
        data = left + chunk
        try:
            _, used = codecs.utf_8_decode(data, "strict", False)
        except UnicodeDecodeError:
            return True
        left = data[used:]
    return bool(left)  # a character cut by the end of the file


def kind(path: str) -> str:
    """json | yaml | diff | log | text, by the file's name."""
    name = path.rsplit("/", 1)[-1].lower()
    if name.endswith(".json"):
        return "json"
    if name.endswith((".yml", ".yaml")):
        return "yaml"
    if name.endswith((".diff", ".patch")):
        return "diff"
    if name.endswith((".log", ".out", ".err")) or "log" in name:
        return "log"
    return "text"


def _clip(data: bytes, tail: bool, size: int) -> tuple[bytes, str]:
    """At most SHOW_LIMIT bytes, cut at a line boundary, and a note saying what was left out
    (`data` is the whole file, or its last bytes when `size` is larger)."""
    if len(data) <= SHOW_LIMIT and size == len(data):
        return data, ""
    if tail:
        part = data[-SHOW_LIMIT:]
        part = part[part.find(b"\n") + 1 :] if b"\n" in part else part
        return part, f"showing the last {len(part)} of {size} bytes"
    part = data[:SHOW_LIMIT]
    part = part[: part.rfind(b"\n") + 1] if b"\n" in part else part
    return part, f"showing the first {len(part)} of {len(data)} bytes"


def render(path: str, data: bytes, size: int | None = None) -> str:
    """The HTML of one text file's contents (call only when `is_binary` is false); `size`
    larger than `data` says `data` is the tail of a log of that size."""
    found = kind(path)
    shown, note = _clip(data, tail=found == "log", size=len(data) if size is None else size)
    body = shown.decode("utf-8", "replace")
    note_html = f'<p class="dim">{note}</p>' if note else ""
    if found == "json" and not note and (pretty := indented_json(data)) is not None:
        return f'<pre class="json">{text_lines(pretty)}</pre>'
    if found == "yaml":
        return note_html + f'<pre class="yaml">{_yaml(body)}</pre>'
    if found == "diff":
        return note_html + f'<pre class="diff">{diff_lines(body.splitlines())}</pre>'
    if found == "log":
        # Clipped where the last SHOW_LIMIT bytes hold no newline: what is shown starts
        # inside a line, so its one line is not the whole line `check` reads.
        whole = not note or b"\n" in data[-SHOW_LIMIT:]
        return note_html + f'<pre class="log">{_log(shown, body, whole)}</pre>'
    return note_html + f"<pre>{text_lines(body)}</pre>"


def indented_json(data: bytes) -> str | None:
    """`data` indented two spaces a level, each token as the file spells it; None if it is
    not JSON, or if indenting it would pass `_INDENTED_LIMIT`.

    Not parsed and dumped again as such: that shows one of two duplicate keys,
    `1.1` for `1.10` and `é` for `\\u00e9`, a page that says the file holds what
    it does not. Only where the file's tokens are the very ones orjson writes
    for it does orjson indent it (about ten times faster than `_indent`).
    """
    try:
        value = orjson.loads(data)  # JSON, so its tokens are all there is
    except orjson.JSONDecodeError:
        return None
    try:
        compact = orjson.dumps(value)
    except TypeError:  # an integer past 64 bits, which orjson reads but does not write
        compact = b""
    if compact != data.strip():  # not orjson's own spelling already: compare the tokens
        tokens = _JSON_TOKEN.findall(data.decode())
        if "".join(tokens).encode() != compact:
            return _indent(tokens)
    indented = orjson.dumps(value, option=orjson.OPT_INDENT_2).decode()
    return indented if len(indented) <= _INDENTED_LIMIT else None


def _indent(tokens: list[str]) -> str | None:
    """JSON's tokens joined with `indented_json`'s layout; None past `_INDENTED_LIMIT`."""
    pieces: list[str] = []
    size = depth = i = 0
    while i < len(tokens):
        token = tokens[i]
        if token in _OPENERS:
            if i + 1 < len(tokens) and tokens[i + 1] in _CLOSERS:  # empty: `{}`, `[]`
                i += 1
                piece = token + tokens[i]
            else:
                depth += 1
                piece = token + "\n" + "  " * depth
        elif token in _CLOSERS:
            depth -= 1
            piece = "\n" + "  " * depth + token
        elif token == ",":
            piece = ",\n" + "  " * depth
        elif token == ":":
            piece = ": "
        else:
            piece = token
        size += len(piece)
        if size > _INDENTED_LIMIT:  # deep nesting: indentation would dwarf the file
            return None
        pieces.append(piece)
        i += 1
    return "".join(pieces)


def _yaml(body: str) -> str:
    out = []
    for line in body.split("\n"):
        match = _YAML_KEY.match(line)
        if match and not line.lstrip().startswith("#"):
            lead, key, colon = match.groups()
            rest = line[match.end() :]
            out.append(
                f'{text_lines(lead)}<span class="key">{text_lines(key)}</span>'
                f"{colon}{text_lines(rest)}"
            )
        else:
            out.append(text_lines(line))
    return "\n".join(out)


def diff_lines(lines: list[str]) -> str:
    """Unified-diff lines, each coloured by its first character (+, -, @@, file headers)."""
    out = []
    for line in lines:
        if line.startswith(("+++", "---", "diff ", "index ")):
            css = "d-file"
        elif line.startswith("@@"):
            css = "d-hunk"
        elif line.startswith("+"):
            css = "d-add"
        elif line.startswith("-"):
            css = "d-del"
        else:
            out.append(text_lines(line))
            continue
        out.append(f'<span class="{css}">{text_lines(line)}</span>')
    return "\n".join(out)


def _log(shown: bytes, body: str, whole: bool = True) -> str:
    """Log lines (`body`, the text of `shown`); the line that decides by the output
    contract's rule (`harness.verdict`), when it says PASS or FAIL, highlighted: the
    page never highlights a verdict that `check` would not give. `whole` False: `shown`
    starts inside a line (a tail with no newline to cut at), and nothing is highlighted."""
    out = [text_lines(line) for line in body.split("\n")]
    found = last_line_outcome(shown) if whole else None
    if found is not None and found[1] is not Outcome.INDETERMINATE:
        last, css = found[0], found[1].value
        out[last] = f'<span class="verdict-line {css}">{out[last]}</span>'
    return "\n".join(out)


def config_diff(name_a: str, a: bytes | None, name_b: str, b: bytes | None) -> str:
    """A unified diff of one configuration file between two records, coloured; a note
    instead when either side is past `DIFF_LIMIT` bytes or `DIFF_LINES` lines."""
    if a is not None and b is not None and a == b:
        return ""
    left = (a or b"").decode("utf-8", "replace").splitlines()
    right = (b or b"").decode("utf-8", "replace").splitlines()
    if max(len(a or b""), len(b or b"")) > DIFF_LIMIT or max(len(left), len(right)) > DIFF_LINES:
        return too_large_to_diff()
    lines = list(difflib.unified_diff(left, right, name_a, name_b, lineterm=""))
    return f'<pre class="diff">{diff_lines(lines)}</pre>' if lines else ""


def too_large_to_diff() -> str:
    """What a configuration diff shows for a file past `DIFF_LIMIT` or `DIFF_LINES`."""
    return (
        f'<p class="dim">too large to diff here (at most {DIFF_LINES} lines and '
        f"{DIFF_LIMIT // 1024} KiB a side); compare the raw files</p>"
    )


def binary_diff() -> str:
    """What a configuration diff shows for a file that is binary on either side."""
    return '<p class="dim">binary; not diffed here: compare the raw files</p>'


def binary_note(size: int) -> str:
    """What a binary file shows instead of its contents."""
    return f'<p class="dim">binary file, {text(size)} bytes: download only</p>'

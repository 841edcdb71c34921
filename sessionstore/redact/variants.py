"""The byte strings ("needles") that stand for one registered secret.

A secret leaks not only verbatim but in the spellings tools give it on the
way to a log: stripped of the newline `echo` added, one line of a PEM key at a
time, base64 at any offset of a larger blob, percent-encoded in a URL, escaped
inside a JSON or XML string, hex-dumped. `needles()` returns all of them.

Every needle has at least `MIN_NEEDLE_LEN` bytes left after stripping
whitespace. Shorter spellings (a short line of a multi-line secret, the
stripped form of a whitespace-padded value) are dropped rather than matched
anywhere: eight bytes of secret-derived text are rare enough in unrelated data
that matching them does not corrupt it, while "1" or "ok" would. Encoded forms
of a value of at least eight bytes are never shorter than eight bytes.
"""

from __future__ import annotations

import base64
import html
import json
import re
from urllib.parse import quote, quote_plus

MIN_NEEDLE_LEN = 8

_URLSAFE = bytes.maketrans(b"+/", b"-_")
_LINE_BREAK = re.compile(rb"\r?\n")
_PERCENT_HEX = re.compile(rb"%[0-9A-F]{2}")
# Base64 characters to drop at the front when the secret starts k bytes into
# a 3-byte group: with k filler bytes in front, the first k*8 bits of the
# encoding (rounded up to whole 6-bit characters) depend on those unknown bytes.
_LEADING_UNKNOWN = (0, 2, 3)


def needles(value: bytes) -> set[bytes]:
    """Return every spelling of `value` that must not survive redaction."""
    out: set[bytes] = set()
    for form in plain_forms(value):
        out.add(form)
        out.update(_encoded_forms(form))
    return {n for n in out if significant_len(n) >= MIN_NEEDLE_LEN}


def significant_len(value: bytes) -> int:
    """Length without surrounding whitespace: what the short-secret rule measures."""
    return len(value.strip())


def plain_forms(value: bytes) -> set[bytes]:
    """The value, stripped, and for multi-line values each line and both newline spellings."""
    forms = {value, value.strip()}
    if b"\n" in value:
        lf = value.replace(b"\r\n", b"\n")
        crlf = lf.replace(b"\n", b"\r\n")
        forms.update((lf, crlf, lf.strip(), crlf.strip()))
        for line in _LINE_BREAK.split(value):
            forms.update((line.rstrip(b"\r"), line.strip()))
    return {f for f in forms if significant_len(f) >= MIN_NEEDLE_LEN}


def _encoded_forms(form: bytes) -> set[bytes]:
    out = _base64_forms(form)
    out.update((form.hex().encode(), form.hex().upper().encode()))
    out.update(_percent_forms(form))
    try:
        text = form.decode("utf-8")
    except UnicodeDecodeError:
        return out  # JSON and XML carry text; undecodable bytes cannot appear there verbatim
    out.update(_json_forms(text))
    out.update(_xml_forms(text))
    return out


def _base64_forms(form: bytes) -> set[bytes]:
    """Base64 of `form` as a substring of the encoding of any larger blob.

    For each of the 3 alignments the characters that depend on unknown
    neighbouring bytes are dropped: at the front those mixed with the filler,
    at the back the last character whose low bits would come from whatever
    follows (so base64 of `secret + "\\n"` still contains a needle). The
    complete forms, with and without padding, are kept as well so that a
    secret at the very end of an encoded blob is covered up to its last
    character.
    """
    out: set[bytes] = set()
    for k, lead in enumerate(_LEADING_UNKNOWN):
        padded = base64.b64encode(b"\0" * k + form)
        unpadded = padded.rstrip(b"=")
        complete_groups = (k + len(form)) % 3 == 0
        trimmed = unpadded if complete_groups else unpadded[:-1]
        for enc in (padded, unpadded, trimmed):
            out.add(enc[lead:])
            out.add(enc[lead:].translate(_URLSAFE))
    return out


def _percent_forms(form: bytes) -> set[bytes]:
    spellings = {
        quote(form, safe="").encode(),
        quote(form, safe="/").encode(),
        quote_plus(form, safe="").encode(),
        quote(form, safe="!'()*").encode(),  # JavaScript's encodeURIComponent
    }
    # Some encoders emit lowercase hex digits (%2f); both decode the same.
    return spellings | {_PERCENT_HEX.sub(lambda m: m.group().lower(), s) for s in spellings}


# Characters HTML-safe JSON encoders write as `\\u00XX`: Go's encoding/json `<`, `>`, `&`
# (and U+2028, U+2029), Gson those and `=`, `'`, which a base64 secret's padding is.
_JSON_HTML_SAFE = ("<>&\u2028\u2029", "<>&='")


def _json_forms(text: str) -> set[bytes]:
    spellings = {json.dumps(text)[1:-1], json.dumps(text, ensure_ascii=False)[1:-1]}
    # "\/" is a legal JSON escape that PHP and some Java encoders emit.
    spellings |= {s.replace("/", "\\/") for s in spellings}
    for escaped in _JSON_HTML_SAFE:
        table = {ord(c): f"\\u{ord(c):04x}" for c in escaped}
        spellings |= {s.translate(table) for s in spellings}
    return {s.encode("utf-8") for s in spellings}


# Each quote as written and as encoders escape it (html.escape: `&quot;` `&#x27;`; XML:
# `&apos;`; markupsafe, so Jinja2, and Go's html packages: `&#34;` `&#39;`). The two
# vary apart: ElementTree and quoteattr escape `"` in an attribute and leave `'`.
_QUOTES = (('"', ("&quot;", "&#34;")), ("'", ("&#x27;", "&apos;", "&#39;")))


def _xml_forms(text: str) -> set[bytes]:
    spellings = {html.escape(text, quote=False)}  # `&`, `<` and `>`: escaped by all
    for mark, entities in _QUOTES:
        if mark in text:
            spellings |= {s.replace(mark, e) for s in spellings for e in entities}
    return {s.encode("utf-8") for s in spellings}

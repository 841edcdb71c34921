"""Every leak case from ANCHORS.md section 5, one named test each."""

from __future__ import annotations

import base64
import html
import json
import os
import xml.etree.ElementTree as ET
from collections.abc import Callable
from urllib.parse import quote, quote_plus
from xml.sax import saxutils

import pytest
from redact_engines import engine  # noqa: F401  (a fixture, used by name)

from sessionstore.errors import InvalidInput, RedactionUnsafe, SecretRefused
from sessionstore.redact.matcher import build
from sessionstore.redact.redactor import Redactor
from sessionstore.redact.stream import StreamRedactor

# Every case runs under both matching engines (redact_engines.py).
pytestmark = pytest.mark.usefixtures("engine")

SECRET = b"s3cr3t-T0ken/+value"
M = b"REDACTED"


def redactor(*secrets: bytes | str) -> Redactor:
    r = Redactor()
    for s in secrets:
        r.add(s)
    return r


def chunked(r: Redactor, pieces: list[bytes]) -> bytes:
    s = r.stream()
    return b"".join([s.feed(p) for p in pieces]) + s.finish()


def test_leak_split_at_every_chunk_offset() -> None:
    r = redactor(SECRET)
    data = b"head " + SECRET + b" middle " + SECRET + b" tail"
    expected = b"head REDACTED middle REDACTED tail"
    for cut in range(len(data) + 1):
        assert chunked(r, [data[:cut], data[cut:]]) == expected
    assert chunked(r, [data[i : i + 1] for i in range(len(data))]) == expected


def test_leak_self_overlapping_across_chunks() -> None:
    secret = b"abcabcabcabd"  # a failed partial match must restart inside itself
    r = redactor(secret)
    data = b"abcabcabc" + secret + b"!"
    for cut in range(len(data) + 1):
        assert chunked(r, [data[:cut], data[cut:]]) == b"abcabcabcREDACTED!"


def test_leak_gitlab_aab_restart() -> None:
    secret = b"aaaaaaab"  # GitLab's `aab` written as `xaa` then `ab`, scaled to 8 bytes
    r = redactor(secret)
    assert chunked(r, [b"x" + b"a" * 6, b"ab"]) == b"xREDACTED"


def test_leak_overlapping_abcd_bcdefgh() -> None:
    # `abcd` / `bcdefgh` scaled to the 8-byte minimum; leftmost-first leaves `fgh` visible.
    r = redactor(b"abcdefgh", b"cdefghijklmn")
    assert r.redact(b"<abcdefghijklmn>") == b"<REDACTED>"


def test_leak_adjacent_secrets_one_marker() -> None:
    r = redactor(b"first-secret", b"second-secret")
    assert r.redact(b"first-secretsecond-secret") == M


def test_leak_nested_secrets() -> None:
    r = redactor(b"outer-[inner-secret]-outer", b"inner-secret")
    assert r.redact(b"a outer-[inner-secret]-outer b inner-secret") == b"a REDACTED b REDACTED"


@pytest.mark.parametrize(
    ("data", "expected"),
    [
        pytest.param(SECRET + b" rest", M + b" rest", id="start"),
        pytest.param(b"rest " + SECRET, b"rest " + M, id="end"),
        pytest.param(SECRET, M, id="whole-file"),
    ],
)
def test_leak_at_start_end_and_whole_file(data: bytes, expected: bytes) -> None:
    r = redactor(SECRET)
    assert r.redact(data) == expected
    assert chunked(r, [data[i : i + 3] for i in range(0, len(data), 3)]) == expected


@pytest.mark.parametrize("registered_crlf", [False, True])
def test_leak_multiline_lf_vs_crlf(registered_crlf: bool) -> None:
    lines = [b"-----BEGIN KEY-----", b"MIIEowIBAAKCAQEA", b"-----END KEY-----"]
    eol, other = (b"\r\n", b"\n") if registered_crlf else (b"\n", b"\r\n")
    r = redactor(eol.join(lines))
    data = b"key:\n" + other.join(lines) + other + b"done\n"
    out = r.redact(data)
    assert not [line for line in lines if line in out]
    assert out == b"key:\n" + M + other * 3 + b"done\n"
    assert out.count(b"\n") == data.count(b"\n")


def test_leak_multiline_secret_inside_unified_diff() -> None:
    lines = [b"-----BEGIN KEY-----", b"MIIEowIBAAKCAQEA", b"-----END KEY-----"]
    r = redactor(b"\n".join(lines))
    diff = b"@@ -1,2 +1,5 @@\n context\n" + b"".join(b"+" + x + b"\n" for x in lines) + b" end\n"
    out = r.redact(diff)
    assert out == b"@@ -1,2 +1,5 @@\n context\n" + b"+REDACTED\n" * 3 + b" end\n"


def test_leak_whitespace_padded_registered_value() -> None:
    r = redactor(b"  padded-secret-value\t\n")
    assert r.redact(b"x=padded-secret-value;") == b"x=REDACTED;"


@pytest.mark.parametrize("prefix_len", [0, 1, 2])
@pytest.mark.parametrize("suffix", [b"", b"\n", b"\nmore bytes"], ids=["end", "echo", "more"])
@pytest.mark.parametrize("urlsafe", [False, True], ids=["std", "urlsafe"])
@pytest.mark.parametrize("padded", [True, False], ids=["pad", "nopad"])
def test_leak_base64(prefix_len: int, suffix: bytes, urlsafe: bool, padded: bool) -> None:
    r = redactor(SECRET)
    prefix = b"ab"[:prefix_len]
    encode = base64.urlsafe_b64encode if urlsafe else base64.b64encode
    enc = encode(prefix + SECRET + suffix)
    if not padded:
        enc = enc.rstrip(b"=")
    out = r.redact(b"data: " + enc + b"\n")
    # Characters computed from secret bytes alone: none may survive in a run of 4.
    first = -(-prefix_len * 4 // 3) + (1 if prefix_len else 0)
    last = (prefix_len + len(SECRET)) * 4 // 3
    exposed = [enc[i : i + 4] for i in range(first, last - 3) if enc[i : i + 4] in out]
    assert M in out and not exposed


def test_leak_base64_of_echo_output() -> None:
    r = redactor(SECRET)
    assert r.redact(base64.b64encode(SECRET + b"\n")).startswith(M)


@pytest.mark.parametrize("upper", [False, True])
def test_leak_hex(upper: bool) -> None:
    r = redactor(SECRET)
    enc = SECRET.hex().upper() if upper else SECRET.hex()
    assert r.redact(b"0x" + enc.encode() + b"\n") == b"0xREDACTED\n"


@pytest.mark.parametrize("encode", [quote, quote_plus, lambda s: quote(s, safe="")])
def test_leak_url_encoding(encode):  # type: ignore[no-untyped-def]
    secret = "p@ss w/rd+&=x?"
    r = redactor(secret)
    url = "https://h/?token=" + encode(secret) + "&next=1"
    assert r.redact(url.encode()) == b"https://h/?token=REDACTED&next=1"


def test_leak_url_encoding_of_javascript() -> None:
    # encodeURIComponent leaves `!'()*` as they are, which Python's quote escapes.
    r = redactor("p@ss (w0rd)!*'x")
    url = b"https://h/?token=p%40ss%20(w0rd)!*'x&next=1"  # what node prints
    assert r.redact(url) == b"https://h/?token=REDACTED&next=1"


@pytest.mark.parametrize("ensure_ascii", [True, False])
def test_leak_json_escapes(ensure_ascii: bool) -> None:
    secret = 'multi"line\\sécret\n\tend'
    r = redactor(secret)
    doc = json.dumps({"k": secret, "n": 1}, ensure_ascii=ensure_ascii).encode()
    out = r.redact(doc)
    assert json.loads(out) == {"k": "REDACTED", "n": 1}


@pytest.mark.parametrize(
    ("secret", "encoded"),
    [
        # Go's json.Marshal: `<`, `>` and `&` as \u escapes, HTML-safe.
        ("p&ss<w0rd>1", r'{"k":"p\u0026ss\u003cw0rd\u003e1"}'),
        # Gson's toJson: `=` and `'` too, so the padding of a base64 secret.
        ("dGhpcyBpcyBhIHNlY3JldA==", r'{"k":"dGhpcyBpcyBhIHNlY3JldA\u003d\u003d"}'),
        ("it's=a&secret", r'{"k":"it\u0027s\u003da\u0026secret"}'),
    ],
)
def test_leak_html_safe_json_escapes(secret: str, encoded: str) -> None:
    out = redactor(secret).redact(encoded.encode())
    assert json.loads(out) == {"k": "REDACTED"}


@pytest.mark.parametrize(
    "escape",
    [
        lambda s: html.escape(s),
        lambda s: html.escape(s).replace("&#x27;", "&apos;"),
        lambda s: ET.tostring(ET.Element("c", t=s)).decode(),  # `&quot;`, `'` as it is
        lambda s: saxutils.quoteattr(s),  # the same
        lambda s: html.escape(s).replace("&quot;", "&#34;").replace("&#x27;", "&#39;"),
    ],
    ids=["html", "apos", "elementtree", "quoteattr", "numeric"],
)
def test_leak_xml_escapes(escape: Callable[[str], str]) -> None:
    # Both quote kinds: every encoder escapes `&`, `<` and `>`, the quotes each its own way.
    secret = "pa\"ss'w0rd&<x>"
    out = redactor(secret).redact(escape(secret).encode())
    assert b"w0rd" not in out and M in out


def test_leak_non_utf8_neighbours() -> None:
    r = redactor(SECRET)
    data = b"\xff\xfe\x00" + SECRET + b"\x80\xc3\r\n"
    assert r.redact(data) == b"\xff\xfe\x00" + M + b"\x80\xc3\r\n"


def test_leak_names() -> None:
    r = redactor(SECRET.decode())
    assert r.redact_name("dump-" + SECRET.decode() + ".log") == "dump-REDACTED.log"
    raw = os.fsdecode(b"\xff" + SECRET)  # undecodable bytes next to the secret
    assert r.redact_name(raw) == os.fsdecode(b"\xffREDACTED")
    assert r.redact_name("innocent") == "innocent"


def test_leak_short_secret_in_name_only_whole() -> None:
    r = Redactor()
    r.add("prod", allow_short=True)
    assert r.redact_name("prod") == "REDACTED"
    assert r.redact_name("production") == "production"


def test_leak_secret_registered_after_files_were_mirrored() -> None:
    # A redactor only knows what was registered when it ran: the earlier copy
    # keeps the secret, so the mirror must recopy everything when secrets change.
    data = b"late " + SECRET
    assert redactor(b"other-secret").redact(data) == data
    assert redactor(b"other-secret", SECRET).redact(data) == b"late " + M


def test_leak_short_secret_refused_without_value() -> None:
    with pytest.raises(SecretRefused) as info:
        redactor(b"1234567")
    assert "1234567" not in str(info.value) and "1234567" not in repr(info.value)


def test_leak_no_repr_shows_a_secret() -> None:
    # What a traceback with locals, pytest or hypothesis prints of the redactor's state.
    r = Redactor()
    r.add(b"pin4711", allow_short=True)
    r.add(SECRET)
    for shown in (r, r.stream(), r._compile()):
        assert "4711" not in repr(shown) and SECRET.decode() not in repr(shown), shown


@pytest.mark.parametrize(
    ("data", "expected"),
    [
        (b"true", M),
        (b"  true\n", b"  " + M + b"\n"),
        (b"true\r\n", M + b"\r\n"),
        (b"it is true", b"it is true"),
        (b"true" + b" " * 300, b"true" + b" " * 300),  # past SHORT_FILE_MAX: not whole-file rule
    ],
)
def test_leak_short_secrets_whole_file_only(data: bytes, expected: bytes) -> None:
    r = Redactor()
    r.add("true", allow_short=True)
    assert r.redact(data) == expected
    assert chunked(r, [data[i : i + 1] for i in range(len(data))]) == expected


def test_leak_marker_containing_secret() -> None:
    r = Redactor(marker="TOKEN_hunter22_X")
    with pytest.raises(InvalidInput) as info:
        r.add("hunter22")
    assert "hunter22" not in str(info.value) and "literal #1" in str(info.value)
    with pytest.raises(InvalidInput):
        Redactor().add("prefix-REDACTED-suffix")  # would re-match in redacted output


def test_leak_applied_twice_is_stable() -> None:
    r = redactor(b"abcdefgh", b"cdefghijklmn", b"line-1-secret\nline-2-secret")
    data = b"x abcdefghijklmn y line-1-secret\r\nline-2-secret z " + base64.b64encode(b"abcdefgh")
    once = r.redact(data)
    assert r.redact(once) == once


def test_leak_secret_starting_with_marker_end() -> None:
    r = redactor(b"firstsecret1", b"EDabcdefgh")
    data = b"firstsecret1abcdefgh"  # output REDACTEDabcdefgh would hold the second secret
    assert r.redact(data) == M
    assert chunked(r, [data[i : i + 1] for i in range(len(data))]) == M


def test_leak_secret_ending_with_marker_start() -> None:
    r = redactor(b"firstsecret1", b"abcdefgR")
    data = b"xxabcdefgfirstsecret1yy"  # abcdefgREDACTED would hold the second secret
    out = r.redact(data)
    assert out == b"xxabcdefREDACTEDyy" and r.redact(out) == out
    assert chunked(r, [data[i : i + 2] for i in range(0, len(data), 2)]) == out


def test_leak_secret_completed_by_marker_again_and_again() -> None:
    r = redactor(b"firstsecret1", b"Dabcdefg")
    data = b"firstsecret1" + b"abcdefg" * 50 + b"!"  # each step uncovers the next copy
    assert r.redact(data) == M + b"!"
    assert chunked(r, [data[i : i + 5] for i in range(0, len(data), 5)]) == M + b"!"


@pytest.mark.parametrize(
    "data",
    [b"xoxb-ab!!secret-value!!", b"AKIA!!secret-valueABCDEFGH.", b"hf_" + b"a" * 26 + b"!!secret!"],
)
def test_leak_token_completed_by_marker(data: bytes) -> None:
    r = Redactor(patterns=True)
    r.add("!!secret-value" if b"-value" in data else "!!secret")
    out = r.redact(data)
    assert r.redact(out) == out
    assert chunked(r, [data[i : i + 1] for i in range(len(data))]) == out


def test_leak_run_the_marker_would_complete_is_refused_not_written() -> None:
    # aaaaaaaR: before the marker, every `a` of a long run completes it again;
    # no bounded-memory stream can decide where the run ends, so both refuse.
    r = redactor(b"firstsecret1", b"aaaaaaaR")
    data = b"a" * 200 + b"firstsecret1"
    with pytest.raises(RedactionUnsafe, match="choose another marker"):
        r.redact(data)
    with pytest.raises(RedactionUnsafe):
        chunked(r, [data[i : i + 7] for i in range(0, len(data), 7)])
    assert r.redact(b"a" * 9 + b"firstsecret1") == b"a" * 6 + M  # a short run settles


def test_an_ordinary_secret_leaves_the_marker_inert() -> None:
    # Inert: settling skips its checks (the fast path); any marker overlap turns it off.
    assert redactor(SECRET)._compile().inert
    for overlapping in (b"EDabcdefgh", b"abcdefgR"):
        assert not redactor(SECRET, overlapping)._compile().inert
    assert not Redactor(patterns=True)._compile().inert


@pytest.mark.parametrize(
    ("needles", "data"),
    [
        # Needle sets no Redactor registers (it adds the stripped form, refuses the
        # marker), as `build` takes them: each would be whole in the output if
        # settling were skipped.
        ({b"k9Xw2mPq\nzz", b"\nPQRSTUVWX"}, b"k9Xw2mPq\nzzPQRSTUVWX!"),
        ({b"k9Xw2mPq\rzz", b"\rPQRSTUVWX"}, b"k9Xw2mPq\rzzPQRSTUVWX!"),
        ({b"abcdefghij", b"xxREDACTEDyy"}, b"xxabcdefghijyy"),
    ],
)
def test_leak_needle_crossing_out_of_a_rendering_without_a_marker_tail(
    needles: set[bytes], data: bytes
) -> None:
    compiled = build(M, needles, set(), False)
    assert not compiled.inert
    outs = [StreamRedactor.redact_whole(compiled, data)]
    for size in (1, 3):
        s = StreamRedactor(compiled)
        outs.append(b"".join([s.feed(data[i : i + size]) for i in range(0, len(data), size)]))
        outs[-1] += s.finish()
    assert outs[0] == outs[1] == outs[2]
    assert not any(needle in outs[0] for needle in needles)

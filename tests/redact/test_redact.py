"""Redactor laws (hypothesis) and registration rules.

The laws compare against a deliberately naive reference: find every needle at
every position with bytes.find, merge overlapping and adjacent ranges, write
the marker plus the range's CR/LF bytes. The redactor may only differ from it
where the reference output itself holds a needle (one that shares bytes with a
marker); the marker-boundary laws below cover those inputs.
"""

from __future__ import annotations

import base64
import os
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from hypothesis import assume, given
from hypothesis import strategies as st
from redact_engines import engine  # noqa: F401  (a fixture, used by name)

from sessionstore.errors import InvalidInput, RedactionUnsafe, SecretRefused, StreamFinished
from sessionstore.redact.patterns import pattern_spans
from sessionstore.redact.redactor import DEFAULT_MARKER, SHORT_FILE_MAX, Redactor, StreamRedactor

# Every case runs under both matching engines (redact_engines.py).
pytestmark = pytest.mark.usefixtures("engine")

MARKER = DEFAULT_MARKER.encode()


def reference(r: Redactor, data: bytes) -> bytes:
    spans: list[tuple[int, int]] = []
    for needle in r.needles():
        if len(needle.strip()) < 8:
            if len(data) <= SHORT_FILE_MAX and data.strip() == needle:
                start = len(data) - len(data.lstrip())
                spans.append((start, start + len(needle)))
            continue
        i = data.find(needle)
        while i != -1:
            spans.append((i, i + len(needle)))
            i = data.find(needle, i + 1)
    merged: list[list[int]] = []
    for s, e in sorted(spans):
        if merged and s <= merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], e)
        else:
            merged.append([s, e])
    out, pos = b"", 0
    for s, e in merged:
        kept = bytes(b for b in data[s:e] if b in b"\r\n")
        out += data[pos:s] + MARKER + kept
        pos = e
    return out + data[pos:]


def streamed(stream: StreamRedactor, data: bytes, sizes: list[int]) -> bytes:
    out, pos, i = [], 0, 0
    while pos < len(data):
        size = sizes[i % len(sizes)] if sizes else len(data)
        out.append(stream.feed(data[pos : pos + size]))
        pos += size
        i += 1
    out.append(stream.finish())
    return b"".join(out)


def survivors(r: Redactor, out: bytes) -> list[bytes]:
    """Needles found in `out` by plain bytes.find, and token pattern matches if on."""
    found = [n for n in r.needles() if len(n.strip()) >= 8 and out.find(n) != -1]
    if r.patterns:
        found.extend(out[s:e] for s, e in pattern_spans(out, final=True))
    return found


def _usable(secret: bytes) -> bool:
    return len(secret.strip()) >= 8 and MARKER not in secret and secret.strip(b"\r\n") not in MARKER


secrets_st = st.lists(st.binary(min_size=8, max_size=24).filter(_usable), min_size=1, max_size=3)
encodings = [
    lambda s: s,
    lambda s: base64.b64encode(s),
    lambda s: base64.urlsafe_b64encode(b"x" + s + b"\n"),
    lambda s: base64.b64encode(b"yz" + s).rstrip(b"="),
    lambda s: s.hex().encode(),
    lambda s: s.replace(b"\n", b"\r\n"),
]


@st.composite
def documents(draw: st.DrawFn) -> tuple[list[bytes], bytes]:
    secrets = draw(secrets_st)
    pieces = draw(
        st.lists(
            st.one_of(
                st.binary(max_size=40),
                st.tuples(st.sampled_from(secrets), st.sampled_from(encodings)).map(
                    lambda t: t[1](t[0])
                ),
            ),
            max_size=8,
        )
    )
    return secrets, b"".join(pieces)


def make(secrets: list[bytes], *, patterns: bool = False) -> Redactor:
    r = Redactor(patterns=patterns)
    for s in secrets:
        r.add(s)
    return r


chunkings = st.lists(st.integers(min_value=1, max_value=17), max_size=6)


# -- laws ----------------------------------------------------------------------


@given(documents(), chunkings)
def test_stream_equals_whole_for_every_chunking(
    doc: tuple[list[bytes], bytes], sizes: list[int]
) -> None:
    secrets, data = doc
    r = make(secrets)
    assert streamed(r.stream(), data, sizes) == r.redact(data)


@given(documents())
def test_whole_equals_naive_reference(doc: tuple[list[bytes], bytes]) -> None:
    secrets, data = doc
    r = make(secrets)
    expected = reference(r, data)
    if not survivors(r, expected):
        assert r.redact(data) == expected


@given(documents())
def test_no_needle_survives(doc: tuple[list[bytes], bytes]) -> None:
    secrets, data = doc
    r = make(secrets)
    assert not survivors(r, r.redact(data))


@given(documents())
def test_redacting_twice_equals_once(doc: tuple[list[bytes], bytes]) -> None:
    secrets, data = doc
    r = make(secrets)
    once = r.redact(data)
    assert r.redact(once) == once


@given(documents())
def test_line_count_is_kept(doc: tuple[list[bytes], bytes]) -> None:
    secrets, data = doc
    out = make(secrets).redact(data)
    assert out.count(b"\n") == data.count(b"\n")


@given(st.binary(max_size=300), st.integers(min_value=1, max_value=5))
def test_one_byte_chunks_with_short_secret(data: bytes, size: int) -> None:
    r = Redactor()
    r.add("true", allow_short=True)
    r.add("correct horse battery")
    assert streamed(r.stream(), data, [size]) == r.redact(data) == reference(r, data)


def test_stream_equals_whole_with_patterns_across_long_input() -> None:
    rng = __import__("random").Random(7)
    tokens = [
        b"AKIA" + b"ABCDEFGHIJKLMNOP",
        b"ghp_" + b"a1" * 18,
        b"hf_" + b"x" * 34,
        b"xoxb-" + b"1234-abcd" * 5,
        b"-----BEGIN RSA PRIVATE KEY-----\nMIIE" + b"q" * 3000 + b"\n-----END RSA PRIVATE KEY-----",
    ]
    parts = []
    for _ in range(60):
        parts.append(bytes(rng.choice(b"abc \n.:/") for _ in range(rng.randint(0, 4000))))
        parts.append(rng.choice(tokens))
    data = b"".join(parts)
    r = Redactor(patterns=True)
    r.add("a registered secret")
    whole = r.redact(data)
    assert not [t for t in tokens if t in whole]
    for _ in range(4):
        sizes = [rng.randint(1, 9000) for _ in range(50)]
        assert streamed(r.stream(), data, sizes) == whole


# -- marker boundaries --------------------------------------------------------------
# Secrets that begin with the end of the marker (`D`, `ED`, ...), end with its
# start (`R`, `RE`, ...), start with a token prefix, or share bytes with each
# other; inputs glue their fragments right next to other secrets.

_HEADS = [MARKER[-k:] for k in range(1, len(MARKER))] + [b"xoxb-", b"AKIA", b"hf_", b"ghp_"]
_TAILS = [MARKER[:k] for k in range(1, len(MARKER))]
_body = st.binary(min_size=1, max_size=10).filter(lambda b: b.strip() != b"")


@st.composite
def boundary_cases(draw: st.DrawFn) -> tuple[Redactor, bytes]:
    r = Redactor(patterns=draw(st.booleans()))
    secrets: list[bytes] = []
    for _ in range(draw(st.integers(1, 4))):
        head = draw(st.sampled_from([b"", *_HEADS]))
        tail = draw(st.sampled_from([b"", *_TAILS]))
        if bool(secrets) and draw(st.booleans()):  # share a prefix or suffix with another secret
            other = draw(st.sampled_from(secrets))
            cut = draw(st.integers(1, len(other)))
            body = other[:cut] if draw(st.booleans()) else other[-cut:]
        else:
            body = draw(_body)
        secret = (head + body + draw(_body) + tail).ljust(8, b".")
        try:
            r.add(secret)
        except (InvalidInput, SecretRefused):
            # Contains the marker, lies inside it, or strips to under 8 bytes: refused,
            # as it must be.
            continue
        secrets.append(secret)
    assume(secrets)
    fragments = [s[i:j] for s in secrets for i in range(len(s)) for j in range(i + 1, len(s) + 1)]
    k = st.integers(1, len(MARKER) - 1)
    pair = st.tuples(st.sampled_from(secrets), st.sampled_from(secrets), k)
    piece = st.one_of(
        st.sampled_from(secrets),
        # The rest of one secret right after (or before) another: only the
        # marker would complete it.
        pair.map(lambda t: t[0] + t[1][t[2] :]),
        pair.map(lambda t: t[1][: -t[2]] + t[0]),
        st.sampled_from(fragments),
        st.sampled_from(_HEADS + _TAILS + [b"\n", b"\r\n", MARKER]),
        st.binary(max_size=6),
    )
    return r, b"".join(draw(st.lists(piece, max_size=12)))


@given(boundary_cases(), chunkings)
def test_marker_boundaries_leave_no_needle_and_are_idempotent(
    case: tuple[Redactor, bytes], sizes: list[int]
) -> None:
    r, data = case
    try:
        once = r.redact(data)
    except RedactionUnsafe:  # a long run the marker would complete: refused in both modes
        with pytest.raises(RedactionUnsafe):
            streamed(r.stream(), data, sizes)
        return
    assert not survivors(r, once)
    assert r.redact(once) == once
    assert streamed(r.stream(), data, sizes) == once
    assert once.count(b"\n") == data.count(b"\n")


# -- matching rules -------------------------------------------------------------


def test_bytes_outside_matches_are_identical() -> None:
    r = make([b"s3cret-value"])
    data = b"\x00\r\n\xff\xfe a s3cret-value b\r\n\x80"
    assert r.redact(data) == b"\x00\r\n\xff\xfe a REDACTED b\r\n\x80"


def test_multiline_range_keeps_line_breaks_after_one_marker() -> None:
    r = make([b"line-one-secret\r\nline-two-secret\nthree"])
    data = b"a line-one-secret\r\nline-two-secret\nthree z\n"
    assert r.redact(data) == b"a REDACTED\r\n\n z\n"


def test_empty_redactor_passes_everything_through() -> None:
    r = Redactor()
    assert not r
    assert r.redact(b"anything\x00") == b"anything\x00"
    assert streamed(r.stream(), b"abc" * 100, [7]) == b"abc" * 100


def test_bool_and_max_pattern_len() -> None:
    r = Redactor()
    r.add(b"12345678")
    assert r
    assert r.max_pattern_len >= len(base64.b64encode(b"\0\0" + b"12345678"))
    assert Redactor(patterns=True)
    assert Redactor(patterns=True).max_pattern_len > 16 * 1024


def test_secret_added_later_applies_to_next_redact_not_to_open_stream() -> None:
    r = Redactor()
    r.add("first-secret")
    s = r.stream()
    r.add("second-secret")
    assert r.redact(b"second-secret") == MARKER
    assert s.feed(b"second-secret") + s.finish() == b"second-secret"


def test_stream_cannot_be_fed_after_finish() -> None:
    s = make([b"abcdefgh"]).stream()
    s.finish()
    with pytest.raises(StreamFinished, match=r"^feed\(\) after finish\(\)") as raised:
        s.feed(b"x")
    assert isinstance(raised.value, ValueError) and raised.value.call == "feed"
    with pytest.raises(StreamFinished, match=r"call Redactor\.stream\(\)"):
        s.finish()


# A 256 KiB run of one secret, fed in 64 KiB chunks, in a fresh interpreter: tracemalloc
# counts every thread's allocations, and other tests' servers and pools live on in this
# one (one of them once took the peak from 4 to 13 MiB). A redactor holding the run's
# overlapping matches (one a byte) would peak near 30 MiB; under tracemalloc each chunk
# costs about a second, so four chunks, across three seams. argv: the tests' directory,
# the engine. Prints the output's length and the peak.
LONG_RUN = """
import sys, tracemalloc
sys.path.insert(0, sys.argv[1])
from redact_engines import force
from sessionstore.redact.redactor import Redactor
force(sys.argv[2], setattr)
r = Redactor()
r.add("aaaaaaaa")
s = r.stream()
chunk = b"a" * (1 << 16)
out = 0
tracemalloc.start()
for _ in range(4):  # one single merged range
    out += len(s.feed(chunk))
out += len(s.finish())
print(out, tracemalloc.get_traced_memory()[1])
"""


def test_long_run_of_overlapping_secrets_streams_in_bounded_memory(
    request: pytest.FixtureRequest,
) -> None:
    here = str(Path(__file__).parent)
    proc = subprocess.run(
        [sys.executable, "-c", LONG_RUN, here, request.getfixturevalue("engine")],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    out, peak = map(int, proc.stdout.split())
    assert out == len(MARKER)
    assert peak < 8 << 20


def test_concurrent_redaction_after_registration() -> None:
    r = make([b"shared-secret-1", b"shared-secret-2"])
    data = b"x shared-secret-1 y shared-secret-2 z" * 1000
    expected = r.redact(data)
    results: list[bytes] = []
    threads = [threading.Thread(target=lambda: results.append(r.redact(data))) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert results == [expected] * 8


@pytest.mark.parametrize(
    "token",
    [
        pytest.param(b"AKIAIOSFODNN7EXAMPLE", id="aws"),
        pytest.param(b"ghp_" + b"A" * 36, id="github"),
        pytest.param(b"github_pat_" + b"a_" * 41, id="github-fine-grained"),
        pytest.param(b"hf_" + b"abcdefghijklmnopq" * 2, id="huggingface"),
        pytest.param(b"xoxb-123456789012-abcdefABCDEF", id="slack"),
        pytest.param(
            b"-----BEGIN OPENSSH PRIVATE KEY-----\nb3Bl\nbnNz\n-----END OPENSSH PRIVATE KEY-----",
            id="pem",
        ),
    ],
)
def test_token_patterns_only_when_switched_on(token: bytes) -> None:
    data = b"key: " + token + b"\n"
    assert Redactor().redact(data) == data
    out = Redactor(patterns=True).redact(data)
    assert token not in out
    assert out.startswith(b"key: REDACTED") and out.count(b"\n") == data.count(b"\n")


def test_pem_block_longer_than_limit_is_not_a_block_in_either_mode() -> None:
    body = b"A" * (17 * 1024)
    pem = b"-----BEGIN PRIVATE KEY-----\n" + body + b"\n-----END PRIVATE KEY-----\n"
    r = Redactor(patterns=True)
    assert r.redact(pem) == pem
    assert streamed(r.stream(), pem, [1000]) == pem


# -- registration -------------------------------------------------------------------


def _assert_hidden(exc: BaseException, value: str) -> None:
    assert value not in str(exc) and value not in repr(exc)


def test_short_literal_refused_naming_literal_number() -> None:
    r = Redactor()
    r.add("long-enough-1")
    with pytest.raises(SecretRefused) as info:
        r.add("hunter2")
    assert "literal #2" in str(info.value)
    _assert_hidden(info.value, "hunter2")


def test_short_env_refused_naming_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SECRET_TOKEN", "pw12")
    with pytest.raises(SecretRefused) as info:
        Redactor().add_env("SECRET_TOKEN")
    assert "env SECRET_TOKEN" in str(info.value)
    _assert_hidden(info.value, "pw12")


def test_missing_or_empty_env_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("NO_SUCH_SECRET", raising=False)
    monkeypatch.setenv("EMPTY_SECRET", "  ")
    for name in ("NO_SUCH_SECRET", "EMPTY_SECRET"):
        with pytest.raises(SecretRefused, match=f"env {name}"):
            Redactor().add_env(name)


def test_env_value_registered(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("API_TOKEN", "tok-0123456789")
    r = Redactor()
    r.add_env("API_TOKEN")
    assert r.redact(b"Bearer tok-0123456789") == b"Bearer REDACTED"


def test_short_file_line_refused_naming_line_and_nothing_registered(tmp_path: Path) -> None:
    path = tmp_path / "secrets.txt"
    path.write_bytes(b"# tokens\nlong-secret-value\n\nPIN=4711\n")
    r = Redactor()
    with pytest.raises(SecretRefused) as info:
        r.add_file(path)
    assert f"{path}:4" in str(info.value)
    _assert_hidden(info.value, "4711")
    assert not r


def test_secrets_file_dotenv_forms(tmp_path: Path) -> None:
    path = tmp_path / ".env"
    path.write_bytes(
        b"raw-line-secret-1\r\n"
        b"export AWS_SECRET='single-quoted-2'\n"
        b'DB_PASSWORD="double \\"quoted\\" 3"\n'
        b"  # indented comment\n"
        b"PLAIN=unquoted-value-4 # note\n"
        b"dGhpcyBpcyBhIHNlY3JldA=\n"
    )
    r = Redactor()
    r.add_file(path)
    for value in (
        b"raw-line-secret-1",
        b"single-quoted-2",
        b'double "quoted" 3',
        b"unquoted-value-4",
        b"dGhpcyBpcyBhIHNlY3JldA=",
    ):
        assert r.redact(b"<" + value + b">") == b"<REDACTED>", value
    assert r.redact(b"indented comment") == b"indented comment"


def test_unreadable_secrets_file(tmp_path: Path) -> None:
    with pytest.raises(InvalidInput, match="cannot read"):
        Redactor().add_file(tmp_path / "missing.txt")


def test_empty_values_dropped() -> None:
    r = Redactor()
    r.add("")
    r.add(b"   \n")
    assert not r


def test_marker_must_be_plain_word() -> None:
    for bad in ("", "***", "[MASKED]", "RED ACTED", "a\nb"):
        with pytest.raises(InvalidInput):
            Redactor(marker=bad)
    assert Redactor(marker="MASKED_1").redact(b"") == b""


def test_custom_marker_used() -> None:
    r = Redactor(marker="XXX")
    r.add("the-secret")
    assert r.redact(b"a the-secret b") == b"a XXX b"


def test_str_values_with_surrogate_escapes_match_raw_bytes() -> None:
    raw = b"\xffsecret\xfe-bytes"
    r = Redactor()
    r.add(os.fsdecode(raw))
    assert r.redact(b"[" + raw + b"]") == b"[REDACTED]"

"""What the stream copies, and which matcher runs: under both engines, with real chunk sizes.

From `feed`, a chunk with no secret must come back as the object it came as
(no copy), a chunk with one must be copied once (the output), never joined to
the held-back bytes first. From `feed_parts`, every part but the markers and
a small held-back tail is a view of a chunk, and the stream keeps no
reference to a chunk it returned. Hyperscan must really be the engine for
many secrets, confirm nothing over whole needles, and match needles holding
NUL bytes whole.
"""

from __future__ import annotations

import base64
import random
import sys
import tracemalloc
from collections.abc import Callable

import pytest
from hypothesis import given
from hypothesis import strategies as st
from redact_engines import engine  # noqa: F401  (a fixture, used by name)

from sessionstore.redact import matcher
from sessionstore.redact.matcher import Span
from sessionstore.redact.redactor import Redactor

both_engines = pytest.mark.usefixtures("engine")

CHUNK = 1 << 20
SECRET = b"copy-test-secret-value"


def make(*secrets: bytes) -> Redactor:
    r = Redactor()
    for s in secrets:
        r.add(s)
    return r


def clean_chunk(seed: int) -> bytes:
    # Lowercase letters only: no needle (every one holds a '-' or a digit) can occur.
    rng = random.Random(seed)
    return bytes(rng.choices(b"abcdefghijklmnopqrstuvwxyz \n", k=CHUNK))


def _peak_growth(feed: Callable[[bytes], object], chunks: list[bytes]) -> list[int]:
    """`feed` each chunk; the peak memory each call allocated beyond what was held before."""
    growth: list[int] = []
    tracemalloc.start()
    try:
        for chunk in chunks:
            before = tracemalloc.get_traced_memory()[0]
            tracemalloc.reset_peak()
            feed(chunk)
            growth.append(tracemalloc.get_traced_memory()[1] - before)
    finally:
        tracemalloc.stop()
    return growth


def test_the_fixture_selects_the_engine(engine: str) -> None:  # noqa: F811
    compiled = make(SECRET)._compile()
    assert (compiled.fast is None) == (compiled.detector is not None) == (engine == "ahocorasick")
    if compiled.fast is not None:
        whole = len(compiled.fast._shape) == len(make(SECRET).needles())
        assert whole == (engine == "hyperscan")


def test_hyperscan_over_whole_needles_confirms_nothing(
    engine: str,  # noqa: F811
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Its hits are the occurrences; over prefixes (or with the prefilter) they
    # are only where one may start, and the confirming automaton must run.
    other = b"second-secret-4242"
    r = make(SECRET, other)
    confirmed: list[int] = []
    real = matcher.Compiled._confirm

    def confirm(self: matcher.Compiled, view: memoryview, windows: list[Span]) -> list[Span]:
        confirmed.append(len(windows))
        return real(self, view, windows)

    monkeypatch.setattr(matcher.Compiled, "_confirm", confirm)
    noise = clean_chunk(7)
    data = noise[:70_000] + SECRET + other + noise[:9] + base64.b64encode(other) + noise
    expected = noise[:70_000] + b"REDACTED" + noise[:9] + b"REDACTED" + noise
    assert r.redact(data) == expected
    s = r.stream()
    parts = [p for i in range(0, len(data), 4096) for p in s.feed_parts(data[i : i + 4096])]
    assert b"".join(parts + s.finish_parts()) == expected
    assert (not confirmed) == (engine == "hyperscan")


@both_engines
def test_chunks_without_a_secret_leave_as_the_objects_they_came_as() -> None:
    r = make(SECRET)
    chunks = [clean_chunk(i) for i in range(4)]
    s = r.stream()
    outputs = [out for c in chunks for out in (s.feed(c), s.feed(b""))] + [s.finish()]
    assert b"".join(outputs) == b"".join(chunks)
    for chunk in chunks:
        assert any(out is chunk for out in outputs)


@both_engines
def test_a_chunk_with_a_secret_is_copied_once() -> None:
    r = make(SECRET)
    chunks = [
        c[: CHUNK // 2] + SECRET + c[CHUNK // 2 + len(SECRET) :] for c in map(clean_chunk, range(4))
    ]
    s = r.stream()
    outputs: list[bytes] = []
    growth = _peak_growth(lambda chunk: outputs.append(s.feed(chunk)), chunks)
    outputs.append(s.finish())
    assert b"".join(outputs) == r.redact(b"".join(chunks))
    assert b"".join(outputs).count(b"REDACTED") == 4 and SECRET not in b"".join(outputs)
    # The output (a chunk minus the secret) is the only chunk-sized allocation.
    assert max(growth) < CHUNK + CHUNK // 4


@both_engines
def test_a_buffer_the_caller_reuses_does_not_change_the_output() -> None:
    r = make(SECRET)
    data = [clean_chunk(1)[:5000] + SECRET, clean_chunk(2)[:5000], clean_chunk(3)[:5000]]
    s = r.stream()
    buf = bytearray(len(data[0]))
    outputs = []
    for piece in data:
        buf[: len(piece)] = piece
        # Not bytes, as typed: what a caller that reuses one buffer might pass anyway.
        outputs.append(s.feed(memoryview(buf)[: len(piece)]))  # type: ignore[arg-type]
    outputs.append(s.finish())
    assert b"".join(outputs) == r.redact(b"".join(data))


@both_engines
@pytest.mark.parametrize(
    "secret", [b"\x00leading-nul", b"mid\x00dle-nul-secret", b"trailing-nul\x00"]
)
def test_needles_holding_nul_bytes_match_whole(secret: bytes) -> None:
    # The part before (or after) the NUL is all a strlen() would see of the needle.
    part = max(secret.split(b"\x00"), key=len)
    data = b"x " + secret + b" y " + part + b" z"
    assert make(secret).redact(data) == b"x REDACTED y " + part + b" z"


@both_engines
def test_many_secrets_across_every_chunk_boundary() -> None:
    rng = random.Random(5)
    secrets = [
        b"tok-%d-" % i + bytes(rng.choices(b"ABCDEFGHJK0123456789", k=20)) for i in range(60)
    ]
    r = make(*secrets)
    data = b" | ".join(s + b"\n" + s.hex().encode() for s in secrets[::3]) + secrets[-1]
    expected = r.redact(data)
    assert not [s for s in secrets if s in expected or s.hex().encode() in expected]
    for size in (1, 7, 64, 333, 4096):
        s = r.stream()
        out = b"".join(s.feed(data[i : i + size]) for i in range(0, len(data), size))
        assert out + s.finish() == expected


def _usable(secret: bytes) -> bool:
    return (
        len(secret.strip()) >= 8
        and b"REDACTED" not in secret
        and secret.strip(b"\r\n") not in b"REDACTED"
    )


@st.composite
def long_documents(draw: st.DrawFn) -> tuple[list[bytes], bytes]:
    """Documents longer than several `max_pattern_len`, so chunks are held whole."""
    secrets = draw(
        st.lists(st.binary(min_size=8, max_size=24).filter(_usable), min_size=1, max_size=3)
    )
    piece = st.one_of(
        st.binary(max_size=300),
        st.sampled_from(secrets),
        st.sampled_from(secrets).map(lambda s: base64.b64encode(b"x" + s)),
        st.sampled_from(secrets).map(lambda s: s.hex().encode()),
    )
    return secrets, b"".join(draw(st.lists(piece, max_size=24)))


@both_engines
@given(long_documents(), st.lists(st.integers(min_value=1, max_value=2000), min_size=1, max_size=5))
def test_stream_equals_whole_with_chunks_held_whole(
    doc: tuple[list[bytes], bytes], sizes: list[int]
) -> None:
    secrets, data = doc
    r = make(*secrets)
    s = r.stream()
    out, pos, i = [], 0, 0
    while pos < len(data):
        size = sizes[i % len(sizes)]
        out.append(s.feed(data[pos : pos + size]))
        pos, i = pos + size, i + 1
    assert b"".join(out) + s.finish() == r.redact(data)


@both_engines
def test_parts_of_a_chunk_with_a_secret_are_views_of_it_no_copy() -> None:
    r = make(SECRET)
    chunks = [
        c[: CHUNK // 3] + SECRET + c[CHUNK // 3 + len(SECRET) :] for c in map(clean_chunk, range(4))
    ]
    s = r.stream()
    parts: list[bytes | memoryview] = []
    growth = _peak_growth(lambda chunk: parts.extend(s.feed_parts(chunk)), chunks)
    parts.extend(s.finish_parts())
    assert b"".join(parts) == r.redact(b"".join(chunks))
    assert max(growth) < CHUNK // 4  # no chunk-sized allocation: nothing was joined
    # Every byte that is not a marker is a view of one of the input chunks, but
    # for the few bytes held back from each call, which were copied.
    views = [p for p in parts if isinstance(p, memoryview) and any(p.obj is c for c in chunks)]
    assert sum(map(len, views)) >= len(b"".join(parts)) - 4 * (r.max_pattern_len * 3 + 8)


@both_engines
@pytest.mark.parametrize("where", [0, CHUNK // 2, CHUNK - len(SECRET), CHUNK - 5])
def test_the_parts_stream_keeps_no_reference_to_a_chunk(where: int) -> None:
    # Holding the chunk until the next call would keep two chunks alive while
    # the caller reads the next one (see `StreamRedactor._hold`).
    r = make(SECRET)
    s = r.stream()
    chunks = [clean_chunk(i) for i in range(3)]
    chunks[1] = chunks[1][:where] + SECRET + chunks[1][where + len(SECRET) :]
    outputs = []
    for chunk in chunks:
        before = sys.getrefcount(chunk)
        parts = s.feed_parts(chunk)
        outputs.append(b"".join(parts))
        del parts
        assert sys.getrefcount(chunk) == before
    outputs.append(b"".join(s.finish_parts()))
    assert b"".join(outputs) == r.redact(b"".join(chunks))
    assert SECRET not in b"".join(outputs)


@both_engines
@given(
    long_documents(),
    st.lists(st.integers(min_value=1, max_value=2000), min_size=1, max_size=5),
    st.lists(st.booleans(), min_size=1, max_size=4),
)
def test_feed_and_feed_parts_mixed_in_any_order_are_the_whole_output(
    doc: tuple[list[bytes], bytes], sizes: list[int], joined: list[bool]
) -> None:
    # The two hold back different amounts (`feed` the whole chunk where it can),
    # so one stream may switch between them at any call.
    secrets, data = doc
    r = make(*secrets)
    s = r.stream()
    out: list[bytes] = []
    pos, i = 0, 0
    while pos < len(data):
        piece = data[pos : pos + sizes[i % len(sizes)]]
        out.append(s.feed(piece) if joined[i % len(joined)] else b"".join(s.feed_parts(piece)))
        pos, i = pos + len(piece), i + 1
    out.append(s.finish() if joined[i % len(joined)] else b"".join(s.finish_parts()))
    assert b"".join(out) == r.redact(data)

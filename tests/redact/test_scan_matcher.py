"""The scanner: every spelling the redactor removes is found, named, and found once.

Secrets here are obviously fake; files holding them are made under tmp_path only.
"""

from __future__ import annotations

import base64
import json
import os
from pathlib import Path
from urllib.parse import quote

import pytest
from hypothesis import given
from hypothesis import strategies as st
from redact_engines import engine  # noqa: F401  (a fixture, used by name)

from sessionstore.errors import InvalidInput, SecretRefused
from sessionstore.redact.patterns import PATTERNS
from sessionstore.redact.redactor import Redactor
from sessionstore.redact.scan import (
    PATTERN_NAMES,
    PATTERN_SOURCE,
    Hit,
    Scanner,
    labelled_needles,
)
from sessionstore.redact.variants import needles

# Every case runs under both matching engines (redact_engines.py).
pytestmark = pytest.mark.usefixtures("engine")

# Characters that make every encoding differ from the raw value: '/' (URL, JSON's
# optional escape), '"' (JSON, XML), '&' and '<' (XML), ' ' and '+' (URL).
FAKE = b'fake/not-a-secret "x"&<y> +1'
SOURCE = "FAKE_TOKEN"


def spellings(value: bytes) -> dict[str, bytes]:
    """One spelling per kind, made with the standard library (not with the scanner's code)."""
    b64 = base64.b64encode(value)
    url_safe = base64.urlsafe_b64encode(b"\0\0" + value)  # this alignment holds a "-"
    return {
        "raw": value,
        "hex": value.hex().encode(),
        "base64": b64,
        "base64url": url_safe,
        "url": quote(value, safe="").encode(),
        "json": json.dumps(value.decode())[1:-1].encode(),
        "xml": value.replace(b"&", b"&amp;").replace(b"<", b"&lt;").replace(b">", b"&gt;"),
    }


def scanner(*values: tuple[bytes, str], patterns: bool = False) -> Scanner:
    return Scanner(list(values), patterns=patterns)


def test_every_needle_has_a_kind() -> None:
    """No needle of the redactor's is left unlabelled: a new encoding fails here first."""
    labels = labelled_needles(FAKE)
    assert set(labels) == needles(FAKE)
    assert "encoded" not in labels.values()
    assert set(labels.values()) == {"raw", "hex", "base64", "base64url", "url", "json", "xml"}


def test_scanner_looks_for_exactly_the_redactors_needles() -> None:
    s = scanner((FAKE, SOURCE), (b"second-fake-secret\nwith two lines", "f:2"))
    r = Redactor()
    r.add(FAKE)
    r.add(b"second-fake-secret\nwith two lines")
    assert s.redactor.needles() == r.needles()


@pytest.mark.parametrize("kind", sorted(spellings(FAKE)))
def test_each_encoded_form_is_found_with_its_kind(kind: str) -> None:
    spelled = spellings(FAKE)[kind]
    data = b"prefix " + spelled + b" suffix"
    hits = scanner((FAKE, SOURCE)).scan_bytes(data)
    assert [(h.kind, h.source) for h in hits] == [(kind, SOURCE)]
    # base64 of a value preceded by filler starts inside the spelling; all others at it.
    assert 7 <= hits[0].offset <= 7 + 4
    assert FAKE not in repr(hits).encode()


def test_nested_needles_are_one_hit() -> None:
    """Padded base64 holds the unpadded and trimmed needles; a value holds its stripped form."""
    padded = b"  fake-secret-with-blanks \n"
    s = scanner((padded, SOURCE))
    assert s.scan_bytes(b"x" + padded + b"y") == [Hit(1, 1 + len(padded), "raw", SOURCE)]
    hits = s.scan_bytes(b"=" + base64.b64encode(padded) + b"=")
    assert [(h.offset, h.kind) for h in hits] == [(1, "base64")]


def test_a_multi_line_secret_and_one_of_its_lines() -> None:
    key = b"fake-line-one-0000\nfake-line-two-1111\n"
    s = scanner((key, "KEY"))
    assert [h.offset for h in s.scan_bytes(b"ab" + key)] == [2]
    assert [h.offset for h in s.scan_bytes(b"abc fake-line-two-1111 d")] == [4]


def test_adjacent_occurrences_are_two_hits() -> None:
    s = scanner((b"fake-secret-01", SOURCE))
    assert [h.offset for h in s.scan_bytes(b"fake-secret-01" * 2)] == [0, 14]


def test_each_source_is_named() -> None:
    s = scanner((b"fake-secret-aa", "A"), (b"fake-secret-bb", "f.env:3"), (b"fake-secret-aa", "C"))
    hits = s.scan_bytes(b"fake-secret-bb fake-secret-aa")
    assert [(h.offset, h.source) for h in hits] == [(0, "f.env:3"), (15, "A"), (15, "C")]


def test_patterns_are_named() -> None:
    assert len(PATTERN_NAMES) == len(PATTERNS)
    token = b"ghp_" + b"F" * 36
    aws = b"AKIA" + b"FAKEFAKEFAKEFAKE"
    hits = scanner(patterns=True).scan_bytes(b"a " + token + b" b " + aws)
    assert [(h.offset, h.kind, h.source) for h in hits] == [
        (2, "github-token", PATTERN_SOURCE),
        (2 + len(token) + 3, "aws-access-key-id", PATTERN_SOURCE),
    ]


def test_across_a_slash_only_what_holds_it() -> None:
    # Base64 holds `/`, and so may a PEM block's body: a path can spell either across
    # its names. Only a hit holding the last `/` counts (the others are the names' own).
    slashed = b"fake/slashed-secret"
    s = scanner((slashed, SOURCE), patterns=True)
    assert s.scan_across(b"root/fake", b"slashed-secret") == [Hit(-5, 14, "raw", SOURCE)]
    assert s.scan_across(b"root/fake/slashed-secret", b"x") == []  # held above the `/`
    assert s.scan_across(b"root", b"fake") == []
    pem = b"-----BEGIN RSA PRIVATE KEY-----\nMIIB/cdEF\n-----END RSA PRIVATE KEY-----"
    above, name = pem.split(b"/")
    assert [h.kind for h in s.scan_across(b"r/" + above, name)] == ["private-key"]
    assert not scanner((b"plain-secret-value", SOURCE)).may_cross(b"any-name")  # no walk asks


@pytest.mark.parametrize("chunk", [1, 2, 3, 7, 64, 1000])
def test_a_secret_across_chunk_boundaries_is_found_once(chunk: int) -> None:
    s = scanner((FAKE, SOURCE), patterns=True)
    data = b"." * 5000 + FAKE + b"." * 3 + b"ghp_" + b"Z" * 36 + b"." * 100 + FAKE
    chunks = [data[i : i + chunk] for i in range(0, len(data), chunk)]
    expected = s.scan_bytes(data)
    assert [h.offset for h in expected] == [5000, 5000 + len(FAKE) + 3, len(data) - len(FAKE)]
    assert list(s.scan_chunks(chunks)) == expected


@given(
    st.lists(
        st.sampled_from([b"ab", b"fake-secret-1", b"\n", b"ZmFrZS1zZWNy", b"ghp_"]), max_size=40
    ),
    st.integers(min_value=1, max_value=40),
)
def test_streaming_equals_whole_buffer(parts: list[bytes], chunk: int) -> None:
    s = scanner((b"fake-secret-1", SOURCE), (b"ab\nfake-secret-1", "B"), patterns=True)
    data = b"".join(parts)
    chunks = [data[i : i + chunk] for i in range(0, len(data), chunk)]
    assert list(s.scan_chunks(chunks)) == s.scan_bytes(data)


def test_a_boundary_exactly_at_every_position() -> None:
    s = scanner((FAKE, SOURCE))
    data = b"0123456789" + FAKE + b"9876543210"
    for cut in range(len(data) + 1):
        assert [h.offset for h in s.scan_chunks([data[:cut], data[cut:]])] == [10]


def test_scan_fd_reads_in_bounded_chunks(tmp_path: Path) -> None:
    path = tmp_path / "f"
    path.write_bytes(b"x" * 3000 + FAKE + b"x" * 10)
    fd = os.open(path, os.O_RDONLY)
    try:
        hits = list(scanner((FAKE, SOURCE)).scan_fd(fd, chunk=1024))
    finally:
        os.close(fd)
    assert [h.offset for h in hits] == [3000]


def test_from_sources_names_where_each_secret_came_from(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FAKE_ENV_SECRET", "fake-env-secret-value")
    secrets = tmp_path / "s.env"
    secrets.write_text("# comment\nAPI_KEY=fake-file-secret-value\n")
    s = Scanner.from_sources(["FAKE_ENV_SECRET"], secrets)
    hits = s.scan_bytes(b"fake-file-secret-value fake-env-secret-value")
    assert [h.source for h in hits] == [f"{secrets}:2", "FAKE_ENV_SECRET"]


def test_from_sources_refuses_bad_input(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("FAKE_UNSET_SECRET", raising=False)
    monkeypatch.setenv("FAKE_SHORT_SECRET", "s3cr3tX")
    with pytest.raises(SecretRefused, match="FAKE_UNSET_SECRET: is not set"):
        Scanner.from_sources(["FAKE_UNSET_SECRET"])
    with pytest.raises(SecretRefused, match=r"^FAKE_SHORT_SECRET: value is shorter") as short:
        Scanner.from_sources(["FAKE_SHORT_SECRET"])
    assert "s3cr3tX" not in str(short.value)
    short_file = tmp_path / "short.env"
    short_file.write_text("A=fake-long-enough-value\nB=s3cr3tX\n")
    with pytest.raises(SecretRefused, match=f"^{short_file}:2: value is shorter") as short:
        Scanner.from_sources([], short_file)
    assert "s3cr3tX" not in str(short.value)
    with pytest.raises(InvalidInput, match="cannot read"):
        Scanner.from_sources([], tmp_path / "missing.env")
    empty = tmp_path / "empty.env"
    empty.write_text("# nothing here\n\n")
    with pytest.raises(InvalidInput, match="holds no secret"):
        Scanner.from_sources([], empty)
    with pytest.raises(InvalidInput, match="nothing to look for"):
        Scanner.from_sources([])


def test_display_name_redacts() -> None:
    s = scanner((b"fake-secret-in-a-name", SOURCE))
    assert s.display_name("a-fake-secret-in-a-name.txt") == "a-REDACTED.txt"


def test_a_secret_holding_the_marker_is_still_looked_for(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FAKE_MARKER_SECRET", "fake-REDACTED-secret")
    s = Scanner.from_sources(["FAKE_MARKER_SECRET"])
    assert [h.offset for h in s.scan_bytes(b"..fake-REDACTED-secret")] == [2]
    assert s.display_name("a-fake-REDACTED-secret") == "a-SECRET_REMOVED"


def test_env_is_a_list_not_one_string(monkeypatch: pytest.MonkeyPatch) -> None:
    # Iterated, "HF_TOKEN" named the variables H, F, _, ...: an error about an unnamed one.
    monkeypatch.setenv("HF_TOKEN", "hf_0123456789abcdef")
    with pytest.raises(InvalidInput, match="env: a list of variable names, not one string"):
        Scanner.from_sources(env="HF_TOKEN")

"""`escape`: names and fields are data on one line, never terminal control."""

from __future__ import annotations

import re
import unicodedata

import orjson
import pytest
from hypothesis import given
from hypothesis import strategies as st

from sessionstore._display import cut_point, escape, escape_json, escape_lines, scalar


@pytest.mark.parametrize(
    ("raw", "shown"),
    [
        ("plain name.txt", "plain name.txt"),
        ("été/日本.log", "été/日本.log"),
        ("a\nb", "a\\nb"),
        ("a\rb\tc", "a\\rb\\tc"),
        ("evil\x1b]0;pwned\x07", "evil\\x1b]0;pwned\\x07"),
        ("csi\x9b2J", "csi\\x9b2J"),
        ("del\x7f", "del\\x7f"),
        ("rtl\u202etxt.exe", "rtl\\u202etxt.exe"),
        ("line\u2028sep", "line\\u2028sep"),
        ("bad-byte-\udcff", "bad-byte-\\xff"),
        ("run\u200b.log", "run\\u200b.log"),
        ("mark\u200e\u061c", "mark\\u200e\\u061c"),
        ("\ufeffbom", "\\ufeffbom"),
        # Invisible too: `run.log` to the eye. Tag characters spell hidden ASCII.
        ("run\U000e0041\U000e007f.log", "run\\U000e0041\\U000e007f.log"),
        ("soft\xadhyphen", "soft\\xadhyphen"),
        ("mvs\u180e\u206a\u206f", "mvs\\u180e\\u206a\\u206f"),
        # A backslash starts every escape, so the name's own is doubled: the four
        # characters `\x1b` never print as an ESC does.
        ("lit\\x1b", "lit\\\\x1b"),
        ("C:\\dir\\", "C:\\\\dir\\\\"),
    ],
)
def test_escapes_control_characters(raw: str, shown: str) -> None:
    assert escape(raw) == shown


@given(st.text())
def test_escaped_text_has_no_control_left(text: str) -> None:
    shown = escape(text)
    assert not [c for c in shown if unicodedata.category(c) in ("Cc", "Zl", "Zp", "Cs")]


@given(st.text())
def test_escaped_lines_keep_only_line_feeds_and_tabs(text: str) -> None:
    shown = escape_lines(text)
    controls = [c for c in shown if unicodedata.category(c) in ("Cc", "Zl", "Zp", "Cs")]
    assert set(controls) <= {"\n", "\t"}
    assert (shown.count("\n"), shown.count("\t")) == (text.count("\n"), text.count("\t"))


@given(st.recursive(st.text() | st.integers(-(2**63), 2**63 - 1), st.lists, max_leaves=8))
def test_json_escaped_is_the_same_value_with_no_control_left(value: object) -> None:
    for option in (0, orjson.OPT_INDENT_2):
        data = escape_json(orjson.dumps(value, option=option))
        assert orjson.loads(data) == value
        shown = data.decode().replace("\n", "")  # indentation's own line breaks
        # Nothing left that a table would escape, but JSON's own escapes' backslashes.
        assert escape(shown) == shown.replace("\\", "\\\\")


_ESCAPE = re.compile(r"\\(?:x([0-9a-f]{2})|u([0-9a-f]{4})|U([0-9a-f]{8})|(.))", re.DOTALL)
_NAMED = {"n": "\n", "r": "\r", "t": "\t", "\\": "\\"}


def _unescape(shown: str) -> str:
    """What a reader of `escape`'s output takes it to say: each backslash starts an escape."""

    def one(match: re.Match[str]) -> str:
        code = match.group(1) or match.group(2) or match.group(3)
        return chr(int(code, 16)) if code else _NAMED[match.group(4)]

    return _ESCAPE.sub(one, shown)


@given(st.text(alphabet=st.characters(exclude_categories=["Cs"])))
def test_escaped_text_reads_back_as_it_was(text: str) -> None:
    """Two names never print alike (`a\\x1b` and `a` ESC did): escaped text reads back one way.
    (Lone surrogates aside: os.fsdecode's stand-in for byte 0x9b prints as U+009B does.)"""
    assert _unescape(escape(text)) == text


@given(st.text(alphabet=st.characters(exclude_categories=["Cs"])), st.integers(0, 60))
def test_cut_escaped_text_keeps_whole_escapes(text: str, end: int) -> None:
    """Cut at `cut_point`, escaped text keeps only whole escapes: it reads back as a start
    of the text (`\\x1` of an ESC read as nothing), at most an escape shorter than asked."""
    shown = escape(text)
    at = cut_point(shown, end)
    assert min(end, len(shown)) - 9 <= at <= end
    assert text.startswith(_unescape(shown[:at]))


def test_json_escapes_a_character_past_the_bmp_as_its_surrogate_pair() -> None:
    # `\ue0041` would be U+E004 and a `1`: another value.
    data = escape_json(orjson.dumps({"tag\U000e0041": "x\U000e007f"}))
    assert data == b'{"tag\\udb40\\udc41":"x\\udb40\\udc7f"}'
    assert orjson.loads(data) == {"tag\U000e0041": "x\U000e007f"}


@pytest.mark.parametrize(
    ("value", "shown"),
    [
        (200, "200"),
        (0.5, "0.5"),
        (1234.56, "1234.6"),
        (-1234.56, "-1234.6"),
        (1e15, "1e+15"),
        (123456789012345.6, "123456789012345.6"),
        (1.5e300, "1.5e+300"),
        (-1.7976931348623157e308, "-1.798e+308"),
        (2**70, "1.181e+21"),
        (True, "true"),
        ("a\x1bb", "a\\x1bb"),
        ({"k": [1]}, '{"k":[1]}'),
        (None, "null"),
        (float("nan"), "null"),
    ],
)
def test_scalar(value: object, shown: str) -> None:
    assert scalar(value) == shown

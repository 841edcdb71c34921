"""A JSON file as the viewer shows it: every token as the file spells it, in one layout.

Generated JSON texts with every spelling a parse-and-dump would lose (duplicate
keys, `1.10`, `1e3`, big integers, escapes) and arbitrary whitespace, through
`render` as a page renders a file.
"""

from __future__ import annotations

import re

import orjson
from hypothesis import given, settings
from hypothesis import strategies as st
from view_helpers import soup

from sessionstore._display import escape_lines
from sessionstore.view.render import render

# What the renderer must keep: strings, structural characters, the rest.
TOKEN = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"|[{}\[\],:]|[^\s{}\[\],:"]+')
SPACE = st.sampled_from(["", " ", "\n", "\t", "\r\n", "  "])
NUMBER = st.one_of(
    st.integers(-(10**30), 10**30).map(str),
    st.sampled_from(["1.10", "1e3", "-0", "0.0", "1E-7", "2.50e+10"]),
)
STRING = st.one_of(
    st.text(st.characters(codec="utf-8"), max_size=6).map(lambda s: orjson.dumps(s).decode()),
    st.sampled_from(['"\\u00e9"', '"\\/"', '"a\\"b"', '"\\\\"', '"\\n"', '"{[,:]}"', '"<b>"']),
)
SCALAR = st.one_of(NUMBER, STRING, st.sampled_from(["true", "false", "null"]))


def _array(parts: tuple[list[str], str]) -> str:
    items, w = parts
    return "[" + w + ("," + w).join(items) + w + "]"


def _object(parts: tuple[list[tuple[str, str]], str]) -> str:
    pairs, w = parts
    return "{" + w + ("," + w).join(k + w + ":" + w + v for k, v in pairs) + w + "}"


JSON_TEXT = st.recursive(
    SCALAR,
    lambda inner: st.one_of(
        st.tuples(st.lists(inner, max_size=4), SPACE).map(_array),
        st.tuples(st.lists(st.tuples(STRING, inner), max_size=4), SPACE).map(_object),
    ),
    max_leaves=20,
)


def _layout(tokens: list[str]) -> str:
    """The layout shown: two spaces a level, `{}` and `[]` when empty, `": "`."""
    out, depth = [], 0
    for i, token in enumerate(tokens):
        after = tokens[i + 1] if i + 1 < len(tokens) else ""
        if token in "{[" and after in ("}", "]"):
            out.append(token)
        elif token in "{[":
            depth += 1
            out.append(token + "\n" + "  " * depth)
        elif token in "}]":
            if tokens[i - 1] in ("{", "["):
                out.append(token)
            else:
                depth -= 1
                out.append("\n" + "  " * depth + token)
        elif token == ",":
            out.append(",\n" + "  " * depth)
        else:
            out.append(": " if token == ":" else token)
    return "".join(out)


@settings(max_examples=400, deadline=None)
@given(JSON_TEXT, SPACE, SPACE)
def test_every_token_is_shown_as_spelled(text: str, before: str, after: str) -> None:
    data = (before + text + after).encode()
    try:
        orjson.loads(data)
    except orjson.JSONDecodeError:  # an integer past 64 bits: orjson reads none
        shown = soup(render("f.json", data)).pre
        assert shown is not None and shown.get_text() == escape_lines(data.decode())  # as is
        return
    shown = soup(render("f.json", data)).select_one("pre.json")
    assert shown is not None
    tokens = TOKEN.findall(data.decode())
    assert shown.get_text() == escape_lines(_layout(tokens))  # control characters: `\\x7f`
    assert shown.find("b") is None  # a string's markup is text

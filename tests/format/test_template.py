"""Prompt templates: one example per rule and per error, then two property laws."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass

import pytest
from hypothesis import assume, given
from hypothesis import strategies as st

from sessionstore.errors import SessionStoreError, TemplateError
from sessionstore.format.template import render

# --- rules -------------------------------------------------------------------


def test_plain_text_passes_through() -> None:
    assert render("") == ""
    assert render("a <b> c -- d\n  e\n") == "a <b> c -- d\n  e\n"


@pytest.mark.parametrize(("flag", "expected"), [(True, "Hi dear Ann."), (False, "Hi Ann.")])
def test_inline_if(flag: bool, expected: str) -> None:
    assert render("Hi <!--?if f-->dear <!--?end-->{n}.", f=flag, n="Ann") == expected


@pytest.mark.parametrize(("flag", "expected"), [(True, "[yes]"), (False, "[no]")])
def test_inline_else(flag: bool, expected: str) -> None:
    assert render("[<!--?if f-->yes<!--?else-->no<!--?end-->]", f=flag) == expected


def test_directive_alone_on_a_line_disappears_with_its_newline() -> None:
    text = "a\n  <!--?if f-->  \nb\n\t<!--?else-->\nc\n<!--?end-->\nd\n"
    assert render(text, f=True) == "a\nb\nd\n"
    assert render(text, f=False) == "a\nc\nd\n"


def test_several_directives_alone_on_a_line_disappear() -> None:
    text = "a\n<!--?if f--><!--?if g-->\nx\n<!--?end--> <!--?end-->\nb\n"
    assert render(text, f=True, g=True) == "a\nx\nb\n"
    assert render(text, f=True, g=False) == "a\nb\n"


def test_spaces_inside_a_directive_are_allowed() -> None:
    assert render("<!--? if  f -->x<!--? else -->y<!--?end -->", f=0) == "y"


def test_nested_indented_template_renders_flush_left() -> None:
    text = (
        "Rules:\n"
        "<!--?if a-->\n"
        "    - A {x}\n"
        "    <!--?if b-->\n"
        "        - B\n"
        "          continued\n"
        "    <!--?else-->\n"
        "        - not B\n"
        "    <!--?end-->\n"
        "    - A again\n"
        "<!--?end-->\n"
        "end\n"
    )
    assert render(text, a=True, b=True, x=1) == "Rules:\n- A 1\n- B\n  continued\n- A again\nend\n"
    assert render(text, a=True, b=False, x=1) == "Rules:\n- A 1\n- not B\n- A again\nend\n"
    assert render(text, a=False, b=True, x=1) == "Rules:\nend\n"


def test_directive_lines_count_toward_the_enclosing_common_indent() -> None:
    # The nested `if` line sits at column 1, so the outer body shares no indent.
    text = "<!--?if a-->\n  A\n<!--?if b-->\n    B\n<!--?end-->\n<!--?end-->\n"
    assert render(text, a=True, b=True) == "  A\nB\n"


def test_blank_lines_are_ignored_for_the_common_indent_and_lose_what_they_have() -> None:
    text = "<!--?if f-->\n    a\n\n  \n      b\n<!--?end-->\n"
    assert render(text, f=True) == "a\n\n\n  b\n"


def test_a_branch_of_blank_lines_loses_what_its_enclosing_branch_removes() -> None:
    text = "<!--?if f-->\n  a\n  <!--?if g-->\n     \n  <!--?end-->\n<!--?end-->\n"
    assert render(text, f=True, g=True) == "a\n   \n"


def test_tabs_and_spaces_share_only_a_literal_prefix() -> None:
    assert render("<!--?if f-->\n\tx\n    y\n<!--?end-->\n", f=1) == "\tx\n    y\n"
    assert render("<!--?if f-->\n\t x\n\t  y\n<!--?end-->\n", f=1) == "x\n y\n"


def test_top_level_text_is_never_dedented() -> None:
    assert render("  a\n  <!--?if f-->b<!--?end-->\n", f=True) == "  a\n  b\n"


def test_inline_body_is_not_dedented() -> None:
    assert render("x:<!--?if f-->   y<!--?end-->", f=True) == "x:   y"


def test_lines_of_an_inline_body_belong_to_the_enclosing_branch() -> None:
    text = "<!--?if a-->\n  p <!--?if b-->q\n    r<!--?end-->\n  s\n<!--?end-->\n"
    # The inline body's newline is part of it: a plain textual substitution.
    assert render(text, a=True, b=True) == "p q\n  r\ns\n"
    assert render(text, a=True, b=False) == "p \ns\n"


def test_standalone_opener_with_inline_closer() -> None:
    text = "<!--?if f-->\n  a\n  b<!--?end--> c\n"
    assert render(text, f=True) == "a\nb c\n"
    assert render(text, f=False) == " c\n"


def test_else_branch_is_dedented_on_its_own() -> None:
    text = "<!--?if f-->\n  yes\n<!--?else-->\n      no\n<!--?end-->\n"
    assert render(text, f=False) == "no\n"


def test_values_are_str_and_multiline_values_are_inserted_as_is() -> None:
    assert render("{a} {b} {c}", a=1, b=None, c=[1]) == "1 None [1]"
    text = "<!--?if f-->\n    log:\n      {log}\n<!--?end-->\n"
    assert render(text, f=True, log="one\ntwo") == "log:\n  one\ntwo\n"


def test_values_are_never_reparsed() -> None:
    assert render("{v}", v="<!--?if x--> {y} {{z}}") == "<!--?if x--> {y} {{z}}"


def test_truthiness_is_python_truthiness() -> None:
    text = "<!--?if v-->T<!--?else-->F<!--?end-->"
    assert [render(text, v=v) for v in ([], [0], "", "0", 0, 0.5, None)] == list("FTFTFTF")


def test_a_flag_may_also_be_a_placeholder() -> None:
    text = "<!--?if who-->Hello {who}<!--?else-->Hello<!--?end-->"
    assert render(text, who="Ann") == "Hello Ann"
    assert render(text, who="") == "Hello"


def test_a_variable_may_be_called_text() -> None:
    assert render("{text}", text="t") == "t"


def test_json_and_other_braces_pass_through() -> None:
    text = 'Reply {"a": {"b": [1, {}]}} or {{}} or { x } or {1} or {a-b} or }} {{'
    assert render(text) == text


def test_double_braces_around_a_name_escape_a_placeholder() -> None:
    assert render("use {{name}} for {name}", name="N") == "use {name} for N"
    # An escape is not a use: `name` is not referenced here.
    with pytest.raises(TemplateError, match="used nowhere"):
        render("{{name}}", name="N")


def test_notes_are_stripped_inline_on_their_line_and_across_lines() -> None:
    text = "a<!--! inline -->b\n  <!--! own line {unknown} <!--?if -->\nc<!--! spans\nlines -->d\n"
    assert render(text) == "ab\ncd\n"


def test_a_note_alone_on_its_lines_disappears_and_counts_for_the_indent() -> None:
    text = "<!--?if f-->\n<!--! a note\n         on two lines -->\n    x\n<!--?end-->\n"
    assert render(text, f=True) == "    x\n"


def test_html_comments_are_text() -> None:
    assert render("<!-- keep -->\n") == "<!-- keep -->\n"


def test_missing_final_newline_and_crlf() -> None:
    assert render("a\n<!--?if f-->b<!--?end-->", f=True) == "a\nb"
    assert render("a\n<!--?if f-->\nb\n<!--?end-->", f=True) == "a\nb\n"
    crlf = "a\r\n<!--?if f-->\r\n  b\r\n<!--?end-->\r\nc\r\n"
    assert render(crlf, f=True) == "a\r\nb\r\nc\r\n"


def test_same_text_renders_with_different_variables() -> None:
    text = "<!--?if f-->{x}<!--?end-->"
    assert (render(text, f=1, x="a"), render(text, f=1, x="b")) == ("a", "b")


# --- errors ------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "variables", "line", "column", "problem"),
    [
        pytest.param(
            "a\n  <!--?if f-->\n<!--?if g-->\n<!--?end-->\n",
            {"f": 1, "g": 1},
            2,
            3,
            "'if f' is never closed with <!--?end-->",
            id="unclosed-if",
        ),
        pytest.param(
            "a\nb <!--?else-->", {}, 2, 3, "'else' without an open 'if'", id="else-without-if"
        ),
        pytest.param(
            "<!--?if f--><!--?end-->\n\t<!--?end-->",
            {"f": 1},
            2,
            2,
            "'end' without an open 'if'",
            id="end-without-if",
        ),
        pytest.param(
            "<!--?if f-->\n<!--?else-->\nx<!--?else-->\n<!--?end-->",
            {"f": 1},
            3,
            2,
            "second 'else' for the 'if' at 1:1 (first 'else' at 2:1)",
            id="second-else",
        ),
        pytest.param(
            "x <!--?iff f-->",
            {},
            1,
            3,
            "malformed <!--?iff f-->: unknown directive 'iff'",
            id="unknown-keyword",
        ),
        pytest.param(
            "<!--?if-->",
            {},
            1,
            1,
            "malformed <!--?if-->: 'if' takes exactly one variable name",
            id="if-no-name",
        ),
        pytest.param(
            "<!--?if a b-->",
            {},
            1,
            1,
            "malformed <!--?if a b-->: 'if' takes exactly one variable name",
            id="if-two-names",
        ),
        pytest.param(
            "<!--?if 1x-->",
            {},
            1,
            1,
            "malformed <!--?if 1x-->: '1x' is not a variable name",
            id="if-bad-name",
        ),
        pytest.param("<!--?-->", {}, 1, 1, "malformed <!--?-->: empty directive", id="empty"),
        pytest.param(
            "<!--?end f-->",
            {},
            1,
            1,
            "malformed <!--?end f-->: 'end' takes no argument",
            id="end-argument",
        ),
        pytest.param(
            "ok\n  <!--?if f",
            {},
            2,
            3,
            "unterminated directive: '<!--?' needs '-->' on the same line",
            id="unterminated-directive",
        ),
        pytest.param(
            "<!--?if f\n-->",
            {},
            1,
            1,
            "unterminated directive: '<!--?' needs '-->' on the same line",
            id="directive-across-lines",
        ),
        pytest.param(
            "<!--! a\n\n <!--! b",
            {},
            1,
            1,
            "unterminated note: '<!--!' needs '-->'",
            id="unterminated-note",
        ),
        pytest.param(
            "<!--?if f-->\n{a}\n<!--?else-->\n  {b}\n<!--?end-->",
            {"f": 1, "a": 1},
            4,
            3,
            "unknown variable 'b' (passed: a, f)",
            id="unknown-in-false-branch",
        ),
        pytest.param(
            "x\n <!--?if f-->y<!--?end-->",
            {},
            2,
            2,
            "unknown variable 'f' (passed: none)",
            id="unknown-flag",
        ),
        pytest.param(
            "{a}",
            {"a": 1, "z": 2, "b": 3},
            1,
            1,
            "passed but used nowhere in the template: 'b', 'z'",
            id="unused",
        ),
    ],
)
def test_errors_name_line_and_column(
    text: str, variables: dict[str, object], line: int, column: int, problem: str
) -> None:
    with pytest.raises(TemplateError) as caught:
        render(text, **variables)
    err = caught.value
    assert (err.line, err.column) == (line, column)
    assert err.problem.startswith(problem)
    assert str(err) == f"<template>:{line}:{column}: {err.problem}"


def test_error_is_a_value_error_under_the_root() -> None:
    with pytest.raises(ValueError) as caught:
        render("<!--?end-->")
    assert isinstance(caught.value, SessionStoreError)


def test_malformed_directive_message_says_what_is_expected() -> None:
    with pytest.raises(TemplateError, match=r"expected <!--\?if NAME-->, <!--\?else--> or"):
        render("<!--?fi-->")


def test_first_error_in_source_order_wins() -> None:
    with pytest.raises(TemplateError, match="'end' without") as caught:
        render("<!--?end-->\n<!--?iff-->\n{unknown}")
    assert caught.value.line == 1
    with pytest.raises(TemplateError, match="unknown variable 'u'"):
        render("{u}<!--?if v--><!--?end-->")


@pytest.mark.parametrize("sep", ["", "\n"], ids=["inline", "standalone"])
def test_blocks_nested_past_the_limit_are_a_template_error_not_a_recursion_error(
    sep: str,
) -> None:
    """Parsing, dedenting and rendering recurse once per open block: 5,000 nested blocks
    raised RecursionError, a traceback from `contract --template`, not a TemplateError."""
    from sessionstore.format.template import MAX_DEPTH

    def nested(depth: int) -> str:
        return f"<!--?if a-->{sep}" * depth + f"  x{sep}" + f"<!--?end-->{sep}" * depth

    assert render(nested(MAX_DEPTH), a=True).strip() == "x"
    for depth in (MAX_DEPTH + 1, 5_000):
        with pytest.raises(TemplateError) as caught:
            render(nested(depth), a=True)
        line, column = (1, MAX_DEPTH * 12 + 1) if not sep else (MAX_DEPTH + 1, 1)
        assert (caught.value.line, caught.value.column) == (line, column)
        assert caught.value.problem == f"blocks nested more than {MAX_DEPTH} deep"


def test_a_long_branch_and_a_long_line_render_in_linear_time() -> None:
    """The common indent of a branch was reduced over all its lines once per line, and a
    line's text pieces were joined by `+=`: both quadratic. 50,000 lines in one branch
    took over an hour, 1,000,000 escapes on one line minutes (the run's hang guard)."""
    lines = 50_000
    text = "<!--?if a-->\n" + "    - {a}\n" * lines + "<!--?end-->\n"
    assert render(text, a=1) == "- 1\n" * lines
    pieces = 1_000_000
    assert render("ab{{x}}<!--!n-->" * pieces) == "ab{x}" * pieces


# --- properties --------------------------------------------------------------
# A tiny template AST, a writer for its source and an independent reference
# evaluator that follows the documented rules line by line.


@dataclass(frozen=True)
class Text:
    s: str


@dataclass(frozen=True)
class Var:
    name: str


@dataclass(frozen=True)
class Note:
    s: str


@dataclass(frozen=True)
class InlineIf:
    name: str
    then: tuple[Piece, ...]
    otherwise: tuple[Piece, ...] | None


@dataclass(frozen=True)
class Line:
    extra: str
    pieces: tuple[Piece, ...]  # starts with non-blank text, so never blank nor standalone


@dataclass(frozen=True)
class Blank:
    ws: str


@dataclass(frozen=True)
class NoteLine:
    indent: str
    s: str


@dataclass(frozen=True)
class Block:
    name: str
    indent: str  # of its if/else/end lines, relative to the enclosing body
    then_indent: str
    then: tuple[Item, ...]
    else_indent: str
    otherwise: tuple[Item, ...] | None


Piece = Text | Var | Note | InlineIf
Item = Line | Blank | NoteLine | Block
FLAGS = ("f", "g", "h")
VARS = ("x", "y")
VALUES = {"x": "X1", "y": "y 2"}

ws = st.text(" \t", max_size=3)
words = st.text("ab .,:;-!?\t", max_size=6)
first_word = st.builds(lambda c, s: c + s, st.sampled_from("abcXYZ-*"), words)
note_text = st.text("ab \n?!-", max_size=8)


def pieces(depth: int) -> st.SearchStrategy[tuple[Piece, ...]]:
    leaf: list[st.SearchStrategy[Piece]] = [
        st.builds(Text, st.text("ab .,:;-!?\t", min_size=1, max_size=6)),
        st.builds(Var, st.sampled_from(VARS)),
        st.builds(Note, note_text),
    ]
    if depth < 3:
        inner = pieces(depth + 1)
        leaf.append(st.builds(InlineIf, st.sampled_from(FLAGS), inner, st.none() | inner))
    return st.lists(st.one_of(leaf), max_size=3).map(tuple)


def items(depth: int) -> st.SearchStrategy[tuple[Item, ...]]:
    line = st.builds(
        Line, ws, st.tuples(st.builds(Text, first_word), pieces(depth)).map(lambda t: (t[0], *t[1]))
    )
    options: list[st.SearchStrategy[Item]] = [
        line,
        st.builds(Blank, ws),
        st.builds(NoteLine, ws, note_text),
    ]
    if depth < 3:
        inner = items(depth + 1)
        options.append(
            st.builds(Block, st.sampled_from(FLAGS), ws, ws, inner, ws, st.none() | inner)
        )
    return st.lists(st.one_of(options), max_size=4).map(tuple)


def emit_pieces(ps: tuple[Piece, ...]) -> str:
    out = []
    for p in ps:
        if isinstance(p, Text):
            out.append(p.s)
        elif isinstance(p, Var):
            out.append("{" + p.name + "}")
        elif isinstance(p, Note):
            out.append("<!--!" + p.s + "-->")
        else:
            out.append(f"<!--?if {p.name}-->" + emit_pieces(p.then))
            if p.otherwise is not None:
                out.append("<!--?else-->" + emit_pieces(p.otherwise))
            out.append("<!--?end-->")
    return "".join(out)


def emit(its: tuple[Item, ...], base: str) -> list[str]:
    lines: list[str] = []
    for it in its:
        if isinstance(it, Line):
            lines.append(base + it.extra + emit_pieces(it.pieces))
        elif isinstance(it, Blank):
            lines.append(it.ws)
        elif isinstance(it, NoteLine):
            lines.append(base + it.indent + "<!--!" + it.s + "-->")
        else:
            d = base + it.indent
            lines += [f"{d}<!--?if {it.name}-->", *emit(it.then, base + it.then_indent)]
            if it.otherwise is not None:
                lines += [f"{d}<!--?else-->", *emit(it.otherwise, base + it.else_indent)]
            lines.append(f"{d}<!--?end-->")
    return lines


def eval_pieces(ps: tuple[Piece, ...] | None, env: dict[str, object]) -> str:
    out = []
    for p in ps or ():
        if isinstance(p, Text):
            out.append(p.s)
        elif isinstance(p, Var):
            out.append(str(env[p.name]))
        elif isinstance(p, InlineIf):
            out.append(eval_pieces(p.then if env[p.name] else p.otherwise, env))
    return "".join(out)


def common(strings: list[str]) -> str:
    """Longest common prefix, compared character by character."""
    first = min(strings)
    last = max(strings)
    n = 0
    while n < len(first) and first[n] == last[n]:
        n += 1
    return first[:n]


def indents(its: tuple[Item, ...], base: str) -> list[str]:
    """Leading whitespace of every non-blank source line, nested ones included."""
    found: list[str] = []
    for it in its:
        if isinstance(it, Line):
            found.append(base + it.extra)
        elif isinstance(it, NoteLine):
            found.append(base + it.indent)
        elif isinstance(it, Block):
            found.append(base + it.indent)
            found += indents(it.then, base + it.then_indent)
            found += indents(it.otherwise or (), base + it.else_indent)
    return found


def evaluate(its: tuple[Item, ...], base: str, prefix: str, env: dict[str, object]) -> list[str]:
    """Output lines; `prefix` is what this branch removes from each of its lines."""
    out: list[str] = []
    for it in its:
        if isinstance(it, Line):
            out.append((base + it.extra)[len(prefix) :] + eval_pieces(it.pieces, env))
        elif isinstance(it, Blank):
            out.append(it.ws[len(common([it.ws, prefix])) :])
        elif isinstance(it, Block):
            branch, inner = (
                (it.then, it.then_indent) if env[it.name] else (it.otherwise or (), it.else_indent)
            )
            found = indents(branch, base + inner)
            out += evaluate(branch, base + inner, common(found) if found else prefix, env)
    return out


def source(its: tuple[Item, ...], final_newline: bool) -> str:
    text = "\n".join(emit(its, ""))
    return text + "\n" if final_newline and its else text


def env_for(its: tuple[Item, ...], flags: list[bool]) -> dict[str, object]:
    names = {
        n
        for pair in re.findall(
            r"\{(\w+)\}|<!--\?if (\w+)-->",
            re.sub(r"<!--!.*?-->", "", source(its, True), flags=re.S),
        )
        for n in pair
        if n
    }
    env: dict[str, object] = {**dict(zip(FLAGS, flags, strict=True)), **VALUES}
    return {k: v for k, v in env.items() if k in names}


@given(items(0), st.lists(st.booleans(), min_size=3, max_size=3), st.booleans())
def test_well_formed_templates_match_the_reference(
    its: tuple[Item, ...], flags: list[bool], final_newline: bool
) -> None:
    text = source(its, final_newline)
    env = env_for(its, flags)
    expected = "".join(line + "\n" for line in evaluate(its, "", "", env))
    if not final_newline and its and not isinstance(its[-1], Block | NoteLine):
        expected = expected[:-1]
    out = render(text, **env)
    assert "<!--?" not in out and "<!--!" not in out
    assert out == expected


DIRECTIVE = re.compile(r"<!--\?(if \w+|else|end)-->")


def with_block() -> st.SearchStrategy[tuple[Item, ...]]:
    block = st.builds(Block, st.sampled_from(FLAGS), ws, ws, items(1), ws, st.none() | items(1))
    return st.builds(lambda a, b, c: (*a, b, *c), items(1), block, items(1))


@given(with_block(), st.data())
def test_unbalanced_templates_always_raise(its: tuple[Item, ...], data: st.DataObject) -> None:
    text = source(its, True)
    found = list(DIRECTIVE.finditer(text))
    m = data.draw(st.sampled_from(found))
    # Dropping an `else` leaves a balanced template, so only `if`/`end` are dropped.
    drop = m[1] != "else" and data.draw(st.booleans())
    broken = text[: m.start()] + ("" if drop else m[0] * 2) + text[m.end() :]
    with pytest.raises(TemplateError) as caught:
        render(broken, **env_for(its, [True, False, True]))
    assert re.match(
        r"'(else|end)' without|second 'else'|'if \w+' is never closed", caught.value.problem
    )


@given(
    st.recursive(
        st.none() | st.booleans() | st.integers() | st.text(),
        lambda kids: st.lists(kids, max_size=3) | st.dictionaries(st.text(), kids, max_size=3),
        max_leaves=10,
    )
)
def test_json_without_placeholders_renders_unchanged(value: object) -> None:
    text = json.dumps(value, ensure_ascii=False)
    assume(not re.search(r"\{[^\W\d]\w*\}|<!--[?!]", text))
    assert render(text) == text


def test_used_variables_lists_every_use_in_both_branches() -> None:
    from sessionstore.format.template import used_variables

    text = "<!--?if a-->{b}<!--?else-->\n  {c} {b}\n<!--?end-->"
    assert used_variables(text) == [("a", 1, 1), ("b", 1, 13), ("c", 2, 3), ("b", 2, 7)]

"""Prompt templates: nested conditional blocks, placeholders and notes, checked strictly.

Grammar (anything not matched here is literal text)::

    directive   = "<!--?" ( "if" NAME | "else" | "end" ) "-->"   one line; spaces allowed inside
    note        = "<!--!" text-without-"-->" "-->"             may span lines; removed
    placeholder = "{" NAME "}"                                 replaced by str(value)
    escape      = "{{" NAME "}}"                               renders as the literal "{NAME}"
    NAME        = an identifier ([^\\W\\d]\\w*)
    block       = if-directive body [ else-directive body ] end-directive

Any other brace text (JSON examples, "{}", "{{", "}}") passes through unchanged.

Layout:

* A line holding only directives, notes and whitespace is removed with its newline.
* A branch whose opening directive (``if`` or ``else``) stands alone on its line is
  dedented: the longest common prefix of spaces and tabs of its non-blank source lines
  (lines of nested directives and notes included) is removed from each of its lines;
  whitespace-only lines lose as much of that prefix as they have. Nested blocks are thus
  dedented relative to their enclosing block. A branch opened inline is not dedented;
  its lines count as lines of the enclosing branch.

Errors are `TemplateError` with the 1-based line and column of the offending
directive or placeholder: malformed or unterminated directive, unterminated note,
``else``/``end`` without ``if``, a second ``else``, an unclosed ``if``, an ``if``
nested more than `MAX_DEPTH` deep, an unknown variable (both branches are checked),
and passed variables used nowhere (at 1:1).
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field

from sessionstore.errors import TemplateError

__all__ = ["render"]

_NAME = r"[^\W\d]\w*"
_TOKEN = re.compile(
    rf"(?P<nl>\n)|<!--(?P<sigil>[?!])|\{{\{{(?P<esc>{_NAME})\}}\}}|\{{(?P<var>{_NAME})\}}"
)
_EXPECTED = "expected <!--?if NAME-->, <!--?else--> or <!--?end-->"
# Parsing, dedenting and rendering each recurse once per open block: deeper nesting would
# end in a RecursionError (a traceback) instead of a TemplateError. No prompt needs it.
MAX_DEPTH = 100


@dataclass(frozen=True)
class _Var:
    name: str
    line: int
    column: int


@dataclass(frozen=True)
class _Directive:
    keyword: str  # "if", "else" or "end"
    name: str
    line: int
    column: int


class _Note:
    """A stripped note; kept as a token only so that its line can count as standalone."""


@dataclass(frozen=True)
class _If:
    name: str
    line: int
    column: int
    then: tuple[_Node, ...]
    otherwise: tuple[_Node, ...]


_Node = str | _Var | _If
_Content = str | _Var | _Directive
_Token = _Content | _Note


def render(text: str, /, **variables: object) -> str:
    """Render `text` with `variables`; see the module docstring for the syntax.

    `text` is positional-only so that a variable may be called ``text``.
    Raises TemplateError (a ValueError) for any malformed template, unknown
    variable or unused variable, whatever the flag values are.
    """
    nodes, names = _parse(text)
    for name, line, column in names:
        if name not in variables:
            known = ", ".join(sorted(variables)) or "none"
            raise TemplateError(f"unknown variable {name!r} (passed: {known})", line, column)
    unused = sorted(set(variables) - {name for name, _, _ in names})
    if unused:
        listed = ", ".join(repr(name) for name in unused)
        raise TemplateError(f"passed but used nowhere in the template: {listed}", 1, 1)
    out: list[str] = []
    _render(nodes, variables, out)
    return "".join(out)


def used_variables(text: str) -> list[tuple[str, int, int]]:
    """The variables `text` uses (flags and placeholders of every branch), with line and column.

    One entry per use, in source order. Raises TemplateError for a malformed template.
    """
    return list(_parse(text)[1])


def _render(nodes: tuple[_Node, ...], variables: Mapping[str, object], out: list[str]) -> None:
    for node in nodes:
        if isinstance(node, str):
            out.append(node)
        elif isinstance(node, _Var):
            out.append(str(variables[node.name]))
        else:
            _render(node.then if variables[node.name] else node.otherwise, variables, out)


@dataclass(eq=False)
class _Scope:
    """A dedented branch: the indents of the lines that start inside it."""

    outer: _Scope | None
    indents: list[str] = field(default_factory=list)
    known: str | None = None

    def prefix(self) -> str:
        """The common indent; asked once per line, only after parsing, so computed once:
        reducing every line's indent for each line was quadratic in the branch's length."""
        if self.known is None:
            if self.indents:
                self.known = functools.reduce(_common, self.indents)
            else:
                # Only blank lines: they still lose what the enclosing branch removes.
                self.known = self.outer.prefix() if self.outer else ""
        return self.known


@dataclass(frozen=True)
class _Strip:
    """Line-start text whose indent is cut once every line of its scope is known."""

    text: str
    scope: _Scope


@dataclass(eq=False)
class _Frame:
    opened: _Directive
    scope: _Scope | None  # scope of the current branch; None when opened inline
    then: list[_Node | _Strip | _Frame] = field(default_factory=list)
    otherwise: list[_Node | _Strip | _Frame] | None = None
    else_at: _Directive | None = None


class _Parser:
    def __init__(self) -> None:
        self.root: list[_Node | _Strip | _Frame] = []
        self.stack: list[_Frame] = []

    def nodes(self) -> list[_Node | _Strip | _Frame]:
        if not self.stack:
            return self.root
        top = self.stack[-1]
        return top.then if top.otherwise is None else top.otherwise

    def scope(self, depth: int) -> _Scope | None:
        """The innermost dedented branch among the outermost `depth` open blocks."""
        return next((f.scope for f in reversed(self.stack[:depth]) if f.scope), None)

    def line(self, tokens: list[_Token], newline: str) -> None:
        kept: list[_Content] = [t for t in tokens if not isinstance(t, _Note)]
        standalone = len(kept) < len(tokens) or any(isinstance(t, _Directive) for t in kept)
        standalone &= all(
            isinstance(t, _Directive) or (isinstance(t, str) and t.isspace()) for t in kept
        )
        blank = all(isinstance(t, str) and t.isspace() for t in tokens)
        if standalone:
            indent = _indent(tokens[0]) if isinstance(tokens[0], str) else ""
            kept = [t for t in kept if isinstance(t, _Directive)]
        else:
            kept = _merge([*kept, newline] if newline else kept)
            indent = _indent(kept[0]) if kept and isinstance(kept[0], str) else ""
        # The line belongs to the blocks that enclose its leading directives; an
        # `end` or `else` line sits outside the branch it closes.
        low, lead = len(self.stack), 0
        while lead < len(kept) and isinstance(token := kept[lead], _Directive):
            self.directive(token, standalone)
            low = min(low, len(self.stack) - (token.keyword == "else"))
            lead += 1
        if not blank:
            for frame in self.stack[:low]:
                if frame.scope:
                    frame.scope.indents.append(indent)
        owner = self.scope(low)
        for j, token in enumerate(kept[lead:], lead):
            if isinstance(token, _Directive):
                self.directive(token, False)
            elif isinstance(token, str) and j == 0 and owner:
                self.nodes().append(_Strip(token, owner))
            else:
                self.nodes().append(token)

    def directive(self, d: _Directive, standalone: bool) -> None:
        if d.keyword == "if":
            if len(self.stack) >= MAX_DEPTH:
                raise TemplateError(f"blocks nested more than {MAX_DEPTH} deep", d.line, d.column)
            scope = _Scope(self.scope(len(self.stack))) if standalone else None
            frame = _Frame(d, scope)
            self.nodes().append(frame)
            self.stack.append(frame)
            return
        if not self.stack:
            raise TemplateError(f"'{d.keyword}' without an open 'if'", d.line, d.column)
        top = self.stack[-1]
        if d.keyword == "end":
            self.stack.pop()
        elif top.else_at is not None:
            at = top.else_at
            raise TemplateError(
                f"second 'else' for the 'if' at {top.opened.line}:{top.opened.column}"
                f" (first 'else' at {at.line}:{at.column})",
                d.line,
                d.column,
            )
        else:
            top.else_at, top.otherwise = d, []
            top.scope = _Scope(self.scope(len(self.stack) - 1)) if standalone else None


def _indent(text: str) -> str:
    return text[: len(text) - len(text.lstrip(" \t"))]


def _common(a: str, b: str) -> str:
    """Longest common prefix, character by character: a tab never matches spaces."""
    n = next((i for i, (x, y) in enumerate(zip(a, b, strict=False)) if x != y), min(len(a), len(b)))
    return a[:n]


def _merge(tokens: list[_Content]) -> list[_Content]:
    """Join adjacent text (split apart by removed notes) so a line's indent is one string."""
    out: list[_Content] = []
    run: list[str] = []  # joined once: `+=` on the last text copied it for every piece
    for token in tokens:
        if isinstance(token, str):
            run.append(token)
            continue
        if run:
            out.append("".join(run))
            run = []
        out.append(token)
    if run:
        out.append("".join(run))
    return out


def _lines(text: str) -> Iterator[tuple[list[_Token], str]]:
    """Yield each logical line's tokens and its newline; a note may span physical lines."""
    line, line_start, pos = 1, 0, 0
    tokens: list[_Token] = []
    while match := _TOKEN.search(text, pos):
        if match.start() > pos:
            tokens.append(text[pos : match.start()])
        column, pos = match.start() - line_start + 1, match.end()
        if match["nl"]:
            yield tokens, "\n"
            tokens, line, line_start = [], line + 1, pos
        elif match["esc"]:
            tokens.append("{" + match["esc"] + "}")
        elif match["var"]:
            tokens.append(_Var(match["var"], line, column))
        else:
            close = text.find("-->", pos)
            if match["sigil"] == "!":
                if close < 0:
                    raise TemplateError("unterminated note: '<!--!' needs '-->'", line, column)
                if (inner := text.count("\n", pos, close)) > 0:
                    line, line_start = line + inner, text.rfind("\n", pos, close) + 1
                tokens.append(_Note())
            else:
                if close < 0 or "\n" in text[pos:close]:
                    raise TemplateError(
                        "unterminated directive: '<!--?' needs '-->' on the same line", line, column
                    )
                tokens.append(_directive(text[pos:close], line, column))
            pos = close + 3
    if pos < len(text):
        tokens.append(text[pos:])
    if tokens:
        yield tokens, ""


def _directive(body: str, line: int, column: int) -> _Directive:
    words = body.split()
    if words[:1] == ["if"] and len(words) == 2 and re.fullmatch(_NAME, words[1]):
        return _Directive("if", words[1], line, column)
    if words in (["else"], ["end"]):
        return _Directive(words[0], "", line, column)
    if words[:1] == ["if"]:
        problem = "'if' takes exactly one variable name"
        if len(words) == 2:
            problem = f"'{words[1]}' is not a variable name"  # quoted: the CLI escapes it
    elif words[:1] in (["else"], ["end"]):
        problem = f"'{words[0]}' takes no argument"
    else:
        problem = f"unknown directive '{words[0]}'" if words else "empty directive"
    raise TemplateError(f"malformed <!--?{body}-->: {problem}; {_EXPECTED}", line, column)


@functools.lru_cache(maxsize=64)
def _parse(text: str) -> tuple[tuple[_Node, ...], tuple[tuple[str, int, int], ...]]:
    """Parse once into an immutable tree plus every name used, in source order."""
    parser = _Parser()
    for tokens, newline in _lines(text):
        parser.line(tokens, newline)
    if parser.stack:
        d = parser.stack[-1].opened
        raise TemplateError(f"'if {d.name}' is never closed with <!--?end-->", d.line, d.column)
    names: list[tuple[str, int, int]] = []
    return _freeze(parser.root, names), tuple(names)


def _freeze(
    nodes: list[_Node | _Strip | _Frame], names: list[tuple[str, int, int]]
) -> tuple[_Node, ...]:
    out: list[_Node] = []
    for node in nodes:
        if isinstance(node, _Strip):
            indent = _indent(node.text)
            out.append(node.text[len(_common(indent, node.scope.prefix())) :])
        elif isinstance(node, _Frame):
            d = node.opened
            names.append((d.name, d.line, d.column))
            then = _freeze(node.then, names)
            out.append(_If(d.name, d.line, d.column, then, _freeze(node.otherwise or [], names)))
        else:
            if isinstance(node, _Var):
                names.append((node.name, node.line, node.column))
            out.append(node)
    return tuple(out)

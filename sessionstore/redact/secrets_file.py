"""Reading a secrets file: what python-dotenv would load, and every other plausible reading.

The file is parsed by python-dotenv's own parser (`dotenv.parser.parse_stream`),
so quotes, escapes, `export `, comments (`#` at the start of a line or after
whitespace) and multi-line quoted values mean what they mean to the programs
that load the file. A secrets file is also read by people and shells that
see it differently, and a secret missed under one reading leaks, so every
reading of a line is registered:

* dotenv's value of an assignment;
* the value as written: the text after `=` up to the end of the line, with
  one pair of enclosing quotes removed (`value<TAB># comment` when dotenv
  reads `value`; `a\\'b` when dotenv reads `a'b`, as a shell would; an
  unclosed `"x` that dotenv rejects);
* the value as a shell reads it (`set -a; . ./secrets.env`): its first word
  with quotes removed and backslash escapes applied, nothing expanded
  (`p\\@ss\\ w0rd` is `p@ss w0rd`, `"pa\\$\\$w0rd"` is `pa$$w0rd`); one under the
  minimum length is dropped rather than refused, another reading being longer;
* the whole line, when it is not an assignment (a raw secret), when its name
  is not a conventional variable name or its unquoted value holds `=`
  (a raw password such as `p@ss=w0rd=x`), or when the value is empty
  (`dGhpcyBpcyBhIHNlY3JldA=`, base64 with one `=` of padding, reads as the
  name `dGhpcyBpcyBhIHNlY3JldA` with no value);
* for a quoted value that spans lines, each of its lines on its own as well
  (a stray quote must not hide the assignments after it); those lines are
  spellings of a longer value, so one under the minimum length is dropped
  rather than refused, as for a multi-line `Redactor.add`.

Bytes are read as UTF-8 with `surrogateescape`: a byte that is not UTF-8 is
kept as it is, so every value registers the exact bytes of the file. A
leading UTF-8 byte order mark is not part of the first line. A file that
starts with a UTF-16 or UTF-32 byte order mark (Windows PowerShell's `>`
writes UTF-16) is decoded as such: read as UTF-8, every value would be its
characters with NUL bytes between them, matching no text that holds it.
"""

from __future__ import annotations

import codecs
import io
import os
import re
from bisect import bisect_right
from collections.abc import Iterator

from dotenv.parser import Binding, parse_stream

from sessionstore._fs.read import read_named
from sessionstore.errors import InvalidInput
from sessionstore.redact.variants import MIN_NEEDLE_LEN, significant_len

# A secrets file is a few lines; anything this large is almost certainly not one (and
# could not be registered: `redactor.MAX_SECRETS_BYTES`), but python-dotenv would take
# ~0.6 s a MiB to parse it first.
SECRETS_FILE_MAX = 1 << 20


def read_secrets_file(path: str | os.PathLike[str]) -> bytes:
    """The bytes of the secrets file the user named (followed); `InvalidInput` naming it.

    Read as every file a user names is (`_fs.read.read_named`): a regular
    file only, so a FIFO is never waited on and a device never read without end.
    """
    where = os.fspath(path)
    data = read_named(where, SECRETS_FILE_MAX)
    if data is None:
        raise InvalidInput(where, f"is larger than {SECRETS_FILE_MAX} bytes; not a secrets file")
    return data


__all__ = ["MAX_BLANK_RUN", "file_secrets"]

# python-dotenv's line breaks, so line numbers agree with its own.
_NEWLINE = re.compile(r"\r\n|\n|\r")
# An assignment as written: optional `export `, dotenv's name syntax, `=`, the rest.
_WRITTEN = re.compile(r"\s*(?:export[^\S\r\n]+)?('[^']+'|[^=#\s]+)[^\S\r\n]*=(.*)", re.DOTALL)
# A name nobody would mistake for part of a password.
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_.]*")
_QUOTES = ("'", '"')
# python-dotenv strips an inline comment with `re.sub(r"\s+#.*", ...)`, whose time is
# quadratic in a run of blanks no `#` follows (a megabyte of spaces: most of an hour).
# Longer runs are refused; the lookbehind makes the search itself start only at a run's start.
MAX_BLANK_RUN = 256
_LONG_BLANKS = re.compile(rf"(?<![^\S\r\n])[^\S\r\n]{{{MAX_BLANK_RUN + 1},}}")


def file_secrets(data: bytes, where: str = "secrets file") -> Iterator[tuple[bytes, int]]:
    """Every (value, 1-based line) the secrets file `data` stands for, in file order.

    Yielded as parsed, so a caller that stops (the redactor at a short value
    or past its bounds) parses no further: python-dotenv takes ~16 µs a line,
    8 s for a megabyte of `A=x` lines. Raises `InvalidInput` naming
    `where:LINE` (never a value) for a run of more than `MAX_BLANK_RUN`
    blanks, which python-dotenv's parser cannot read in reasonable time, and
    naming `where` for a UTF-16 or UTF-32 byte order mark the rest does not follow.
    """
    text = _text(data, where)
    if long_run := _LONG_BLANKS.search(text):
        line = len(_NEWLINE.findall(text, 0, long_run.start())) + 1
        raise InvalidInput(
            f"{where}:{line}",
            f"a run of more than {MAX_BLANK_RUN} blanks: python-dotenv's parser takes time "
            "quadratic in it (so would every program loading this file); remove the padding",
        )
    lines = _NEWLINE.split(text)
    starts = [0, *(m.end() for m in _NEWLINE.finditer(text))]
    offset = 0
    # Bindings cover the text back to back; offsets (not dotenv's own line
    # counter, which counts a CRLF after a malformed line twice) give the lines.
    for binding in parse_stream(io.StringIO(text)):
        raw = binding.original.string
        begin, offset = offset, offset + len(raw)
        content = raw.lstrip().rstrip("\r\n")
        if not content:
            continue
        first = bisect_right(starts, begin + len(raw) - len(raw.lstrip()))
        last = first + len(_NEWLINE.findall(content))
        if first == last:
            yield from ((_encode(v), first) for v in _line_readings(lines[first - 1], binding))
            continue
        if binding.value is not None:
            yield _encode(binding.value), first
        for n in range(first, last + 1):
            for value in _line_readings(lines[n - 1], _parse_line(lines[n - 1])):
                # dotenv rejected the whole span: each line is all there is, short or not.
                if binding.error or significant_len(_encode(value)) >= MIN_NEEDLE_LEN:
                    yield _encode(value), n


# Longest first: a UTF-32-LE mark starts with the UTF-16-LE one.
_WIDE_BOMS = (
    (codecs.BOM_UTF32_LE, "utf-32-le"),
    (codecs.BOM_UTF32_BE, "utf-32-be"),
    (codecs.BOM_UTF16_LE, "utf-16-le"),
    (codecs.BOM_UTF16_BE, "utf-16-be"),
)


def _text(data: bytes, where: str) -> str:
    """The file's text: UTF-8 (surrogate-escaped), or what its UTF-16/32 byte order mark says."""
    for bom, encoding in _WIDE_BOMS:
        if data.startswith(bom):
            try:
                return data[len(bom) :].decode(encoding)
            except UnicodeDecodeError as exc:
                raise InvalidInput(
                    where,
                    f"starts with a {encoding} byte order mark but is not {encoding} "
                    f"(byte {exc.start + len(bom)}); save it as UTF-8",
                ) from None
    return data.removeprefix(codecs.BOM_UTF8).decode("utf-8", "surrogateescape")


def _encode(value: str) -> bytes:
    return value.encode("utf-8", "surrogateescape")


def _parse_line(line: str) -> Binding | None:
    return next(parse_stream(io.StringIO(line)), None)


def _line_readings(line: str, binding: Binding | None) -> list[str]:
    """The readings of one physical line; `binding` is dotenv's reading of it."""
    if binding is None or (binding.key is None and not binding.error):
        return []  # blank or a comment
    found = [] if binding.value is None else [binding.value]
    written = _WRITTEN.fullmatch(line)
    rest = written.group(2).strip() if written else ""
    if written:
        found.append(_unquoted(rest))
        shell = _shell_word(rest)
        if shell is not None and significant_len(_encode(shell)) >= MIN_NEEDLE_LEN:
            found.append(shell)
    if (
        binding.value is None
        or not binding.value.strip()
        or not _NAME.fullmatch(binding.key or "")
        or ("=" in binding.value and not rest.startswith(_QUOTES))
    ):
        found.append(line)
    return found


# What ends an unquoted shell word: a blank or an operator (`TOKEN=x;` assigns `x`).
_WORD_END = frozenset(" \t;&|<>()")
# The characters a backslash escapes inside double quotes (POSIX); before others it stays.
_DOUBLE_ESCAPES = frozenset('$`"\\')


def _shell_word(rest: str) -> str | None:
    """The first word of `rest` as a POSIX shell assigns it, unexpanded (`$X` stays as
    written, as dotenv's reading keeps `${X}`); None for an unclosed quote."""
    out: list[str] = []
    i, n = 0, len(rest)
    while i < n and rest[i] not in _WORD_END:
        ch = rest[i]
        if ch == "\\":
            out.append(rest[i + 1 : i + 2])
            i += 2
        elif ch == "'":
            end = rest.find("'", i + 1)
            if end < 0:
                return None
            out.append(rest[i + 1 : end])
            i = end + 1
        elif ch == '"':
            i += 1
            while i < n and rest[i] != '"':
                escaped = rest[i] == "\\" and rest[i + 1 : i + 2] in _DOUBLE_ESCAPES
                out.append(rest[i + 1] if escaped else rest[i])
                i += 2 if escaped else 1
            if i >= n:
                return None
            i += 1
        else:
            out.append(ch)
            i += 1
    return "".join(out)


def _unquoted(rest: str) -> str:
    """`rest` without one pair of enclosing quotes."""
    if len(rest) >= 2 and rest[0] in _QUOTES and rest.endswith(rest[0]):
        return rest[1:-1]
    return rest

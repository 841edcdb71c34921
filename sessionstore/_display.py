"""Text for people: names and fields made safe to print on one line of a terminal.

Names come from the agent's workspace and fields from files it wrote, so they
are data, never control: a file name with `\\n` must not forge a second line in
a pass summary, and `\\x1b]0;...\\a` must not retitle the user's terminal. Every
human-readable output (tables, pass summaries, errors, the daemon log) passes
what it did not write itself through `escape`, once. JSON output is exact, its
unsafe characters written as JSON escapes (`escape_json`): orjson escapes the
C0 controls only.

Escaped text is read back one way: every backslash in it starts an escape
(`\\\\` is a backslash of the name, `\\x1b` an ESC), so a name holding the four
characters `\\x1b` never prints as one holding ESC. Escaping twice doubles the
backslashes of the first pass: a message is escaped where it is printed, and
whatever is built into it is not escaped before.
"""

from __future__ import annotations

import math

# Not typing's (nor the package's: a helper imports no layer above it): `re` and `typing`
# are imported on use only, so that `inspect` of an empty store pays for neither.
TYPE_CHECKING = False
if TYPE_CHECKING:
    import re
    from collections.abc import Callable
    from typing import Any

# C0 controls, DEL, C1 controls (0x80-0x9f: some terminals read 0x9b as CSI), the
# Unicode line/paragraph separators, the bidi overrides and marks that reorder what
# follows, the invisible characters that make `run\u200b.log` look like `run.log`
# (soft hyphen, Mongolian vowel separator, zero-width spaces and joiners, word joiner,
# the deprecated shaping controls, BOM, interlinear annotations, and the tag characters
# U+E0000-E007F, which spell hidden ASCII), and lone surrogates (os.fsdecode's stand-ins
# for undecodable bytes: printing one raises UnicodeEncodeError).
_CONTROLS = (
    "\x00-\x1f\x7f-\x9f\xad\u061c\u180e\u200b-\u200f\u2028-\u202e\u2060-\u2064"
    "\u2066-\u206f\ufeff\ufff9-\ufffb\ud800-\udfff\U000e0000-\U000e007f"
)
# Those and the backslash, the one character that starts an escape (module docstring).
_UNSAFE = "[\\\\" + _CONTROLS + "]"
# The controls less the C0 ones, which orjson escapes itself and which JSON output holds
# only as its own line breaks (`escape_json`); a backslash there is JSON's own escape.
_UNSAFE_IN_JSON = "[" + _CONTROLS.replace("\x00-\x1f", "") + "]"
# The controls less the line feed and the tab (`escape_lines`): a file's text keeps its
# backslashes as it spells them.
_UNSAFE_IN_LINES = "[" + _CONTROLS.replace("\x00-\x1f", "\x00-\x08\x0b-\x1f") + "]"
_compiled: dict[str, re.Pattern[str]] = {}
_NAMED = {"\n": "\\n", "\r": "\\r", "\t": "\\t", "\\": "\\\\"}


def _replace(match: re.Match[str]) -> str:
    char = match.group()
    if char in _NAMED:
        return _NAMED[char]
    code = ord(char)
    if 0xDC80 <= code <= 0xDCFF:  # surrogateescape: the original byte
        return f"\\x{code - 0xDC00:02x}"
    if code <= 0xFF:
        return f"\\x{code:02x}"
    return f"\\u{code:04x}" if code <= 0xFFFF else f"\\U{code:08x}"


def escape(text: str) -> str:
    """`text` with every control or reordering character written as a visible escape.

    Printable text, including non-ASCII letters, is unchanged; the result never
    contains a line break, so one problem stays one line.
    """
    return _sub(_UNSAFE, text)


# One escape `escape` writes (`\\`, `\n`, `\x1b`, `\u202e`, `\U000e0041`): a backslash and
# what follows it, which is always one of these.
_ESCAPE = r"\\(?:x[0-9a-f]{2}|u[0-9a-f]{4}|U[0-9a-f]{8}|.)"


def cut_point(shown: str, end: int) -> int:
    """Where to cut `escape`'s output `shown` to keep at most its first `end` characters:
    `end`, or the start of the escape `end` falls inside (`\\x1` of `\\x1b` would read
    as another character, or none)."""
    if "\\" not in shown[max(end - 9, 0) : end]:  # no escape is longer than 10 characters
        return end
    for match in _compiled_pattern(_ESCAPE).finditer(shown):
        if match.start() >= end:
            break
        if match.end() > end:
            return match.start()
    return end


def escape_lines(text: str) -> str:
    """`escape`, keeping line feeds and tabs: for a file's contents shown as lines.

    A `\\r` is escaped too, so a CRLF file shows where its carriage returns
    are and no line can overwrite another. A backslash stays one: the text
    reads as the file spells it (JSON's `\\u00e9`, a Windows path), so there a
    file's `\\x1b` and an escaped ESC look alike (the one-line outputs tell them
    apart: `escape`).
    """
    return _sub(_UNSAFE_IN_LINES, text)


def escape_json(data: bytes) -> bytes:
    """orjson's output with every character `escape` escapes written as a JSON `\\uXXXX`
    escape: the same JSON value, safe to print (`--json` on a terminal).

    orjson escapes the C0 controls only; a C1 control (0x9b is CSI to some
    terminals), DEL, a bidi override or a zero-width space in a name would
    reach the terminal as it is. Escaped, a script reads the exact value still.
    """
    # Lone surrogates never reach here: orjson refuses them.
    if data.isascii() and b"\x7f" not in data:
        return data
    return _sub(_UNSAFE_IN_JSON, data.decode(), _json_escape).encode()


def _json_escape(match: re.Match[str]) -> str:
    code = ord(match.group())
    if code > 0xFFFF:  # JSON writes a character past the BMP as its UTF-16 surrogate pair
        code -= 0x10000
        return f"\\u{0xD800 + (code >> 10):04x}\\u{0xDC00 + (code & 0x3FF):04x}"
    return f"\\u{code:04x}"


def _sub(pattern: str, text: str, replace: Callable[[re.Match[str]], str] = _replace) -> str:
    # Printable ASCII (most names and fields) holds none of the characters the patterns
    # match, all of which are ASCII controls or not ASCII, but for the backslash.
    if text.isascii() and text.isprintable() and "\\" not in text:
        return text
    return _compiled_pattern(pattern).sub(replace, text)


def _compiled_pattern(pattern: str) -> re.Pattern[str]:
    compiled = _compiled.get(pattern)
    if compiled is None:
        import re

        compiled = _compiled[pattern] = re.compile(pattern)
    return compiled


def fmt_number(value: float) -> str:
    """Short human form: integers whole, large values to one decimal, small and huge ones
    to 4 digits (1e300 is `1e+300`, not 301 digits that fill a table cell)."""
    if value.is_integer() and abs(value) < 1e15:
        return str(int(value))
    if 1000 <= abs(value) < 1e15:
        return f"{value:.1f}"
    return f"{value:.4g}"


def scalar(value: Any) -> str:
    """A JSON value on one line for people, escaped: a finite number short
    (`fmt_number`), a string as it is, anything else as compact JSON."""
    if isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value):
        return fmt_number(float(value))
    if isinstance(value, str):
        return escape(value)
    # On use: this module is imported by every command, most never need it.
    from sessionstore._orjson import orjson

    # JSON escapes C0 controls but leaves C1 controls, NEL and bidi overrides as they are.
    return escape(orjson.dumps(value).decode())

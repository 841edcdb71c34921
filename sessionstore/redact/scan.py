"""Finding registered secrets (and token shapes) in bytes: what `sessionstore scan` reports.

The scanner looks for exactly what the redactor removes: every needle
`variants.needles` gives a secret (the redactor's own list of spellings,
never a second one) and, with `patterns`, every match of
`patterns.PATTERNS`, through the automaton `matcher.build` makes. What a
redactor only needs to know as "somewhere in here", a scanner reports as
a `Hit`: where it starts, which form it is (`kind`: raw, hex, base64,
base64url, url, json, xml, or the pattern's name) and which secret it is
(`source`: the environment variable's name or `FILE:LINE` of the secrets
file; `patterns` for a token shape), never the value.

One leak is one hit: the needles of one secret nest (base64 with and
without padding, a value and its stripped form, a whole multi-line value
and each of its lines), so overlapping occurrences of one (kind, source)
are merged into one hit at the first start.

Streams: `scan_chunks` reads a file chunk by chunk in bounded memory and
finds every occurrence exactly once, a chunk boundary inside it or not.
Each window is scanned only for occurrences *starting* before its last
`width` bytes (the longest needle or pattern), which are therefore whole
in the window and seen as a whole-file scan sees them; the next window
starts where those starts end.
"""

from __future__ import annotations

import contextlib
import heapq
import os
from collections.abc import Iterable, Iterator
from dataclasses import dataclass

from sessionstore.errors import InvalidInput, SecretRefused
from sessionstore.redact.matcher import Compiled, build
from sessionstore.redact.patterns import MAX_MATCH_LEN, PATTERNS, pattern_spans
from sessionstore.redact.redactor import MIN_SECRET_LEN, Redactor, check_bounds
from sessionstore.redact.secrets_file import file_secrets, read_secrets_file
from sessionstore.redact.variants import (
    _base64_forms,
    _json_forms,
    _percent_forms,
    _xml_forms,
    needles,
    plain_forms,
    significant_len,
)

__all__ = ["CHUNK", "PATTERN_NAMES", "PATTERN_SOURCE", "Hit", "Scanner", "labelled_needles"]

CHUNK = 1 << 20
# The names of `patterns.PATTERNS`, in its order (a test checks there is one for each).
PATTERN_NAMES = (
    "aws-access-key-id",
    "github-token",
    "github-fine-grained-token",
    "huggingface-token",
    "slack-token",
    "private-key",
)
PATTERN_SOURCE = "patterns"
_MARKER = "REDACTED"
# Markers for shown names when a secret contains the first (the redactor refuses a
# marker and a secret that contain one another); the scan has no marker option.
_MARKERS = (_MARKER, "SECRET_REMOVED", "XXXXXXXX", "scrubbed_0")


def _marker_for(needles: Iterable[bytes]) -> str:
    """The first marker that no needle contains and that contains no needle."""
    found = list(needles)
    for marker in _MARKERS:
        word = marker.encode()
        if not any(word in n or n.strip(b"\r\n") in word for n in found):
            return marker
    raise InvalidInput("scan", "every marker for shown names collides with a secret")


@dataclass(frozen=True, slots=True, order=True)
class Hit:
    """One occurrence: bytes [offset, end) are the `kind` spelling of `source`'s secret."""

    offset: int
    end: int
    kind: str
    source: str


def labelled_needles(value: bytes) -> dict[bytes, str]:
    """Every needle of `value` (`variants.needles`, exactly the redactor's) with its kind.

    Kinds go by the encoder that produced the needle, the plainest first (a
    needle that is both raw and its own JSON escape is raw). A needle no
    encoder below claims (one a later version of `variants` adds) is `encoded`.
    """
    labels: dict[bytes, str] = {}
    wanted = needles(value)
    for form in plain_forms(value):
        spellings: list[tuple[str, Iterable[bytes]]] = [("raw", [form])]
        b64 = _base64_forms(form)
        spellings.append(("base64", (e for e in b64 if e == e.translate(_TO_STANDARD))))
        spellings.append(("base64url", b64))
        spellings.append(("url", _percent_forms(form)))
        try:
            text = form.decode("utf-8")
        except UnicodeDecodeError:
            text = None
        if text is not None:
            spellings += [("json", _json_forms(text)), ("xml", _xml_forms(text))]
        for kind, found in spellings:
            for needle in found:
                if needle in wanted:
                    labels.setdefault(needle, kind)
    for needle in wanted:
        if needle not in labels:
            labels[needle] = "hex" if _is_hex_of(needle, value) else "encoded"
    return labels


_TO_STANDARD = bytes.maketrans(b"-_", b"+/")


def _is_hex_of(needle: bytes, value: bytes) -> bool:
    try:
        return bytes.fromhex(needle.decode("ascii")) in plain_forms(value)
    except ValueError:
        return False


class Scanner:
    """Registered secrets, each with its source, and the automaton that finds them.

    Secrets are validated as the redactor validates them (`Redactor.add`:
    `SecretRefused` naming the source for a value under 8 bytes); the
    redactor built beside them redacts the names `display_name` shows.
    """

    def __init__(self, secrets: Iterable[tuple[bytes, str]], *, patterns: bool = False) -> None:
        self.patterns = patterns
        self._labels: dict[bytes, list[tuple[str, str]]] = {}
        self.sources: list[str] = []
        entries = list(_bounded(secrets))
        for value, source in entries:
            if 0 < significant_len(value) < MIN_SECRET_LEN:
                raise SecretRefused(
                    source,
                    f"value is shorter than {MIN_SECRET_LEN} bytes: too short to look for "
                    "without matching unrelated text",
                )
            if not value.strip():
                continue
            self.sources.append(source)
            for needle, kind in labelled_needles(value).items():
                self._labels.setdefault(needle, []).append((kind, source))
        marker = _marker_for(self._labels)
        self.redactor = Redactor(marker, patterns=patterns)
        for value, source in entries:
            self.redactor.add(value, origin=source)
        # The same needles the redactor holds, by construction; said here so a change
        # to either side that breaks it fails loudly instead of scanning for less.
        assert frozenset(self._labels) == self.redactor.needles()
        self._compiled: Compiled = build(marker.encode(), set(self._labels), set(), patterns)
        self.width = max(self._compiled.needle_max, MAX_MATCH_LEN if patterns else 0, 1)
        self._slashed = any(b"/" in n for n in self._labels)  # see `may_cross`

    @classmethod
    def from_sources(
        cls,
        env: Iterable[str] = (),
        secrets_file: str | os.PathLike[str] | None = None,
        *,
        patterns: bool = False,
        secrets_data: bytes | None = None,
    ) -> Scanner:
        """A scanner for the values of environment variables `env` and of `secrets_file`.

        `secrets_data`: the secrets file's contents, already read (standard input);
        `secrets_file` then only names it, in errors and in each finding's source.

        Raises `SecretRefused` for an unset, empty or short variable (naming
        it), `InvalidInput` for a secrets file that cannot be read or holds
        no secret, and for nothing to look for at all (no secret, no patterns).
        """
        if isinstance(env, str):  # iterated, "HF_TOKEN" would name the variables H, F, ...
            raise InvalidInput("scan", f"env: a list of variable names, not one string {env!r}")
        entries: list[tuple[bytes, str]] = []
        for name in env:
            # The redactor's own refusal of an unset or empty variable (length: __init__;
            # a clash with the marker: __init__ picks another).
            with contextlib.suppress(InvalidInput):
                Redactor(_MARKER).add_env(name, allow_short=True)
            entries.append((os.fsencode(os.environ[name]), name))
        if secrets_file is not None:
            where = os.fspath(secrets_file)
            data = read_secrets_file(where) if secrets_data is None else secrets_data
            read = ((v, f"{where}:{n}") for v, n in file_secrets(data, where) if v.strip())
            found = list(_bounded(read, entries))  # parsed no further than the bounds
            if not found:
                raise InvalidInput(where, "the secrets file holds no secret to look for")
            entries += found
        if not entries and not patterns:
            raise InvalidInput("scan", "nothing to look for: name a secret or ask for patterns")
        return cls(entries, patterns=patterns)

    def scan_bytes(self, data: bytes) -> list[Hit]:
        """The hits in `data`, a whole file or a name."""
        return list(_merged(self._hits(data, len(data), final=True)))

    def may_cross(self, name: bytes) -> bool:
        """Whether a path ending in `name` can spell a secret across its last `/`: when
        not, `scan_across` finds nothing, and a walk need not build the path to ask it.

        A needle holding a `/`, or a PEM block (its body may hold one) ending in `name`,
        so in `-`; no other token pattern holds a `/`.
        """
        return self._slashed or (self.patterns and b"-" in name)

    def scan_across(self, above: bytes, name: bytes) -> list[Hit]:
        """The hits of the path `above/name` that hold its last `/`: spelled by `name` and
        the names above it together (`ab/cdefgh12` as `ab` holding `cdefgh12`), which
        neither holds alone. Offsets are into `name`, negative where a hit starts above it.
        """
        if not self.may_cross(name):
            return []
        tail = above[len(above) - self.width :] if len(above) > self.width else above
        cut = len(tail)  # where the `/` is
        return [
            Hit(h.offset - cut - 1, h.end - cut - 1, h.kind, h.source)
            for h in self.scan_bytes(tail + b"/" + name)
            if h.offset <= cut < h.end
        ]

    def scan_chunks(self, chunks: Iterable[bytes]) -> Iterator[Hit]:
        """The hits in the concatenation of `chunks`, in offset order, in bounded memory.

        Holds at most one chunk plus `width` bytes.
        """
        return _merged(self._stream(chunks))

    def scan_fd(self, fd: int, chunk: int = CHUNK) -> Iterator[Hit]:
        """`scan_chunks` of the file open at `fd`, read `chunk` bytes at a time."""
        return self.scan_chunks(iter(lambda: os.read(fd, chunk), b""))

    def display_name(self, name: str) -> str:
        """`name` with every secret and token in it redacted, for showing a path."""
        return self.redactor.redact_name(name)

    def _stream(self, chunks: Iterable[bytes]) -> Iterator[Hit]:
        buf = b""
        base = 0  # offset of buf[0] in the stream
        for chunk in chunks:
            buf += chunk
            limit = len(buf) - self.width
            if limit <= 0:
                continue
            for hit in self._hits(buf, limit, final=False):
                yield Hit(base + hit.offset, base + hit.end, hit.kind, hit.source)
            buf = buf[limit:]
            base += limit
        for hit in self._hits(buf, len(buf), final=True):
            yield Hit(base + hit.offset, base + hit.end, hit.kind, hit.source)

    def _hits(self, buf: bytes, limit: int, final: bool) -> list[Hit]:
        """Occurrences in `buf` starting before `limit`, sorted by start (then longest first)."""
        found: list[Hit] = []
        c = self._compiled
        if c.matcher is not None:
            view = memoryview(buf)
            # The redactor's own two-stage search finds the regions holding every
            # occurrence (merged); the full automaton then names each one in them.
            for lo, hi in c._literal_spans(buf):
                if lo >= limit:
                    break
                for _, s, e in c.matcher.find_matches_as_indexes(view[lo:hi], overlapping=True):
                    if lo + s < limit:
                        for kind, source in self._labels[buf[lo + s : lo + e]]:
                            found.append(Hit(lo + s, lo + e, kind, source))
        if self.patterns:
            for start, end in pattern_spans(buf, final):
                if start < limit:
                    found.append(Hit(start, end, _pattern_name(buf, start, end), PATTERN_SOURCE))
        found.sort(key=lambda h: (h.offset, -h.end))
        return found


def _bounded(
    entries: Iterable[tuple[bytes, str]], before: Iterable[tuple[bytes, str]] = ()
) -> Iterator[tuple[bytes, str]]:
    """`entries`, but `SecretRefused` (as `Redactor.add` says it) at the first one past the
    bounds of a redactor, the values of `before` counted first: the forms of none are
    computed, and a secrets file is parsed no further, as the redactor's own check does."""
    seen = {value for value, _ in before if value.strip()}
    size = sum(map(len, seen))
    for value, source in entries:
        if value.strip() and value not in seen:
            seen.add(value)
            size += len(value)
            check_bounds(len(seen), size, source)
        yield value, source


def _pattern_name(buf: bytes, start: int, end: int) -> str:
    for i, pattern in enumerate(PATTERNS):
        m = pattern.match(buf, start)
        if m is not None and m.end() == end:
            return PATTERN_NAMES[i] if i < len(PATTERN_NAMES) else f"pattern-{i + 1}"
    return "pattern"


def _merged(hits: Iterable[Hit]) -> Iterator[Hit]:
    """Overlapping hits of one (kind, source) merged; `hits` sorted by start, output too.

    A merged hit is final once a later hit starts at or after its end (every
    hit still to come starts later), and is given out once no open one starts
    before it, so the output stays in offset order.
    """
    open_: dict[tuple[str, str], Hit] = {}
    done: list[Hit] = []
    for hit in hits:
        key = (hit.kind, hit.source)
        for k in [k for k, h in open_.items() if h.end <= hit.offset]:
            heapq.heappush(done, open_.pop(k))
        current = open_.get(key)
        if current is not None and hit.offset < current.end:
            if hit.end > current.end:
                open_[key] = Hit(current.offset, hit.end, hit.kind, hit.source)
        else:
            open_[key] = hit
        first_open = min((h.offset for h in open_.values()), default=None)
        while done and (first_open is None or done[0].offset < first_open):
            yield heapq.heappop(done)
    for h in open_.values():
        heapq.heappush(done, h)
    while done:
        yield heapq.heappop(done)

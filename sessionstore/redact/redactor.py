"""Byte-level secret redaction that cannot leak.

A `Redactor` holds registered secrets. Each secret is expanded into needles
(`_redact_variants`: stripped, per line, LF/CRLF, base64 at 3 alignments,
hex, percent, JSON and XML escapes). Redaction finds **every** occurrence of
every needle, overlapping ones included, merges overlapping and adjacent
ranges, and replaces each merged range by one marker followed by the CR and
LF bytes the range contained, so line counts (and diff hunk headers) survive.
Bytes outside ranges are copied unchanged.

Design choices, each there to close a leak other maskers have:

* All-overlapping matching, then merging. Leftmost-first alternation leaves
  `efgh` of secret `bcdefgh` visible in `abcdefgh` when `abcd` is also a
  secret. Matching runs in two stages for speed: a leftmost-first automaton
  over the 8-byte needle prefixes locates candidate regions (every needle
  occurrence starts inside one of its hits), and an overlapping automaton
  over the full needles runs only on those regions.
* The output holds no needle and no token, so redacting twice equals
  redacting once. Merging input matches is not enough: a secret that begins
  with the end of the marker (`EDabcdefgh`) reappears in `REDACTEDabcdefgh`
  when its remainder follows another secret, one that ends with the marker's
  start (`...R`) when its head precedes one, and `xoxb-` + a secret becomes a
  Slack token. So ranges are settled left to right against the *output*:
  a range's start moves left one byte at a time while the output before it
  plus the marker holds an occurrence crossing into the marker, and its end
  moves right over every occurrence crossing out of its rendering (marker
  plus kept line breaks) into the following bytes. Proof sketch: take any
  occurrence in the final output. Inside a gap it would be an input match,
  which lies inside a range. Else let R be the last range it touches. If it
  ends past R's rendering, it is in the window R's last right check saw (the
  output up to R plus the raw bytes up to the next range's first start,
  which a later left move only brings closer), so R would have grown. If it
  ends inside R's rendering it ends inside the marker (a needle may not
  contain the marker; no token ends in a line break) and was seen by R's
  last left check, so R's start would have moved. Each step covers one more input
  byte, so settling ends.
* Moving right is unbounded but streams: the range stays open. Moving left
  cannot stream in bounded memory in general (secret `aaaaaaaR`: in
  `aaa...a` + another secret, every `a` before the marker completes it, so
  nothing could be emitted until the run ends). It stops after `max_len`
  bytes and raises RedactionUnsafe instead of emitting such an occurrence. It
  takes a run in which every byte ends the head of some needle whose tail is
  a start of the marker, like `aaaaaaaR` next to many `a`; a moved start
  usually settles after a byte or two.
* Streaming: every step above reads at most `3 * max_len` bytes past the
  range it settles (a `max_len` window, needles complete up to its end, and
  a left move of up to `max_len` by a range not yet found), so `_settle()`
  takes a step only when those bytes are buffered and otherwise stops; a
  range still growing stays *open* (its marker emitted once, continued in
  the next call). So stream output equals whole-buffer output for every
  chunking, and a long run of overlapping secrets never grows the buffer.
* Short secrets (under 8 bytes) cannot be matched anywhere without corrupting
  unrelated bytes, so they are refused unless allowed, and an allowed one is
  redacted only when a whole file (of at most `SHORT_FILE_MAX` bytes) is that
  value, ignoring surrounding whitespace.
* Optional token patterns (`_redact_patterns`) have bounded length, which
  `max_len` includes, so they stream like needles.

Thread-safety: registration and the lazy automaton build take a lock; after
registration a `Redactor` may be used from several threads at once. A
`StreamRedactor` holds per-file state and belongs to one thread; it sees the
secrets registered when it was created.
"""

from __future__ import annotations

import os
import re
import threading
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

import ahocorasick_rs

from sessionstore.errors import InvalidInput, RedactionUnsafe, SecretRefused, StreamFinished
from sessionstore.redact.patterns import MAX_MATCH_LEN as PATTERN_MAX_LEN
from sessionstore.redact.patterns import pattern_spans
from sessionstore.redact.secrets_file import file_secrets
from sessionstore.redact.variants import MIN_NEEDLE_LEN, needles, significant_len

__all__ = ["DEFAULT_MARKER", "MIN_SECRET_LEN", "SHORT_FILE_MAX", "Redactor", "StreamRedactor"]

DEFAULT_MARKER = "REDACTED"
MIN_SECRET_LEN = MIN_NEEDLE_LEN
# Largest file (or name) the short-secret rule looks at. Bounded so a stream
# needs to hold back at most this many bytes before it knows the file is longer.
SHORT_FILE_MAX = 256

# A DFA scans about twice as fast as an NFA but takes ~250 bytes per state;
# past this many detector prefixes (~300 secrets) the NFA keeps memory small.
_DFA_MAX_PREFIXES = 8_000
_BLOCK = 1 << 14
# Detector needles are the first bytes of each needle; every needle is at least
# this long. Shorter prefixes (4) measured slower: more false candidate windows.
_PREFIX_LEN = MIN_NEEDLE_LEN
_MARKER_RE = re.compile(r"[A-Za-z0-9_]+")
_NOT_NEWLINE = bytes(b for b in range(256) if b not in b"\r\n")

Span = tuple[int, int]


@dataclass(frozen=True, slots=True)
class _Compiled:
    """An immutable snapshot of everything matching needs; shared by streams."""

    marker: bytes
    detector: ahocorasick_rs.BytesAhoCorasick | None
    matcher: ahocorasick_rs.BytesAhoCorasick | None
    needle_max: int
    patterns: bool
    shorts: frozenset[bytes]

    @property
    def max_len(self) -> int:
        return max(self.needle_max, PATTERN_MAX_LEN if self.patterns else 0)

    @property
    def reach(self) -> int:
        """How far a byte's fate can depend on the bytes after it (see `StreamRedactor`)."""
        return 3 * self.max_len

    def spans(self, buf: bytes, final: bool, whole: bool) -> list[Span]:
        """Every needle and token occurrence in `buf`; unless `final`, only the complete ones.

        `whole` says `buf` is the entire file, the only case short secrets apply to.
        """
        found = self._literal_spans(buf)
        if self.patterns:
            found.extend(pattern_spans(buf, final))
        if whole and self.shorts and len(buf) <= SHORT_FILE_MAX:
            core = buf.strip()
            if core in self.shorts:
                start = len(buf) - len(buf.lstrip())
                found.append((start, start + len(core)))
        return found

    def crossing(self, window: bytes, at: int) -> list[Span]:
        """Occurrences in `window` that contain both `window[at - 1]` and `window[at]`."""
        found: list[Span] = []
        if self.matcher is not None:
            hits = self.matcher.find_matches_as_indexes(window, overlapping=True)
            found.extend((s, e) for _, s, e in hits if s < at < e)
        if self.patterns:
            found.extend((s, e) for s, e in pattern_spans(window, True) if s < at < e)
        return found

    def _literal_spans(self, buf: bytes) -> list[Span]:
        if self.detector is None or self.matcher is None:
            return []
        spans: list[Span] = []
        view = memoryview(buf)
        # Blocks bound the match lists a dense input (a long run of one
        # secret) produces, so memory stays proportional to the block size.
        for block in range(0, len(buf), _BLOCK):
            # The detector sees 7 bytes past the block so every prefix starting
            # inside it is whole; hits starting past the block are the next one's.
            hits = self.detector.find_matches_as_indexes(
                view[block : block + _BLOCK + _PREFIX_LEN - 1]
            )
            found: list[Span] = []
            for start, end in _windows(hits, block, self.needle_max, len(buf)):
                window = self.matcher.find_matches_as_indexes(view[start:end], overlapping=True)
                found.extend((start + s, start + e) for _, s, e in window)
            spans.extend(_merge(found))
        return spans


def _windows(
    hits: list[tuple[int, int, int]], offset: int, needle_max: int, limit: int
) -> list[Span]:
    """Regions that contain every needle occurrence starting inside a detector hit.

    Leftmost-first search reports the leftmost start each time, so every
    occurrence of a needle starts inside some hit [s, s + 8) (its 8-byte prefix
    is a detector needle) and ends before s + 7 + needle_max.
    """
    windows: list[Span] = []
    for _, start, end in hits:
        if start >= _BLOCK:
            break
        start, end = offset + start, min(limit, offset + end + needle_max - 1)
        if windows and start <= windows[-1][1]:
            windows[-1] = (windows[-1][0], end)
        else:
            windows.append((start, end))
    return windows


def _merge(spans: list[Span]) -> list[Span]:
    """Sort and merge overlapping *and adjacent* spans: one marker per merged range."""
    merged: list[Span] = []
    for start, end in sorted(spans):
        if merged and start <= merged[-1][1]:
            if end > merged[-1][1]:
                merged[-1] = (merged[-1][0], end)
        else:
            merged.append((start, end))
    return merged


class Redactor:
    """Registered secrets and the marker that replaces them."""

    def __init__(self, marker: str = DEFAULT_MARKER, *, patterns: bool = False) -> None:
        """Raises InvalidInput if `marker` is not a plain word or would match a token pattern."""
        if not _MARKER_RE.fullmatch(marker):
            raise InvalidInput(
                "marker",
                "must be a plain word of ASCII letters, digits and '_' so YAML and JSON "
                "scalars stay valid scalars",
            )
        self._marker = marker.encode("ascii")
        if patterns and pattern_spans(self._marker, final=True):
            raise InvalidInput("marker", "looks like a token the patterns redact; choose another")
        self._patterns = patterns
        self._needles: set[bytes] = set()
        self._shorts: set[bytes] = set()
        self._literals = 0
        self._compiled: _Compiled | None = None
        self._lock = threading.Lock()

    # -- registration -----------------------------------------------------

    def add(
        self, value: str | bytes, *, origin: str = "literal", allow_short: bool = False
    ) -> None:
        """Register one secret; an empty (or all-whitespace) value is ignored.

        Raises SecretRefused (naming `origin`, never the value) for a value
        under 8 bytes unless `allow_short`, and InvalidInput if the marker and
        the secret contain one another.
        """
        with self._lock:
            if origin == "literal":
                self._literals += 1
                origin = f"literal #{self._literals}"
        raw = value.encode("utf-8", "surrogateescape") if isinstance(value, str) else bytes(value)
        if raw.strip():
            self._register([(raw, origin)], allow_short)

    def add_env(self, name: str, *, allow_short: bool = False) -> None:
        """Register the value of environment variable `name`; SecretRefused if unset or empty."""
        origin = f"env {name}"
        value = os.environ.get(name)
        if value is None or not value.strip():
            raise SecretRefused(origin, "is not set or empty; export it before registering it")
        self._register([(os.fsencode(value), origin)], allow_short)

    def add_file(self, path: str | os.PathLike[str], *, allow_short: bool = False) -> None:
        """Register the secrets of a file: its lines, or the values of its dotenv assignments.

        The file is read as python-dotenv reads it, and every other plausible
        reading of a line is registered too (`_redact_file`, docs/redaction.md).
        Either every value is registered or, on error, none is. Raises
        InvalidInput if the file cannot be read, SecretRefused naming
        `path:line` for a short value.
        """
        try:
            data = Path(path).read_bytes()
        except OSError as exc:
            raise InvalidInput(
                os.fspath(path), f"cannot read secrets file: {exc.strerror}"
            ) from exc
        where = os.fspath(path)
        entries = file_secrets(data, where)
        self._register(((value, f"{where}:{n}") for value, n in entries), allow_short)

    def _register(self, entries: Iterable[tuple[bytes, str]], allow_short: bool) -> None:
        """Validate every entry first, then add them all: no half-registered file."""
        new_needles: set[bytes] = set()
        new_shorts: set[bytes] = set()
        for raw, origin in entries:
            if not raw.strip():
                continue  # an empty value (`KEY=""`) protects nothing
            if significant_len(raw) >= MIN_SECRET_LEN:
                forms = needles(raw)
                for form in forms:
                    self._check_marker(form, origin)
                new_needles |= forms
            elif allow_short:
                self._check_marker(raw.strip(), origin)
                new_shorts.add(raw.strip())
            else:
                raise SecretRefused(
                    origin,
                    f"value is shorter than {MIN_SECRET_LEN} bytes and would corrupt unrelated "
                    "text; allow short secrets (allow_short=True, --allow-short-secrets) to "
                    "redact it only where it is a whole file",
                )
        with self._lock:
            if not (new_needles <= self._needles and new_shorts <= self._shorts):
                self._needles |= new_needles
                self._shorts |= new_shorts
                self._compiled = None  # rebuilt lazily on next use, not per add

    def _check_marker(self, form: bytes, origin: str) -> None:
        # A marker containing a secret would publish it; a secret containing
        # the marker (or lying inside marker + line breaks) would be matched
        # again in redacted output, breaking idempotence.
        if form.strip(b"\r\n") in self._marker or self._marker in form:
            raise InvalidInput(
                origin, "this secret and the marker contain one another; choose another marker"
            )

    # -- queries ------------------------------------------------------------

    @property
    def marker(self) -> str:
        """The word each redacted range is replaced by."""
        return self._marker.decode("ascii")

    @property
    def patterns(self) -> bool:
        """Whether the well-known token patterns are redacted too."""
        return self._patterns

    def needles(self) -> frozenset[bytes]:
        """Every byte string acted on: all needles plus the (whole-file only) short values.

        Short values are under 8 significant bytes and needles never are, so
        the union is unambiguous; it suits a fingerprint of the redactor.
        """
        with self._lock:
            return frozenset(self._needles | self._shorts)

    def __bool__(self) -> bool:
        """True when redaction can change anything: a secret is registered or patterns are on."""
        return bool(self._needles or self._shorts or self._patterns)

    @property
    def max_pattern_len(self) -> int:
        """Length of the longest needle or token pattern; streams hold back up to 3 times it."""
        return self._compile().max_len

    def redact(self, data: bytes) -> bytes:
        """Return `data` with every secret occurrence replaced."""
        return StreamRedactor(self._compile())._settle(data, final=True, whole=True)[0]

    def stream(self) -> StreamRedactor:
        """Fresh streaming state for one file, using the secrets registered so far."""
        return StreamRedactor(self._compile())

    def redact_name(self, name: str) -> str:
        """Redact one path component (str, possibly carrying surrogate-escaped bytes)."""
        return os.fsdecode(self.redact(os.fsencode(name)))

    def _compile(self) -> _Compiled:
        with self._lock:
            if self._compiled is None:
                self._compiled = _build(self._marker, self._needles, self._shorts, self._patterns)
            return self._compiled


def _build(marker: bytes, found: set[bytes], shorts: set[bytes], patterns: bool) -> _Compiled:
    if not found:
        return _Compiled(marker, None, None, 0, patterns, frozenset(shorts))
    ordered = sorted(found)
    prefixes = sorted({n[:_PREFIX_LEN] for n in ordered})
    fast = ahocorasick_rs.Implementation.DFA
    small = ahocorasick_rs.Implementation.ContiguousNFA
    detector = ahocorasick_rs.BytesAhoCorasick(
        prefixes,
        matchkind=ahocorasick_rs.MATCHKIND_LEFTMOST_FIRST,
        implementation=fast if len(prefixes) <= _DFA_MAX_PREFIXES else small,
    )
    matcher = ahocorasick_rs.BytesAhoCorasick(ordered, implementation=small)
    return _Compiled(marker, detector, matcher, max(map(len, ordered)), patterns, frozenset(shorts))


class StreamRedactor:
    """Redacts one file chunk by chunk in bounded memory.

    The concatenation of every `feed()` result and `finish()` equals
    `Redactor.redact()` of the whole input, however it was chunked: both run
    `_settle()`, which takes a step only once the bytes that step depends on
    are all in the buffer, and otherwise stops and resumes on the next chunk.
    """

    def __init__(self, compiled: _Compiled) -> None:
        self._c = compiled
        self._buf = b""
        # The last max_len bytes of output: the context a needle or token could
        # share with a marker.
        self._tail = b""
        # A range whose marker was emitted may still grow: it covers the first
        # `_carried` bytes of `_buf` (already rendered) and continues from there.
        self._open = False
        self._carried = 0
        # Until more than SHORT_FILE_MAX bytes arrived the file may still be a
        # whole-file short secret, so nothing may be emitted yet.
        self._gated = bool(compiled.shorts)
        self._consumed = False  # some input already left the buffer
        self._finished = False

    def feed(self, chunk: bytes) -> bytes:
        """Take the next chunk; return the output that is already certain (maybe b"").

        Raises StreamFinished after `finish()`.
        """
        if self._finished:
            raise StreamFinished("feed")
        self._buf += chunk
        if self._gated:
            if len(self._buf) <= SHORT_FILE_MAX:
                return b""
            self._gated = False
        if len(self._buf) <= self._c.reach:
            return b""
        out, keep = self._settle(self._buf, final=False, whole=False)
        self._buf = self._buf[keep:]
        self._consumed = True
        return out

    def finish(self) -> bytes:
        """Return the rest of the output; the stream cannot be fed afterwards.

        Raises StreamFinished if called twice.
        """
        if self._finished:
            raise StreamFinished("finish")
        self._finished = True
        buf, self._buf = self._buf, b""
        return self._settle(buf, final=True, whole=not self._consumed)[0]

    def _settle(self, buf: bytes, final: bool, whole: bool) -> tuple[bytes, int]:
        """Render `buf` (continuing this stream's state); return output and bytes used.

        Ranges are taken left to right. A new range's start moves left one
        byte at a time while the output before it plus the marker holds an
        occurrence crossing into the marker; its end moves right over every
        occurrence that crosses out of its rendering. Unless `final`, a step
        that needs bytes beyond the buffer is not taken: the output so far and
        the index to keep the buffer from are returned instead.
        """
        c = self._c
        width = c.max_len
        n = len(buf)
        found = c.spans(buf, final, whole)
        if self._open:
            found.append((0, self._carried))
        ranges = _merge(found)
        # Gaps go out as views of `buf`: the final join is their only copy.
        view = memoryview(buf)
        out: list[bytes | memoryview] = []
        pos = 0  # buf[:pos] is rendered
        idx = 0  # ranges[idx:] are not yet part of the output
        current = self._open  # a range ends at pos, its marker emitted, and may grow

        def emit(data: bytes | memoryview) -> None:
            out.append(data)
            tail = data[-width:] if len(data) >= width else self._tail + data
            self._tail = bytes(tail[-width:])

        def grow(end: int) -> None:
            # Extend the current range to `end`, merging ranges it reaches or touches.
            nonlocal pos, idx
            while idx < len(ranges) and ranges[idx][0] <= end:
                end = max(end, ranges[idx][1])
                idx += 1
            emit(buf[pos:end].translate(None, _NOT_NEWLINE))
            pos = end

        if current:
            pos = self._carried
            grow(pos)
        while True:
            if current:
                if not final and n - pos < c.reach:
                    break
                nxt = ranges[idx][0] if idx < len(ranges) else n
                look = buf[pos : min(nxt, pos + width - 1)]
                crossing = c.crossing(self._tail + look, len(self._tail))
                if crossing:
                    grow(pos + max(e for _, e in crossing) - len(self._tail))
                    continue
                # A range close enough that moving its start left could reach this one.
                near = idx < len(ranges) and nxt - pos <= width
                if near and self._start(buf, pos, nxt) == pos:
                    grow(nxt)
                    continue
                current = False
            # A range found this close to the end may still gain an earlier start.
            if idx == len(ranges) or (not final and ranges[idx][0] > n - width):
                break
            start = self._start(buf, pos, ranges[idx][0])
            emit(view[pos:start])
            emit(c.marker)
            pos = start
            grow(ranges[idx][0])
            current = True
        if final:
            emit(view[pos:])
            return b"".join(out), n
        self._open = current
        if current:
            # Keep every byte a needle still incomplete at the buffer end may start at.
            keep = max(0, min(pos, n - width + 1))
            self._carried = pos - keep
        else:
            # Not yet found ranges start after n - width and move left at most `width`.
            keep = max(pos, n - 2 * width)
            emit(view[pos:keep])
        return b"".join(out), keep

    def _start(self, buf: bytes, floor: int, start: int) -> int:
        """Where a range found at `start` begins so no occurrence crosses into its marker.

        Moves left one byte at a time, at most `max_len` bytes and not below
        `floor` (the end of the previous range: reaching it merges the two).
        Raises RedactionUnsafe past that bound, rather than emit such an occurrence.
        """
        c = self._c
        width = c.max_len
        pos = start
        while pos > floor:
            ctx = (self._tail + buf[max(floor, pos - width) : pos])[-width:]
            if not c.crossing(ctx + c.marker, len(ctx)):
                break
            pos -= 1
            if start - pos > width:
                raise RedactionUnsafe(
                    f"more than {width} bytes before a secret each complete a registered value "
                    f"or token with the start of the marker {c.marker.decode()!r}; refusing to "
                    "write output that contains it; choose another marker",
                )
        return pos

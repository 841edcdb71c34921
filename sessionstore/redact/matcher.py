"""Finding every occurrence of every needle: an immutable snapshot the redactor's streams share.

All-overlapping matching, then merging. Leftmost-first alternation leaves
`efgh` of secret `bcdefgh` visible in `abcdefgh` when `abcd` is also a
secret. Two engines find the same occurrences; the faster one for the
needles is used (docs/redaction.md, "Performance"):

a *detector* locates candidate regions, and an overlapping automaton over
the full needles confirms them, only on those regions. The detector is

* for few distinct 8-byte needle prefixes (a handful of secrets), a
  leftmost-first Aho-Corasick automaton over them, which ahocorasick-rs runs
  with its SIMD prefilter: every needle occurrence starts inside a hit;
* for more, Hyperscan (`sessionstore.redact.hyperscan_detector`) over the
  needles themselves, which reports every occurrence, overlapping ones
  included: its hits are the occurrences, with nothing left to confirm; past
  `_HS_MAX_NEEDLES`, Hyperscan over their prefixes, whose hits are every
  start; the Aho-Corasick detector where Hyperscan is not installed.

`Compiled.spans` finds the occurrences in a buffer (needles, token patterns
and, for a whole file, short secrets); `Compiled.crossing_end` the ones that
straddle a given position, which is what settling a range asks
(`sessionstore.redact.stream`), unless `Compiled.inert` says none can.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import ahocorasick_rs

from sessionstore.redact.hyperscan_detector import WINDOW_MAX, HyperscanDetector, load
from sessionstore.redact.patterns import MAX_MATCH_LEN as PATTERN_MAX_LEN
from sessionstore.redact.patterns import pattern_spans
from sessionstore.redact.variants import MIN_NEEDLE_LEN

__all__ = ["SHORT_FILE_MAX", "Compiled", "Span", "build", "merge"]

# Largest file (or name) the short-secret rule looks at. Bounded so a stream
# needs to hold back at most this many bytes before it knows the file is longer.
SHORT_FILE_MAX = 256

# A DFA scans about twice as fast as an NFA but takes ~250 bytes per state;
# past this many detector prefixes (~300 secrets) the NFA keeps memory small.
_DFA_MAX_PREFIXES = 8_000
# Up to about this many prefixes the prefilter makes the detector faster than
# Hyperscan (measured: 38 prefixes, 7 secrets, still faster; 55 slower).
_PREFILTER_MAX_PREFIXES = 48
# Hyperscan scans whole needles ~1.6x faster than their prefixes (100 secrets)
# but compiles 10,000 of them (1,000 secrets) with 33 MiB of peak memory, 4x
# the time and 1.2x slower scans; past this many it is given the prefixes.
_HS_MAX_NEEDLES = 4_000
# Each detector call costs a few microseconds, which small blocks multiply at
# GB/s. A block with more hits than a sparse text has is dense (a long run of
# a secret): it is redone in small blocks, since its overlapping matches at
# once would take tens of MiB of tuples (a 256 KiB block's hits alone take 4).
_BLOCK = 1 << 18
_SPARSE_HITS = 256
_DENSE_BLOCK = WINDOW_MAX
# Detector needles are the first bytes of each needle; every needle is at least
# this long. Shorter prefixes (4) measured slower: more false candidate windows.
_PREFIX_LEN = MIN_NEEDLE_LEN

Span = tuple[int, int]


@dataclass(frozen=True, slots=True)
class Compiled:
    """An immutable snapshot of everything matching needs; shared by streams."""

    marker: bytes
    detector: ahocorasick_rs.BytesAhoCorasick | None
    matcher: ahocorasick_rs.BytesAhoCorasick | None
    fast: HyperscanDetector | None
    needle_max: int
    patterns: bool
    # The short secrets themselves: kept out of the repr a traceback or a test failure prints.
    shorts: frozenset[bytes] = field(repr=False)
    # No occurrence can hold a byte of a rendered range (see `_inert`), so settling
    # a range never moves it and `crossing_end` need not be asked.
    inert: bool
    # The longest occurrence, and how far a byte's fate can depend on the bytes after it
    # (see `StreamRedactor`): fields set once, not properties, for a stream reads them
    # several times per chunk.
    max_len: int = field(init=False)
    reach: int = field(init=False)

    def __post_init__(self) -> None:
        max_len = max(self.needle_max, PATTERN_MAX_LEN if self.patterns else 0)
        object.__setattr__(self, "max_len", max_len)  # frozen: set past its __setattr__
        object.__setattr__(self, "reach", 3 * max_len)

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

    def crossing_end(self, window: bytes, at: int) -> int:
        """The furthest end of an occurrence in `window` holding `window[at - 1]` and
        `window[at]`; 0 if there is none."""
        end = 0
        if self.matcher is not None:
            for _, s, e in self.matcher.find_matches_as_indexes(window, overlapping=True):
                if s < at < e:
                    end = max(end, e)
        if self.patterns:
            for s, e in pattern_spans(window, True):
                if s < at < e:
                    end = max(end, e)
        return end

    def _literal_spans(self, buf: bytes) -> list[Span]:
        """Spans covering every needle occurrence in `buf`, sorted by start, mostly merged.

        Each span is a union of occurrences; spans of neighbouring windows may
        still touch, so a caller that needs ranges merges them (`merge`).
        """
        if self.matcher is None:
            return []
        if self.fast is not None and self.fast.exact:
            return self.fast.windows(buf)
        if len(buf) <= _DENSE_BLOCK:
            # A name, a small file, the seam between two chunks: one window. The
            # prefilter rules out most for a third of what confirming a seam costs.
            if self.detector is not None and not self.detector.find_matches_as_indexes(buf):
                return []
            return self._confirm(buf, [(0, len(buf))])
        view = memoryview(buf)
        if self.fast is not None:
            return self._confirm(view, self.fast.windows(buf))
        # Blocks bound the match lists a dense input (a long run of one
        # secret) produces, so memory stays proportional to the block size.
        assert self.detector is not None
        find = self.detector.find_matches_as_indexes
        spans: list[Span] = []
        limit = len(buf)
        for block in range(0, limit, _BLOCK):
            # The detector sees 7 bytes past the block so every prefix starting
            # inside it is whole; hits starting past the block are the next one's.
            hits = find(view[block : block + _BLOCK + _PREFIX_LEN - 1])
            if not hits:  # most blocks of a log: nothing to confirm
                continue
            if len(hits) <= _SPARSE_HITS:
                spans += self._confirm(view, _windows(hits, block, _BLOCK, self.needle_max, limit))
                continue
            for sub in range(block, min(block + _BLOCK, limit), _DENSE_BLOCK):
                hits = find(view[sub : sub + _DENSE_BLOCK + _PREFIX_LEN - 1])
                spans += self._confirm(
                    view, _windows(hits, sub, _DENSE_BLOCK, self.needle_max, limit)
                )
        return spans

    def _confirm(self, view: bytes | memoryview, windows: list[Span]) -> list[Span]:
        """The occurrences in each window, merged window by window (bounded lists).

        `view`: a view of a large buffer, or a small buffer itself, whose one window
        is all of it (a whole slice of bytes is the object itself: no view to make).
        """
        assert self.matcher is not None
        spans: list[Span] = []
        for start, end in windows:
            found = self.matcher.find_matches_as_indexes(view[start:end], overlapping=True)
            if found:
                spans += merge([(start + s, start + e) for _, s, e in found])
        return spans


def _windows(
    hits: list[tuple[int, int, int]], offset: int, size: int, needle_max: int, limit: int
) -> list[Span]:
    """Regions that contain every needle occurrence starting inside a detector hit.

    Leftmost-first search reports the leftmost start each time, so every
    occurrence of a needle starts inside some hit [s, s + 8) (its 8-byte prefix
    is a detector needle) and ends before s + 7 + needle_max.
    """
    windows: list[Span] = []
    for _, start, end in hits:
        if start >= size:
            break
        start, end = offset + start, offset + end + needle_max - 1
        if end > limit:  # not min(): a builtin call costs 5x a comparison, once a hit
            end = limit
        if windows and start <= windows[-1][1]:
            windows[-1] = (windows[-1][0], end)
        else:
            windows.append((start, end))
    return windows


def merge(spans: list[Span]) -> list[Span]:
    """Sort and merge overlapping *and adjacent* spans: one marker per merged range.

    Most calls get one span (a chunk's occurrence, a window's): it comes back as it is.
    """
    if len(spans) < 2:
        return spans
    merged: list[Span] = []
    for start, end in sorted(spans):
        if merged and start <= merged[-1][1]:
            if end > merged[-1][1]:
                merged[-1] = (merged[-1][0], end)
        else:
            merged.append((start, end))
    return merged


def build(marker: bytes, found: set[bytes], shorts: set[bytes], patterns: bool) -> Compiled:
    if not found:
        return Compiled(
            marker, None, None, None, 0, patterns, frozenset(shorts), _inert(marker, [], patterns)
        )
    ordered = sorted(found)
    prefixes = sorted({n[:_PREFIX_LEN] for n in ordered})
    small = ahocorasick_rs.Implementation.ContiguousNFA
    # The full automaton also answers `crossing_end` on small windows, where its
    # per-call cost matters more than its speed.
    matcher = ahocorasick_rs.BytesAhoCorasick(ordered, implementation=small)
    needle_max = max(map(len, ordered))
    fast = None
    if len(prefixes) > _PREFILTER_MAX_PREFIXES:
        if len(ordered) <= _HS_MAX_NEEDLES:
            fast = load(ordered, list(map(len, ordered)))
        else:
            fast = load(prefixes, [needle_max] * len(prefixes))
    detector = None
    if fast is None:
        dfa = ahocorasick_rs.Implementation.DFA
        detector = ahocorasick_rs.BytesAhoCorasick(
            prefixes,
            matchkind=ahocorasick_rs.MATCHKIND_LEFTMOST_FIRST,
            implementation=dfa if len(prefixes) <= _DFA_MAX_PREFIXES else small,
        )
    inert = _inert(marker, ordered, patterns)
    return Compiled(marker, detector, matcher, fast, needle_max, patterns, frozenset(shorts), inert)


def _inert(marker: bytes, needles: list[bytes], patterns: bool) -> bool:
    """Whether no occurrence can hold a byte of a marker or of the line breaks kept after it.

    Then no occurrence crosses into a marker (it would end with a head of the
    marker, or hold it whole) nor out of a rendering (it would start with a
    tail of the marker or a line break, or hold the marker whole). Token
    patterns are not taken apart: with them on, no marker is inert.
    """
    if patterns:
        return False
    heads = tuple(marker[:k] for k in range(1, len(marker)))
    tails = (b"\r", b"\n", *(marker[k:] for k in range(1, len(marker))))
    return not any(n.endswith(heads) or n.startswith(tails) or marker in n for n in needles)

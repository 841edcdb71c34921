"""The first matching stage through Hyperscan, where its wheel is installed.

Hyperscan reports every occurrence of every pattern, overlapping ones
included. Given the needles, its hits are the occurrences themselves; given
their distinct 8-byte prefixes, every position where a needle may start,
which the overlapping automaton then confirms (`sessionstore.redact.matcher`).
With hundreds of needles it
runs several times faster than an Aho-Corasick DFA. Whole needles scan
faster; prefixes compile in a quarter of the time and half the peak memory,
which past a few thousand needles is what counts (docs/redaction.md,
"Performance").

They are compiled as regular expressions made of `\\xHH` escapes, never with
the binding's literal mode: that mode measures each pattern with strlen() and
so would cut a prefix at its first NUL byte.

Each hit of pattern i ending at e gives the window [e - len(i), e - len(i) +
width(i)): the pattern's own length for a needle, the longest needle for a
prefix. Hits arrive through a Python callback and are merged into windows
as they come, each at most `WINDOW_MAX` long, so a dense input (one long run
of a secret) holds a window per 16 KiB, not one entry per byte. A window of
needles is then a union of occurrences (`exact`): nothing to confirm.

A scratch space serves one scan at a time: each thread scans with its own clone.
"""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import hyperscan

__all__ = ["WINDOW_MAX", "HyperscanDetector", "database", "load"]

# Longest window: one handed to the confirming automaton has its overlapping
# matches made into tuples, one per byte or more in a dense window.
WINDOW_MAX = 1 << 14

Span = tuple[int, int]


def load(patterns: list[bytes], widths: list[int]) -> HyperscanDetector | None:
    """A detector for `patterns`, or None where Hyperscan is missing or refuses them.

    None leaves the first stage to an Aho-Corasick automaton, which finds the
    same starts (the wheel is x86-64 Linux only; a CPU without SSSE3 raises
    `hyperscan.error`).
    """
    try:
        import hyperscan
    except ImportError:
        return None
    try:
        return HyperscanDetector(patterns, widths)
    except hyperscan.error:
        return None


def database(patterns: list[bytes]) -> hyperscan.Database:
    """A block-mode database matching each pattern as bytes; its id is the pattern's index."""
    import hyperscan

    db = hyperscan.Database(mode=hyperscan.HS_MODE_BLOCK)
    db.compile(
        expressions=[b"".join(b"\\x%02x" % c for c in p) for p in patterns],
        ids=list(range(len(patterns))),
        elements=len(patterns),
        flags=0,
    )
    return db


class HyperscanDetector:
    """Immutable once built; `windows` may be called from several threads at once."""

    __slots__ = ("_db", "_local", "_shape", "exact")

    def __init__(self, patterns: list[bytes], widths: list[int]) -> None:
        self._db = database(patterns)
        self._shape = tuple(zip(map(len, patterns), widths, strict=True))
        self._local = threading.local()
        # Given the needles themselves, each window is the union of the
        # occurrences it was made of: nothing is left to confirm.
        self.exact = all(size == width for size, width in self._shape)

    def windows(self, buf: bytes) -> list[Span]:
        """Sorted regions of `buf` that hold every needle occurrence.

        Overlapping and adjacent windows are joined while the result stays
        within `WINDOW_MAX`. When `exact`, each is a union of occurrences.
        """
        windows: list[Span] = []
        shape = self._shape
        limit = len(buf)
        ordered = True

        def on_hit(pattern: int, _from: int, end: int, _flags: int, _ctx: object) -> None:
            nonlocal ordered
            size, width = shape[pattern]
            start = end - size
            stop = min(limit, start + width)
            if windows:
                first, last = windows[-1]
                if start < first:
                    ordered = False  # Hyperscan does not promise end order: sorted after
                elif start <= last and stop - first <= WINDOW_MAX:
                    windows[-1] = (first, max(last, stop))
                    return
            windows.append((start, stop))

        self._db.scan(buf, match_event_handler=on_hit, scratch=self._scratch())
        return windows if ordered else sorted(windows)

    def _scratch(self) -> hyperscan.Scratch:
        scratch: hyperscan.Scratch | None = getattr(self._local, "scratch", None)
        if scratch is None:
            scratch = self._local.scratch = self._db.scratch.clone()
        return scratch

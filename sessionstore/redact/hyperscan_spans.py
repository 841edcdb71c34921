"""Every needle occurrence in one pass through Hyperscan, where its wheel is installed.

Hyperscan reports every end offset of every pattern, overlapping occurrences
included, which is all redaction needs from a matcher: with hundreds of
needles its literal matcher runs several times faster than an Aho-Corasick
DFA (docs/redaction.md, "Performance"). The needles are compiled as regular
expressions made of `\\xHH` escapes, never with the binding's literal mode:
that mode measures each pattern with strlen() and so cuts a needle at its first
NUL byte, which would put every match of it in the wrong place. Hyperscan
builds the same literal matcher from both.

Matches arrive through a Python callback and are merged as they come, so a
dense input (one long run of a secret) holds one span, not one per match.

A scratch space serves one scan at a time: each thread scans with its own clone.
"""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import hyperscan

__all__ = ["HyperscanSpans", "load"]

Span = tuple[int, int]


def load(needles: list[bytes]) -> HyperscanSpans | None:
    """A Hyperscan scanner for `needles`, or None where Hyperscan is missing or refuses them.

    None leaves matching to the Aho-Corasick automata, which find the same
    occurrences (the wheel is x86-64 only; a CPU without SSSE3 or a needle too
    large for its compiler raises `hyperscan.error`).
    """
    try:
        import hyperscan
    except ImportError:
        return None
    try:
        return HyperscanSpans(needles)
    except hyperscan.error:
        return None


class HyperscanSpans:
    """Immutable once built; `spans` may be called from several threads at once."""

    __slots__ = ("_db", "_lens", "_local")

    def __init__(self, needles: list[bytes]) -> None:
        import hyperscan

        db = hyperscan.Database(mode=hyperscan.HS_MODE_BLOCK)
        db.compile(
            expressions=[b"".join(b"\\x%02x" % c for c in n) for n in needles],
            ids=list(range(len(needles))),
            elements=len(needles),
            flags=0,
        )
        self._db = db
        self._lens = tuple(map(len, needles))
        self._local = threading.local()

    def spans(self, buf: bytes) -> tuple[list[Span], bool]:
        """The occurrences of every needle in `buf`, and whether they are merged and sorted.

        Overlapping and adjacent occurrences are merged as they arrive; False
        means one arrived out of order and the caller must still merge the list.
        """
        merged: list[Span] = []
        lens = self._lens
        ordered = True

        def on_match(pattern: int, _from: int, end: int, _flags: int, _ctx: object) -> None:
            nonlocal ordered
            start = end - lens[pattern]
            if merged and end < merged[-1][1]:
                # Hyperscan does not promise end order across patterns: sort it out after.
                ordered = False
                merged.append((start, end))
                return
            while merged and start <= merged[-1][1]:
                start = min(start, merged.pop()[0])
            merged.append((start, end))

        self._db.scan(buf, match_event_handler=on_match, scratch=self._scratch())
        return merged, ordered

    def _scratch(self) -> hyperscan.Scratch:
        scratch: hyperscan.Scratch | None = getattr(self._local, "scratch", None)
        if scratch is None:
            scratch = self._local.scratch = self._db.scratch.clone()
        return scratch

"""A stream's buffer as two pieces, the bytes held back and the new chunk, never joined whole.

Joining them (`held + chunk`) would copy every chunk once before the output
copies it again. Instead a range or a window that straddles the two is
joined on its own (a few hundred bytes), a gap goes out as views, and a
piece wanted whole goes out as itself: when a chunk holds no secret the
stream returns that very bytes object, and copies nothing at all.

Occurrences are found in each piece separately, plus a *seam*: the end of
the held bytes joined to the first `max_len` bytes of the chunk, where
every occurrence starting in the held bytes lies whole (none is longer).
"""

from __future__ import annotations

from sessionstore.redact.matcher import Compiled, Span

__all__ = ["Pieces", "spans"]


class Pieces:
    """`head` (held back) followed by `body` (the new chunk), indexed as one buffer."""

    __slots__ = ("body", "head", "n", "split")

    def __init__(self, head: bytes, body: bytes) -> None:
        self.head = head
        self.body = body
        self.split = len(head)
        self.n = self.split + len(body)

    def slice(self, i: int, j: int) -> bytes:
        """A copy of bytes [i, j): for windows and ranges, never for gaps."""
        k = self.split
        if j <= k:
            return self.head[i:j]
        if i >= k:
            return self.body[i - k : j - k]
        return self.head[i:] + self.body[: j - k]

    def parts(self, i: int, j: int) -> list[bytes | memoryview]:
        """Bytes [i, j) without copying: views, or a piece itself when all of it is wanted."""
        k = self.split
        if i >= j:
            return []
        if i >= k:
            return [_part(self.body, i - k, j - k)]
        if j <= k:
            return [_part(self.head, i, j)]
        return [_part(self.head, i, k), _part(self.body, 0, j - k)]

    def rest(self, i: int) -> bytes:
        """Bytes [i, n) to hold back: the chunk itself (uncopied) if it starts there."""
        return self.body if i == self.split else self.slice(i, self.n)


def _part(piece: bytes, i: int, j: int) -> bytes | memoryview:
    return piece if i == 0 and j == len(piece) else memoryview(piece)[i:j]


def spans(c: Compiled, buf: Pieces, scan_from: int, final: bool, whole: bool) -> list[Span]:
    """`Compiled.spans` of the whole buffer, for occurrences starting at `scan_from` or later.

    The caller knows none starts in `head` before `scan_from`, so the held
    bytes a previous call already searched are not searched again; what is
    left of `head` is then at most a few `max_len` long.
    """
    head = buf.head[scan_from:] if scan_from else buf.head
    body = buf.body
    if not body or not head or len(body) <= c.max_len:
        joined = head + body if head and body else head or body
        return _shifted(c.spans(joined, final, whole), scan_from if head else buf.split)
    seam = head + body[: c.max_len]
    cut = len(head)
    found = c.spans(seam, True, False)
    if found:  # seldom: a secret across two chunks
        found = [(scan_from + s, scan_from + e) for s, e in found if s < cut]
    return found + _shifted(c.spans(body, final, False), buf.split)


def _shifted(found: list[Span], offset: int) -> list[Span]:
    return [(s + offset, e + offset) for s, e in found] if offset else found

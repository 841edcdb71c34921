"""Streaming redaction: one file chunk by chunk, in bounded memory, equal to whole-buffer output.

Occurrences (`sessionstore.redact.matcher`) are merged into ranges; each
range is replaced by one marker followed by the CR and LF bytes it
contained. The ranges are settled against the output, not the input:

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
* Most needle sets cannot touch a marker: no needle holds it, ends with a
  head of it, or starts with a tail of it or a line break
  (`Compiled.inert`). Then no occurrence crosses into a marker or out of a
  rendering, every check above would find nothing, and settling skips them
  and the output tail they read.
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
* Optional token patterns (`sessionstore.redact.patterns`) have bounded length, which
  `max_len` includes, so they stream like needles.
* Copies: held bytes and the new chunk are never joined (`sessionstore.redact.pieces`).
  `feed_parts` returns views of all but the last `reach` bytes or so, and
  copies those to hold them: the caller's chunk is free once it drops the
  parts. `feed` holds the chunk whole instead: a range found more than
  `max_len` into it waits for the next call (`defer`), so the bytes before
  the chunk go out and the chunk is held, with the ranges found in it
  (`_pending`); a chunk without a secret then goes out as itself, one with a
  secret is copied once, into the output.
"""

from __future__ import annotations

from sessionstore.errors import RedactionUnsafe, StreamFinished
from sessionstore.redact.matcher import SHORT_FILE_MAX, Compiled, Span, merge
from sessionstore.redact.pieces import Pieces, spans

__all__ = ["StreamRedactor"]

_NOT_NEWLINE = bytes(b for b in range(256) if b not in b"\r\n")


class StreamRedactor:
    """Redacts one file chunk by chunk in bounded memory.

    The concatenation of every `feed()` result and `finish()` equals
    `Redactor.redact()` of the whole input, however it was chunked: both run
    `_settle()`, which takes a step only once the bytes that step depends on
    are all in the buffer, and otherwise stops and resumes on the next chunk.
    """

    def __init__(self, compiled: Compiled) -> None:
        self._c = compiled
        self._buf = b""
        # No occurrence starts in `_buf` before this offset: those bytes were searched,
        # and what they hold is in `_pending` (found, not yet rendered).
        self._scan_from = 0
        self._pending: list[Span] = []
        # The last max_len bytes of output before this call: the context a needle
        # or token could share with a marker (never read, so not kept, if it is inert).
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

    @classmethod
    def redact_whole(cls, compiled: Compiled, data: bytes) -> bytes:
        """`data` redacted as one whole file: what `Redactor.redact` returns."""
        data = data if type(data) is bytes else bytes(data)
        return b"".join(cls(compiled)._settle(Pieces(b"", data), final=True, whole=True)[0])

    def feed(self, chunk: bytes) -> bytes:
        """Take the next chunk; return output for the input so far (maybe b"").

        Usually that is everything up to this chunk, which is held whole (by
        reference) for the next call: a chunk holding no secret comes back
        then as the same object, uncopied. `feed_parts` is the same output
        unjoined.

        Raises StreamFinished after `finish()`.
        """
        return b"".join(self._feed(chunk, hold=True))

    def feed_parts(self, chunk: bytes) -> list[bytes | memoryview]:
        """`feed`, as the pieces its output is joined from: views of the input and markers.

        For a writer (`os.write` each, or `os.writev`), which then copies
        nothing in user space. Unlike `feed` it does not hold the chunk back
        whole: what it returns covers all but the last `reach` bytes fed, which
        it copies, so the chunk is released when the caller drops the parts
        (see `_hold`). The views stay valid: they are of immutable bytes this
        stream no longer changes.
        """
        return self._feed(chunk, hold=False)

    def _feed(self, chunk: bytes, hold: bool) -> list[bytes | memoryview]:
        if self._finished:
            raise StreamFinished("feed")
        if not chunk:
            return []  # settling now would only copy the held chunk out early
        # Held by reference past this call (see `Pieces`), so never a buffer the caller reuses.
        chunk = chunk if type(chunk) is bytes else bytes(chunk)
        total = len(self._buf) + len(chunk)
        if total <= (max(self._c.reach, SHORT_FILE_MAX) if self._gated else self._c.reach):
            self._buf += chunk  # both small: at most `reach` bytes
            return []
        self._gated = False
        buf = Pieces(self._buf, chunk)
        out, keep = self._settle(buf, final=False, whole=False, hold=hold)
        self._buf = buf.rest(keep)
        self._consumed = True
        return out

    def finish(self) -> bytes:
        """Return the rest of the output; the stream cannot be fed afterwards.

        Raises StreamFinished if called twice.
        """
        return b"".join(self.finish_parts())

    def finish_parts(self) -> list[bytes | memoryview]:
        """`finish`, as the pieces its output is joined from (see `feed_parts`)."""
        if self._finished:
            raise StreamFinished("finish")
        self._finished = True
        buf, self._buf = Pieces(self._buf, b""), b""
        return self._settle(buf, final=True, whole=not self._consumed)[0]

    def _settle(
        self, buf: Pieces, final: bool, whole: bool, hold: bool = False
    ) -> tuple[list[bytes | memoryview], int]:
        """Render `buf` (continuing this stream's state); return output parts and bytes used.

        `hold`: keep the new chunk whole for the next call when it can (see `_hold`).

        Ranges are taken left to right. A new range's start moves left one
        byte at a time while the output before it plus the marker holds an
        occurrence crossing into the marker; its end moves right over every
        occurrence that crosses out of its rendering. Unless `final`, a step
        that needs bytes beyond the buffer is not taken: the output so far and
        the index to keep the buffer from are returned instead.

        Long because the loop is one state machine (`pos`, `idx`, `current` and
        the output shared by every step, the `grow` closure in the hot path):
        the proof sketch in the module docstring reads against it as one
        piece, and splitting it would pass that state around per byte.
        """
        c = self._c
        width = c.max_len
        n = buf.n
        found = spans(c, buf, self._scan_from, final, whole) + self._pending
        if self._open:
            found.append((0, self._carried))
        ranges = merge(found)
        # Gaps go out as views of `buf`, or as a whole piece itself: joining them
        # (`feed`) is their only copy, and none when the output is one whole piece.
        out: list[bytes | memoryview] = []
        pos = 0  # buf[:pos] is rendered
        idx = 0  # ranges[idx:] are not yet part of the output
        current = self._open  # a range ends at pos, its marker emitted, and may grow

        def grow(end: int) -> None:
            # Extend the current range to `end`, merging ranges it reaches or touches.
            nonlocal pos, idx
            while idx < len(ranges) and ranges[idx][0] <= end:
                if ranges[idx][1] > end:  # not max(): a builtin call costs 5x a comparison
                    end = ranges[idx][1]
                idx += 1
            breaks = buf.slice(pos, end).translate(None, _NOT_NEWLINE)
            if breaks:
                out.append(breaks)
            pos = end

        if current:
            pos = self._carried
            grow(pos)
        # A range found this close to the end may still gain an earlier start. To
        # hold the chunk whole, one starting a `width` into it waits too, so the
        # held bytes before it can go out now (see `_hold`).
        defer = n if final else n - width + 1
        if hold:
            defer = min(defer, buf.split + width)
        while True:
            if current:
                if not final and n - pos < c.reach:
                    break
                # An inert marker is never crossed: nothing here could move a range.
                if not c.inert:
                    nxt = ranges[idx][0] if idx < len(ranges) else n
                    look = buf.slice(pos, min(nxt, pos + width - 1))
                    tail = self._tail_of(out)
                    end = c.crossing_end(tail + look, len(tail))
                    if end:
                        grow(pos + end - len(tail))
                        continue
                    # A range close enough that moving its start left could reach this one.
                    near = idx < len(ranges) and nxt - pos <= width
                    if near and self._start(buf, pos, nxt, out) == pos:
                        grow(nxt)
                        continue
                current = False
            if idx == len(ranges) or ranges[idx][0] >= defer:
                break
            start = self._start(buf, pos, ranges[idx][0], out)
            out += buf.parts(pos, start)
            out.append(c.marker)
            pos = start
            grow(ranges[idx][0])
            current = True
        keep = n if final else self._hold(buf, pos, current, ranges[idx:], hold)
        out += buf.parts(pos, keep)
        if not c.inert:
            self._tail = self._tail_of(out)
        return out, keep

    def _tail_of(self, out: list[bytes | memoryview]) -> bytes:
        """The last `max_len` bytes of this stream's output, `out` being this call's so far.

        Taken when a check reads it rather than kept up to date per part: an
        inert marker (`Compiled.inert`) needs no check, hence no tail.
        """
        width = self._c.max_len
        tail = b""
        for part in reversed(out):
            tail = bytes(part[len(tail) - width :]) + tail
            if len(tail) >= width:
                return tail
        return (self._tail + tail)[-width:]

    def _hold(self, buf: Pieces, pos: int, current: bool, waiting: list[Span], whole: bool) -> int:
        """Where the bytes to hold back for the next call begin; records what it needs.

        `waiting` are the ranges not yet taken; unless a range is open they all
        start at least `width` past where it returns, so moving their starts left
        stays inside the held bytes, and they are kept (`_pending`) rather than
        searched for again. `whole`: hold the whole chunk where that is as
        correct, for `feed`, whose joined output is then the chunk itself a
        call later when it holds no secret. Parts need no such hold, and it
        costs: the caller reads its next chunk while this one is still alive,
        and glibc, finding two chunks' worth free at the top of its heap,
        returns the pages to the kernel, which faults fresh zeroed ones in for
        the next (15-60 faults a MiB, as much time as a copy or more).
        """
        width = self._c.max_len
        n = buf.n
        self._open = current
        if current:
            # Keep every byte a needle still incomplete at the buffer end may start at.
            keep = max(0, min(pos, n - width + 1))
            self._carried = pos - keep
            self._scan_from = 0
            self._pending = []
            return keep
        # The last 2 * width bytes, from `width` before the first range waiting if
        # that is earlier, but nothing rendered (comparisons: see `grow`).
        keep = n - 2 * width
        if waiting and waiting[0][0] - width < keep:
            keep = waiting[0][0] - width
        if keep < pos:
            keep = pos
        # Holding back more is as correct: hold the whole chunk rather than copy its
        # tail, so a chunk with no secret leaves (next call) as the object it came as.
        if whole and pos <= buf.split <= keep:
            keep = buf.split
        # Every occurrence starting before n - width was complete, hence found.
        self._scan_from = n - width - keep if n - width > keep else 0
        self._pending = [(s - keep, e - keep) for s, e in waiting] if waiting else []
        return keep

    def _start(self, buf: Pieces, floor: int, start: int, out: list[bytes | memoryview]) -> int:
        """Where a range found at `start` begins so no occurrence crosses into its marker.

        Moves left one byte at a time, at most `max_len` bytes and not below
        `floor` (the end of the previous range: reaching it merges the two;
        `out` is the output up to there). Raises RedactionUnsafe past that
        bound, rather than emit such an occurrence.
        """
        c = self._c
        if c.inert:
            return start
        width = c.max_len
        before = self._tail_of(out)
        pos = start
        while pos > floor:
            ctx = (before + buf.slice(max(floor, pos - width), pos))[-width:]
            if not c.crossing_end(ctx + c.marker, len(ctx)):
                break
            pos -= 1
            if start - pos > width:
                raise RedactionUnsafe(
                    f"more than {width} bytes before a secret each complete a registered value "
                    f"or token with the start of the marker {c.marker.decode()!r}; refusing to "
                    "write output that contains it; choose another marker",
                )
        return pos

"""Accidental damage to the summary index (a flipped, inserted or deleted byte, a
truncation) is never believed: each line carries the checksum of its document
(index format 3), so the line damage hits is unusable and the listing says what
the records say. Deliberate forgery (a consistent rewrite, checksums included)
is out of scope: whoever can write the index can write the markers.
"""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

import cli_runner
import orjson
from inspect_helpers import attempt, metrics, trial
from test_index import _documents, _lines, settled, without_index

from sessionstore.format.names import INDEX
from sessionstore.inspect.summary import SessionView, session_summary
from sessionstore.store.session import Session, Store

__all__ = ["settled"]  # the fixture, used by name

# (output tok/s, ttft mean): the best trial under the ttft constraint (200) is #2; #4 is
# faster but over it, so a changed digit in a cached marker can change the best trial.
_TRIALS = [(120.0, 150.0), (340.5, 180.0), (95.25, 120.0), (410.0, 260.0), (275.0, 90.0)]


def _session(root: Path) -> Session:
    """Every record complete (so a summary is kept), a service record too."""
    s = Store(root).create(id="s1", name="one", trials=6, constraints={"max_ttft_ms.mean": 200})
    for tok, ttft in _TRIALS:
        trial(s, metrics(tok, ttft))
    attempt(s, {"trial": 2, "status": "verified"})
    return s


def _summary(session: Session, write: bool = False) -> bytes:
    """The listing's row, as the bytes `inspect --json` would print for it."""
    return orjson.dumps(session_summary(Session.open(session.path), write_index=write))


def _detail(session: Session, write: bool = False) -> dict[str, Any]:
    return SessionView.load(Session.open(session.path), write_index=write).detail()


def _damage(rng: random.Random, data: bytes) -> bytes:
    """`data` with one accident: a byte flipped, truncated, a byte inserted or deleted, or
    a digit turned into another (bit rot that leaves the JSON valid)."""
    at = rng.randrange(len(data))
    kind = rng.randrange(5)
    if kind == 0:
        return data[:at] + bytes([data[at] ^ rng.randrange(1, 256)]) + data[at + 1 :]
    if kind == 1:
        return data[:at]
    if kind == 2:
        return data[:at] + bytes([rng.randrange(256)]) + data[at:]
    if kind == 3:
        return data[:at] + data[at + 1 :]
    digits = [i for i, b in enumerate(data) if 0x30 <= b <= 0x39]
    at = rng.choice(digits)
    other = rng.choice([d for d in b"0123456789" if d != data[at]])
    return data[:at] + bytes([other]) + data[at + 1 :]


def test_random_damage_to_the_index_is_never_believed_and_is_repaired(
    tmp_path: Path, settled: None
) -> None:
    s = _session(tmp_path / "store")
    index = s.path / INDEX
    truth = without_index(s, lambda: _summary(s))
    detail = without_index(s, lambda: _detail(s))
    assert _summary(s, write=True) == truth
    valid = index.read_bytes()
    _documents(valid)  # two checked lines, the summary kept in the first
    assert "summary" in _lines(s)[0]
    rng = random.Random(20250611)
    for case in range(400):
        damaged = _damage(rng, valid)
        assert damaged != valid
        index.write_bytes(damaged)
        assert _summary(s) == truth, (case, damaged)
        assert _detail(s) == detail, (case, damaged)
        assert _summary(s, write=True) == truth, case
        head, newline, _ = damaged.partition(b"\n")
        if newline and head == valid.partition(b"\n")[0]:
            # Only the markers line is damaged: the listing checked the head alone.
            assert index.read_bytes() == damaged, case
        else:
            assert index.read_bytes() == valid, case  # rewritten from the markers
        assert _detail(s, write=True) == detail, case
        assert _summary(s, write=True) == truth, case
        assert index.read_bytes() == valid, case


def _flip_digit(data: bytes, text: bytes, offset: int) -> bytes:
    """`data` with the digit at `offset` in its first `text` changed (one byte)."""
    at = data.index(text) + offset
    digit = data[at : at + 1]
    return data[:at] + (b"1" if digit != b"1" else b"2") + data[at + 1 :]


def test_inspect_json_shows_the_records_through_a_damaged_index(
    tmp_path: Path, settled: None
) -> None:
    """The two accidents that were believed before the checksums: a digit of the kept best
    value (the list), a digit of a cached marker's constraint value (the detail)."""
    root = tmp_path / "store"
    s = _session(root)
    listing = ("inspect", "--json", "--store", root)
    detail = ("inspect", "s1", "--json", "--store", root)
    truth = without_index(s, lambda: [cli_runner.run(*c).stdout for c in (listing, detail)])
    assert _summary(s, write=True)  # written, summary kept
    index = s.path / INDEX
    valid = index.read_bytes()
    head_line, _, markers_line = valid.partition(b"\n")
    # "value":340.5 -> 341.5 in the head; trial 4's ttft mean 260.0 -> 160.0 in the markers,
    # which would make #4 (410 tok/s) meet the constraint and be the best.
    cases = [
        (listing, _flip_digit(head_line, b'"value":340.5', 10) + b"\n" + markers_line),
        (detail, head_line + b"\n" + _flip_digit(markers_line, b'"mean":260.0', 7)),
    ]
    for (command, damaged), expected in zip(cases, truth, strict=True):
        assert damaged != valid and len(damaged) == len(valid)
        index.write_bytes(damaged)
        proc = cli_runner.run(*command)
        assert (proc.returncode, proc.stdout) == (0, expected), proc.stderr
        # `inspect` replaced what it read (a process of its own: with what has settled).
        rewritten = index.read_bytes()
        assert rewritten != damaged
        _documents(rewritten)
    assert orjson.loads(truth[0])[0]["best"]["n"] == 2


def test_a_format_2_index_is_ignored_and_rewritten(tmp_path: Path, settled: None) -> None:
    """Format 2 was two lines of bare JSON: no checksum to vouch for it, so unusable."""
    s = _session(tmp_path / "store")
    truth = without_index(s, lambda: _summary(s))
    assert _summary(s, write=True) == truth
    head, markers = _lines(s)
    head["format"] = 2
    head["summary"]["fields"]["best"]["value"] = 1e9  # would show, were it believed
    old = orjson.dumps(head) + b"\n" + orjson.dumps(markers)
    index = s.path / INDEX
    index.write_bytes(old)
    assert _summary(s) == truth
    assert index.read_bytes() == old  # a reader that does not write leaves it
    assert _summary(s, write=True) == truth
    assert _lines(s)[0]["format"] == 3 and "summary" in _lines(s)[0]
    assert _summary(s) == truth

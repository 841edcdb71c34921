"""A record sealed in the destination by another writer while a pass is changing it.

The pass learns whether a record is sealed when the walk enters it; the
commits of its files come later (durable: in fsync rounds, after the walk has
moved on). Once the marker exists no file of the record may change: each
commit into a record looks for the marker again just before its rename (a
chmod in place and a `--delete` unlink just before they are made), and a
file not committed because of it is reported as diverged. Another process
seals the record (a temp linked to `trial.json`, as the store does) from the
read hook at a chosen file; the test snapshots the record right after.
"""

from __future__ import annotations

import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest
from mirror_helpers import run, settle, temps, tree, write

from sessionstore.mirror.mirror import CACHE_NAME, Mirror

FILES = [f"f{i}" for i in range(8)]
SEAL_AT = "trials/1/f3"  # the file being read when the other writer seals

# The store's way (format.md, "Writing a record"): a temp file linked to the marker's name.
SEAL = """
import os, sys
record = sys.argv[1]
temp = os.path.join(record, ".sstmp-seal")
with open(temp, "wb") as f:
    f.write(b'{"by": "store"}')
os.link(temp, os.path.join(record, "trial.json"))
os.unlink(temp)
"""


def _in_flight(src: Path, dst: Path) -> None:
    """trials/1 in the destination without a marker, older than the source's files."""
    for name in FILES:
        write(src / "trials" / "1" / name, b"old " + name.encode())
    settle()
    assert sorted(run(src, dst).copied) == [f"trials/1/{name}" for name in FILES]
    for name in FILES:
        write(src / "trials" / "1" / name, b"new " + name.encode())
    settle()


@pytest.mark.parametrize("durable", [True, False], ids=["durable", "no-fsync"])
def test_no_file_of_a_record_changes_once_another_writer_sealed_it(
    src: Path, dst: Path, durable: bool
) -> None:
    _in_flight(src, dst)
    record = dst / "trials" / "1"
    at_seal: dict[str, bytes] = {}

    def other_writer(drel: str) -> None:
        if drel == SEAL_AT and not at_seal:
            subprocess.run([sys.executable, "-c", SEAL, str(record)], check=True, timeout=60)
            at_seal.update(tree(record))

    report = Mirror(src, dst, durable=durable, _on_chunk=other_writer).run_once()
    assert at_seal, "the hook never ran; the test proves nothing"
    assert tree(record) == at_seal
    assert report.ok, report.errors
    # What was not committed is reported, never dropped: every file of the record the
    # destination does not hold as the source has it is diverged, and none is copied.
    differs = sorted(f"trials/1/{n}" for n in FILES if at_seal[n] != b"new " + n.encode())
    assert differs, "nothing left to commit after the seal; the test proves nothing"
    assert [(d["path"], d["files"]) for d in report.diverged] == [("trials/1", differs)]
    assert not set(differs) & set(report.copied)
    assert not temps(dst)
    # The next pass finds the record sealed: compared, the same divergence, nothing written.
    settle()
    again = run(src, dst)
    assert tree(record) == at_seal
    assert [(d["path"], d["files"]) for d in again.diverged] == [("trials/1", differs)]
    assert again.copied == []


def test_delete_removes_nothing_from_a_record_sealed_during_it(
    src: Path, dst: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`--delete` decides per record when it reaches it; the record is sealed by another
    process during its first deletion there. That one is the gap no check closes (the
    marker appears between the check and the unlink); no deletion follows it."""
    for name in FILES:
        write(src / "trials" / "1" / name, b"x")
    settle()
    run(src, dst)
    for name in FILES:
        (src / "trials" / "1" / name).unlink()
    (src / "trials" / "1" / "keep").write_bytes(b"the record is still in the source")
    settle()
    record = dst / "trials" / "1"
    real_unlink = os.unlink
    sealed: list[str] = []

    def unlink(path: str, *, dir_fd: int | None = None) -> None:
        if path in FILES and not sealed:
            subprocess.run([sys.executable, "-c", SEAL, str(record)], check=True, timeout=60)
            sealed.append(path)
        real_unlink(path, dir_fd=dir_fd)

    monkeypatch.setattr(os, "unlink", unlink)
    report = run(src, dst, delete=True)
    monkeypatch.undo()
    assert sealed, "nothing was deleted; the test proves nothing"
    assert report.deleted == ["trials/1/f0"]
    assert sorted(tree(record)) == sorted([*FILES[1:], "keep", "trial.json"])
    assert [(d["path"], d["files"]) for d in report.diverged] == [
        ("trials/1", [f"trials/1/{n}" for n in FILES[1:]])
    ]


def test_no_mode_of_a_record_changes_once_another_writer_sealed_it(src: Path, dst: Path) -> None:
    """Same bytes, other bits, no cache entry: the pass compares each file and chmods it
    in place. The record is sealed while the pass reads one of its files; from then on
    no file of it changes mode (that one included: the look is just before the chmod)."""
    for name in FILES:
        write(src / "trials" / "1" / name, b"same " + name.encode(), mode=0o644)
    settle()
    run(src, dst)
    for name in FILES:
        (src / "trials" / "1" / name).chmod(0o600)
    (dst / CACHE_NAME).unlink()
    settle()
    record = dst / "trials" / "1"
    at_seal: dict[str, int] = {}

    def modes() -> dict[str, int]:
        return {p.name: stat.S_IMODE(p.stat().st_mode) for p in record.iterdir()}

    def other_writer(drel: str) -> None:
        if drel == SEAL_AT and not at_seal:
            subprocess.run([sys.executable, "-c", SEAL, str(record)], check=True, timeout=60)
            at_seal.update(modes())

    report = Mirror(src, dst, durable=False, _on_chunk=other_writer).run_once()
    assert at_seal, "the hook never ran; the test proves nothing"
    assert at_seal[SEAL_AT.rpartition("/")[2]] == 0o644, "the test proves nothing"
    assert modes() == at_seal
    assert report.ok, report.errors
    assert report.copied == []

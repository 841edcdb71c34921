"""Hard links to destination files: what the mirror changes reaches no other name.

A `cp -al` snapshot of the destination shares every file's inode with it. A
file replaced by the mirror gets a new inode (temp file and rename), which
leaves the snapshot's name on the old one; only a change made to the inode
itself (a chmod of a file found to hold the right bytes already) would show
through the snapshot. The passes run as real processes; the snapshot is
taken by `cp -al`, as a user would.
"""

from __future__ import annotations

import json
import os
import stat
import subprocess
from pathlib import Path

import pytest
from mirror_helpers import mirror_cli, settle, write

from sessionstore.mirror.mirror import CACHE_NAME


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


@pytest.mark.parametrize("linked", [True, False], ids=["linked", "unlinked"])
def test_a_mode_fixed_without_a_cache_entry_never_reaches_another_name(
    tmp_path: Path, src: Path, dst: Path, linked: bool
) -> None:
    """Same bytes, other bits, and no cache entry to vouch for the destination file
    (here the cache is lost; a newly registered secret does the same): the pass
    compares, finds the bytes equal and must give the file the source's mode. A
    file with another name is replaced by a new one; a file with none is chmod'ed
    in place, as before."""
    write(src / "notes.txt", b"report v1\n", mode=0o644)
    settle()
    assert mirror_cli(src, dst, "--once").returncode == 0
    snap = tmp_path / "snapshot"
    if linked:
        subprocess.run(["cp", "-al", str(dst), str(snap)], check=True, timeout=60)
    before = (dst / "notes.txt").stat()
    (src / "notes.txt").chmod(0o600)
    (dst / CACHE_NAME).unlink()
    settle()

    done = mirror_cli(src, dst, "--once", "--json")
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    after = (dst / "notes.txt").stat()
    assert _mode(dst / "notes.txt") == 0o600
    assert (dst / "notes.txt").read_bytes() == b"report v1\n"
    if linked:
        assert _mode(snap / "notes.txt") == 0o644
        assert (snap / "notes.txt").read_bytes() == b"report v1\n"
        assert after.st_ino != before.st_ino
        assert report["copied"] == ["notes.txt"]
    else:
        assert after.st_ino == before.st_ino
        assert report["copied"] == []
    # The next pass trusts what this one recorded: nothing to do.
    settle()
    again = json.loads(mirror_cli(src, dst, "--once", "--json").stdout)
    assert (again["copied"], again["unchanged"]) == ([], 1)
    if linked:
        assert os.stat(snap / "notes.txt").st_nlink == 1

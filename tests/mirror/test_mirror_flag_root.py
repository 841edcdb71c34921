"""A destination root the mirror cannot create its in-progress flag in.

Its subdirectories are writable, its root is not (`chattr +i` as root, which
ignores permission bits; mode 0555 otherwise). The flag is the pass's own
error, once; the files are mirrored all the same (docs/mirror.md, the
in-progress flag). The pass runs as a real process.
"""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from mirror_helpers import mirror_cli, settle, write

from sessionstore.mirror.layout import DIRTY_NAME
from sessionstore.mirror.mirror import CACHE_NAME


@contextmanager
def _root_not_writable(root: Path) -> Iterator[None]:
    """Root ignores permission bits: the immutable attribute (ext4, xfs, btrfs) instead."""
    if os.geteuid() != 0:
        root.chmod(0o555)
        try:
            yield
        finally:
            root.chmod(0o700)
        return
    done = subprocess.run(["chattr", "+i", str(root)], capture_output=True, timeout=60)
    if done.returncode != 0:
        pytest.skip(f"chattr +i is not supported here: {done.stderr.decode().strip()}")
    try:
        yield
    finally:
        subprocess.run(["chattr", "-i", str(root)], check=True, timeout=60)


def test_a_flag_that_cannot_be_created_is_reported_and_the_pass_mirrors(
    src: Path, dst: Path
) -> None:
    write(src / "b" / "y", b"1")
    settle()
    assert mirror_cli(src, dst, "--once").returncode == 0
    write(src / "b" / "y", b"2")
    settle()
    with _root_not_writable(dst):
        done = mirror_cli(src, dst, "--once", "--json")
        report = json.loads(done.stdout)
        assert (dst / "b" / "y").read_bytes() == b"2"
        assert report["copied"] == ["b/y"]
        # The flag once, and the change cache, which cannot be written there either.
        assert [e["path"] for e in report["errors"]] == [DIRTY_NAME, CACHE_NAME]
        assert report["errors"][0]["error"].startswith("cannot create the in-progress flag")
        assert not (dst / DIRTY_NAME).exists()
        assert done.returncode == 1  # an error of the pass, as any other

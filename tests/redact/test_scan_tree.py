"""Scanning trees: contents, names, symlinks and FIFOs (never followed or opened), depth, size.

Secrets here are obviously fake; every tree is made under tmp_path.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from sessionstore._fs.tree import remove_tree_at
from sessionstore.errors import InvalidInput
from sessionstore.redact.scan import Scanner
from sessionstore.redact.scan_tree import Finding, ScanError, ScanTotals, Skipped, scan_path

FAKE = b"fake-secret-for-tree-tests"
SOURCE = "FAKE_TOKEN"


def scanner(patterns: bool = False) -> Scanner:
    return Scanner([(FAKE, SOURCE)], patterns=patterns)


def events(path: Path, totals: ScanTotals | None = None) -> list[Finding | Skipped | ScanError]:
    return list(scan_path(path, scanner(), totals=totals))


def test_contents_names_and_counts(tmp_path: Path) -> None:
    (tmp_path / "a" / "b").mkdir(parents=True)
    (tmp_path / "a" / "b" / "log.txt").write_bytes(b"token=" + FAKE + b"\n")
    (tmp_path / "a" / ("copy-" + FAKE.decode() + ".txt")).write_bytes(b"clean")
    (tmp_path / "clean.txt").write_bytes(b"nothing here")
    totals = ScanTotals()
    found = events(tmp_path, totals)
    assert found == [
        Finding(f"{tmp_path}/a/b/log.txt", 6, "content", "raw", SOURCE),
        Finding(f"{tmp_path}/a/copy-REDACTED.txt", 5, "name", "raw", SOURCE),
    ]
    assert totals == ScanTotals(files=3, findings=2, skipped=0, errors=0)


def test_a_secret_in_a_directory_name_is_redacted_in_every_path(tmp_path: Path) -> None:
    inner = tmp_path / FAKE.decode()
    inner.mkdir()
    (inner / "f").write_bytes(FAKE)
    found = events(tmp_path)
    assert [(f.path, f.where) for f in found if isinstance(f, Finding)] == [
        (f"{tmp_path}/REDACTED", "name"),
        (f"{tmp_path}/REDACTED/f", "content"),
    ]
    assert all(FAKE.decode() not in f.path for f in found)


def test_a_secret_holding_a_slash_is_redacted_across_names(tmp_path: Path) -> None:
    # Base64 secrets hold `/`: as directory and file names, no one name holds them whole,
    # and the path to the file spells it all the same: found there, at the `/` it holds.
    slashed = b"slashed-secret/its-second-half"
    (tmp_path / "slashed-secret").mkdir()
    (tmp_path / "slashed-secret" / "its-second-half").write_bytes(FAKE)
    (tmp_path / "slashed-secret" / "its-second-half-not").write_bytes(b"x")  # holds it too
    (tmp_path / "slashed-secret" / "its-second").write_bytes(b"x")  # does not
    found = list(scan_path(tmp_path, Scanner([(FAKE, SOURCE), (slashed, "SLASHED")])))
    assert sorted((f.path, f.where, f.offset) for f in found if isinstance(f, Finding)) == [
        (f"{tmp_path}/REDACTED", "content", 0),
        (f"{tmp_path}/REDACTED", "path", -len("slashed-secret/")),
        (f"{tmp_path}/REDACTED-not", "path", -len("slashed-secret/")),
    ]
    assert all(f.source == "SLASHED" for f in found if isinstance(f, Finding) and f.where == "path")


@pytest.mark.parametrize("below", ["slashed-secret", "slashed-secret/"])
def test_a_secret_spanning_the_root_and_a_name_below_it_is_never_shown(
    tmp_path: Path, below: str
) -> None:
    # The root as given holds the secret's head, a name below the root its tail; the
    # root holding a whole secret (given as it is, or as one file) is shown redacted too.
    slashed = b"slashed-secret/its-second-half"
    (tmp_path / "slashed-secret" / "its-second-half").mkdir(parents=True)
    (tmp_path / "slashed-secret" / "its-second-half" / "f").write_bytes(FAKE)
    (tmp_path / FAKE.decode()).write_bytes(FAKE)
    sought = Scanner([(FAKE, SOURCE), (slashed, "SLASHED")])
    found = list(scan_path(f"{tmp_path}/{below}", sought))
    found += scan_path(tmp_path / FAKE.decode(), sought)
    assert [(f.path, f.where) for f in found if isinstance(f, Finding)] == [
        (f"{tmp_path}/REDACTED", "path"),  # the name below the root completes it
        (f"{tmp_path}/REDACTED/f", "content"),
        (f"{tmp_path}/REDACTED", "content"),
    ]


def test_symlinks_and_fifos_are_skipped_never_followed_or_opened(tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.txt").write_bytes(FAKE)
    tree = tmp_path / "tree"
    tree.mkdir()
    (tree / "to-file").symlink_to(outside / "secret.txt")
    (tree / "to-dir").symlink_to(outside)
    os.mkfifo(tree / "fifo")  # opening it for reading would block: the scan must not
    with socket.socket(socket.AF_UNIX) as sock:
        sock.bind(str(tree / "sock"))
        found = events(tree)
    assert found == [
        Skipped(f"{tree}/fifo", "fifo"),
        Skipped(f"{tree}/sock", "socket"),
        Skipped(f"{tree}/to-dir", "symlink"),
        Skipped(f"{tree}/to-file", "symlink"),
    ]


def test_a_symlinks_target_text_is_scanned(tmp_path: Path) -> None:
    (tmp_path / "link").symlink_to("/nonexistent/" + FAKE.decode())
    found = events(tmp_path)
    assert Finding(f"{tmp_path}/link", 13, "link target", "raw", SOURCE) in found


def test_a_root_that_is_a_symlink_is_followed_only_when_asked(tmp_path: Path) -> None:
    (tmp_path / "real").mkdir()
    (tmp_path / "real" / "f").write_bytes(FAKE)
    (tmp_path / "link").symlink_to(tmp_path / "real")
    assert [e.path for e in events(tmp_path / "link")] == [f"{tmp_path}/link/f"]
    with pytest.raises(InvalidInput, match="symlink"):
        scan_path(tmp_path / "link", scanner(), follow=False)


def test_one_file_and_bad_roots(tmp_path: Path) -> None:
    (tmp_path / "f").write_bytes(b"." + FAKE)
    assert events(tmp_path / "f") == [Finding(f"{tmp_path}/f", 1, "content", "raw", SOURCE)]
    with pytest.raises(InvalidInput, match="no such file or directory"):
        scan_path(tmp_path / "missing", scanner())
    os.mkfifo(tmp_path / "fifo")
    with pytest.raises(InvalidInput, match="not a regular file or a directory"):
        scan_path(tmp_path / "fifo", scanner())


@pytest.mark.parametrize("kind", ["missing", "fifo", "dangling", "nul"])
def test_a_bad_root_holding_a_secret_is_named_redacted(tmp_path: Path, kind: str) -> None:
    # Every path is shown redacted: the root given, in the error refusing it too.
    root = tmp_path / FAKE.decode() / kind
    root.parent.mkdir()
    if kind == "nul":  # no path can hold one: refused before any call, quoting it
        root = tmp_path / f"{FAKE.decode()}\0"
    if kind == "fifo":
        os.mkfifo(root)
    elif kind == "dangling":
        root.symlink_to(tmp_path / "nowhere")
    with pytest.raises(InvalidInput) as caught:
        scan_path(root, scanner(), follow=kind != "dangling")
    assert FAKE.decode() not in str(caught.value) and "REDACTED" in str(caught.value)


@pytest.mark.skipif(os.geteuid() == 0, reason="root reads files whatever their mode")
def test_an_unreadable_file_is_an_error_and_the_scan_goes_on(tmp_path: Path) -> None:
    (tmp_path / "a").write_bytes(b"x")
    (tmp_path / "a").chmod(0)
    (tmp_path / "b").write_bytes(FAKE)
    found = events(tmp_path)
    assert isinstance(found[0], ScanError) and "Permission denied" in found[0].error
    assert isinstance(found[1], Finding)


def test_a_10000_level_tree(tmp_path: Path) -> None:
    """Walked iteratively, one directory fd at a time: no RecursionError, no EMFILE."""
    depth = 10_000
    top = os.open(tmp_path, os.O_RDONLY | os.O_DIRECTORY)
    fd = os.dup(top)
    try:
        for _ in range(depth):
            os.mkdir("d", dir_fd=fd)
            sub = os.open("d", os.O_RDONLY | os.O_DIRECTORY, dir_fd=fd)
            os.close(fd)
            fd = sub
        leaf = os.open("leaf", os.O_WRONLY | os.O_CREAT, 0o644, dir_fd=fd)
        os.write(leaf, FAKE)
        os.close(leaf)
        os.close(fd)
        totals = ScanTotals()
        found = events(tmp_path, totals)
        assert len(found) == 1 and isinstance(found[0], Finding)
        assert found[0].path == str(tmp_path) + "/d" * depth + "/leaf"
        assert totals.files == 1
    finally:
        remove_tree_at(top, "d")
        os.close(top)


@pytest.mark.slow
def test_a_1_gib_file_is_streamed(tmp_path: Path) -> None:
    """A sparse 1 GiB file with the secret across a chunk boundary at its end: found once,
    at its offset, and the scanning process stays far below the file's size."""
    big = tmp_path / "big"
    size = 1 << 30
    with open(big, "wb") as f:
        f.truncate(size - 10)
        f.seek(size - 10)
        f.write(FAKE)
    probe = textwrap.dedent(
        f"""
        from sessionstore.redact.scan import Scanner
        from sessionstore.redact.scan_tree import scan_path
        found = list(scan_path({str(tmp_path)!r}, Scanner([({FAKE!r}, "T")])))
        print([f.offset for f in found])
        # VmHWM, not ru_maxrss: that survives execve and counts the pytest process
        # this one was forked from (300 MB late in the suite).
        hwm = next(line for line in open("/proc/self/status") if line.startswith("VmHWM:"))
        print(hwm.split()[1])
        """
    )
    done = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, timeout=300, check=True
    )
    offsets, peak_kib = done.stdout.splitlines()
    assert offsets == f"[{size - 10}]"
    assert int(peak_kib) < 200 * 1024  # the interpreter and the automaton: tens of MiB

"""A source name that changes kind between passes (a directory becomes a file, or the
reverse): never half-replaced in the destination, and with --delete the next passes
converge (the old entry removed the way --delete removes files, then the new one)."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import cli_runner
import orjson
import pytest
from mirror_helpers import (
    DaemonProcess,
    mirror_cli,
    paths,
    run,
    settle,
    snapshot,
    temps,
    tree,
    write,
)

from sessionstore._fs.tree import exchange_at
from sessionstore.mirror.mirror import DIRTY_NAME, Mirror
from sessionstore.redact.redactor import Redactor

pytestmark = pytest.mark.timeout(120)

NOT_REPLACED = (
    "a directory is in its place in the destination; not replaced "
    "(--delete removes one this mirror wrote)"
)
DIR_REMOVED = "--delete removed the directory in its place; the next pass copies it"
FILE_REMOVED = "--delete removed the file in its place; the next pass makes the directory"


def _pass(src: Path, dst: Path, *options: str, rc: int = 0) -> dict[str, Any]:
    done = mirror_cli(src, dst, "--once", "--json", *options)
    assert done.returncode == rc, done.stderr
    report: dict[str, Any] = orjson.loads(done.stdout)
    return report


def _dir_to_file(src: Path, name: str = "a") -> None:
    shutil.rmtree(src / name)
    write(src / name, b"a file now")
    settle()


def _mirrored_dir(tmp_path: Path) -> tuple[Path, Path]:
    src, dst = tmp_path / "src", tmp_path / "dst"
    write(src / "a" / "f", b"x")
    write(src / "a" / "b" / "g", b"z")
    write(src / "keep", b"k")
    settle()
    _pass(src, dst)
    return src, dst


def test_a_directory_replaced_by_a_file_is_kept_whole_without_delete(tmp_path: Path) -> None:
    src, dst = _mirrored_dir(tmp_path)
    _dir_to_file(src)
    for _ in range(2):  # reported by every pass, the same way; never half-replaced
        report = _pass(src, dst, rc=1)
        assert report["errors"] == [{"path": "a", "error": NOT_REPLACED}]
        assert tree(dst) == {"a/f": b"x", "a/b/g": b"z", "keep": b"k"}


def test_a_directory_replaced_by_a_file_converges_with_delete(tmp_path: Path) -> None:
    src, dst = _mirrored_dir(tmp_path)
    _dir_to_file(src)
    before = snapshot(dst)
    dry = _pass(src, dst, "--delete", "--dry-run")
    assert snapshot(dst) == before  # a dry run changes nothing
    assert dry["deleted"] == ["a/b/g", "a/f"] and dry["errors"] == []
    assert paths(dry["unstable"]) == ["a"]
    report = _pass(src, dst, "--delete")
    assert report["deleted"] == ["a/b/g", "a/f"] and report["errors"] == []
    assert report["unstable"] == [{"path": "a", "reason": DIR_REMOVED}]
    assert not (dst / "a").exists()
    report = _pass(src, dst, "--delete")
    assert report["copied"] == ["a"] and report["errors"] == report["unstable"] == []
    assert tree(dst) == tree(src) == {"a": b"a file now", "keep": b"k"}
    assert _pass(src, dst, "--delete")["copied"] == []


def test_a_file_replaced_by_a_directory_converges_with_delete(tmp_path: Path) -> None:
    src, dst = tmp_path / "src", tmp_path / "dst"
    write(src / "a", b"a file")
    settle()
    _pass(src, dst)
    (src / "a").unlink()
    write(src / "a" / "f", b"x")
    settle()
    report = _pass(src, dst, rc=1)
    assert paths(report["errors"]) == ["a"]
    assert tree(dst) == {"a": b"a file"}
    before = snapshot(dst)
    dry = _pass(src, dst, "--delete", "--dry-run")
    assert snapshot(dst) == before
    assert dry["deleted"] == ["a"] and dry["errors"] == []
    report = _pass(src, dst, "--delete")
    assert report["deleted"] == ["a"] and report["errors"] == []
    assert report["unstable"] == [{"path": "a", "reason": FILE_REMOVED}]
    report = _pass(src, dst, "--delete")
    assert report["copied"] == ["a/f"] and report["errors"] == []
    assert tree(dst) == tree(src) == {"a/f": b"x"}


def test_an_empty_directory_replaced_by_a_file_converges_with_delete(tmp_path: Path) -> None:
    src, dst = tmp_path / "src", tmp_path / "dst"
    (src / "e").mkdir(parents=True)
    _pass(src, dst)
    assert (dst / "e").is_dir()
    (src / "e").rmdir()
    write(src / "e", b"a file now")
    settle()
    assert _pass(src, dst, rc=1)["errors"] == [{"path": "e", "error": NOT_REPLACED}]
    assert _pass(src, dst, "--delete")["unstable"] == [{"path": "e", "reason": DIR_REMOVED}]
    assert _pass(src, dst, "--delete")["copied"] == ["e"]
    assert tree(dst) == tree(src)


def test_a_directory_holding_a_file_not_the_mirrors_is_never_half_replaced(
    tmp_path: Path,
) -> None:
    src, dst = _mirrored_dir(tmp_path)
    write(dst / "a" / "mine.txt", b"put here by hand")
    _dir_to_file(src)
    for _ in range(2):
        report = _pass(src, dst, "--delete", rc=1)
        assert report["errors"] == [
            {
                "path": "a",
                "error": "a directory is in its place in the destination, with files "
                "--delete did not remove; not replaced",
            }
        ]
    assert tree(dst) == {"a/mine.txt": b"put here by hand", "keep": b"k"}


def test_a_sealed_record_replaced_by_a_file_is_kept(tmp_path: Path) -> None:
    src, dst = tmp_path / "src", tmp_path / "dst"
    write(src / "trials" / "3" / "log.txt", b"log")
    write(src / "trials" / "3" / "trial.json", b"{}")
    settle()
    _pass(src, dst)
    _dir_to_file(src, "trials/3")
    report = _pass(src, dst, "--delete", rc=1)
    assert report["deleted"] == [] and report["diverged"] == []
    assert report["errors"] == [
        {
            "path": "trials/3",
            "error": "a sealed record is in its place in the destination; not replaced",
        }
    ]
    assert tree(dst) == {"trials/3/log.txt": b"log", "trials/3/trial.json": b"{}"}


def test_a_redacted_directory_name_replaced_by_a_file_converges(tmp_path: Path) -> None:
    secret = "hf_TopSecretValue123"
    redactor = Redactor()
    redactor.add(secret)
    src, dst = tmp_path / "src", tmp_path / "dst"
    write(src / f"d-{secret}" / "f", b"x")
    settle()

    def mirror() -> Any:
        return Mirror(src, dst, durable=False, redactor=redactor, delete=True).run_once()

    mirror()
    mirror()  # the cache is trusted from here: --delete may run
    [name] = [p.name for p in dst.iterdir() if p.name.startswith("d-")]
    assert secret not in name
    _dir_to_file(src, f"d-{secret}")
    report = mirror()
    assert report.deleted == [f"{name}/f"] and not report.errors
    assert report.unstable == [{"path": name, "reason": DIR_REMOVED}]
    report = mirror()
    assert report.copied == [name] and not report.errors
    assert (dst / name).read_bytes() == b"a file now"
    assert secret not in str(report.to_dict())


def test_a_subset_pass_reports_a_directory_in_a_files_place(tmp_path: Path) -> None:
    src, dst = _mirrored_dir(tmp_path)
    _dir_to_file(src)
    mirror = Mirror(src, dst, durable=False, delete=True)
    report = mirror.run_dirs([""])
    assert report.deleted == ["a/b/g", "a/f"] and not report.errors
    assert mirror.run_dirs([""]).copied == ["a"]
    assert tree(dst) == tree(src)
    assert run(src, dst, delete=True).copied == []


_KILLED_PASS = """
import sys, time
from pathlib import Path
from sessionstore.mirror.mirror import Mirror

def hook(rel):
    if rel == "a/zz/big.bin":
        Path(sys.argv[3]).touch()
        time.sleep(600)  # until the test's SIGKILL

Mirror(sys.argv[1], sys.argv[2], durable=False, delete=True, _on_chunk=hook).run_once()
"""


def test_a_pass_killed_in_a_directory_the_source_then_makes_a_file_converges(
    tmp_path: Path,
) -> None:
    src, dst, ready = tmp_path / "src", tmp_path / "dst", tmp_path / "ready"
    write(src / "f", b"v")
    settle()
    _pass(src, dst)
    write(src / "a" / "n1", b"n")  # committed (claimed) before the subdirectory's file
    write(src / "a" / "zz" / "big.bin", bytes(1 << 20))
    settle()
    proc = subprocess.Popen(
        [sys.executable, "-c", _KILLED_PASS, src, dst, ready], stderr=subprocess.PIPE
    )
    try:
        cli_runner.wait_for(lambda: ready.exists() or proc.poll() is not None, "the hook")
    finally:
        proc.kill()
        proc.communicate(timeout=60)
    assert proc.returncode == -signal.SIGKILL, "the pass ended before the kill"
    assert (dst / "a" / "n1").exists() and temps(dst / "a" / "zz")
    _dir_to_file(src)
    report = _pass(src, dst, "--delete")
    assert report["deleted"] == ["a/n1"] and report["errors"] == []
    assert report["unstable"] == [{"path": "a", "reason": DIR_REMOVED}]
    assert _pass(src, dst, "--delete")["copied"] == ["a"]
    assert tree(dst) == tree(src) and not temps(dst)
    assert not (dst / DIRTY_NAME).exists()


def test_the_daemon_replaces_a_directory_its_source_made_a_file(tmp_path: Path) -> None:
    src, dst = tmp_path / "src", tmp_path / "dst"
    write(src / "a" / "f", b"x")
    write(src / "a" / "b" / "g", b"z")
    settle()
    daemon = DaemonProcess(src, dst, "--json", "--delete", "--full-every", "3600")
    try:
        assert daemon.next()["pass"] == "initial"
        # In one step (no pass may see the directory emptied first, which --delete
        # always settled): the directory and a file outside the source swap places.
        write(tmp_path / "new-a", b"a file now")
        fd = os.open(tmp_path, os.O_RDONLY | os.O_DIRECTORY)
        try:
            if not exchange_at(fd, "new-a", "src/a"):
                pytest.skip("renameat2(RENAME_EXCHANGE) is not supported here")
        finally:
            os.close(fd)
        for _ in range(50):  # bounded: the events' passes, the delete, its retry
            if "a" in daemon.next()["copied"]:
                break
        else:
            raise AssertionError("the file never replaced the directory")
    finally:
        code, err = daemon.stop()
    assert code == 0, err
    assert tree(dst) == tree(src) == {"a": b"a file now"}


def test_a_file_changed_in_the_destination_is_kept_when_the_source_makes_a_directory(
    tmp_path: Path,
) -> None:
    src, dst = tmp_path / "src", tmp_path / "dst"
    write(src / "a", b"a file")
    settle()
    _pass(src, dst)
    write(dst / "a", b"edited in the destination")
    (src / "a").unlink()
    write(src / "a" / "f", b"x")
    settle()
    for _ in range(2):  # the same every pass: the error is not taken for a retry
        report = _pass(src, dst, "--delete", rc=1)
        assert report["deleted"] == [] and report["unstable"] == []
        assert paths(report["errors"]) == ["a"]
    assert tree(dst) == {"a": b"edited in the destination"}


def test_a_directory_in_a_sealed_record_replaced_by_a_file_is_diverged(tmp_path: Path) -> None:
    src, dst = tmp_path / "src", tmp_path / "dst"
    write(src / "trials" / "1" / "a" / "f", b"x")
    write(src / "trials" / "1" / "trial.json", b"{}")
    settle()
    _pass(src, dst)
    _dir_to_file(src, "trials/1/a")
    for _ in range(2):
        report = _pass(src, dst, "--delete")
        assert report["deleted"] == [] and report["errors"] == []
        assert [(d["path"], d["files"]) for d in report["diverged"]] == [
            ("trials/1", ["trials/1/a"])
        ]
    assert tree(dst) == {"trials/1/a/f": b"x", "trials/1/trial.json": b"{}"}


def test_a_destination_directory_swapped_for_a_symlink_out_is_never_followed(
    tmp_path: Path,
) -> None:
    src, dst = _mirrored_dir(tmp_path)
    outside = tmp_path / "outside"
    write(outside / "f", b"x")  # the names and bytes the mirror wrote in `a`
    write(outside / "b" / "g", b"z")
    before = snapshot(outside)
    shutil.rmtree(dst / "a")
    (dst / "a").symlink_to(outside, target_is_directory=True)
    _dir_to_file(src)
    for _ in range(2):
        report = _pass(src, dst, "--delete")
        assert report["deleted"] == [] and report["errors"] == []
    assert snapshot(outside) == before
    assert tree(dst) == tree(src) and not (dst / "a").is_symlink()

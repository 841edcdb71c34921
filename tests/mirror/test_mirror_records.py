"""Markers last, and --delete."""

from __future__ import annotations

import errno
import os
import shutil
from pathlib import Path
from typing import Any

import orjson
import pytest
from mirror_helpers import outside_tree, paths, run, settle, snapshot, tree, write

from sessionstore.mirror.mirror import CACHE_NAME

pytestmark = pytest.mark.timeout(60)


def test_marker_waits_for_an_unstable_record_file(src: Path, dst: Path) -> None:
    rec = src / "trials" / "1"
    write(rec / "patches" / "a.diff", b"+x\n")
    write(rec / "trial.json", b'{"failed": false}')
    settle()
    write(rec / "task.yml", b"fresh")  # inside the racy window: not committed this pass
    report = run(src, dst)
    assert paths(report.unstable) == ["trials/1/task.yml"]
    assert report.held_back == [
        {"path": "trials/1/trial.json", "reason": "waiting for 1 file"},
        {"path": "report.json", "reason": "waiting for 2 files"},
    ] or report.held_back == [{"path": "trials/1/trial.json", "reason": "waiting for 1 file"}]
    assert not (dst / "trials" / "1" / "trial.json").exists()
    assert (dst / "trials" / "1" / "patches" / "a.diff").exists()
    settle()
    report = run(src, dst)
    assert report.copied == ["trials/1/task.yml", "trials/1/trial.json"]


def test_a_torn_marker_is_held_back_with_the_parse_error(src: Path, dst: Path) -> None:
    write(src / "service" / "2" / "service.yml", b"x")
    write(src / "service" / "2" / "verification.json", b'{"status": "verif')
    write(src / "trials" / "3" / "trial.json", b"[1, 2]")
    settle()
    report = run(src, dst)
    reasons = {i["path"]: i["reason"] for i in report.held_back}
    assert reasons["service/2/verification.json"].startswith("not a JSON object: ")
    assert "verif" not in reasons["service/2/verification.json"]  # never quotes content
    assert reasons["trials/3/trial.json"] == "not a JSON object: a JSON list"
    assert tree(dst) == {"service/2/service.yml": b"x"}


def test_a_marker_the_readers_would_call_torn_is_never_sealed(src: Path, dst: Path) -> None:
    # Valid JSON, but nested deeper than any output can write back: the store's readers
    # call it torn. Sealed, the record would stay torn for good, and the agent's rewrite
    # (below) could never land.
    deep = b'{"a": ' + b"[" * 300 + b"]" * 300 + b"}"
    assert orjson.loads(deep)  # orjson reads it; it is only too deep to write back
    write(src / "trials" / "1" / "trial.json", deep)
    settle()
    report = run(src, dst)
    reasons = {i["path"]: i["reason"] for i in report.held_back}
    assert "nested too deeply" in reasons["trials/1/trial.json"]
    assert not (dst / "trials" / "1" / "trial.json").exists()
    write(src / "trials" / "1" / "trial.json", b'{"ok": true}')
    settle()
    assert run(src, dst).copied == ["trials/1/trial.json"]
    assert (dst / "trials" / "1" / "trial.json").read_bytes() == b'{"ok": true}'


def test_markers_count_at_any_depth_but_only_in_record_dirs(src: Path, dst: Path) -> None:
    write(src / "previous" / "ab12cd34" / "trials" / "3" / "trial.json", b"oops")
    write(src / "notes" / "7" / "trial.json", b"oops")  # not under trials/: an ordinary file
    write(src / "trials" / "07" / "trial.json", b"oops")  # not a record number
    settle()
    report = run(src, dst)
    assert paths(report.held_back) == ["previous/ab12cd34/trials/3/trial.json"]
    assert set(tree(dst)) == {"notes/7/trial.json", "trials/07/trial.json"}


def test_report_json_waits_for_the_whole_pass(src: Path, dst: Path) -> None:
    write(src / "report.json", b'{"best": 1}')
    write(src / "trials" / "1" / "trial.json", b"{}")
    settle()
    write(src / "trials" / "2" / "log", b"fresh")
    report = run(src, dst)
    assert paths(report.held_back) == ["report.json"]
    settle()
    report = run(src, dst)
    assert "report.json" in report.copied
    assert tree(dst)["report.json"] == b'{"best": 1}'


def test_a_committed_marker_seals_the_record_and_later_changes_are_diverged(
    src: Path, dst: Path
) -> None:
    write(src / "trials" / "1" / "log", b"1")
    write(src / "trials" / "1" / "trial.json", b'{"v": 1}')
    settle()
    run(src, dst)
    write(src / "trials" / "1" / "trial.json", b"torn{")
    write(src / "trials" / "1" / "log", b"rewritten")
    write(src / "trials" / "1" / "new.txt", b"added later")
    settle()
    report = run(src, dst)
    assert report.ok and report.copied == [] and report.held_back == []
    assert report.diverged == [
        {
            "path": "trials/1",
            "reason": "the source changed after the record was sealed; not applied",
            "files": ["trials/1/log", "trials/1/new.txt", "trials/1/trial.json"],
        }
    ]
    assert tree(dst) == {"trials/1/log": b"1", "trials/1/trial.json": b'{"v": 1}'}


def test_durable_marker_commit_fsyncs_the_record_first(
    src: Path, dst: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    write(src / "trials" / "1" / "patches" / "a.diff", b"+")
    write(src / "trials" / "1" / "trial.json", b"{}")
    settle()
    events: list[str] = []
    real_fsync, real_replace, real_link = os.fsync, os.replace, os.link

    def fsync(fd: int) -> None:
        if os.path.isdir(f"/proc/self/fd/{fd}"):
            events.append("fsync " + os.readlink(f"/proc/self/fd/{fd}"))
        real_fsync(fd)

    def replace(a: str, b: str, **kw: int) -> None:
        where = os.readlink(f"/proc/self/fd/{kw['dst_dir_fd']}")
        events.append(f"commit {where}/{b}")
        real_replace(a, b, **kw)

    def link(a: str, b: str, **kw: Any) -> None:  # a marker: committed create-if-absent
        where = os.readlink(f"/proc/self/fd/{kw['dst_dir_fd']}")
        events.append(f"commit {where}/{b}")
        real_link(a, b, **kw)

    monkeypatch.setattr(os, "fsync", fsync)
    monkeypatch.setattr(os, "replace", replace)
    monkeypatch.setattr(os, "link", link)
    run(src, dst, durable=True)
    marker_at = events.index(f"commit {dst / 'trials' / '1' / 'trial.json'}")
    assert f"fsync {dst / 'trials' / '1' / 'patches'}" in events[:marker_at]


# -- delete --------------------------------------------------------------------


def test_nothing_is_deleted_by_default(src: Path, dst: Path) -> None:
    write(src / "a", b"1")
    write(src / "d" / "b", b"2")
    settle()
    run(src, dst)
    (src / "a").unlink()
    (src / "d" / "b").unlink()
    report = run(src, dst)
    assert report.deleted == []
    assert tree(dst) == {"a": b"1", "d/b": b"2"}


def test_delete_removes_what_the_source_lost_but_never_our_files(src: Path, dst: Path) -> None:
    write(src / "keep", b"k")
    write(src / "gone", b"g")
    write(src / "d" / "sub" / "x", b"x")
    settle()
    run(src, dst)
    (src / "gone").unlink()
    (src / "d" / "sub" / "x").unlink()
    (src / "d" / "sub").rmdir()
    (src / "d").rmdir()
    write(dst / ".sessionstore-lock", b"daemon")
    live_temp = dst / f".sstmp-{os.getpid()}-0123456789abcdef"
    live_temp.write_bytes(b"being written")
    report = run(src, dst, delete=True)
    assert sorted(report.deleted) == ["d/sub/x", "gone"]
    assert tree(dst) == {"keep": b"k"}
    assert not (dst / "d").exists()
    assert (dst / CACHE_NAME).exists() and (dst / ".sessionstore-lock").exists()
    assert live_temp.exists()


def test_delete_removes_a_gone_directory_with_the_empty_directories_below_it(
    src: Path, dst: Path
) -> None:
    # Empty directories are mirrored, and a killed pass leaves those it made before its
    # first commit in them: the emptied directory above them stayed, in every pass.
    write(src / "d" / "f", b"x")
    (src / "d" / "e" / "e2").mkdir(parents=True)
    write(src / "k", b"k")
    settle()
    run(src, dst)
    assert (dst / "d" / "e" / "e2").is_dir()
    shutil.rmtree(src / "d")
    report = run(src, dst, delete=True)
    assert report.deleted == ["d/f"] and not report.errors
    assert not (dst / "d").exists()


def test_delete_keeps_a_gone_directory_holding_what_the_mirror_did_not_write(
    tmp_path: Path, src: Path, dst: Path
) -> None:
    write(src / "d" / "f", b"x")
    (src / "d" / "e").mkdir()
    (src / "d" / "l").mkdir()
    settle()
    run(src, dst)
    outside = outside_tree(tmp_path / "outside")
    before = snapshot(outside)
    write(dst / "d" / "e" / "mine.txt", b"by hand")
    (dst / "d" / "l").rmdir()
    (dst / "d" / "l").symlink_to(outside, target_is_directory=True)
    shutil.rmtree(src / "d")
    report = run(src, dst, delete=True)
    assert report.deleted == ["d/f"] and not report.errors
    assert (dst / "d" / "e" / "mine.txt").read_bytes() == b"by hand"
    assert (dst / "d" / "l").is_symlink() and snapshot(outside) == before


def test_delete_is_skipped_when_the_listing_had_an_error(
    src: Path, dst: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    write(src / "gone", b"g")
    write(src / "private" / "f", b"p")
    settle()
    run(src, dst)
    (src / "gone").unlink()
    real_open = os.open

    def deny(path: object, flags: int, *args: object, **kwargs: object) -> int:
        if path == "private":
            raise PermissionError(errno.EACCES, "Permission denied", "private")
        return real_open(path, flags, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(os, "open", deny)
    report = run(src, dst, delete=True)
    assert report.deleted == [] and report.delete_skipped
    assert tree(dst) == {"gone": b"g", "private/f": b"p"}


# -- passes over a subset (what the daemon will run on events) ------------------


def test_a_subset_pass_widens_to_the_record_and_keeps_other_cache_entries(
    src: Path, dst: Path
) -> None:
    from sessionstore.mirror.mirror import Mirror

    write(src / "other" / "f", b"o")
    write(src / "trials" / "1" / "patches" / "a.diff", b"+")
    write(src / "trials" / "1" / "trial.json", b"{}")
    settle()
    m = Mirror(src, dst, durable=False)
    report = m._pass(["trials/1/patches"])  # widened to trials/1: the marker may commit
    assert sorted(report.copied) == ["trials/1/patches/a.diff", "trials/1/trial.json"]
    assert not (dst / "other").exists()
    m.run_once()
    report = m._pass(["trials/1"])
    assert report.unchanged == 2 and not report.copied
    assert m.run_once().unchanged == 3  # the subset pass kept the cache entry of other/f

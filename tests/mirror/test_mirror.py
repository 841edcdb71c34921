"""Unit behaviour of one mirror pass on a real filesystem."""

from __future__ import annotations

import errno
import os
import stat
import threading
from pathlib import Path
from typing import Any

import pytest
from mirror_helpers import converge, paths, run, settle, temps, tree, write

from sessionstore.errors import InvalidInput
from sessionstore.mirror.mirror import CACHE_NAME, DIRTY_NAME, Mirror

pytestmark = pytest.mark.timeout(60)


@pytest.mark.parametrize(
    "data",
    [
        pytest.param(b"line one\r\nline two\r\n", id="crlf"),
        pytest.param(b"\xff\xfe\x80 not utf-8 \xc3\x28", id="non-utf8"),
        pytest.param(b"a\0b\0\0c", id="nul"),
        pytest.param(b"", id="empty"),
        pytest.param(bytes(range(256)) * 4096, id="all-bytes-1MiB"),
    ],
)
def test_bytes_are_copied_exactly(src: Path, dst: Path, data: bytes) -> None:
    write(src / "f", data)
    settle()
    report = run(src, dst)
    assert report.copied == ["f"] and report.ok
    assert (dst / "f").read_bytes() == data


def test_large_file_has_no_size_cap(src: Path, dst: Path) -> None:
    data = os.urandom(20 * 1024 * 1024 + 3)
    write(src / "big.log", data)
    settle()
    assert run(src, dst).copied == ["big.log"]
    assert (dst / "big.log").read_bytes() == data


def test_permission_bits_are_preserved_and_new_dirs_are_private(src: Path, dst: Path) -> None:
    write(src / "run.sh", b"#!/bin/sh\n", mode=0o751)
    write(src / "a" / "b" / "secret.txt", b"x", mode=0o600)
    settle()
    run(src, dst)
    assert stat.S_IMODE((dst / "run.sh").stat().st_mode) == 0o751
    assert stat.S_IMODE((dst / "a" / "b" / "secret.txt").stat().st_mode) == 0o600
    for d in (dst, dst / "a", dst / "a" / "b"):
        assert stat.S_IMODE(d.stat().st_mode) == 0o700


def test_a_mode_change_alone_is_mirrored(src: Path, dst: Path) -> None:
    write(src / "run.sh", b"#!/bin/sh\n", mode=0o644)
    settle()
    run(src, dst)
    (src / "run.sh").chmod(0o755)
    settle()
    assert run(src, dst).copied == ["run.sh"]
    assert stat.S_IMODE((dst / "run.sh").stat().st_mode) == 0o755


def test_symlinks_never_leak_their_target(tmp_path: Path, src: Path, dst: Path) -> None:
    outside = tmp_path / "outside"
    token = b"TOP-SECRET-CONTENT-" + os.urandom(8).hex().encode()
    write(outside / "creds", token)
    write(src / "ok.txt", b"fine")
    (src / "file-link").symlink_to(outside / "creds")
    (src / "dir-link").symlink_to(outside)
    (src / "dangling").symlink_to(tmp_path / "nowhere")
    settle()
    report = run(src, dst)
    assert sorted(paths(report.skipped)) == ["dangling", "dir-link", "file-link"]
    assert {i["reason"] for i in report.skipped} == {"symlink"}
    assert tree(dst) == {"ok.txt": b"fine"}
    for dirpath, dirs, files in os.walk(dst):
        for name in files + dirs:
            p = Path(dirpath, name)
            assert not p.is_symlink()
            if p.is_file():
                assert token not in p.read_bytes()


def test_fifo_is_skipped_without_hanging(src: Path, dst: Path) -> None:
    src.mkdir()
    os.mkfifo(src / "pipe")
    write(src / "f", b"x")
    settle()
    report = run(src, dst)
    assert report.skipped == [{"path": "pipe", "reason": "special file (fifo)"}]
    assert tree(dst) == {"f": b"x"}


def test_fifo_swapped_in_after_listing_is_not_opened_for_reading(
    src: Path, dst: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Between listing and open the file becomes a fifo: O_NONBLOCK + fstat catch it."""
    write(src / "f", b"x")
    settle()
    real_open = os.open

    def swap_then_open(path: object, flags: int, *args: object, **kwargs: object) -> int:
        if path == "f" and kwargs.get("dir_fd") is not None and not flags & os.O_WRONLY:
            os.unlink(src / "f")
            os.mkfifo(src / "f")
        return real_open(path, flags, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(os, "open", swap_then_open)
    report = run(src, dst)
    monkeypatch.undo()
    assert report.unstable == [{"path": "f", "reason": "replaced during the pass"}]
    assert not (dst / "f").exists()


def test_symlink_swapped_in_after_listing_is_not_followed(
    tmp_path: Path, src: Path, dst: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    write(tmp_path / "secret", b"OUTSIDE")
    write(src / "f", b"inside")
    settle()
    real_open = os.open

    def swap_then_open(path: object, flags: int, *args: object, **kwargs: object) -> int:
        if path == "f" and kwargs.get("dir_fd") is not None:
            os.unlink(src / "f")
            os.symlink(tmp_path / "secret", src / "f")
        return real_open(path, flags, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(os, "open", swap_then_open)
    report = run(src, dst)
    monkeypatch.undo()
    assert paths(report.unstable) == ["f"]
    assert not (dst / "f").exists()


def test_permission_error_is_reported_and_the_pass_goes_on(
    src: Path, dst: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Root ignores chmod 000, so the kernel's EACCES is injected at os.open for one name."""
    write(src / "a.txt", b"a")
    write(src / "locked.txt", b"private")
    write(src / "z.txt", b"z")
    settle()
    real_open = os.open

    def deny(path: object, flags: int, *args: object, **kwargs: object) -> int:
        if path == "locked.txt":
            raise PermissionError(errno.EACCES, "Permission denied", "locked.txt")
        return real_open(path, flags, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(os, "open", deny)
    report = run(src, dst)
    assert report.errors == [{"path": "locked.txt", "error": "Permission denied (EACCES)"}]
    assert not report.ok
    assert tree(dst) == {"a.txt": b"a", "z.txt": b"z"}


def test_unlistable_directory_is_an_error_and_the_pass_goes_on(
    src: Path, dst: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    write(src / "open" / "f", b"1")
    write(src / "closed" / "g", b"2")
    settle()
    real_open = os.open

    def deny(path: object, flags: int, *args: object, **kwargs: object) -> int:
        if path == "closed":
            raise PermissionError(errno.EACCES, "Permission denied", "closed")
        return real_open(path, flags, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(os, "open", deny)
    report = run(src, dst)
    assert paths(report.errors) == ["closed"]
    assert tree(dst) == {"open/f": b"1"}


def test_a_file_that_vanishes_before_open_is_skipped_quietly(
    src: Path, dst: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    write(src / "gone", b"x")
    write(src / "kept", b"y")
    settle()
    real_open = os.open

    def vanish(path: object, flags: int, *args: object, **kwargs: object) -> int:
        if path == "gone":
            os.unlink(src / "gone")
        return real_open(path, flags, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(os, "open", vanish)
    report = run(src, dst)
    assert report.ok and not report.unstable and not report.skipped
    assert tree(dst) == {"kept": b"y"}


def test_missing_source_creates_nothing(tmp_path: Path, dst: Path) -> None:
    report = run(tmp_path / "nope", dst)
    assert report.source_missing and report.ok
    assert not dst.exists()


def test_source_inside_destination_is_refused(tmp_path: Path) -> None:
    (tmp_path / "d" / "s").mkdir(parents=True)
    with pytest.raises(InvalidInput):
        Mirror(tmp_path / "d" / "s", tmp_path / "d")
    with pytest.raises(InvalidInput):
        Mirror(tmp_path / "d", tmp_path / "d")


def test_destination_inside_source_is_not_mirrored_into_itself(tmp_path: Path) -> None:
    src = tmp_path / "ws"
    write(src / "f", b"1")
    settle()
    report = converge(src, src / "out")
    assert tree(src / "out") == {"f": b"1"}
    assert report.skipped == [{"path": "out", "reason": "the destination itself"}]


def test_a_subset_pass_into_the_destination_inside_the_source_skips_it(tmp_path: Path) -> None:
    # The daemon's own writes there are events in the source: passed over, the
    # destination was copied into itself (`out/out/a/f`), each copy the next one's events.
    src = tmp_path / "ws"
    write(src / "a" / "f", b"1")
    settle()
    mirror = Mirror(src, src / "out", durable=False)
    mirror.run_once()
    settle()
    for subset in ["out", "out/a"]:
        report = mirror.run_dirs([subset])
        assert report.copied == [] and report.created_dirs == []
        assert report.skipped == [{"path": "out", "reason": "the destination itself"}]
    assert tree(src / "out") == {"a/f": b"1"}


def test_our_temp_names_in_the_source_are_ignored(src: Path, dst: Path) -> None:
    write(src / ".sstmp-1-abc", b"half")
    write(src / "f", b"x")
    settle()
    report = run(src, dst)
    assert report.copied == ["f"] and not report.skipped
    assert tree(dst) == {"f": b"x"}


def test_a_subset_pass_passes_over_reserved_and_temp_named_directories(
    src: Path, dst: Path
) -> None:
    # An event in such a directory made the daemon's subset pass copy what no full
    # pass ever copies, into names the mirror keeps for its own files and temps.
    write(src / ".sstmp-1-abc" / "f", b"x")
    write(src / ".sessionstore-mirror-x" / "sub" / "f", b"x")
    settle()
    mirror = Mirror(src, dst, durable=False)
    skipped = [{"path": ".sessionstore-mirror-x", "reason": "reserved name"}]
    assert mirror.run_once().skipped == skipped
    report = mirror.run_dirs([".sstmp-1-abc", ".sessionstore-mirror-x/sub"])
    assert report.copied == [] and report.created_dirs == []
    assert report.skipped == skipped
    assert not (dst / ".sstmp-1-abc").exists()
    assert not (dst / ".sessionstore-mirror-x").exists()


def test_reserved_names_are_never_mirrored_over_our_cache(src: Path, dst: Path) -> None:
    write(src / CACHE_NAME, b"not a cache")
    write(src / "f", b"x")
    settle()
    report = run(src, dst)
    assert report.skipped == [{"path": CACHE_NAME, "reason": "reserved name"}]
    assert (dst / CACHE_NAME).read_bytes() != b"not a cache"


def test_empty_directories_are_mirrored(src: Path, dst: Path) -> None:
    (src / "a" / "empty").mkdir(parents=True)
    run(src, dst)
    assert (dst / "a" / "empty").is_dir()


def test_no_temp_files_remain_and_stale_ones_are_swept(src: Path, dst: Path) -> None:
    write(src / "d" / "f", b"x")
    settle()
    run(src, dst)
    # What a pass killed midway leaves: a temp of a dead writer (pid 2**22 + 1 is
    # above the default pid_max) and the in-progress flag.
    stale = dst / "d" / f".sstmp-{2**22 + 1}-deadbeef"
    stale.write_bytes(b"debris")
    (dst / DIRTY_NAME).touch()
    run(src, dst)
    assert not stale.exists() and not (dst / DIRTY_NAME).exists()
    assert temps(dst) == []


def test_a_pass_that_changes_nothing_never_lists_the_destination(
    src: Path, dst: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    write(src / "d" / "f", b"x")
    settle()
    run(src, dst)
    listed: list[object] = []
    real = os.scandir

    def spy(path: Any = ".") -> object:  # Any: os.scandir takes a str path or a dir fd
        if isinstance(path, str) and path.startswith(str(dst)):
            listed.append(path)
        return real(path)

    monkeypatch.setattr(os, "scandir", spy)
    assert run(src, dst).unchanged == 1
    assert listed == [] and not (dst / DIRTY_NAME).exists()


def test_file_replaced_by_directory_in_destination_is_an_error(src: Path, dst: Path) -> None:
    write(src / "x", b"file")
    (dst / "x").mkdir(parents=True)
    settle()
    report = run(src, dst)
    assert paths(report.errors) == ["x"]
    assert (dst / "x").is_dir()


def test_durable_pass_fsyncs_each_touched_directory_once(
    src: Path, dst: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for i in range(5):
        write(src / "a" / f"f{i}", b"x")
    write(src / "b" / "g", b"y")
    settle()
    synced: list[str] = []
    real = os.fsync

    def count(fd: int) -> None:
        if stat.S_ISDIR(os.fstat(fd).st_mode):
            synced.append(os.readlink(f"/proc/self/fd/{fd}"))
        real(fd)

    monkeypatch.setattr(os, "fsync", count)
    run(src, dst, durable=True)
    touched = {str(dst.parent), str(dst), str(dst / "a"), str(dst / "b")}
    # ... plus the root once more, first, for the in-progress flag.
    assert synced[0] == str(dst)
    assert sorted(synced[1:]) == sorted(touched)


def test_no_fsync_means_no_fsync(src: Path, dst: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    write(src / "trials" / "1" / "trial.json", b"{}")
    write(src / "trials" / "1" / "log", b"x")
    settle()
    calls: list[int] = []
    monkeypatch.setattr(os, "fsync", calls.append)
    run(src, dst, durable=False)
    assert calls == []


def test_independent_mirrors_can_run_in_parallel_threads(src: Path, dst: Path) -> None:
    """Mirror keeps no global state: passes to different destinations do not interfere."""
    for i in range(50):
        write(src / f"f{i}", bytes([i]) * 100)
    settle()
    threads = [threading.Thread(target=run, args=(src, dst.with_name(f"d{k}"))) for k in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for k in range(3):
        assert tree(dst.with_name(f"d{k}")) == tree(src)


def test_non_utf8_names_round_trip_through_cache_and_report(src: Path, dst: Path) -> None:
    import orjson

    name = os.fsdecode(b"caf\xe9-\xff.log")  # latin-1 bytes: not UTF-8
    write(src / name, b"bytes")
    settle()
    first = run(src, dst)
    assert first.copied == [name]
    assert orjson.loads(orjson.dumps(first.to_dict()))["copied"] == ["caf\\xe9-\\xff.log"]
    assert (dst / name).read_bytes() == b"bytes"
    assert run(src, dst).unchanged == 1  # the cache key survived its JSON encoding


@pytest.mark.parametrize("chunk_size", [0, -1])
def test_a_chunk_size_under_one_byte_is_refused(src: Path, dst: Path, chunk_size: int) -> None:
    # A 0-byte read ends every file at once: each was "changed while reading", forever.
    write(src / "a.txt", b"a")
    with pytest.raises(
        InvalidInput, match=f"chunk_size must be a number of bytes >= 1, not {chunk_size}"
    ):
        Mirror(src, dst, chunk_size=chunk_size)
    assert not dst.exists() or os.listdir(dst) == []


def test_a_relative_source_stays_where_it_was_named(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Left relative, a chdir after the Mirror was made moved its source: a pass then
    # mirrored a missing directory, nothing, and said all was well.
    write(tmp_path / "ws" / "a.txt", b"a")
    settle()
    monkeypatch.chdir(tmp_path)
    mirror = Mirror("ws", tmp_path / "dst", durable=False)
    monkeypatch.chdir("/")
    report = mirror.run_once()
    assert report.ok and report.copied == ["a.txt"]
    assert (tmp_path / "dst" / "a.txt").read_bytes() == b"a"

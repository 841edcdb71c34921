"""Change detection: no-op passes read nothing, every real change is seen, nothing torn lands."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest
from mirror_helpers import SourceReads, dest_state, paths, run, settle, write

from sessionstore.mirror.copy import CLOCK_COARSE
from sessionstore.mirror.mirror import CACHE_NAME, Mirror

pytestmark = pytest.mark.timeout(60)


@pytest.fixture
def src(tmp_path: Path) -> Path:
    for i in range(20):
        write(tmp_path / "src" / f"d{i % 4}" / f"f{i}.txt", f"version one of {i}\n".encode())
    settle()
    return tmp_path / "src"


def test_a_no_op_pass_opens_and_reads_no_source_file(
    src: Path, dst: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    run(src, dst)
    spy = SourceReads(monkeypatch, src)
    report = run(src, dst)  # a fresh Mirror: only the on-disk cache carries over
    assert report.unchanged == 20 and not report.copied
    assert spy.opens == [] and spy.reads == 0


def test_the_spy_does_see_reads(src: Path, dst: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Guard against a vacuous no-read proof: a first pass is counted."""
    spy = SourceReads(monkeypatch, src)
    run(src, dst)
    assert len(spy.opens) == 20 and spy.reads >= 20


@pytest.mark.parametrize(
    "damage",
    [
        pytest.param(lambda p: p.unlink(), id="deleted"),
        pytest.param(lambda p: p.write_bytes(p.read_bytes()[:37]), id="torn"),
        pytest.param(lambda p: p.write_bytes(b'{"version": 99, "files": {}}'), id="other-version"),
        pytest.param(lambda p: p.write_bytes(b"[1, 2]"), id="not-an-object"),
        pytest.param(
            lambda p: p.write_bytes(b'{"version": 1, "redactor": null, "files": {"x": [1]}}'),
            id="bad-entry",
        ),
        pytest.param(
            lambda p: p.write_bytes(b'{"version": 2, "redactor": null, "dirs": {"d1": 1}}'),
            id="group-not-text",
        ),
    ],
)
def test_a_lost_cache_costs_reads_never_rewrites(src: Path, dst: Path, damage: object) -> None:
    run(src, dst)
    before = dest_state(dst)
    damage(dst / CACHE_NAME)  # type: ignore[operator]
    report = run(src, dst)
    assert report.copied == [] and report.unchanged == 20
    assert dest_state(dst) == before
    # ... and the cache is rebuilt, so the pass after is read-free again.
    assert run(src, dst).unchanged == 20


def test_an_interrupted_pass_leaves_a_cache_without_some_entries_but_no_rewrite(
    src: Path, dst: Path
) -> None:
    run(src, dst)
    before = dest_state(dst)
    write(dst / CACHE_NAME, b'{"version": 2, "redactor": null, "dirs": {}}')
    assert run(src, dst).copied == []
    assert dest_state(dst) == before


def test_same_size_rewrite_with_restored_mtime_is_mirrored(src: Path, dst: Path) -> None:
    run(src, dst)
    f = src / "d1" / "f1.txt"
    st = f.stat()
    f.write_bytes(b"version TWO of 1\n")
    os.utime(f, ns=(st.st_atime_ns, st.st_mtime_ns))
    assert f.stat().st_size == st.st_size and f.stat().st_mtime_ns == st.st_mtime_ns
    settle()
    report = run(src, dst)
    assert report.copied == ["d1/f1.txt"]
    assert (dst / "d1" / "f1.txt").read_bytes() == b"version TWO of 1\n"


def test_a_just_written_file_is_not_trusted_until_its_tick_has_passed(src: Path, dst: Path) -> None:
    """The racy rule: a same-size rewrite inside the same clock tick is never missed."""
    f = src / "new.txt"
    f.write_bytes(b"AAAA")
    first = run(src, dst)  # same tick (or within the window): must not commit
    assert first.unstable == [{"path": "new.txt", "reason": "modified too recently"}]
    with open(f, "r+b") as fh:  # in place, same size, restored mtime
        fh.write(b"BBBB")
    assert not (dst / "new.txt").exists()
    settle()
    assert run(src, dst).copied == ["new.txt"]
    assert (dst / "new.txt").read_bytes() == b"BBBB"


def test_racy_rule_holds_even_when_mtime_is_set_into_the_past(src: Path, dst: Path) -> None:
    f = src / "old-looking.txt"
    f.write_bytes(b"fresh")
    os.utime(f, (1_000_000, 1_000_000))  # mtime says 1970; ctime says now
    assert paths(run(src, dst).unstable) == ["old-looking.txt"]


def test_a_future_mtime_does_not_block_the_file_forever(src: Path, dst: Path) -> None:
    f = src / "future.txt"
    f.write_bytes(b"from a skewed clock")
    future = time.time() + 10 * 365 * 86400
    os.utime(f, (future, future))
    settle()
    assert run(src, dst).copied == ["future.txt"] or (dst / "future.txt").exists()
    assert (dst / "future.txt").read_bytes() == b"from a skewed clock"


def test_the_racy_window_is_at_least_one_tick_of_the_timestamp_clock() -> None:
    m = Mirror("/nonexistent-src", "/nonexistent-dst")
    assert m.window_ns >= time.clock_getres(CLOCK_COARSE) * 1e9


def test_an_edited_destination_is_restored(src: Path, dst: Path) -> None:
    run(src, dst)
    (dst / "d0" / "f0.txt").write_bytes(b"tampered")
    assert run(src, dst).copied == ["d0/f0.txt"]
    assert (dst / "d0" / "f0.txt").read_bytes() == b"version one of 0\n"


def test_a_destination_replaced_with_same_size_and_mtime_is_restored(src: Path, dst: Path) -> None:
    run(src, dst)
    target = dst / "d0" / "f0.txt"
    st = target.stat()
    imposter = dst / "d0" / "imposter"
    imposter.write_bytes(b"X" * st.st_size)
    os.utime(imposter, ns=(st.st_atime_ns, st.st_mtime_ns))
    os.replace(imposter, target)
    assert run(src, dst).copied == ["d0/f0.txt"]
    assert target.read_bytes() == b"version one of 0\n"


def test_a_deleted_destination_file_is_restored(src: Path, dst: Path) -> None:
    run(src, dst)
    (dst / "d2" / "f2.txt").unlink()
    assert run(src, dst).copied == ["d2/f2.txt"]


def _append(f: Path) -> None:
    with f.open("ab") as fh:
        fh.write(b"more")


def _overwrite_in_place(f: Path) -> None:
    with f.open("r+b") as fh:
        fh.write(b"Z")


def _replace(f: Path) -> None:
    f.unlink()
    f.write_bytes(b"other inode")


@pytest.mark.parametrize(
    "mutate",
    [
        pytest.param(lambda f: f.write_bytes(b"short"), id="shrink"),
        pytest.param(_append, id="grow"),
        pytest.param(_overwrite_in_place, id="in-place-same-size"),
        pytest.param(_replace, id="replace"),
    ],
)
def test_a_file_changed_while_read_is_never_committed(
    tmp_path: Path, dst: Path, mutate: object
) -> None:
    src = tmp_path / "s"
    f = write(src / "f", b"0123456789" * 1000)
    settle()
    done: list[bool] = []

    def during_read(path: str) -> None:
        if not done:
            done.append(True)
            mutate(f)  # type: ignore[operator]

    report = run(src, dst, chunk_size=1024, _on_chunk=during_read)
    assert paths(report.unstable) == ["f"]
    assert not (dst / "f").exists()
    settle()
    run(src, dst)
    assert (dst / "f").read_bytes() == f.read_bytes()


def test_a_file_that_never_settles_is_reported_every_pass(tmp_path: Path, dst: Path) -> None:
    src = tmp_path / "s"
    f = write(src / "busy.log", b"x" * 4096)
    settle()

    def always(path: str) -> None:
        with f.open("ab") as fh:
            fh.write(b".")

    for _ in range(3):
        report = run(src, dst, chunk_size=512, _on_chunk=always)
        assert paths(report.unstable) == ["busy.log"]
        settle()

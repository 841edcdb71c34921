"""OS calls that fail half-way: a clear error, no partial file, source untouched, convergence."""

from __future__ import annotations

import errno
import os
from collections.abc import Callable
from pathlib import Path

import pytest
from cli_runner import invoke
from mirror_helpers import converge, paths, run, settle, temps, tree, write

pytestmark = pytest.mark.timeout(60)

OLD = b"old committed version\n" * 100
NEW = b"the new version, longer than the old one\n" * 1000


@pytest.fixture
def dirs(tmp_path: Path) -> tuple[Path, Path]:
    src, dst = tmp_path / "src", tmp_path / "dst"
    write(src / "a" / "f.log", OLD)
    write(src / "a" / "g.log", b"untouched sibling")
    settle()
    run(src, dst)
    write(src / "a" / "f.log", NEW)
    settle()
    return src, dst


def _is_dest_temp(fd: int, dst: Path) -> bool:
    target = os.readlink(f"/proc/self/fd/{fd}")
    return target.startswith(str(dst)) and "/.sstmp-" in target


def enospc_half_way(dst: Path) -> Callable[..., int]:
    real = os.write

    def write_(fd: int, data: bytes) -> int:
        if _is_dest_temp(fd, dst):
            if len(data) > 1:
                return real(fd, memoryview(data)[: len(data) // 2])
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        return real(fd, data)

    return write_


def fail_fsync(dst: Path) -> Callable[[int], None]:
    real = os.fsync

    def fsync_(fd: int) -> None:
        if _is_dest_temp(fd, dst):
            raise OSError(errno.EIO, os.strerror(errno.EIO))
        real(fd)

    return fsync_


def fail_replace(dst: Path) -> Callable[..., None]:
    real = os.replace

    def replace_(a: object, b: object, **kw: object) -> None:
        if str(b).endswith("f.log"):
            raise OSError(errno.EROFS, os.strerror(errno.EROFS))
        real(a, b, **kw)  # type: ignore[arg-type]

    return replace_


@pytest.mark.parametrize(
    ("call", "make", "text"),
    [
        pytest.param("write", enospc_half_way, "No space left on device (ENOSPC)", id="enospc"),
        pytest.param("fsync", fail_fsync, "Input/output error (EIO)", id="fsync"),
        pytest.param("replace", fail_replace, "Read-only file system (EROFS)", id="replace"),
    ],
)
def test_a_failing_os_call_leaves_no_partial_file(
    dirs: tuple[Path, Path],
    monkeypatch: pytest.MonkeyPatch,
    call: str,
    make: Callable[[Path], object],
    text: str,
) -> None:
    src, dst = dirs
    monkeypatch.setattr(os, call, make(dst))
    report = run(src, dst, durable=True)
    monkeypatch.undo()
    # The cache is written through a temp too, so a full disk may fail it as well.
    assert report.errors[0] == {"path": "a/f.log", "error": text}
    assert paths(report.errors[1:]) in ([], [".sessionstore-mirror.json"])
    assert (dst / "a" / "f.log").read_bytes() == OLD  # the old version, whole
    assert temps(dst) == []
    assert (src / "a" / "f.log").read_bytes() == NEW  # source untouched
    report = converge(src, dst)
    assert report.ok and tree(dst) == tree(src)


def test_enospc_makes_the_cli_exit_1_with_a_clear_line(
    dirs: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    src, dst = dirs
    monkeypatch.setattr(os, "write", enospc_half_way(dst))
    result = invoke("mirror", src, dst, "--once")
    monkeypatch.undo()
    assert result.exit_code == 1
    assert "  error: a/f.log: No space left on device (ENOSPC)" in result.output
    assert (dst / "a" / "f.log").read_bytes() == OLD


def test_enospc_on_a_new_file_leaves_no_name_at_all(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    src, dst = tmp_path / "src", tmp_path / "dst"
    write(src / "new.bin", os.urandom(3 << 20))
    settle()
    monkeypatch.setattr(os, "write", enospc_half_way(dst))
    report = run(src, dst, chunk_size=1 << 20)
    monkeypatch.undo()
    assert paths(report.errors)[0] == "new.bin"
    assert not (dst / "new.bin").exists() and temps(dst) == []


def test_a_failing_cache_write_is_reported_but_files_are_in_place(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    src, dst = tmp_path / "src", tmp_path / "dst"
    write(src / "f", b"x")
    settle()
    real = os.replace

    def replace_(a: object, b: object, **kw: object) -> None:
        if str(b).endswith(".sessionstore-mirror.json"):
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        real(a, b, **kw)  # type: ignore[arg-type]

    monkeypatch.setattr(os, "replace", replace_)
    report = run(src, dst)
    assert paths(report.errors) == [".sessionstore-mirror.json"]
    assert tree(dst) == {"f": b"x"} and temps(dst) == []

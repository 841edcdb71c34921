"""`--dry-run/-n`: the destination is byte-for-byte untouched (cache, flag, temps, dirs, the
root itself), and what it reports is what the next real pass does."""

from __future__ import annotations

import os
import stat
from pathlib import Path
from typing import Any

import orjson
import pytest
from mirror_helpers import mirror_cli, paths, run, settle, tree, write

from sessionstore.mirror.cache import CACHE_NAME
from sessionstore.mirror.layout import DIRTY_NAME
from sessionstore.mirror.mirror import Mirror

pytestmark = pytest.mark.timeout(120)

Exact = dict[str, tuple[Any, ...]]


def exact(root: Path) -> Exact:
    """Every entry under `root` and `root` itself: its whole lstat but atime, and its bytes."""

    def entry(p: Path) -> tuple[Any, ...]:
        st = p.lstat()
        facts = (st.st_mode, st.st_ino, st.st_nlink, st.st_size, st.st_mtime_ns, st.st_ctime_ns)
        if stat.S_ISREG(st.st_mode):
            return (*facts, p.read_bytes())
        if stat.S_ISLNK(st.st_mode):
            return (*facts, os.readlink(p))
        return facts

    found = {".": entry(root)}
    for dirpath, dirnames, filenames in os.walk(root):
        for name in dirnames + filenames:
            p = Path(dirpath, name)
            found[p.relative_to(root).as_posix()] = entry(p)
    return found


def busy_destination(tmp: Path) -> tuple[Path, Path]:
    """A source and a destination where a real pass would do one of everything."""
    src, dst = tmp / "src", tmp / "dst"
    write(src / "same.txt", b"same")
    write(src / "changed.txt", b"v1")
    write(src / "gone.txt", b"gone")
    write(src / "trials" / "1" / "log.txt", b"log")
    write(src / "trials" / "1" / "trial.json", b"{}")
    settle()
    assert run(src, dst).ok
    write(src / "changed.txt", b"v2, longer")
    (src / "gone.txt").unlink()
    write(src / "trials" / "1" / "log.txt", b"rewritten after sealing")
    write(src / "trials" / "2" / "log.txt", b"new record")
    write(src / "trials" / "2" / "trial.json", b"{torn")
    write(src / "new" / "deep" / "file.bin", b"\0\1")
    write(src / "bad\nname\x1b[31m.txt", b"hostile name")
    (src / "new" / "empty").mkdir()
    (src / "link").symlink_to("/etc/hostname")
    write(dst / "by-hand.txt", b"not ours")
    write(dst / ".sstmp-999999-dead", b"a temp of a killed pass")
    write(dst / DIRTY_NAME, b"")  # the killed pass's flag: a real pass would sweep
    (dst / "planted").mkdir()
    write(src / "planted" / "x", b"x")
    os.rmdir(dst / "planted")
    (dst / "planted").symlink_to(tmp / "outside")
    (tmp / "outside").mkdir()
    settle()
    return src, dst


def test_dry_run_writes_nothing_and_predicts_the_pass(tmp_path: Path) -> None:
    src, dst = busy_destination(tmp_path)
    before, outside = exact(dst), exact(tmp_path / "outside")
    # A real process, with every option that writes in a real pass.
    proc = mirror_cli(src, dst, "-n", "--delete", "--json")
    assert proc.returncode == 1, proc.stderr  # the planted symlink is an error, as for real
    assert exact(dst) == before and exact(tmp_path / "outside") == outside
    dry = orjson.loads(proc.stdout)
    assert dry["dry_run"] is True
    real = Mirror(src, dst, durable=False, delete=True).run_once().to_dict()
    assert real["dry_run"] is False
    for key in ("copied", "new", "created_dirs", "deleted", "held_back", "skipped", "errors"):
        assert sorted(map(str, dry[key])) == sorted(map(str, real[key])), key
    assert dry["diverged"] == real["diverged"] and dry["unchanged"] == real["unchanged"]
    assert dry["copied"]  # it did predict something


def test_dry_run_itemizes_every_change_and_problem(tmp_path: Path) -> None:
    src, dst = busy_destination(tmp_path)
    before = exact(dst)
    proc = mirror_cli(src, dst, "--dry-run", "--delete")
    assert exact(dst) == before
    assert proc.stdout.splitlines() == [
        "A bad\\nname\\x1b[31m.txt",
        "M changed.txt",
        "D gone.txt",
        "S link: symlink",
        "A new/",
        "A new/deep/",
        "A new/deep/file.bin",
        "A new/empty/",
        "E planted: a symlink is where a directory belongs; nothing is written through it",
        "X trials/1: the source changed after the record was sealed; not applied (log.txt)",
        "A trials/2/",
        "A trials/2/log.txt",
        "H trials/2/trial.json: not a JSON object: "
        "unexpected character, expected a string key at line 1 column 2",
    ]
    assert proc.stderr == (
        "mirror (dry run, nothing written): 4 copied, 2 unchanged, 0 unstable, "
        "1 held back, 1 skipped, 1 errors, 1 diverged, 1 deleted\n"
    )
    assert proc.returncode == 1


def test_dry_run_does_not_create_a_missing_destination(tmp_path: Path) -> None:
    src = tmp_path / "src"
    write(src / "a" / "b.txt", b"b")
    settle()
    dst = tmp_path / "not" / "yet" / "there"
    before = exact(tmp_path)
    proc = mirror_cli(src, dst, "-n")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines() == ["A ./", "A a/", "A a/b.txt"]
    assert exact(tmp_path) == before and not (tmp_path / "not").exists()


def test_dry_run_of_a_daemon_is_one_pass_and_takes_no_lock(tmp_path: Path) -> None:
    src, dst = tmp_path / "src", tmp_path / "dst"
    write(src / "f.txt", b"f")
    dst.mkdir()
    settle()
    before = exact(dst)
    proc = mirror_cli(src, dst, "-n", "--full-every", "1", timeout=30)  # no --once
    assert (proc.returncode, proc.stdout) == (0, "A f.txt\n")
    assert exact(dst) == before  # no lock, no pid file


def test_dry_run_reports_torn_reads_without_writing(tmp_path: Path) -> None:
    src, dst = tmp_path / "src", tmp_path / "dst"
    write(src / "trials" / "1" / "log.txt", b"first")
    write(src / "trials" / "1" / "trial.json", b"{}")
    settle()

    def rewrite(path: str) -> None:  # the file changes while the dry run reads it
        if path.endswith("log.txt"):
            write(src / path, b"second, and longer")

    report = Mirror(src, dst, durable=False, _on_chunk=rewrite).run_once(dry_run=True)
    assert report.dry_run and paths(report.unstable) == ["trials/1/log.txt"]
    assert report.held_back == [{"path": "trials/1/trial.json", "reason": "waiting for 1 file"}]
    assert not dst.exists()


def test_dry_run_sees_a_record_sealed_in_the_destination(tmp_path: Path) -> None:
    src, dst = tmp_path / "src", tmp_path / "dst"
    write(src / "trials" / "1" / "log.txt", b"log")
    write(src / "trials" / "1" / "trial.json", b'{"n": 1}')
    settle()
    # Someone else sealed the record in the destination first.
    write(dst / "trials" / "1" / "trial.json", b'{"n": "theirs"}')
    report = Mirror(src, dst, durable=False).run_once(dry_run=True)
    assert report.copied == [] and paths(report.diverged) == ["trials/1"]
    assert tree(dst) == {"trials/1/trial.json": b'{"n": "theirs"}'}


def test_dry_run_without_cache_compares_and_copies_nothing_identical(tmp_path: Path) -> None:
    src, dst = tmp_path / "src", tmp_path / "dst"
    write(src / "a.txt", b"same")
    write(src / "b.txt", b"differs")
    write(dst / "a.txt", b"same")
    write(dst / "b.txt", b"old")
    os.chmod(dst / "a.txt", 0o600)  # a real pass would fix the mode; a dry run must not
    settle()
    before = exact(dst)
    report = Mirror(src, dst, durable=False).run_once(dry_run=True)
    assert (report.copied, report.new, report.unchanged) == (["b.txt"], [], 1)
    assert exact(dst) == before and not (dst / CACHE_NAME).exists()


def test_verbose_real_pass_itemizes_in_the_same_format(tmp_path: Path) -> None:
    src, dst = busy_destination(tmp_path)
    dry = mirror_cli(src, dst, "-n", "--delete").stdout
    real = mirror_cli(src, dst, "--once", "-v", "--delete")
    assert real.stdout == dry
    assert real.stderr.startswith("mirror: 4 copied, 2 unchanged")
    again = mirror_cli(src, dst, "--once", "-v", "--delete")
    assert [line[0] for line in again.stdout.splitlines()] == ["S", "E", "X", "H"]


def test_dry_run_reports_a_directory_where_a_file_belongs_as_the_pass_does(
    tmp_path: Path,
) -> None:
    # The source replaced a directory with a file: no rename replaces the destination's
    # directory (--delete would, see test_mirror_retype), so the real pass reports an
    # error; the dry run said `M d` (copied).
    src, dst = tmp_path / "src", tmp_path / "dst"
    write(src / "d" / "x", b"x")
    settle()
    assert run(src, dst).ok
    (src / "d" / "x").unlink()
    (src / "d").rmdir()
    write(src / "d", b"a file now")
    settle()
    before = exact(dst)
    dry = Mirror(src, dst, durable=False).run_once(dry_run=True).to_dict()
    assert exact(dst) == before
    real = Mirror(src, dst, durable=False).run_once().to_dict()
    for each in (dry, real):
        del each["duration"], each["dry_run"]
    assert dry == real
    assert real["errors"] == [
        {
            "path": "d",
            "error": "a directory is in its place in the destination; not replaced "
            "(--delete removes one this mirror wrote)",
        }
    ]

"""Claims: a killed pass leaves proof of what it committed, so `--delete` still converges.

The change cache is written at the end of a pass; the in-progress flag holds a
claim per file the pass commits, appended before the file takes its name
(storage/journal.py). The pass after a kill counts a file as the mirror's own
only while it is still exactly the file claimed.
"""

from __future__ import annotations

import os
import resource
import signal
from pathlib import Path

import cli_runner
import orjson
import pytest
from mirror_helpers import outside_tree, run, settle, snapshot, tree, unpack_group, write

from sessionstore.mirror.mirror import CACHE_NAME, DIRTY_NAME, Mirror
from sessionstore.storage import journal

pytestmark = pytest.mark.timeout(180)

BIG = 256 << 20  # keeps a pass busy after the root's files, long enough to be killed


def _claims(dst: Path) -> dict[str, list[journal.Claim]]:
    return journal.read((dst / DIRTY_NAME).read_bytes())


def _identity(path: Path) -> journal.Claim:
    st = path.lstat()
    return st.st_size, st.st_mtime_ns, st.st_ino


def _committed_claims(dst: Path) -> dict[str, journal.Claim]:
    """The files in place as a claim in the flag says (renamed: committed), by path."""
    try:
        claims = _claims(dst)
    except FileNotFoundError:
        return {}
    return {
        k: _identity(dst / k)
        for k, each in claims.items()
        if (dst / k).exists() and _identity(dst / k) in each
    }


def _kill_mid_pass(src: Path, dst: Path, *options: str) -> None:
    """Run a pass in its own process; SIGKILL it once it has committed a file of the root
    (the root's files come before its subdirectories: it is copying zz/big.bin then)."""
    proc = cli_runner.popen("mirror", src, dst, "--once", *options)
    try:
        cli_runner.wait_for(lambda: _committed_claims(dst) != {}, "a commit", timeout=120)
    finally:
        proc.kill()
        proc.communicate(timeout=60)
    assert proc.returncode == -signal.SIGKILL, "the pass ended before the kill"


@pytest.mark.parametrize("durable", [False, True], ids=["no-fsync", "durable"])
def test_delete_removes_what_a_killed_pass_committed_once_the_source_drops_it(
    tmp_path: Path, durable: bool
) -> None:
    src, dst = tmp_path / "src", tmp_path / "dst"
    options = [] if durable else ["--no-fsync"]
    write(src / "f.txt", b"v1")
    write(src / "zz" / "big.bin", b"0")
    settle()
    assert cli_runner.run("mirror", src, dst, "--once", *options).returncode == 0
    write(src / "f.txt", b"v2")
    # New files; a durable pass renames its temps 64 at a time: enough for one round.
    added = ["new.txt", *(f"n{i:02}.txt" for i in range(70))]
    for name in added:
        write(src / name, name.encode())
    write(src / "zz" / "big.bin", bytes(BIG))
    settle()
    # An earlier pass was killed mid-claim: its cut record must not swallow the first
    # claim of the pass appended after it.
    (dst / DIRTY_NAME).write_bytes(_claim("f.txt", (3, 1, 1))[:-4])
    _kill_mid_pass(src, dst, *options)
    committed = _committed_claims(dst)  # some, or (durable) a round cut by the kill
    for name in ["f.txt", *added]:
        (src / name).unlink()  # the agent removes them before the next pass
    reports = []
    for _ in range(2):
        done = cli_runner.run("mirror", src, dst, "--once", "--delete", "--json", *options)
        assert done.returncode == 0, done.stderr
        reports.append(orjson.loads(done.stdout))
    assert reports[0]["skipped"] == [] and reports[0]["errors"] == []
    assert set(committed) <= set(reports[0]["deleted"])
    assert reports[1]["deleted"] == [] and reports[1]["copied"] == []
    assert tree(dst) == tree(src) == {"zz/big.bin": bytes(BIG)}
    assert not (dst / DIRTY_NAME).exists()


def test_after_a_kill_a_claimed_file_is_compared_not_rewritten(tmp_path: Path) -> None:
    src, dst = tmp_path / "src", tmp_path / "dst"
    write(src / "f.txt", b"v1")
    write(src / "zz" / "big.bin", b"0")
    settle()
    run(src, dst)
    write(src / "f.txt", b"v2")
    write(src / "new.txt", b"new")
    write(src / "zz" / "big.bin", bytes(BIG))
    settle()
    _kill_mid_pass(src, dst, "--no-fsync")
    committed = _committed_claims(dst)
    report = run(src, dst)
    assert not set(committed) & set(report.copied)
    assert {name: _identity(dst / name) for name in committed} == committed  # same inodes
    assert tree(dst) == tree(src) and not (dst / DIRTY_NAME).exists()
    assert run(src, dst).unchanged == 3  # and the cache now knows them


def _claim(key: str, claim: journal.Claim) -> bytes:
    path = os.fsencode(key)
    return b"%d %d %d %d %s\0" % (*claim, len(path), path)


def _interrupted_with(dst: Path, claims: list[tuple[str, journal.Claim]]) -> None:
    """The in-progress flag as a killed pass leaves it, holding these claims."""
    (dst / DIRTY_NAME).write_bytes(b"".join(_claim(key, claim) for key, claim in claims))


def test_the_mirrors_own_files_are_never_claimed(tmp_path: Path) -> None:
    src, dst = tmp_path / "src", tmp_path / "dst"
    write(src / "keep.txt", b"k")
    settle()
    run(src, dst)
    own = [".sessionstore-mirror.lock", ".sessionstore-mirror.pid", CACHE_NAME]
    for name in own[:2]:
        write(dst / name, b"a daemon's")
    before = {name: (dst / name).read_bytes() for name in own}
    _interrupted_with(dst, [(name, _identity(dst / name)) for name in own])
    report = run(src, dst, delete=True)
    assert report.deleted == [] and report.errors == []
    assert {name: (dst / name).read_bytes() for name in own[:2]} == {
        name: before[name] for name in own[:2]
    }
    assert run(src, dst, delete=True).unchanged == 1  # the cache is trusted still


@pytest.mark.parametrize(
    "flag",
    [
        b"9" * 5000 + b" 1 1 1 x\0",  # int() refuses a number this long
        bytes(1 << 20),  # a power cut's zeros
        b"1 1 1 1000000000 x",  # a length past the end
        b"1 1 1 1 \0" * 1000,  # a path that is empty
        b"1 1 1 3 a\0b\0",  # a path holding a NUL
    ],
    ids=["long-number", "zeros", "long-length", "empty-path", "nul-in-path"],
)
def test_a_malformed_flag_costs_nothing_and_the_pass_converges(tmp_path: Path, flag: bytes) -> None:
    src, dst = tmp_path / "src", tmp_path / "dst"
    write(src / "a", b"a")
    settle()
    run(src, dst)
    write(dst / "x", b"the user's")
    (dst / DIRTY_NAME).write_bytes(flag)
    report = run(src, dst, delete=True)
    assert report.errors == [] and report.deleted == [] and (dst / "x").exists()
    assert not (dst / DIRTY_NAME).exists()


def test_a_hard_linked_flag_is_never_written_through(tmp_path: Path) -> None:
    """A flag with a second name (a `cp -al` snapshot taken mid-pass): a pass appending
    its claims would write to the file elsewhere; it makes a flag of its own instead."""
    src, dst = tmp_path / "src", tmp_path / "dst"
    write(src / "keep.txt", b"k")
    settle()
    run(src, dst)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.write_bytes(b"a file of the snapshot\n")
    os.link(elsewhere, dst / DIRTY_NAME)
    write(src / "new.txt", b"n")
    settle()
    report = run(src, dst, delete=True)
    assert report.copied == ["new.txt"] and report.errors == []
    assert elsewhere.read_bytes() == b"a file of the snapshot\n"
    assert not (dst / DIRTY_NAME).exists()


def test_a_flag_another_user_made_proves_nothing(tmp_path: Path) -> None:
    """A destination in a shared directory: another user plants the flag, with a claim
    on a file of the owner's that the source lacks, in its true identity."""
    if os.geteuid() != 0:
        pytest.skip("only root can give a file to another user")
    src, dst = tmp_path / "src", tmp_path / "dst"
    write(src / "keep.txt", b"k")
    settle()
    run(src, dst)
    write(dst / "user.txt", b"the user's own file")
    _interrupted_with(dst, [("user.txt", _identity(dst / "user.txt"))])
    os.chown(dst / DIRTY_NAME, 65534, 65534)
    write(src / "new.txt", b"n")
    settle()
    report = run(src, dst, delete=True)
    assert report.copied == ["new.txt"] and report.deleted == [] and report.errors == []
    assert (dst / "user.txt").exists() and not (dst / DIRTY_NAME).exists()
    assert run(src, dst, delete=True).deleted == []


def test_a_claim_never_proves_a_file_it_does_not_describe(tmp_path: Path) -> None:
    src, dst = tmp_path / "src", tmp_path / "dst"
    for name in ("a.txt", "b.txt", "c.txt"):
        write(src / name, name.encode())
    settle()
    run(src, dst, delete=True)
    outside = outside_tree(tmp_path / "outside")
    before = snapshot(outside)
    write(dst / "user.txt", b"the user's own file")
    victim = outside / "keep.txt"
    _interrupted_with(
        dst,
        [
            ("a.txt", (99, 1, 1)),  # its rename never happened: a.txt is still as cached
            ("user.txt", (1, 1, 1)),  # not the file that is there
            ("../outside/keep.txt", _identity(victim)),  # outside the destination
            ("x/../../outside/keep.txt", _identity(victim)),
        ],
    )
    (dst / DIRTY_NAME).write_bytes(
        (dst / DIRTY_NAME).read_bytes() + _claim("c.txt", (3, 1, 1))[:-3]  # cut by a kill
    )
    for name in ("a.txt", "c.txt"):
        (src / name).unlink()
    report = run(src, dst, delete=True)
    assert sorted(report.deleted) == ["a.txt", "c.txt"] and report.skipped == []
    assert (dst / "user.txt").read_bytes() == b"the user's own file"
    assert snapshot(outside) == before
    assert not (dst / DIRTY_NAME).exists()
    assert run(src, dst, delete=True).deleted == []


def test_a_planted_flag_proves_nothing(tmp_path: Path) -> None:
    """Claims written by anyone: a file is taken only if it is exactly the claimed one
    and below the destination; the user's own file claimed with its true identity is
    still not deleted unless the source listing says it is gone *and* it matches."""
    src, dst = tmp_path / "src", tmp_path / "dst"
    write(src / "keep.txt", b"k")
    settle()
    run(src, dst)
    os.symlink(tmp_path / "elsewhere", dst / "link")
    write(tmp_path / "elsewhere" / "x", b"outside, through a symlink")
    _interrupted_with(dst, [("link/x", _identity(tmp_path / "elsewhere" / "x"))])
    report = run(src, dst, delete=True)
    assert report.deleted == [] and (tmp_path / "elsewhere" / "x").exists()


def test_claims_outside_a_subset_pass_are_kept_for_a_later_full_pass(tmp_path: Path) -> None:
    src, dst = tmp_path / "src", tmp_path / "dst"
    write(src / "a" / "f", b"a")
    write(src / "b" / "g", b"b")
    settle()
    run(src, dst)
    write(dst / "b" / "h", b"committed by a killed pass")  # ... and claimed by it
    _interrupted_with(dst, [("b/h", _identity(dst / "b" / "h"))])
    write(src / "a" / "f", b"a2")
    settle()
    report = Mirror(src, dst, durable=False).run_dirs(["a"])
    assert report.copied == ["a/f"] and not (dst / DIRTY_NAME).exists()
    cache = orjson.loads((dst / CACHE_NAME).read_bytes())
    group = cache["groups"][cache["dirs"].index("b")]
    assert "h" in unpack_group(orjson.dumps(group))  # now in the cache
    report = run(src, dst, delete=True)  # b/h is not in the source: the mirror's to delete
    assert report.deleted == ["b/h"] and tree(dst) == tree(src)


def test_a_flag_that_cannot_be_replaced_flags_the_pass_and_is_reported(tmp_path: Path) -> None:
    """A directory where the flag goes: the pass copies without a journal and says the
    flag cannot be removed; each pass after it does the same, none stops at the flag."""
    src, dst = tmp_path / "src", tmp_path / "dst"
    write(src / "a", b"a")
    settle()
    run(src, dst)
    write(dst / DIRTY_NAME / "inner", b"not a flag")
    for name in ("b", "c"):
        write(src / name, name.encode())
        settle()
        report = run(src, dst)
        assert report.copied == [name]
        assert [e["path"] for e in report.errors] == [DIRTY_NAME]
        assert "cannot remove the in-progress flag" in report.errors[0]["error"]
    assert (dst / DIRTY_NAME / "inner").read_bytes() == b"not a flag"


def _limit_file_size() -> None:
    """In the child: no file may grow past 4 KiB (a disk full at the flag, no more)."""
    resource.setrlimit(resource.RLIMIT_FSIZE, (4096, 4096))
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # EFBIG, not a signal


def test_a_flag_that_cannot_grow_costs_the_journal_not_the_pass(tmp_path: Path) -> None:
    src, dst = tmp_path / "src", tmp_path / "dst"
    write(src / "a", b"a")
    settle()
    run(src, dst)
    (dst / DIRTY_NAME).write_bytes(b"x" * 4096)  # a cut record, as long as a file may be
    added = [f"n{i}" for i in range(5)]
    for name in added:
        write(src / name, name.encode())
    settle()
    done = cli_runner.run(
        "mirror", src, dst, "--once", "--no-fsync", "--json", preexec_fn=_limit_file_size
    )
    assert done.returncode == 0, done.stderr
    report = orjson.loads(done.stdout)
    assert sorted(report["copied"]) == added and report["errors"] == []
    assert not (dst / DIRTY_NAME).exists()


def test_a_claim_whose_rename_never_happened_does_not_hide_the_one_before(
    tmp_path: Path,
) -> None:
    """Seen in CI's race: a pass killed after committing f.txt, then a pass killed after
    claiming its next version but before the rename. The file in place answers to the
    first claim: it is still the mirror's."""
    src, dst = tmp_path / "src", tmp_path / "dst"
    write(src / "keep.txt", b"k")
    settle()
    run(src, dst)
    write(dst / "f.txt", b"committed by the first killed pass")
    _interrupted_with(dst, [("f.txt", _identity(dst / "f.txt")), ("f.txt", (5, 1, 1))])
    report = run(src, dst, delete=True)  # the source has no f.txt (any more)
    assert report.deleted == ["f.txt"] and report.skipped == [] and report.errors == []
    assert not (dst / DIRTY_NAME).exists()

"""Hostile cases for the forked verifier (`mirror.split`, `mirror.vouch`) and the
change cache's read window it moved to both directions (`Cache.text`).

Each split pass runs in a fresh process (`test_mirror_split.RUNNER`, with a prelude
of attacks set through the environment), and its outcome is compared with the same
pass pinned to one CPU (no fork) on a twin tree built the same way: the report, the
destination, the names in the new change cache, and what later passes do.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import cli_runner
import orjson
import pytest
from mirror_helpers import run, settle, temps, tree, write
from test_mirror_split import RUNNER, SESSIONS, make_source

from sessionstore.mirror.cache import _WINDOW, CACHE_NAME, Cache
from sessionstore.mirror.cache_file import MASK, SHIFT, read
from sessionstore.storage.local_tree_root import FdFile

pytestmark = pytest.mark.timeout(180)

# Run before RUNNER (same process): attacks named in $SPLIT_ATTACK (JSON), and a probe
# of what the pass leaves behind (live children, open fds) written to attack["probe"].
PRELUDE = r"""
import json as _json, os as _os, shutil as _shutil, time as _time
from sessionstore.mirror import split as _split
from sessionstore.mirror import mirror as _mirror

_attack = _json.loads(_os.environ.get("SPLIT_ATTACK") or "{}")
if _attack.get("greedy-child"):  # the child ignores the parent's claims: takes every one
    def _take_back(self, back):
        self.slots[1] = back
        return True
    _split.Claims.take_back = _take_back
if _attack.get("greedy-parent"):  # the parent ignores the child's claims
    def _take(self, front):
        if self.slots is None:
            return False
        self.slots[0] = front + 1
        return True
    _split.Claims.take = _take
if _attack.get("mutate"):  # change the source once the first verdicts are in the parent
    _read, _done = _split.Verifier._read, []

    def _mutate(drel):
        root = _attack["src"]
        where = _os.path.join(root, drel, _attack["target"])
        how = _attack["mutate"]
        if how == "rewrite":
            with open(_os.path.join(where, _attack["file"]), "wb") as f:
                f.write(b"rewritten while the pass ran\n")
        elif how == "new-file":
            with open(_os.path.join(where, "new.txt"), "wb") as f:
                f.write(b"new while the pass ran\n")
        elif how == "remove":
            _shutil.rmtree(where)
        elif how == "symlink":
            _shutil.rmtree(where)
            _os.symlink(_attack["outside"], where)
        elif how == "file":
            _shutil.rmtree(where)
            with open(where, "wb") as f:
                f.write(b"a file now\n")
        elif how == "replace":  # another directory of the same name, other files
            _os.rename(where, where + ".old")
            _os.mkdir(where)
            with open(_os.path.join(where, "other.txt"), "wb") as f:
                f.write(b"another directory\n")
            _shutil.rmtree(where + ".old")

    def _reading(self, block):
        found = _read(self, block)
        verdicts = [v for v in found if v is not None]
        if verdicts and not _done:
            _done.append(True)
            _mutate(self.items[verdicts[0][0]][2])
        return found

    _split.Verifier._read = _reading
    _take = _split.Claims.take

    def _patient_take(self, front):
        # The case needs a verdict: the parent takes its first subdirectory only once
        # the child has walked one (bounded), whatever the machine's timing. Without
        # it, a child slow to start got nothing to vouch for and nothing changed.
        slots = self.slots
        deadline = _time.monotonic() + 10
        while front == 0 and slots is not None and slots[2] == 0 and _time.monotonic() < deadline:
            _time.sleep(0.002)
        return _take(self, front)

    _split.Claims.take = _patient_take
if _attack.get("probe"):
    _run_once = _mirror.Mirror.run_once

    def _probed(self, *args, **kwargs):
        before = len(_os.listdir("/proc/self/fd"))
        report = _run_once(self, *args, **kwargs)
        after = len(_os.listdir("/proc/self/fd"))
        try:
            live = _os.waitpid(-1, _os.WNOHANG)[0] == 0
        except ChildProcessError:
            live = False
        with open(_attack["probe"], "w") as f:
            f.write(_json.dumps({"fds": after - before, "child-left": live}))
        return report

    _mirror.Mirror.run_once = _probed
"""


def attack_pass(
    src: Path, dst: Path, fault: str = "none", *options: str, **attack: Any
) -> dict[str, Any]:
    """One pass in a process of its own, with the attacks of `attack`; its result, and the
    probe's findings (no child left, no fd left open) checked."""
    probe = dst.parent / "probe.json"
    attack = {"src": str(src), "probe": str(probe), **attack}
    proc = subprocess.run(
        [sys.executable, "-c", PRELUDE + RUNNER, str(src), str(dst), fault, *options],
        capture_output=True,
        timeout=120,
        env=cli_runner.environ(SPLIT_ATTACK=orjson.dumps(attack).decode()),
    )
    assert proc.returncode == 0, proc.stderr.decode()
    assert proc.stderr == b""
    assert orjson.loads(probe.read_bytes()) == {"fds": 0, "child-left": False}
    result: dict[str, Any] = orjson.loads(proc.stdout)
    return result


LISTS = ("copied", "new", "deleted", "created_dirs")
ITEMS = ("skipped", "unstable", "held_back", "errors", "diverged")


def outcome(report: dict[str, Any]) -> dict[str, Any]:
    """A report as a comparable value: its lists as sets, `unchanged` as is."""
    found: dict[str, Any] = {key: sorted(report[key]) for key in LISTS}
    for key in ITEMS:
        found[key] = sorted(orjson.dumps(item).decode() for item in report[key])
    found["unchanged"] = report["unchanged"]
    return found


def cache_names(dst: Path) -> dict[str, list[str]]:
    """The change cache's directories and the file names of each (not their stats, which
    differ between twins)."""
    file = FdFile(os.open(dst / CACHE_NAME, os.O_RDONLY), (dst / CACHE_NAME).stat().st_size)
    try:
        found = read(file)
        assert found is not None
        cache = Cache(found[1], b"", trusted=True, file=found[2])
        return {rel: sorted(cache.group(rel)) for rel in sorted(cache.groups)}
    finally:
        file.close()


def twins(tmp_path: Path, build: Any) -> dict[str, tuple[Path, Path]]:
    """Two source/destination pairs built alike, each mirrored once (no cache: no fork)."""
    pairs = {}
    for name in ("split", "one"):
        src, dst = tmp_path / name / "src", tmp_path / name / "dst"
        build(src)
        pairs[name] = (src, dst)
    settle()
    for src, dst in pairs.values():
        assert attack_pass(src, dst)["forks"] == 0
    return pairs


def with_notes(src: Path) -> None:
    """`make_source`, and an unsealed directory with a file in each session."""
    make_source(src)
    for s in range(SESSIONS):
        write(src / f"s{s}" / "notes" / "a.txt", b"notes %d\n" % s)


def in_flight_changed(src: Path) -> None:
    """One change in every session's in-flight trial: no session is clean whole, so the
    parent walks the verifier's sessions itself, adopting what it vouched for."""
    for s in range(SESSIONS):
        write(src / f"s{s}" / "trials" / "130" / "log.txt", b"rewritten %d\n" % s)


def converged(pairs: dict[str, tuple[Path, Path]], *, every: bool = True) -> None:
    """Two more passes in one process on each twin: the same outcome (of each, or with
    `every` False of the last), the same destination, the same cache names; and the
    last pass changes nothing."""
    settle()
    last = {}
    for i in range(2):
        for name, (src, dst) in pairs.items():
            last[name] = attack_pass(src, dst, "one-cpu", "--delete")["report"]
        settle()
        if every or i:
            assert outcome(last["split"]) == outcome(last["one"])
    assert last["one"]["copied"] == last["one"]["deleted"] == []
    dst1, dst2 = pairs["split"][1], pairs["one"][1]
    assert tree(dst1) == tree(dst2)
    assert cache_names(dst1) == cache_names(dst2)
    assert temps(dst1) == temps(dst2) == []


# -- the read window (abd255a): a group larger than the window, read after a later one --


def test_a_group_over_the_window_read_after_a_later_one(tmp_path: Path) -> None:
    """As the verifier reads its share (last first), and as `save` starts again from the
    first group once the walk has read the last: every group's bytes exactly."""
    src, dst = tmp_path / "src", tmp_path / "dst"
    for k in range(1000):  # the root's group: the first in the file, over 64 KiB
        write(src / f"file-{k:04}-{'x' * 40}.txt", b"x")
    write(src / "small" / "f.txt", b"small")
    settle()
    run(src, dst)
    file = FdFile(os.open(dst / CACHE_NAME, os.O_RDONLY), (dst / CACHE_NAME).stat().st_size)
    found = read(file)
    assert found is not None
    cache = Cache(found[1], b"salt", trusted=True, file=found[2])
    try:
        refs = found[1]
        assert refs[""] & MASK > _WINDOW and refs[""] < refs["small"]
        expected = {rel: file.read_at(ref >> SHIFT, ref & MASK) for rel, ref in refs.items()}
        for rel in ("small", ""):  # a later group, then the one over the window before it
            assert cache.text(refs[rel]) == expected[rel], rel
    finally:
        cache.close()


def test_a_pass_writes_its_cache_when_the_first_kept_group_is_over_the_window(
    tmp_path: Path,
) -> None:
    """After the walk the window is at the end of the file; `save` copies the kept groups
    from the first: one over the window, read backwards, came back short (EIO), the
    cache was never written again and the change was copied again by every pass."""
    src, dst = tmp_path / "src", tmp_path / "dst"
    for k in range(1000):  # the root's group is the first in the file, over 64 KiB
        write(src / f"file-{k:04}-{'x' * 40}.txt", b"x")
    write(src / "sub" / "f.txt", b"one")
    settle()
    assert run(src, dst).errors == []
    write(src / "sub" / "f.txt", b"two")
    settle()
    report = run(src, dst)
    assert report.copied == ["sub/f.txt"]
    assert report.errors == []
    settle()
    again = run(src, dst)
    assert again.copied == [] and again.errors == []
    assert again.unchanged == 1001


def test_a_split_pass_with_groups_over_the_window_matches_one_process(tmp_path: Path) -> None:
    """Every session's own group is over the window. In one process the groups are read
    and written front to back (the root's small group first), so the window never
    runs backwards onto a big one. With the split, the verifier reads them last-first,
    the parent walks the verifier's sessions (each one changed) in between its own,
    and writes the new cache in that order, which `save` reads back."""

    def build(src: Path) -> None:
        make_source(src)
        write(src / "top.txt", b"a small group first in the file")
        for s in range(SESSIONS):
            for k in range(300):
                write(src / f"s{s}" / f"{k:03}-{'n' * 196}.txt", b"x")

    pairs = twins(tmp_path, build)
    for src, _ in pairs.values():
        in_flight_changed(src)
    settle()
    split = attack_pass(*pairs["split"], "none", "--delete")
    one = attack_pass(*pairs["one"], "one-cpu", "--delete")
    assert split["forks"] == 1 and one["forks"] == 0
    assert one["report"]["errors"] == []
    assert outcome(split["report"]) == outcome(one["report"])
    converged(pairs)


# -- the claims raced: both walk the same subdirectories ---------------------------------


@pytest.mark.parametrize(
    "racing",
    [{"greedy-child": True}, {"greedy-parent": True}, {"greedy-child": 1, "greedy-parent": 1}],
    ids=["child-takes-all", "parent-takes-all", "both-take-all"],
)
@pytest.mark.parametrize("changed", [False, True], ids=["clean", "in-flight-changed"])
def test_claims_taken_twice_change_nothing(
    tmp_path: Path, racing: dict[str, Any], changed: bool
) -> None:
    """A take that loses the race is the rule here, not a rare interleaving: verdicts on
    subdirectories the parent took are dropped, those it did not take are adopted once."""
    pairs = twins(tmp_path, with_notes)
    for src, _ in pairs.values():
        write(src / "s2" / "notes" / "b.txt", b"a new file in the parent's share")
        write(src / f"s{SESSIONS - 2}" / "notes" / "b.txt", b"a new file in the child's share")
        (src / "s1" / "notes" / "a.txt").unlink()
        (src / f"s{SESSIONS - 1}" / "notes" / "a.txt").unlink()
        if changed:
            in_flight_changed(src)
    settle()
    split = attack_pass(*pairs["split"], "none", "--delete", **racing)
    one = attack_pass(*pairs["one"], "one-cpu", "--delete")
    assert split["forks"] == 1 and one["forks"] == 0
    assert outcome(split["report"]) == outcome(one["report"])
    assert tree(pairs["split"][1]) == tree(pairs["one"][1])
    assert cache_names(pairs["split"][1]) == cache_names(pairs["one"][1])
    converged(pairs)


# -- the source changed by another process after the verifier vouched -------------------

FILES = {"trials/5": "log.txt", "notes": "a.txt"}  # the file of each target rewritten
MUTATIONS = ["rewrite", "new-file", "remove", "symlink", "file", "replace"]


@pytest.mark.parametrize("target", ["trials/5", "notes"], ids=["sealed-record", "unsealed"])
@pytest.mark.parametrize("how", MUTATIONS)
def test_a_vouched_directory_changed_before_the_parent_reaches_it(
    tmp_path: Path, how: str, target: str
) -> None:
    """Once the parent has read the first verdicts (so before it lists the verifier's
    sessions it walks), a directory vouched for in the first of them changes. The pass
    may adopt it as it was vouched for (as a pass that got there first would have), but
    nothing may fail, and later passes end where passes in one process do."""
    pairs = twins(tmp_path, with_notes)
    outside = tmp_path / "outside"
    write(outside / "secret.txt", b"never mirrored")
    for src, _ in pairs.values():
        in_flight_changed(src)
    settle()
    split = attack_pass(
        *pairs["split"],
        "none",
        "--delete",
        mutate=how,
        target=target,
        file=FILES[target],
        outside=str(outside),
    )
    assert split["forks"] == 1
    report = split["report"]
    assert report["errors"] == []
    # The twin's source gets the same change before its pass in one process.
    changed = _changed_sessions(pairs["split"][0], target, how)
    assert len(changed) == 1, changed
    _apply(pairs["one"][0] / changed[0] / target, how, outside, FILES[target])
    settle()
    attack_pass(*pairs["one"], "one-cpu", "--delete")
    assert b"never mirrored" not in b"".join(tree(pairs["split"][1]).values())
    if how == "file" and target == "notes":
        # A directory replaced by a file: --delete removes it in one pass, the next
        # copies the file; a split pass that adopted the directory is a pass behind.
        attack_pass(*pairs["split"], "one-cpu", "--delete")
    # The pass after may still have to copy what changed after the verifier's look.
    converged(pairs, every=False)


def _changed_sessions(src: Path, target: str, how: str) -> list[str]:
    found = []
    for s in range(SESSIONS):
        where = src / f"s{s}" / target
        if how == "rewrite":
            f = where / FILES[target]
            hit = f.exists() and b"while" in f.read_bytes()
        elif how == "new-file":
            hit = (where / "new.txt").exists()
        elif how == "remove":
            hit = not os.path.lexists(where)
        elif how == "symlink":
            hit = where.is_symlink()
        elif how == "file":
            hit = where.is_file()
        else:
            hit = (where / "other.txt").exists()
        if hit:
            found.append(f"s{s}")
    return found


def _apply(where: Path, how: str, outside: Path, name: str) -> None:
    if how == "rewrite":
        write(where / name, b"rewritten while the pass ran\n")
    elif how == "new-file":
        write(where / "new.txt", b"new while the pass ran\n")
    elif how == "remove":
        shutil.rmtree(where)
    elif how == "symlink":
        shutil.rmtree(where)
        os.symlink(outside, where)
    elif how == "file":
        shutil.rmtree(where)
        write(where, b"a file now\n")
    else:
        shutil.rmtree(where)
        write(where / "other.txt", b"another directory\n")

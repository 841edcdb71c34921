"""A big pass shares its checks with a forked read-only verifier (`mirror.split`).

Each pass runs in a fresh Python process (`RUNNER`), so the fork is the real
one, made from a process with no other thread, and the test can count it.
Faults are injected into the child (it exits, raises, or waits to be killed
from this process), at the fork (it fails; the child is reaped by the kernel),
and into the conditions (a thread, one CPU, SIGCHLD ignored); killing the
parent instead must leave no child running.
"""

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
from mirror_helpers import settle, temps, tree, write

from sessionstore.mirror import split
from sessionstore.mirror.cache import CACHE_NAME
from sessionstore.storage import local_tree_sync

pytestmark = pytest.mark.timeout(120)

# One pass in a process of its own: how many verifiers it forked, how many directories
# it listed itself (not counting its verifier's), and its report.
# argv: src dst fault [options...]; `fault` names the injected fault ("none": none).
RUNNER = r"""
import os, signal, sys, threading, time
import orjson
from sessionstore.mirror import split, vouch
from sessionstore.mirror.mirror import Mirror
from sessionstore.mirror.walk import Pass
from sessionstore.redact.redactor import Redactor

src, dst, fault, *options = sys.argv[1:]
forks = []
real_fork = os.fork

def fork():
    if fault == "no-fork":
        raise BlockingIOError(11, "Resource temporarily unavailable")
    pid = real_fork()
    if pid:
        forks.append(pid)
    return pid

os.fork = fork
parent, listed, enter = os.getpid(), [], Pass.enter

def counting_enter(self, frame):
    if os.getpid() == parent:  # the directories this process listed itself
        listed.append(frame.rel)
        # A head start for the verifier, which a loaded machine may not schedule for a
        # while: the parent pauses once per session it walks (its `trials/`).
        if "--unhurried-parent" in options and frame.rel.rpartition("/")[2] == "trials":
            time.sleep(0.2)
    return enter(self, frame)

Pass.enter = counting_enter
if fault == "one-cpu":
    os.sched_setaffinity(0, {min(os.sched_getaffinity(0))})
elif fault == "ignore-chld":  # as a supervisor's `trap '' CHLD` leaves it
    signal.signal(signal.SIGCHLD, signal.SIG_IGN)
elif fault == "reaped-elsewhere":  # the kernel reaps the child: waitpid finds none
    start = split.start

    def ignoring(*args):
        signal.signal(signal.SIGCHLD, signal.SIG_IGN)
        return start(*args)

    split.start = ignoring
elif fault == "thread":
    stop = threading.Event()
    threading.Thread(target=stop.wait, daemon=True).start()
elif fault != "none":
    verify = vouch.vouch_for

    def faulty(*args):
        if fault == "exit":
            os._exit(3)
        if fault == "raise":
            raise OSError("injected")
        if fault == "bad-index":  # a directory index past the subdirectory's: not trusted
            return [[len(args[2]) - 1, [[10**6, 1]]]]
        if fault.startswith("wait:"):  # pid file, then wait for the go file
            pid_file = fault[5:]
            with open(pid_file + ".tmp", "w") as f:
                f.write(str(os.getpid()))
            os.rename(pid_file + ".tmp", pid_file)
            go(pid_file)
        return verify(*args)

    def go(pid_file):
        for _ in range(3000):
            if os.path.exists(pid_file + ".go"):
                break
            time.sleep(0.01)

    vouch.vouch_for = faulty
    if fault.startswith("wait:"):  # the parent too waits, once the child is forked
        start = split.start

        def waiting(*args):
            subdirs = start(*args)
            go(fault[5:])
            return subdirs

        split.start = waiting
redactor = None
if "--secret" in options:
    redactor = Redactor()
    redactor.add(options[options.index("--secret") + 1])
mirror = Mirror(
    src, dst, redactor=redactor, durable="--durable" in options, delete="--delete" in options
)
report = mirror.run_once(dry_run="--dry-run" in options)
if fault == "thread":
    stop.set()
result = {"forks": len(forks), "listed": listed, "entered": len(listed), "report": report.to_dict()}
sys.stdout.buffer.write(orjson.dumps(result))
"""

SESSIONS = 8
TRIALS = 130  # 8 x 130 trial directories: over split.MIN_GROUPS


def make_source(src: Path, under: str = "") -> list[str]:
    """Sessions of sealed trials and one in-flight trial each; their file paths."""
    files = []
    for s in range(SESSIONS):
        for t in range(1, TRIALS + 1):
            rec = f"{under}s{s}/trials/{t}"
            write(src / rec / "log.txt", b"log %d %d\n" % (s, t))
            files.append(f"{rec}/log.txt")
            marker = "trial.json" if t < TRIALS else "progress.json"  # the last is in flight
            write(src / rec / marker, b'{"trial": %d}' % t)
            files.append(f"{rec}/{marker}")
    assert SESSIONS * TRIALS >= split.MIN_GROUPS
    return files


def run_pass(src: Path, dst: Path, fault: str = "none", *options: str) -> dict[str, Any]:
    proc = subprocess.run(
        [sys.executable, "-c", RUNNER, str(src), str(dst), fault, *options],
        capture_output=True,
        timeout=90,
        env=cli_runner.environ(),
    )
    assert proc.returncode == 0, proc.stderr.decode()
    assert proc.stderr == b""
    result: dict[str, Any] = orjson.loads(proc.stdout)
    return result


def first_copy(tmp_path: Path, under: str = "") -> tuple[Path, Path, list[str]]:
    src, dst = tmp_path / "src", tmp_path / "dst"
    files = make_source(src, under)
    settle()
    first = run_pass(src, dst)
    assert first["forks"] == 0  # no trusted cache yet: nothing to vouch with
    assert sorted(first["report"]["copied"]) == sorted(files)
    return src, dst, files


@pytest.mark.parametrize("under", ["", "runs/"], ids=["sessions-at-the-top", "one-dir-above"])
def test_a_no_op_pass_shared_with_a_verifier_vouches_for_every_file(
    tmp_path: Path, under: str
) -> None:
    src, dst, files = first_copy(tmp_path, under)
    cache = (dst / CACHE_NAME).read_bytes()
    before = {p: os.lstat(dst / p) for p in files}
    # Both walks start together, and the parent pauses at each session: the child's own
    # start (the fork, its imports) under load could otherwise let the parent walk all but
    # the last session before it begins.
    proc, _ = start_waiting_pass(tmp_path, src, dst, "--unhurried-parent")
    (tmp_path / "child.pid.go").touch()
    out, err = proc.communicate(timeout=90)
    assert proc.returncode == 0 and err == b"", err.decode()
    result = orjson.loads(out)
    report = result["report"]
    assert result["forks"] == 1
    # Each session (2 + TRIALS directories) was listed whole by the parent, from the first,
    # or vouched for whole by the verifier, from the last: they met between two sessions.
    order = os.listdir(src / under)  # as the pass lists them
    listed = [
        sum(f"{rel}/".startswith(f"{under}{name}/") for rel in result["listed"]) for name in order
    ]
    split_at = listed.index(0)
    assert listed == [TRIALS + 2] * split_at + [0] * (SESSIONS - split_at), listed
    assert 1 <= split_at <= SESSIONS - 2  # and the verifier vouched for two or more
    assert report["unchanged"] == len(files)
    for key in ("copied", "unstable", "held_back", "skipped", "errors", "diverged", "deleted"):
        assert report[key] == [], key
    assert (dst / CACHE_NAME).read_bytes() == cache  # every group adopted as stored
    after = {p: os.lstat(dst / p) for p in files}
    assert {p: (s.st_ino, s.st_mtime_ns) for p, s in after.items()} == {
        p: (s.st_ino, s.st_mtime_ns) for p, s in before.items()
    }


KINDS = ["rewritten", "new-file", "removed", "symlink", "fifo", "diverged", "new-dir", "empty-dir"]


@pytest.mark.parametrize("kind", KINDS)
def test_changes_in_either_share_are_made_by_the_writing_process(tmp_path: Path, kind: str) -> None:
    """One kind of change in every session (so in both shares), each handled once.

    One kind per pass: each alone is what must keep a subdirectory out of the
    verifier's clean ones.
    """
    src, dst, files = first_copy(tmp_path)
    want: dict[str, list[str]] = {key: [] for key in ("copied", "new", "deleted", "skipped")}
    want |= {"diverged": [], "created_dirs": []}
    lost = 0  # files no longer counted unchanged
    for s in range(SESSIONS):
        top, live = f"s{s}/trials", f"s{s}/trials/{TRIALS}"  # the in-flight trial
        if kind == "rewritten":
            write(src / live / "log.txt", b"rewritten %d\n" % s)
            want["copied"].append(f"{live}/log.txt")
            lost += 1
        elif kind in ("new-file", "new-dir"):
            rel = f"{live}/extra.txt" if kind == "new-file" else f"s{s}/notes/new.txt"
            write(src / rel, b"new")
            want["copied"].append(rel)
            want["new"].append(rel)
            if kind == "new-dir":
                want["created_dirs"].append(f"s{s}/notes")
        elif kind == "removed":
            (src / live / "progress.json").unlink()
            want["deleted"].append(f"{live}/progress.json")
            lost += 1
        elif kind == "symlink":
            os.symlink("/etc/passwd", src / top / "7" / "link")
            want["skipped"].append(f"{top}/7/link")
        elif kind == "fifo":
            os.mkfifo(src / live / "pipe")
            want["skipped"].append(f"{live}/pipe")
        elif kind == "diverged":
            write(src / top / "3/log.txt", b"changed after sealing\n")
            want["diverged"].append(f"{top}/3")
            lost += 1
        else:
            (src / f"s{s}" / "empty").mkdir()
            want["created_dirs"].append(f"s{s}/empty")
    settle()
    result = run_pass(src, dst, "none", "--delete")
    report = result["report"]
    assert result["forks"] == 1
    for key, paths in want.items():
        found = [i["path"] if isinstance(i, dict) else i for i in report[key]]
        assert sorted(found) == sorted(paths), key
    assert report["errors"] == report["unstable"] == report["held_back"] == []
    assert report["unchanged"] == len(files) - lost
    expected = tree(src)
    for record in want["diverged"]:  # sealed: the destination keeps what it sealed
        expected[f"{record}/log.txt"] = (dst / record / "log.txt").read_bytes()
    assert tree(dst) == expected
    assert all((dst / rel).is_dir() for rel in want["created_dirs"])
    assert temps(dst) == []
    again = run_pass(src, dst, "none", "--delete")["report"]
    assert again["copied"] == again["deleted"] == again["created_dirs"] == []
    assert again["unchanged"] == len(expected) - len(want["diverged"])
    assert sorted(i["path"] for i in again["skipped"]) == sorted(want["skipped"])


DEEP = "deep/a/b/c/d"  # four directories of directories, then one with a file
# Per case: the directories of a session in the verifier's share that the parent lists
# itself. A directory of directories (`trials`, the deep chain) has no cached group to
# be named by, so it is listed even when clean; its clean subdirectories are adopted.
PARENT_LISTS = {"rewritten": 3 + 4, "deep": 6 + 1, "vanished": 2 + 4}


@pytest.mark.parametrize("case", sorted(PARENT_LISTS))
def test_a_session_with_one_change_is_walked_only_down_to_it(tmp_path: Path, case: str) -> None:
    """The verifier vouches for the clean directories of a session that is not clean:
    the parent walks from the top down to the change, not the whole session."""
    src, dst = tmp_path / "src", tmp_path / "dst"
    files = make_source(src)
    for s in range(SESSIONS):
        write(src / f"s{s}/{DEEP}/f.txt", b"deep %d\n" % s)
        files.append(f"s{s}/{DEEP}/f.txt")
    settle()
    assert run_pass(src, dst)["forks"] == 0
    changed, gone = [], []
    for s in range(SESSIONS):
        if case == "vanished":  # the in-flight trial, directory and all
            shutil.rmtree(src / f"s{s}/trials/{TRIALS}")
            gone += [f"s{s}/trials/{TRIALS}/log.txt", f"s{s}/trials/{TRIALS}/progress.json"]
        else:
            rel = f"s{s}/trials/{TRIALS}/log.txt" if case == "rewritten" else f"s{s}/{DEEP}/f.txt"
            write(src / rel, b"rewritten %d\n" % s)
            changed.append(rel)
    settle()
    # Both walks start together, or under load the parent may take every session before
    # the child (forked, but not yet run) takes one.
    proc, _ = start_waiting_pass(tmp_path, src, dst, "--delete")
    (tmp_path / "child.pid.go").touch()
    out, err = proc.communicate(timeout=90)
    assert proc.returncode == 0 and err == b"", err.decode()
    result = orjson.loads(out)
    assert result["forks"] == 1
    # Each session is one the parent took (it listed every directory) or one of the
    # child's, of which it listed only the directories down to the change.
    whole = TRIALS + 2 + 5 - (case == "vanished")
    listed = [
        sum(rel.split("/")[0] == f"s{s}" for rel in result["listed"]) for s in range(SESSIONS)
    ]
    assert set(listed) <= {whole, PARENT_LISTS[case]}, listed
    assert listed.count(PARENT_LISTS[case]) >= 1, listed  # the child took the last one
    report = result["report"]
    assert sorted(report["copied"]) == sorted(changed)
    assert sorted(report["deleted"]) == sorted(gone)
    assert report["unchanged"] == len(files) - len(changed) - len(gone)
    for key in ("unstable", "held_back", "skipped", "errors", "diverged", "created_dirs"):
        assert report[key] == [], key
    assert tree(dst) == tree(src) and temps(dst) == []
    # The cache it wrote holds every adopted directory's group: a pass in one process
    # (one CPU: no fork) finds every file unchanged by it and rewrites nothing.
    cache = (dst / CACHE_NAME).read_bytes()
    again = run_pass(src, dst, "one-cpu", "--delete")
    assert again["forks"] == 0
    assert again["report"]["unchanged"] == len(files) - len(gone)
    assert again["report"]["copied"] == again["report"]["deleted"] == []
    assert (dst / CACHE_NAME).read_bytes() == cache


def test_names_with_secrets_in_the_verifiers_share(tmp_path: Path) -> None:
    secret = "hunter2-very-secret"
    src, dst = tmp_path / "src", tmp_path / "dst"
    files = make_source(src)
    for s in range(SESSIONS):
        write(src / f"s{s}" / f"key-{secret}" / "a.txt", b"token=" + secret.encode())
    settle()
    assert run_pass(src, dst, "none", "--secret", secret)["forks"] == 0
    result = run_pass(src, dst, "none", "--secret", secret)
    assert result["forks"] == 1
    assert result["report"]["unchanged"] == len(files) + SESSIONS
    assert result["report"]["copied"] == []
    assert secret.encode() not in orjson.dumps(result)
    for path, data in tree(dst).items():
        assert secret not in path and secret.encode() not in data


@pytest.mark.parametrize("fault", ["exit", "raise", "bad-index", "no-fork", "reaped-elsewhere"])
def test_a_verifier_that_fails_costs_only_time(tmp_path: Path, fault: str) -> None:
    src, dst, files = first_copy(tmp_path)
    write(src / "s5/trials/130/log.txt", b"changed\n")
    write(src / "s0/trials/130/log.txt", b"changed too\n")
    settle()
    result = run_pass(src, dst, fault)
    assert result["forks"] == (0 if fault == "no-fork" else 1)
    if fault != "reaped-elsewhere":  # no verdict from the child: the parent walked it all
        assert result["entered"] == SESSIONS * (TRIALS + 2) + 1
    # (Reaped by the kernel, the child's verdicts in the pipe are still its own.)
    report = result["report"]
    assert sorted(report["copied"]) == ["s0/trials/130/log.txt", "s5/trials/130/log.txt"]
    assert report["unchanged"] == len(files) - 2
    assert report["errors"] == []
    assert tree(dst) == tree(src)


def start_waiting_pass(
    tmp_path: Path, src: Path, dst: Path, *options: str
) -> tuple[subprocess.Popen[bytes], int]:
    """A pass whose verifier has been forked and waits for `.go`; (the pass, the child's pid)."""
    pid_file = tmp_path / "child.pid"
    proc = subprocess.Popen(
        [sys.executable, "-c", RUNNER, str(src), str(dst), f"wait:{pid_file}", *options],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=cli_runner.environ(),
    )
    cli_runner.wait_for(pid_file.exists, "the verifier's pid file")
    return proc, int(pid_file.read_text())


def test_a_verifier_killed_from_outside_costs_only_time(tmp_path: Path) -> None:
    src, dst, files = first_copy(tmp_path)
    write(src / "s3/trials/130/log.txt", b"changed\n")
    settle()
    proc, child = start_waiting_pass(tmp_path, src, dst)
    os.kill(child, signal.SIGKILL)
    (tmp_path / "child.pid.go").touch()  # the parent goes on only now: the child is dead
    out, err = proc.communicate(timeout=90)
    assert proc.returncode == 0, err.decode()
    result = orjson.loads(out)
    assert result["forks"] == 1
    assert result["entered"] == SESSIONS * (TRIALS + 2) + 1
    assert result["report"]["copied"] == ["s3/trials/130/log.txt"]
    assert result["report"]["unchanged"] == len(files) - 1
    assert tree(dst) == tree(src)


def _running(pid: int) -> bool:
    """Whether `pid` runs (a zombie nobody reaped has finished)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()[0]
    except (FileNotFoundError, ProcessLookupError):
        return False
    return state != "Z"


@pytest.mark.skipif(sys.platform != "linux", reason="the child dies with its parent on Linux")
def test_a_killed_pass_leaves_no_verifier_behind(tmp_path: Path) -> None:
    """Its output ends with the parent, and the child dies with it (it would wait 30 s)."""
    src, dst, files = first_copy(tmp_path)
    proc, child = start_waiting_pass(tmp_path, src, dst)
    proc.kill()
    proc.communicate(timeout=20)  # EOF at once: the child, which holds them too, is gone
    cli_runner.wait_for(lambda: not _running(child), "the verifier to die with it", timeout=20)
    settle()
    report = run_pass(src, dst)["report"]
    assert report["copied"] == [] and report["unchanged"] == len(files)
    assert temps(dst) == []


@pytest.mark.parametrize("case", ["thread", "one-cpu", "ignore-chld", "dry-run", "small"])
def test_no_verifier_where_a_fork_is_unsafe_or_does_not_pay(tmp_path: Path, case: str) -> None:
    src, dst = tmp_path / "src", tmp_path / "dst"
    if case == "small":
        files = [f"d{i}/f.txt" for i in range(split.MIN_GROUPS - 1)]
        for rel in files:
            write(src / rel, b"x")
    else:
        files = make_source(src)
    settle()
    run_pass(src, dst)
    options = ["--dry-run"] if case == "dry-run" else []
    fault = case if case in ("thread", "one-cpu", "ignore-chld") else "none"
    result = run_pass(src, dst, fault, *options)
    assert result["forks"] == 0
    assert result["report"]["unchanged"] == len(files)


def test_plan_splits_where_the_cached_directories_divide() -> None:
    def groups(*rels: str) -> dict[str, str]:
        return dict.fromkeys(rels, "{}")

    flat = groups(*(f"s{i}/t{j}" for i in range(4) for j in range(5)))
    assert split.plan(flat, 10) == (
        "",
        {f"s{i}": [f"s{i}/t{j}" for j in range(5)] for i in range(4)},
    )
    assert split.plan(flat, 21) is None  # too few to pay for a fork
    one_above = groups("", "runs", *(f"runs/s{i}/t{j}" for i in range(4) for j in range(5)))
    found = split.plan(one_above, 10)
    assert found is not None
    # With the cached directories below each subdirectory: what `start` shares out.
    assert found == ("runs", {f"s{i}": [f"runs/s{i}/t{j}" for j in range(5)] for i in range(4)})
    # A chain with nothing to share out at any level.
    chain = groups(*("/".join("d" * (k + 1)) for k in range(40)))
    assert split.plan(chain, 10) is None
    # A heavy subdirectory that is not dominant is split beside the others.
    lopsided = groups(*(f"a/{j}" for j in range(70)), *(f"b/{j}" for j in range(30)))
    found = split.plan(lopsided, 10)
    assert found is not None and found[0] == "" and sorted(found[1]) == ["a", "b"]


def test_no_fork_once_the_fsync_pool_runs(tmp_path: Path) -> None:
    """A round of durable commits before the split directory starts the pool's threads:
    no fork then. A commit still waiting for its round has started none: the fork is
    made, and the commit lands all the same."""
    src, dst, files = first_copy(tmp_path)
    durable = run_pass(src, dst, "none", "--durable")
    assert durable["forks"] == 1 and durable["report"]["unchanged"] == len(files)
    write(src / "top.txt", b"a file at the root, committed before the walk goes down")
    settle()
    result = run_pass(src, dst, "none", "--durable")
    assert result["forks"] == 1
    assert result["report"]["copied"] == ["top.txt"]
    assert result["report"]["unchanged"] == len(files)
    assert (dst / "top.txt").read_bytes() == (src / "top.txt").read_bytes()
    top = [f"top{i}.txt" for i in range(local_tree_sync.MAX_PENDING)]  # one whole round
    for name in top:
        write(src / name, name.encode())
    settle()
    result = run_pass(src, dst, "none", "--durable")
    assert result["forks"] == 0
    assert sorted(result["report"]["copied"]) == sorted(top)
    assert result["report"]["unchanged"] == len(files) + 1
    assert tree(dst) == tree(src) and not temps(dst)

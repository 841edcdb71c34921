"""Lineage under attack: what an agent plants in a previous session or in `previous/`.

Every fault is real (a FIFO, a bound socket, a symlink to a file outside the
store) and every run goes through the CLI as a user would, with a timeout
that only guards against a hang. The laws: `new --previous` never waits on
a FIFO, never follows a symlink, copies nothing that is not a regular file
of the previous session and says so once per entry; `inspect` shows a
planted `previous/<id>` as not copied and never reads what it points to.
"""

from __future__ import annotations

import os
import re
import shutil
import socket
import stat
import subprocess
import sys
import time
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import orjson
import pytest
from inspect_helpers import dead_pid, metrics, run_cli, set_manifest

from sessionstore._fs.tree import exchange_at
from sessionstore.errors import CorruptFile, LineageWarning
from sessionstore.store.lineage import include_previous
from sessionstore.store.session import Session, Store

SECRET = "OUTSIDE-SECRET"
FIFO = "is a FIFO, not a regular file"
LINK_FILE = "is a symlink (never followed), not a regular file"
LINK_DIR = "is a symlink (never followed), not a directory"


def new(root: Path, *previous: str) -> subprocess.CompletedProcess[str]:
    args = [a for p in previous for a in ("--previous", p)]
    return run_cli("new", "--store", str(root), "--id", "new", *args)


def finished(store: Store, session_id: str) -> Session:
    """A finished session: trial 1 completed with a config and a patch, attempt 1 verified."""
    session = store.create(id=session_id, constraints={"max_ttft_ms": 200}, pid=None)
    writer = session.trials.begin()
    writer.write_text("task.yml", "files: [patches/fix.diff]\n")
    writer.write_text("patches/fix.diff", "+x\n")
    writer.complete(metrics(100.0))
    attempt = session.service.begin()
    attempt.write_text("service.yml", "attempt: 1\n")
    attempt.complete({"trial": 1, "status": "verified"})
    session.finish({"best_trial": 1})
    return session


def files_under(path: Path) -> dict[str, bytes]:
    """Every entry below `path` (none may be anything but a directory or a regular file)."""
    found: dict[str, bytes] = {}
    for p in sorted(path.rglob("*")):
        mode = p.lstat().st_mode
        assert stat.S_ISDIR(mode) or stat.S_ISREG(mode), f"{p} is neither file nor directory"
        if stat.S_ISREG(mode):
            found[p.relative_to(path).as_posix()] = p.read_bytes()
    return found


def outside_tree(root: Path) -> list[Path]:
    """A tree outside the store that looks like records, holding the secret everywhere."""
    marker = orjson.dumps({"failed": False, "token": SECRET})
    known: set[Path] = set()
    for rel, data in {
        "creds.json": marker,
        "patchdir/steal.diff": SECRET.encode(),
        "rec/trial.json": marker,
        "rec/task.yml": SECRET.encode(),
        "trials/1/trial.json": marker,
        "trials/2/trial.json": marker,
        "copy/trials/1/trial.json": marker,
        "copy/trials/2/trial.json": marker,
        "copy/trials/3/trial.json": marker,
        "prev/a/trials/1/trial.json": marker,
    }.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_bytes(data)
        known.update([root / rel, *(root / rel).parents])
    # Named, never listed: a listing now would move the directories' atimes too early.
    return sorted(p for p in known if root in (p, *p.parents))


def snapshot(paths: list[Path]) -> dict[Path, tuple[int, ...]]:
    """lstat of each known path, atime included, taken without listing or reading any of them.

    The tree was just written, so each atime is not after its mtime: on a
    relatime (or strictatime) mount a single read or listing moves it.
    """
    return {
        p: (st.st_ino, st.st_mode, st.st_size, st.st_mtime_ns, st.st_atime_ns)
        for p in paths
        for st in [os.lstat(p)]
    }


@contextmanager
def socket_at(path: Path) -> Iterator[None]:
    """A Unix socket bound at `path` (relative to its directory: socket paths must be short)."""
    cwd = os.getcwd()
    sock = socket.socket(socket.AF_UNIX)
    try:
        os.chdir(path.parent)
        sock.bind(path.name)
    finally:
        os.chdir(cwd)
    try:
        yield
    finally:
        sock.close()


def test_fifos_and_a_socket_in_a_previous_session_are_warned_and_never_waited_on(
    tmp_path: Path,
) -> None:
    store = Store(tmp_path / "s")
    a = finished(store, "a")
    record = a.trials.path / "1"
    (record / "task.yml").unlink()
    os.mkfifo(record / "task.yml")  # a trial file lineage copies
    os.mkfifo(record / "patches" / "pipe.diff")
    os.mkfifo(record / "agent.log")  # not a file lineage copies: not opened, not warned
    (a.path / "constraints.json").unlink()
    os.mkfifo(a.path / "constraints.json")
    second = a.trials.begin()
    second.write_text("task.yml", "second\n")
    os.mkfifo(second.path / "trial.json")  # a marker
    (a.service.path / "1" / "verification.json").unlink()
    with socket_at(a.service.path / "1" / "verification.json"):
        result = new(store.root, "a")
    assert (result.returncode, result.stdout) == (0, "new\n"), result.stderr
    assert result.stderr.splitlines() == [
        f"warning: previous session a: {rel} {why}; not copied"
        for rel, why in [
            ("constraints.json", FIFO),
            ("trials/1/patches/pipe.diff", FIFO),
            ("trials/1/task.yml", FIFO),
            ("trials/2/trial.json", FIFO),
            ("service/1/verification.json", "is a socket, not a regular file"),
        ]
    ]
    copy = files_under(store.root / "new" / "previous" / "a")
    assert sorted(copy) == [
        "report.json",
        "service/1/service.yml",
        "trials/1/patches/fix.diff",
        "trials/1/trial.json",
        "trials/2/task.yml",
    ]
    assert copy["trials/2/task.yml"] == b"second\n"


def test_symlinks_to_outside_files_and_directories_are_never_followed(tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    known = outside_tree(outside)
    store = Store(tmp_path / "s")
    a = finished(store, "a")
    record = a.trials.path / "1"
    (record / "creds.json").symlink_to(outside / "creds.json")
    (record / "task.yml").unlink()
    (record / "task.yml").symlink_to(outside / "rec" / "task.yml")
    shutil.rmtree(record / "patches")
    (record / "patches").symlink_to(outside / "patchdir", target_is_directory=True)
    (a.trials.path / "2").symlink_to(outside / "rec", target_is_directory=True)
    (a.path / "report.json").rename(a.path / "report.real")
    (a.path / "report.json").symlink_to(a.path / "report.real")  # even inside the session
    set_manifest(a, status="done")  # the report is unreadable now; the manifest says it ended
    before = snapshot(known)
    result = new(store.root, "a")
    assert snapshot(known) == before
    assert (result.returncode, result.stdout) == (0, "new\n"), result.stderr
    assert result.stderr.splitlines() == [
        f"warning: previous session a: {rel} {why}; not copied"
        for rel, why in [
            ("report.json", LINK_FILE),
            ("trials/1/creds.json", LINK_FILE),
            ("trials/1/patches", LINK_DIR),
            ("trials/1/task.yml", LINK_FILE),
            ("trials/2", LINK_DIR),
        ]
    ]
    copy = files_under(store.root / "new" / "previous" / "a")
    assert sorted(copy) == [
        "constraints.json",
        "service/1/service.yml",
        "service/1/verification.json",
        "trials/1/trial.json",
    ]
    assert not any(SECRET.encode() in data for data in files_under(store.root / "new").values())
    assert SECRET not in result.stdout + result.stderr


def test_a_symlinked_trials_directory_is_skipped_and_its_target_untouched(
    tmp_path: Path,
) -> None:
    outside = tmp_path / "outside"
    known = outside_tree(outside)
    store = Store(tmp_path / "s")
    for session_id in ("a", "b"):
        session = finished(store, session_id)
        shutil.rmtree(session.trials.path)
        session.trials.path.symlink_to(outside / "trials", target_is_directory=True)
    shutil.rmtree(store.root / "b" / "service")  # b's symlinked trials/ were its only records
    before = snapshot(known)
    result = new(store.root, "a", "b")
    assert snapshot(known) == before
    assert (result.returncode, result.stdout) == (0, "new\n"), result.stderr
    assert result.stderr.splitlines() == [
        f"warning: previous session a: trials {LINK_DIR}; not copied",
        f"warning: previous session b: trials {LINK_DIR}; not copied",
        "warning: previous session b has no records; nothing copied from it",
    ]
    previous = store.root / "new" / "previous"
    assert os.listdir(previous) == ["a"]
    assert sorted(files_under(previous / "a")) == [
        "constraints.json",
        "report.json",
        "service/1/service.yml",
        "service/1/verification.json",
    ]


def inspect_new(root: Path) -> tuple[dict[str, object], str]:
    as_json = run_cli("inspect", "new", "--json", "--store", str(root))
    human = run_cli("inspect", "new", "--store", str(root))
    assert (as_json.returncode, human.returncode) == (0, 0), as_json.stderr + human.stderr
    for result in (as_json, human):
        assert SECRET not in result.stdout + result.stderr
    lineage = orjson.loads(as_json.stdout)["lineage"]
    assert isinstance(lineage, list) and len(lineage) == 1
    return lineage[0], human.stdout


def test_a_planted_previous_copy_symlink_shows_not_copied_and_is_never_read(
    tmp_path: Path,
) -> None:
    outside = tmp_path / "outside"
    known = outside_tree(outside)
    store = Store(tmp_path / "s")
    finished(store, "a")
    assert new(store.root, "a").returncode == 0
    previous = store.root / "new" / "previous"
    shutil.rmtree(previous / "a")
    (previous / "a").symlink_to(outside / "copy", target_is_directory=True)
    before = snapshot(known)
    item, human = inspect_new(store.root)
    assert snapshot(known) == before
    assert item == {
        "id": "a",
        "path": str(previous / "a"),
        "copied": False,
        "trials": None,
        "service": None,
        "problem": f"previous/a {LINK_DIR}",
    }
    assert "previous: a (not copied: previous/a is a symlink" in human

    (previous / "a").unlink()
    previous.rename(store.root / "new" / "previous.real")
    previous.symlink_to(outside / "prev", target_is_directory=True)  # `previous` itself
    known = sorted([*known, outside / "prev"])
    before = snapshot(known)
    item, human = inspect_new(store.root)
    assert snapshot(known) == before
    assert (item["copied"], item["trials"], item["problem"]) == (
        False,
        None,
        f"previous {LINK_DIR}",
    )
    assert f"previous: a (not copied: previous {LINK_DIR}" in human


def test_include_previous_replaces_a_planted_copy_symlink_without_touching_its_target(
    tmp_path: Path,
) -> None:
    outside = tmp_path / "outside"
    known = outside_tree(outside)
    store = Store(tmp_path / "s")
    finished(store, "a")
    session = store.create(id="new", previous=["a"], pid=None)
    shutil.rmtree(session.path / "previous" / "a")
    (session.path / "previous" / "a").symlink_to(outside / "copy", target_is_directory=True)
    before = snapshot(known)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert include_previous(store, session) == [session.path / "previous" / "a"]
    assert snapshot(known) == before
    copy = session.path / "previous" / "a"
    assert not copy.is_symlink()
    assert sorted(files_under(copy)) == [
        "constraints.json",
        "report.json",
        "service/1/service.yml",
        "service/1/verification.json",
        "trials/1/patches/fix.diff",
        "trials/1/task.yml",
        "trials/1/trial.json",
    ]
    shutil.rmtree(session.path / "previous")
    (session.path / "previous").symlink_to(outside / "prev", target_is_directory=True)
    known = sorted([*known, outside / "prev"])
    before = snapshot(known)
    with pytest.raises(CorruptFile, match=re.escape(f"/new/previous: {LINK_DIR}; remove it")):
        include_previous(store, session)
    assert snapshot(known) == before


def test_a_pinned_id_that_is_a_path_is_never_opened(tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    known = outside_tree(outside)
    store = Store(tmp_path / "s")
    finished(store, "a")
    session = store.create(id="new", previous=["a"], pid=None)
    escape_id = os.path.relpath(outside / "copy", session.path / "previous")
    set_manifest(session, previous=[escape_id])
    before = snapshot(known)
    item, _ = inspect_new(store.root)
    assert (item["copied"], item["trials"], item["problem"]) == (
        False,
        None,
        "not a valid session id",
    )
    with pytest.warns(LineageWarning, match="is not a valid id; skipped"):
        assert include_previous(store, Session.open(session.path)) == []
    assert snapshot(known) == before


def test_a_previous_session_whose_status_is_unknown_is_refused(tmp_path: Path) -> None:
    store = Store(tmp_path)
    odd = store.create(id="odd", pid=None)
    writer = odd.trials.begin()
    writer.write_text("task.yml", "half-written\n")
    writer.complete(metrics(1.0))
    set_manifest(odd, pid=2**31)  # status unknown: the writer's liveness cannot be told
    result = new(tmp_path, "odd")
    assert (result.returncode, result.stdout) == (1, "")
    assert result.stderr == (
        "Error: previous session 'odd' has status unknown (session.json: pid must be an "
        "integer from 1 to 2147483647 or null, not 2147483648), so whether it still runs cannot "
        "be told; fix its session.json, or give it a completed report.json (Session.finish), "
        "then try again\n"
    )
    assert sorted(os.listdir(tmp_path)) == ["odd"]
    Session.open(odd.path).finish({"best_trial": 1})  # a completed report decides: done
    result = new(tmp_path, "odd")
    assert (result.returncode, result.stdout, result.stderr) == (0, "new\n", "")
    assert (tmp_path / "new" / "previous" / "odd" / "trials" / "1" / "task.yml").is_file()


@pytest.mark.parametrize(
    ("content", "reason"),
    [
        pytest.param(b'{"format": 1, "id": "od', "invalid JSON: unexpected end", id="torn"),
        pytest.param(b"[1]", "not a JSON object (a JSON list)", id="list"),
        pytest.param(None, "missing", id="missing"),
    ],
)
def test_a_previous_session_with_no_manifest_to_read_is_not_called_running(
    tmp_path: Path, content: bytes | None, reason: str
) -> None:
    # It reads as running (no report, no manifest status), but "finish it" would be the
    # wrong advice: what its manifest said, a writer or an end, cannot be told.
    odd = Store(tmp_path).create(id="odd", pid=None)
    odd.trials.begin().complete(metrics(1.0))
    (odd.path / "session.json").unlink()
    if content is not None:
        (odd.path / "session.json").write_bytes(content)
    result = new(tmp_path, "odd")
    assert (result.returncode, result.stdout) == (1, "")
    assert result.stderr.startswith(
        f"Error: previous session 'odd' has status unknown (session.json: {reason}"
    )
    assert "so whether it still runs cannot be told" in result.stderr
    assert sorted(os.listdir(tmp_path)) == ["odd"]


def test_a_patches_tree_deeper_than_the_walk_goes_is_warned_not_a_crash(
    tmp_path: Path,
) -> None:
    store = Store(tmp_path)
    a = finished(store, "a")
    deep = a.trials.path / "1" / "patches"
    for _ in range(300):
        deep = deep / "d"
    deep.mkdir(parents=True)
    (deep / "bottom.diff").write_text("+deep\n")
    result = new(tmp_path, "a")
    assert (result.returncode, result.stdout) == (0, "new\n"), result.stderr
    (line,) = result.stderr.splitlines()
    assert line.startswith("warning: previous session a: trials/1/patches/d/d/")
    assert line.endswith("/d is deeper than 256 levels; not copied")
    assert line.count("/d") == 256
    copy = tmp_path / "new" / "previous" / "a" / "trials" / "1"
    assert (copy / "patches" / "fix.diff").read_text() == "+x\n"


def test_fifos_where_directories_belong_and_hostile_names_are_one_escaped_line_each(
    tmp_path: Path,
) -> None:
    store = Store(tmp_path)
    a = finished(store, "a")
    record = a.trials.path / "1"
    shutil.rmtree(record / "patches")
    os.mkfifo(record / "patches")
    os.mkfifo(a.trials.path / "2")  # a record number that is a FIFO
    (record / "evil\n\x1b]0;pwned\a.yml").symlink_to("/etc/hostname")
    b = finished(store, "b")
    shutil.rmtree(b.trials.path)
    os.mkfifo(b.trials.path)
    shutil.rmtree(b.service.path)
    result = new(tmp_path, "a", "b")
    assert (result.returncode, result.stdout) == (0, "new\n"), result.stderr
    assert result.stderr.splitlines() == [
        f"warning: previous session a: trials/1/evil\\n\\x1b]0;pwned\\x07.yml {LINK_FILE}; "
        "not copied",
        "warning: previous session a: trials/1/patches is a FIFO, not a directory; not copied",
        "warning: previous session a: trials/2 is a FIFO, not a directory; not copied",
        "warning: previous session b: trials is a FIFO, not a directory; not copied",
        "warning: previous session b has no records; nothing copied from it",
    ]
    assert sorted(files_under(tmp_path / "new" / "previous" / "a")) == [
        "constraints.json",
        "report.json",
        "service/1/service.yml",
        "service/1/verification.json",
        "trials/1/task.yml",
        "trials/1/trial.json",
    ]


_SWAPPER = """
import os, sys
record, outside = sys.argv[1], sys.argv[2]
trials = os.path.dirname(record)
for i in range(1_000_000):
    if os.path.exists(os.path.join(trials, "stop")):
        break
    os.mkfifo(os.path.join(record, "t.fifo"))
    os.rename(os.path.join(record, "t.fifo"), os.path.join(record, "task.yml"))
    with open(os.path.join(record, "t.reg"), "w") as f:
        f.write("real\\n")
    os.rename(os.path.join(record, "t.reg"), os.path.join(record, "task.yml"))
    os.rename(os.path.join(trials, "3"), os.path.join(trials, "3.away"))
    os.symlink(outside, os.path.join(trials, "3"))
    os.unlink(os.path.join(trials, "3"))
    os.rename(os.path.join(trials, "3.away"), os.path.join(trials, "3"))
    if i == 0:
        open(os.path.join(trials, "started"), "w").close()
"""


def test_entries_swapped_for_fifos_and_symlinks_during_the_copy_never_hang_or_leak(
    tmp_path: Path,
) -> None:
    outside = tmp_path / "outside"
    known = outside_tree(outside)
    store = Store(tmp_path / "s")
    a = finished(store, "a")
    for _ in range(2):
        writer = a.trials.begin()
        writer.write_text("task.yml", "real\n")
        writer.complete(metrics(1.0))
    before = snapshot(known)
    record = a.trials.path / "1"
    swapper = subprocess.Popen([sys.executable, "-c", _SWAPPER, str(record), str(outside / "rec")])
    try:
        while not (a.trials.path / "started").exists():
            assert swapper.poll() is None, "the swapper died"
            time.sleep(0.01)
        ids = [f"n{i}" for i in range(6)]
        results = [
            run_cli("new", "--store", str(store.root), "--id", i, "--previous", "a") for i in ids
        ]
    finally:
        (a.trials.path / "stop").touch()
        swapper.wait(timeout=60)
    assert swapper.returncode == 0
    allowed = {
        f"warning: previous session a: trials/1/task.yml {FIFO}; not copied",
        f"warning: previous session a: trials/3 {LINK_DIR}; not copied",
    }
    for result in results:
        assert result.returncode == 0, result.stderr
        assert set(result.stderr.splitlines()) <= allowed, result.stderr
    for session_id in ids:
        copy = files_under(
            store.root / session_id / "previous" / "a"
        )  # regular files and directories only
        assert copy.get("trials/1/task.yml", b"real\n") == b"real\n"
        assert not any(SECRET.encode() in data for data in copy.values())
    assert snapshot(known) == before


_INCLUDE = (
    "import sys\n"
    "from sessionstore.store.lineage import include_previous\n"
    "from sessionstore.store.session import Session, Store\n"
    "include_previous(Store(sys.argv[1]), Session.open(sys.argv[2]))\n"
)


@pytest.mark.parametrize("call", ["renameat", "renameat2"])
@pytest.mark.parametrize("when", [1, 2])
def test_a_copy_replaced_by_a_killed_include_previous_is_never_absent(
    tmp_path: Path, call: str, when: int
) -> None:
    # strace SIGKILLs the copier at its `when`-th call of `call`: moving the old copy
    # aside, or swapping the new one in. Whichever, a whole copy stands at the name.
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    fd = os.open(tmp_path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        if not exchange_at(fd, "a", "b"):
            pytest.skip("this file system cannot swap two entries in one step")
    finally:
        os.close(fd)
    store = Store(tmp_path / "store")
    finished(store, "old")
    session = store.create(id="new", pid=None, previous=["old"])
    inject = f"inject={call}:signal=SIGKILL:when={when}"
    cmd = ["strace", "-f", "-qq", "-o", os.devnull, "-e", inject, sys.executable, "-c", _INCLUDE]
    subprocess.run([*cmd, str(store.root), str(session.path)], capture_output=True, timeout=60)
    copy = session.path / "previous" / "old"
    assert (copy / "trials" / "1" / "patches" / "fix.diff").read_bytes() == b"+x\n"
    doctor = run_cli("doctor", "--store", str(store.root), "new", "--repair")
    assert doctor.returncode == 0, doctor.stdout


def test_doctor_tells_a_pinned_copy_missing_while_its_session_has_records(
    tmp_path: Path,
) -> None:
    # What a copy killed between moving the old copy aside and renaming the new one in
    # left (where the swap cannot be made in one step): the name absent, the copy a temp.
    store = Store(tmp_path)
    finished(store, "old")
    store.create(id="empty", pid=None).finish({})  # no records: no copy, none missing
    with pytest.warns(LineageWarning, match="empty has no records"):
        session = store.create(id="new", pid=None, previous=["old", "empty"])
    previous = session.path / "previous"
    pid, _ = dead_pid()
    (previous / "old").rename(previous / f".sstmp-{pid}-0123456789abcdef")
    doctor = run_cli("doctor", "--store", str(tmp_path), "new", "--repair")
    assert doctor.returncode == 1
    assert (
        f"{previous / 'old'}: lineage: missing, while previous session old has records to "
        "copy (a copy cut short, or removed); `lineage.include_previous` copies it again\n"
    ) in doctor.stdout
    with pytest.warns(LineageWarning, match="empty has no records"):
        include_previous(store, Session.open(session.path))
    assert run_cli("doctor", "--store", str(tmp_path), "new").returncode == 0


def test_doctor_repair_keeps_a_temp_in_previous_while_a_pinned_copy_is_missing(
    tmp_path: Path,
) -> None:
    # The old copy moved aside by a replace cut short, its session removed since: that
    # temp is the only copy left, so it is no provable garbage, whoever wrote it.
    store = Store(tmp_path)
    finished(store, "old")
    session = store.create(id="new", pid=None, previous=["old"])
    previous = session.path / "previous"
    pid, _ = dead_pid()
    temp = previous / f".sstmp-{pid}-0123456789abcdef"
    (previous / "old").rename(temp)
    shutil.rmtree(tmp_path / "old")
    doctor = run_cli("doctor", "--store", str(tmp_path), "new", "--repair")
    assert (doctor.returncode, doctor.stdout) == (
        1,
        f"{temp}: temp: no process has its pid {pid}, but it may hold the copy a pinned id "
        "lacks; kept (not provably garbage)\n",
    )
    assert (temp / "trials" / "1" / "patches" / "fix.diff").read_bytes() == b"+x\n"
    temp.rename(previous / "old")  # put back by hand: whole again
    assert run_cli("doctor", "--store", str(tmp_path), "new", "--repair").returncode == 0

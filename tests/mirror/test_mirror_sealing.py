"""Records are written once; a session's own files are the store's; --delete removes only ours.

Through the CLI (a real process, DST given as a session id in a real store),
the Python API, and a hypothesis state machine whose law is that a sealed
record's destination bytes never change and the store's files are never touched.
"""

from __future__ import annotations

import itertools
import shutil
import subprocess
import sys
from pathlib import Path

import hypothesis.strategies as st
import orjson
import pytest
from hypothesis import settings
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule, run_state_machine_as_test
from mirror_helpers import (
    DaemonProcess,
    mirror_cli,
    run,
    settle,
    snapshot,
    temps,
    tree,
    write,
)

from sessionstore.mirror.mirror import CACHE_NAME, Mirror
from sessionstore.store.session import Store

pytestmark = pytest.mark.timeout(120)

OWNED = "the store owns it (the destination is a session)"
DIVERGED = "the source changed after the record was sealed; not applied"
NO_CACHE = (
    "the change cache is missing or untrusted (torn, another user's, or made with "
    "other secrets), so no file is known to be this mirror's; nothing was deleted"
)


@pytest.fixture
def store(tmp_path: Path) -> Store:
    return Store(tmp_path / "store")


def agent_workspace(ws: Path) -> None:
    """What an agent writes when told to write "a session": its own manifest and all."""
    write(ws / "session.json", b'{"id": "forged", "status": "done"}')
    write(ws / "constraints.json", b'{"forged": true}')
    write(ws / "report.json", b'{"best_trial": 99}')
    write(ws / "trials" / "1" / "log.txt", b"trial one\n")
    write(ws / "trials" / "1" / "trial.json", b'{"failed": false}')
    write(ws / "trials" / "2" / "log.txt", b"in flight\n")
    settle()


def test_the_readme_flow_leaves_the_store_files_alone_and_seals_records(
    tmp_path: Path, store: Store
) -> None:
    session = store.create(name="tune", pid=None)
    assert session.id is not None
    own = {n: (session.path / n).read_bytes() for n in ("session.json", "constraints.json")}
    ws = tmp_path / "ws"
    agent_workspace(ws)
    proc = mirror_cli(ws, session.id, "--store", store.root, "--once", "--json")
    assert proc.returncode == 0, proc.stderr
    report = orjson.loads(proc.stdout)
    assert sorted(report["skipped"], key=lambda i: i["path"]) == [
        {"path": name, "reason": OWNED}
        for name in ("constraints.json", "report.json", "session.json")
    ]
    assert {n: (session.path / n).read_bytes() for n in own} == own
    assert not (session.path / "report.json").exists()
    assert (session.path / "trials" / "1" / "trial.json").read_bytes() == b'{"failed": false}'
    assert Store(store.root).open(session.id).manifest == session.manifest

    # The agent rewrites the completed trial: reported once per record, never applied.
    write(ws / "trials" / "1" / "trial.json", b'{"failed": true}')
    write(ws / "trials" / "1" / "log.txt", b"rewritten\n")
    settle()
    proc = mirror_cli(ws, session.id, "--store", store.root, "--once", "--json")
    report = orjson.loads(proc.stdout)
    assert report["diverged"] == [
        {
            "path": "trials/1",
            "reason": DIVERGED,
            "files": ["trials/1/log.txt", "trials/1/trial.json"],
        }
    ]
    assert "  diverged: trials/1: " + DIVERGED + " (log.txt, trial.json)" in proc.stderr
    assert (session.path / "trials" / "1" / "trial.json").read_bytes() == b'{"failed": false}'

    # An emptied workspace mirrored with --delete removes nothing of the session.
    before = snapshot(session.path)
    shutil.rmtree(ws)
    ws.mkdir()
    proc = mirror_cli(ws, session.id, "--store", store.root, "--once", "--delete", "--json")
    report = orjson.loads(proc.stdout)
    assert proc.returncode == 0 and report["deleted"] == ["trials/2/log.txt"]
    after = snapshot(session.path)
    gone = {k for k in before if k not in after}
    assert gone == {"trials/2/log.txt", "trials/2"}  # only what the mirror wrote
    unchanged = {k: v for k, v in before.items() if k not in gone and k != CACHE_NAME}
    assert {k: v for k, v in after.items() if k != CACHE_NAME} == unchanged


def test_dst_is_a_path_when_it_names_an_existing_directory(tmp_path: Path, store: Store) -> None:
    ws = tmp_path / "ws"
    write(ws / "a.txt", b"a")
    (tmp_path / "out").mkdir()  # a bare name that is no directory yet: test_mirror_cli.py
    settle()
    proc = mirror_cli(ws, "out", "--store", store.root, "--once", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert (tmp_path / "out" / "a.txt").read_bytes() == b"a"


def test_delete_removes_only_files_this_mirror_wrote_and_still_holds(src: Path, dst: Path) -> None:
    write(src / "ours.txt", b"ours")
    write(src / "edited.txt", b"ours, then edited in the destination")
    write(src / "d" / "sub" / "x", b"x")
    settle()
    run(src, dst)
    write(dst / "theirs.txt", b"someone else's")
    write(dst / "edited.txt", b"edited in the destination")
    for name in ("ours.txt", "edited.txt"):
        (src / name).unlink()
    shutil.rmtree(src / "d")
    report = run(src, dst, delete=True)
    assert sorted(report.deleted) == ["d/sub/x", "ours.txt"]
    assert report.skipped == [
        {
            "path": "edited.txt",
            "reason": "not deleted: changed in the destination since this mirror wrote it",
        }
    ]
    assert tree(dst) == {
        "theirs.txt": b"someone else's",
        "edited.txt": b"edited in the destination",
    }
    assert not (dst / "d").exists()


@pytest.mark.parametrize("cache", ["missing", "torn"])
def test_delete_is_skipped_without_a_trusted_cache(src: Path, dst: Path, cache: str) -> None:
    write(src / "a.txt", b"a")
    write(src / "gone.txt", b"g")
    settle()
    run(src, dst)
    (src / "gone.txt").unlink()
    if cache == "missing":
        (dst / CACHE_NAME).unlink()
    else:
        (dst / CACHE_NAME).write_bytes(b'{"version": 1, "files": {"gone.txt": [')
    proc = mirror_cli(src, dst, "--once", "--delete", "--json")
    report = orjson.loads(proc.stdout)
    assert report["deleted"] == [] and report["delete_skipped"] == NO_CACHE
    assert f"  delete skipped: {NO_CACHE}" in proc.stderr.splitlines()
    assert (dst / "gone.txt").exists()


def test_a_sealed_record_is_only_compared_by_subset_passes_too(src: Path, dst: Path) -> None:
    write(src / "trials" / "1" / "log.txt", b"one")
    write(src / "trials" / "1" / "trial.json", b"{}")
    settle()
    mirror = Mirror(src, dst, durable=False)
    mirror.run_once()
    write(src / "trials" / "1" / "log.txt", b"two")
    write(src / "trials" / "1" / "extra.txt", b"new")
    settle()
    report = mirror.run_dirs(["trials/1"])
    assert [d["files"] for d in report.diverged] == [["trials/1/extra.txt", "trials/1/log.txt"]]
    assert tree(dst) == {"trials/1/log.txt": b"one", "trials/1/trial.json": b"{}"}


def test_a_record_sealed_by_the_store_is_never_written_by_the_mirror(
    tmp_path: Path, store: Store
) -> None:
    session = store.create(pid=None)
    record = session.trials.begin()
    record.write_bytes("log.txt", b"written by the harness")
    record.complete({"by": "store"})
    before = snapshot(session.path / "trials")
    ws = tmp_path / "ws"
    write(ws / "trials" / "1" / "log.txt", b"the agent's own trial 1")
    write(ws / "trials" / "1" / "trial.json", b'{"by": "agent"}')
    settle()
    proc = mirror_cli(ws, session.path, "--once", "--json", "--delete")
    assert proc.returncode == 0, proc.stderr
    assert [d["path"] for d in orjson.loads(proc.stdout)["diverged"]] == ["trials/1"]
    assert snapshot(session.path / "trials") == before


# -- the law, under random interleavings -----------------------------------------

RECORDS = [1, 2, 3]
FILES = ["log.txt", "sub/patch.diff"]
STORE_FILES = {"session.json": b'{"id": "s", "status": "running"}', "constraints.json": b"{}"}
data = st.sampled_from([b"", b"a", b"bb\r\n", b"\0\xff", b"{}", b"x" * 50])


class SealingMachine(RuleBasedStateMachine):
    """Agent edits and mirror passes; the destination is a session."""

    def __init__(self, root: Path) -> None:
        super().__init__()
        self.src, self.dst = root / "ws", root / "session"
        self.src.mkdir(parents=True)
        for name, content in STORE_FILES.items():
            write(self.dst / name, content)
        self.store_files = snapshot(self.dst)
        self.sealed: dict[int, dict[str, bytes]] = {}
        self.mirrors = {
            d: Mirror(self.src, self.dst, durable=False, delete=d) for d in (False, True)
        }

    def teardown(self) -> None:
        shutil.rmtree(self.src.parent, ignore_errors=True)

    @rule(n=st.sampled_from(RECORDS), name=st.sampled_from(FILES), content=data)
    def agent_writes(self, n: int, name: str, content: bytes) -> None:
        write(self.src / "trials" / str(n) / name, content)

    @rule(n=st.sampled_from(RECORDS), value=st.integers(0, 3))
    def agent_completes_or_rewrites_the_marker(self, n: int, value: int) -> None:
        write(self.src / "trials" / str(n) / "trial.json", b'{"v": %d}' % value)

    @rule(n=st.sampled_from(RECORDS), name=st.sampled_from([*FILES, "trial.json"]))
    def agent_deletes(self, n: int, name: str) -> None:
        (self.src / "trials" / str(n) / name).unlink(missing_ok=True)

    @rule(n=st.sampled_from(RECORDS))
    def agent_deletes_the_record(self, n: int) -> None:
        shutil.rmtree(self.src / "trials" / str(n), ignore_errors=True)

    @rule(name=st.sampled_from(["session.json", "constraints.json", "report.json"]), content=data)
    def agent_writes_a_store_file(self, name: str, content: bytes) -> None:
        write(self.src / name, content)

    @rule(delete=st.booleans())
    def mirror_pass(self, delete: bool) -> None:
        settle()
        report = self.mirrors[delete].run_once()
        assert report.ok, report.errors
        dest = tree(self.dst / "trials")
        for n in RECORDS:
            files = {k: v for k, v in dest.items() if k.startswith(f"{n}/")}
            if n not in self.sealed and f"{n}/trial.json" in files:
                self.sealed[n] = files
        diverged = {d["path"] for d in report.diverged}
        for n, files in self.sealed.items():
            record = self.src / "trials" / str(n)
            if record.is_dir():
                now = {f"{n}/{k}": v for k, v in tree(record).items()}
                assert (f"trials/{n}" in diverged) == (now != files), (n, now, files)

    @invariant()
    def sealed_records_never_change(self) -> None:
        dest = tree(self.dst / "trials")
        for n, files in self.sealed.items():
            assert {k: v for k, v in dest.items() if k.startswith(f"{n}/")} == files

    @invariant()
    def store_files_are_never_touched(self) -> None:
        now = snapshot(self.dst)
        assert {k: now.get(k) for k in STORE_FILES} == {k: self.store_files[k] for k in STORE_FILES}
        assert "report.json" not in now


def test_sealing_state_machine(tmp_path: Path) -> None:
    runs = itertools.count()
    run_state_machine_as_test(
        # A factory, which hypothesis accepts (it only calls it); its annotation says a class.
        lambda: SealingMachine(tmp_path / f"run{next(runs)}"),  # type: ignore[arg-type]
        settings=settings(settings.default, stateful_step_count=20, deadline=None),
    )


def test_the_daemon_says_diverged_once_per_record(src: Path, dst: Path) -> None:
    write(src / "trials" / "1" / "log.txt", b"one")
    write(src / "trials" / "1" / "trial.json", b"{}")
    settle()
    daemon = DaemonProcess(src, dst, "--json", "--full-every", "0.1")
    try:
        assert "trials/1/trial.json" in daemon.next()["copied"]
        write(src / "trials" / "1" / "log.txt", b"rewritten after the seal")
        seen = 0
        for _ in range(400):  # one JSON line per pass; full passes every 0.1 s
            if daemon.next()["diverged"]:
                seen += 1
                if seen == 5:
                    break
        assert seen == 5, "the divergence was not reported on every pass"
    finally:
        code, err = daemon.stop()
    assert code == 0, err
    said = [line for line in err.splitlines() if " diverged " in line]
    assert len(said) == 1 and said[0].endswith(f"diverged trials/1: {DIVERGED} (log.txt)")
    assert (dst / "trials" / "1" / "log.txt").read_bytes() == b"one"


def test_subset_passes_delete_and_see_removals_under_their_subtrees_only(
    src: Path, dst: Path
) -> None:
    write(src / "work" / "a.txt", b"a")
    write(src / "work" / "b.txt", b"b")
    write(src / "other" / "c.txt", b"c")
    write(src / "trials" / "1" / "log.txt", b"one")
    write(src / "trials" / "1" / "trial.json", b"{}")
    settle()
    mirror = Mirror(src, dst, durable=False, delete=True)
    mirror.run_once()
    for rel in ("work/a.txt", "other/c.txt", "trials/1/log.txt"):
        (src / rel).unlink()
    report = mirror.run_dirs(["work", "trials/1"])
    assert report.deleted == ["work/a.txt"]  # other/ was not walked: kept for now
    assert [d["files"] for d in report.diverged] == [["trials/1/log.txt"]]
    kept = ["other/c.txt", "trials/1/log.txt", "trials/1/trial.json", "work/b.txt"]
    assert sorted(tree(dst)) == kept
    assert mirror.run_once().deleted == ["other/c.txt"]  # the cache still knew it was ours


def test_a_record_sealed_by_another_writer_during_the_pass_is_never_overwritten(
    src: Path, dst: Path
) -> None:
    """The marker is committed create-if-absent: another process seals the record in the
    destination while the pass reads the source's marker; theirs stays, byte for byte."""
    write(src / "trials" / "1" / "log.txt", b"log")
    write(src / "trials" / "1" / "trial.json", b'{"from": "the source"}')
    settle()
    theirs = dst / "trials" / "1" / "trial.json"
    sealed: list[str] = []

    def other_writer(drel: str) -> None:
        if drel == "trials/1/trial.json" and not sealed:
            code = "import sys, pathlib; pathlib.Path(sys.argv[1]).write_bytes(b'{\"theirs\": 1}')"
            subprocess.run([sys.executable, "-c", code, str(theirs)], check=True)
            sealed.append(drel)

    report = run(src, dst, _on_chunk=other_writer)
    assert sealed, "the hook never ran; the test proves nothing"
    assert theirs.read_bytes() == b'{"theirs": 1}'
    assert report.held_back == [
        {
            "path": "trials/1/trial.json",
            "reason": "sealed meanwhile in the destination; not overwritten",
        }
    ]
    assert (dst / "trials" / "1" / "log.txt").read_bytes() == b"log"
    assert not temps(dst)
    later = run(src, dst)  # sealed now: compared, never written
    assert theirs.read_bytes() == b'{"theirs": 1}'
    assert [d["path"] for d in later.diverged] == ["trials/1"]


@pytest.mark.parametrize("durable", [False, True], ids=["no-fsync", "durable"])
def test_a_directory_named_like_the_marker_does_not_seal_its_record(
    tmp_path: Path, durable: bool
) -> None:
    # The mirror made `trials/1/trial.json/` itself, then took it for the marker: the
    # record's files below it were reported diverged on every pass, never copied, and a
    # dry run (which makes no directory) said they would be.
    src = tmp_path / "src"
    write(src / "trials" / "1" / "log.txt", b"log")
    write(src / "trials" / "1" / "trial.json" / "d" / "f", b"f")
    settle()
    mirror = Mirror(src, tmp_path / "dst", durable=durable)
    dry = mirror.run_once(dry_run=True).to_dict()
    report = mirror.run_once()
    assert report.ok and not report.diverged, report.to_dict()
    assert tree(tmp_path / "dst") == tree(src)
    real = report.to_dict()
    for each in (dry, real):
        del each["duration"], each["dry_run"]
    assert dry == real
    again = run(src, tmp_path / "dst")
    assert (again.copied, again.diverged, again.unchanged) == ([], [], 2)

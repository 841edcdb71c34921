"""Export: a self-contained copy of one trial that outlives its session and workspace."""

from __future__ import annotations

import contextlib
import os
import shutil
from pathlib import Path
from typing import Any

import orjson
import pytest
from cli_runner import invoke
from inspect_helpers import dead_pid, metrics, torn_trial, trial

from sessionstore._fs import tree as tree_module
from sessionstore.errors import InvalidInput, RecordNotFound
from sessionstore.inspect.summary import SessionView
from sessionstore.storage import local_files
from sessionstore.store import export as export_module
from sessionstore.store.export import EXPORT_MANIFEST, rewrite_references
from sessionstore.store.session import Session, Store


def test_export_best_trial_reproduces_after_session_and_workspace_are_deleted(
    tmp_path: Path,
) -> None:
    workspace = tmp_path / "ws"
    store = Store(tmp_path / "store")
    session = store.create(id="s", constraints={"min_context_length": 4096}, pid=None)
    trial(session, metrics(10.0))
    # The agent wrote absolute workspace paths, a session path and a relative one.
    ws_patch = workspace / "trials" / "2" / "patches" / "fix.diff"
    n = trial(
        session,
        metrics(99.0) | {"files": [str(ws_patch), "trials/2/patches/kernel.cu"]},
        {
            "task.yml": (
                "files:\n"
                f"  - {ws_patch}:/workflow/fix.diff\n"
                f"  - {session.path}/trials/2/patches/kernel.cu\n"
                "  - patches/fix.diff\n"
                f"  - {workspace}/trials/1/task.yml\n"  # another trial's file: left alone
                "commands:\n  - patch -p1 < /workflow/fix.diff\n"
            ),
            "patches/fix.diff": "--- a\n+++ b\n+fixed\n",
            "patches/kernel.cu": "__global__ void k() {}\n",
        },
    )
    best = SessionView.load(session).best
    assert best is not None and best.n == n

    dest = session.export(n, tmp_path / "export")
    shutil.rmtree(store.root)
    shutil.rmtree(workspace, ignore_errors=True)

    task = (dest / "task.yml").read_text()
    assert f"  - {dest}/patches/fix.diff:/workflow/fix.diff\n" in task
    assert f"  - {dest}/patches/kernel.cu\n" in task
    assert "  - patches/fix.diff\n" in task
    assert f"  - {workspace}/trials/1/task.yml\n" in task
    marker = orjson.loads((dest / "trial.json").read_bytes())
    assert marker["files"] == [f"{dest}/patches/fix.diff", f"{dest}/patches/kernel.cu"]
    for path in marker["files"]:
        assert Path(path).is_file()
    assert (dest / "patches" / "fix.diff").read_text() == "--- a\n+++ b\n+fixed\n"
    manifest = orjson.loads((dest / EXPORT_MANIFEST).read_bytes())
    assert manifest["session"] == "s"
    assert manifest["n"] == n
    assert manifest["constraints"] == {"min_context_length": 4096}
    assert sorted(r["file"] for r in manifest["rewritten"]) == ["task.yml", "trial.json"]


def test_export_keeps_bytes_of_files_without_references(tmp_path: Path) -> None:
    session = Store(tmp_path / "store").create(id="s", pid=None)
    raw = b"a: 1\r\nb: \xff /ws/trials/1/nothing\n"
    n = trial(session, metrics(1.0), {"cfg.yml": raw, "blob.bin": "x"})
    dest = session.export(n, tmp_path / "out")
    source = session.trials.get(n).path
    for name in ("cfg.yml", "blob.bin", "trial.json"):
        assert (dest / name).read_bytes() == (source / name).read_bytes()


def test_export_refuses_existing_destination(tmp_path: Path) -> None:
    session = Store(tmp_path / "store").create(id="s", pid=None)
    n = trial(session, metrics(1.0))
    (tmp_path / "out").mkdir()
    with pytest.raises(InvalidInput, match="already exists"):
        session.export(n, tmp_path / "out")


def test_export_refuses_a_destination_inside_the_session(tmp_path: Path) -> None:
    # Into `trials/` it made a new record that read as a completed trial; into a record it
    # wrote into a sealed one. Named through a symlink outside, it is inside all the same.
    session = Store(tmp_path / "store").create(id="s", pid=None)
    n = trial(session, metrics(1.0))
    os.symlink(session.path / "trials", tmp_path / "link")
    before = sorted(p.relative_to(session.path) for p in session.path.rglob("*"))
    for dest in (
        session.path / "trials" / "2",
        session.path / "trials" / str(n) / "copy",
        session.path / "copy",
        tmp_path / "link" / "3",
    ):
        with pytest.raises(InvalidInput, match="inside the session it exports from"):
            session.export(n, dest)
        result = invoke("export", "s", str(dest), "--best", "--store", str(tmp_path / "store"))
        assert (result.exit_code, result.stdout) == (1, ""), result.output
        assert "inside the session it exports from" in result.stderr
        assert len(result.stderr.splitlines()) == 1
    assert sorted(p.relative_to(session.path) for p in session.path.rglob("*")) == before
    assert [r.n for r in session.trials.records()] == [n]
    # Anywhere outside the session is allowed.
    assert session.export(n, tmp_path / "store-side").is_dir()


def test_export_refuses_a_destination_inside_the_store(tmp_path: Path) -> None:
    """At the store's top it listed in `inspect` as a raw session; inside another session
    it made a completed trial of it; by a link to the store, inside all the same."""
    store = Store(tmp_path / "store")
    session, other = store.create(id="s", pid=None), store.create(id="other", pid=None)
    n = trial(session, metrics(1.0))
    os.symlink(store.root, tmp_path / "link")
    (store.root / "Not-An-Id").mkdir()
    for dest in (
        store.root / "copy",
        other.path / "trials" / "7",
        other.path / "copy",
        store.root / "Not-An-Id" / "copy",
        tmp_path / "link" / "copy",
    ):
        with pytest.raises(InvalidInput, match=f"inside the store {store.root}, which holds"):
            session.export(n, dest)
        result = invoke("export", "s", str(dest), "--best", "--store", str(store.root))
        assert (result.exit_code, result.stdout) == (1, ""), result.output
        assert result.stderr == (
            f"Error: {os.path.abspath(dest)}: is inside the store {store.root}, which holds "
            "only sessions; export elsewhere\n"
        )
    assert sorted(os.listdir(store.root)) == ["Not-An-Id", "other", "s"]
    assert os.listdir(store.root / "Not-An-Id") == []
    assert [r.n for r in other.trials.records()] == []
    listed = orjson.loads(invoke("inspect", "--json", "--store", str(store.root)).stdout)
    assert sorted(row["id"] for row in listed) == ["other", "s"]
    # A raw workspace named by its path is in no store: beside it is elsewhere.
    workspace = tmp_path / "ws"
    shutil.copytree(session.path / "trials", workspace / "trials")
    assert Session.open(workspace).export(n, tmp_path / "ws-copy").is_dir()


def test_export_refuses_a_destination_inside_any_session(tmp_path: Path) -> None:
    """A lineage copy (`previous/<id>`, no manifest of its own) exported by its path: into
    the session holding it, or that session's store, it made a completed trial of it or
    a session that is none; into a session of another store, a record of that one."""
    store = Store(tmp_path / "store")
    old = store.create(id="old", pid=None)
    n = trial(old, metrics(1.0))
    old.finish({})
    new = store.create(id="new", previous=["old"], pid=None)
    copy = Session.open(new.path / "previous" / "old")
    elsewhere = Store(tmp_path / "elsewhere").create(id="e", pid=None)
    for dest, why in (
        (new.path / "trials" / "9", f"inside the store {store.root}, which holds"),
        (new.path / "previous" / "other", f"inside the store {store.root}, which holds"),
        (store.root / "copy", f"inside the store {store.root}, which holds"),
        (elsewhere.path / "trials" / "9", "inside a session (a directory holding session.json,"),
    ):
        with pytest.raises(InvalidInput, match=why.replace("(", r"\(").replace(")", r"\)")):
            copy.export(n, dest)
        result = invoke("export", str(copy.path), str(dest), "--trial", str(n))
        assert (result.exit_code, result.stdout) == (1, ""), result.output
        assert why in result.stderr and len(result.stderr.splitlines()) == 1
    assert sorted(os.listdir(store.root)) == ["new", "old"]
    assert [r.n for r in new.trials.records()] == [] == [r.n for r in elsewhere.trials.records()]
    assert sorted(os.listdir(new.path / "previous")) == ["old"]
    assert copy.export(n, tmp_path / "out").is_dir()
    # Another tool's stray session.json above DEST makes no session of its directory.
    (tmp_path / "home" / "exports").mkdir(parents=True)
    (tmp_path / "home" / "session.json").write_text("{}")
    assert copy.export(n, tmp_path / "home" / "exports" / "x").is_dir()


def test_export_refuses_records_that_are_not_completed(tmp_path: Path) -> None:
    session = Store(tmp_path / "store").create(id="s", pid=None)
    in_flight = trial(session, None)
    torn = torn_trial(session)
    for n in (in_flight, torn):
        with pytest.raises(InvalidInput, match="export a completed one"):
            session.export(n, tmp_path / f"out{n}")
    with pytest.raises(RecordNotFound):
        session.export(99, tmp_path / "out99")
    assert not list(tmp_path.glob("out*"))


def test_export_is_all_or_nothing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    session = Store(tmp_path / "store").create(id="s", pid=None)
    n = trial(session, metrics(1.0), {"a.yml": "a\n", "b.yml": "b\n"})
    real_write = os.write
    calls = {"n": 0}

    def write_then_fill_the_disk(fd: int, data: bytes) -> int:
        calls["n"] += 1
        if calls["n"] > 1:  # the first file lands, the second finds the disk full
            raise OSError(28, "injected: no space left on device")
        return real_write(fd, data)

    monkeypatch.setattr(os, "write", write_then_fill_the_disk)
    with pytest.raises(OSError, match="no space"):
        session.export(n, tmp_path / "out")
    monkeypatch.undo()
    assert calls["n"] == 2
    assert sorted(p.name for p in tmp_path.iterdir()) == ["store"]


def test_a_destination_made_during_the_export_is_not_replaced(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # rename(2) replaces an empty directory: one made at DEST while the export was built
    # (after the check that DEST is new) was silently swapped for the export.
    session = Store(tmp_path / "store").create(id="s", pid=None)
    n = trial(session, metrics(1.0), {"a.yml": "a\n"})
    dest = tmp_path / "out"
    real = export_module._copy_file

    def made_meanwhile(*args: Any) -> bool:
        with contextlib.suppress(FileExistsError):
            dest.mkdir()
        return real(*args)

    monkeypatch.setattr(export_module, "_copy_file", made_meanwhile)
    assert not dest.exists()
    with pytest.raises(InvalidInput, match=r"already exists \(made during the export\)"):
        session.export(n, dest)
    monkeypatch.undo()
    assert os.listdir(dest) == []  # the directory made meanwhile, as it was made
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out", "store"]  # no temp left


def test_a_destination_made_just_before_the_rename_is_not_replaced(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Checked, then renamed: an empty directory made at DEST between the two was
    # replaced by rename(2). Renamed with RENAME_NOREPLACE, nothing is between them.
    session = Store(tmp_path / "store").create(id="s", pid=None)
    n = trial(session, metrics(1.0), {"a.yml": "a\n"})
    dest = tmp_path / "out"
    real_lexists, real_rename_new = local_files.lexists, tree_module.rename_new_at

    def made(*args: Any) -> None:
        with contextlib.suppress(FileExistsError):
            dest.mkdir()

    def checked_then_made(*args: Any) -> bool:
        found = real_lexists(*args)
        made()
        return found

    def made_then_renamed(*args: Any) -> bool:
        made()
        return real_rename_new(*args)

    monkeypatch.setattr(export_module, "lexists", checked_then_made)
    monkeypatch.setattr(export_module, "rename_new_at", made_then_renamed, raising=False)
    with pytest.raises(InvalidInput, match=r"already exists \(made during the export\)"):
        session.export(n, dest)
    monkeypatch.undo()
    assert os.listdir(dest) == []  # the directory made meanwhile, as it was made
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out", "store"]  # no temp left


def test_rename_new_at_never_replaces(tmp_path: Path) -> None:
    (tmp_path / "a").mkdir()
    (tmp_path / "a" / "f").write_bytes(b"x")
    (tmp_path / "b").mkdir()
    fd = os.open(tmp_path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        if not tree_module.rename_new_at(fd, "a", "c"):
            pytest.skip("no renameat2(RENAME_NOREPLACE) here")
        with pytest.raises(FileExistsError):
            tree_module.rename_new_at(fd, "c", "b")
    finally:
        os.close(fd)
    assert os.listdir(tmp_path / "b") == []
    assert os.listdir(tmp_path / "c") == ["f"]


@pytest.mark.parametrize("name", ["a,b", "c #d", "e: f", "g]h"])
def test_a_destination_that_would_break_a_yaml_reference_is_refused(
    tmp_path: Path, name: str
) -> None:
    # Written unquoted into `files: [trials/1/a.diff]`, `/x/a,b/a.diff` read back as two
    # files, and `: `, ` #` or `]` made the copy's task.yml not parse at all.
    session = Store(tmp_path / "store").create(id="s", pid=None)
    n = trial(session, metrics(1.0), {"a.diff": "+x\n", "task.yml": "files: [trials/1/a.diff]\n"})
    dest = tmp_path / name
    with pytest.raises(InvalidInput, match=r"would break the YAML of task\.yml"):
        session.export(n, dest)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["store"]  # nothing made
    # Where no YAML reference names it, such a DEST is fine: JSON quotes its paths.
    plain = trial(session, metrics(1.0), {"a.diff": "+x\n", "task.json": '["trials/2/a.diff"]'})
    assert orjson.loads((session.export(plain, dest) / "task.json").read_bytes()) == [
        str(dest / "a.diff")
    ]


def test_a_destination_that_is_not_utf8_is_refused(tmp_path: Path) -> None:
    # Its bytes written into the rewritten marker made the export's trial.json invalid
    # UTF-8: torn, in an export that claimed to hold a completed trial.
    session = Store(tmp_path / "store").create(id="s", pid=None)
    n = trial(session, {"failed": False, "patch": "trials/1/a.diff"}, {"a.diff": "+x\n"})
    dest = tmp_path / os.fsdecode(b"out\xff")
    with pytest.raises(InvalidInput, match="is not valid UTF-8"):
        session.export(n, dest)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["store"]  # nothing made


def test_rewrite_law_idempotent() -> None:
    dest = Path("/exports/best")
    files = {"patches/a.diff"}
    once = rewrite_references("x: /ws/trials/3/patches/a.diff\n", "trials", 3, files, dest)
    assert once == "x: /exports/best/patches/a.diff\n"
    assert rewrite_references(once, "trials", 3, files, dest) == once


def test_rewrite_ignores_other_records_and_unknown_files() -> None:
    dest = Path("/e")
    text = "/ws/trials/13/patches/a.diff /ws/trials/3/patches/missing.diff /ws/xtrials/3/a"
    assert rewrite_references(text, "trials", 3, {"patches/a.diff"}, dest) == text


def test_cli_exports_the_best_trial_or_a_named_one(tmp_path: Path) -> None:
    store = Store(tmp_path / "store")
    session = store.create(id="s", pid=None)
    trial(session, metrics(500.0), {"a.yml": "slow\n"})
    trial(session, metrics(900.0), {"a.yml": "fast\n"})
    base = ["--store", str(store.root)]
    result = invoke("export", "s", tmp_path / "best", "--best", "--json", *base)
    assert result.exit_code == 0, result.output
    assert orjson.loads(result.output) == {
        "trial": 2,
        "path": str(tmp_path / "best"),
        "skipped": [],
    }
    assert (tmp_path / "best" / "a.yml").read_text() == "fast\n"
    result = invoke("export", "s", tmp_path / "one", "--trial", "1", *base)
    assert result.exit_code == 0 and (tmp_path / "one" / "a.yml").read_text() == "slow\n"
    result = invoke("export", "s", tmp_path / "one", "--trial", "2", *base)
    assert result.exit_code == 1 and "already exists" in result.output
    result = invoke("export", "s", tmp_path / "x", *base)
    assert result.exit_code == 2 and "exactly one of --trial N and --best" in result.output
    empty = store.create(id="empty", pid=None)
    trial(empty, None)
    result = invoke("export", "empty", tmp_path / "y", "--best", *base)
    assert result.exit_code == 1 and "no completed trial has a benchmark" in result.output


def test_an_export_sweeps_what_a_killed_export_left_beside_dest(tmp_path: Path) -> None:
    """A SIGKILL before the rename left the staging tree (the record's size) beside DEST,
    and no later command removed it: the next export there does, as the format allows
    anyone to remove a dead writer's temp. A live writer's temp is left alone."""
    session = Store(tmp_path / "store").create(id="s", pid=None)
    n = trial(session, metrics(1.0), {"big.bin": b"x" * 4096})
    out = tmp_path / "out"
    dead = out / f".sstmp-{dead_pid()[0]}-0123456789abcdef"
    (dead / "patches").mkdir(parents=True)
    (dead / "patches" / "big.bin").write_bytes(b"x" * 4096)
    live = out / f".sstmp-{os.getpid()}-fedcba9876543210"
    live.write_bytes(b"being written")
    session.export(n, out / "copy")
    assert sorted(os.listdir(out)) == sorted(["copy", live.name])

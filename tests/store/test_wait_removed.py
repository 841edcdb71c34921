"""A wait is on one session: removed or replaced under the same id, it ends in an error.

Before, a wait on a removed session waited forever (no --timeout), and a new
session created under the same id whose record completed ended it with
success, for a record of another session. The CLI tests run `wait` as a real
process with no --timeout; `ended`'s bound is the hang guard.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import threading
from pathlib import Path

import orjson
import pytest
from cli_runner import popen, reap, run, wait_for

from sessionstore.errors import SessionNotFound
from sessionstore.format.names import MANIFEST
from sessionstore.store.session import RecordState, Session, Store
from sessionstore.store.wait import identify, wait_record

NO_POLL = 60.0  # longer than any test here waits: only an event can end these waits
GONE = "it was removed (or replaced by another) during the wait"


def new_session(root: Path) -> Session:
    return Store(root).create(id="w1", pid=None)


def complete_trial(session: Session) -> None:
    session.trials.begin().complete({"failed": False})


def waiting(store: Path, log: Path) -> subprocess.Popen[bytes]:
    """`wait w1 --trial 1 -v`, no timeout, returned once it says it waits (by then it has
    taken its session's identity). Its stderr goes to `log`."""
    with open(log, "wb") as err:
        proc = popen("wait", "w1", "--trial", "1", "-v", "--store", store, stderr=err)
    try:
        wait_for(lambda: b"waiting for trial 1" in log.read_bytes(), "the wait to start")
    except BaseException:
        reap(proc)
        raise
    return proc


def ended(proc: subprocess.Popen[bytes], log: Path) -> tuple[int, str, str]:
    """(exit status, stdout, stderr) of `proc` once it ends; bounded: a hang guard."""
    try:
        out, _ = proc.communicate(timeout=60)
    finally:
        reap(proc)
    return proc.returncode, out.decode(), log.read_text()


def test_cli_wait_on_a_removed_session_exits_1_naming_it(tmp_path: Path) -> None:
    store, log = tmp_path / "store", tmp_path / "stderr"
    new_session(store)
    proc = waiting(store, log)
    assert run("rm", "w1", "--store", store).returncode == 0
    code, out, err = ended(proc, log)
    assert (code, out) == (1, "")
    # The -v line, then one line worded as for a session missing at the start.
    assert err.splitlines()[1:] == [f"Error: no session 'w1' in store {store}; {GONE}"]


def test_cli_wait_is_not_ended_by_a_replacement_under_the_same_id(tmp_path: Path) -> None:
    store, log = tmp_path / "store", tmp_path / "stderr"
    new_session(store)
    replacement = new_session(tmp_path / "elsewhere")
    complete_trial(replacement)
    proc = waiting(store, log)
    # Swapped in two renames: the wait may see the gap or only the new session; either
    # way its trial 1 is not the one waited for.
    os.rename(store / "w1", tmp_path / "old-w1")
    os.rename(replacement.path, store / "w1")
    code, out, err = ended(proc, log)
    assert (code, out) == (1, "")
    assert err.splitlines()[1:] == [f"Error: no session 'w1' in store {store}; {GONE}"]


def test_library_wait_raises_when_its_session_is_removed_mid_wait(tmp_path: Path) -> None:
    session = new_session(tmp_path / "store")
    identity = identify(session)
    remover = threading.Timer(0.3, shutil.rmtree, [session.path])
    remover.start()
    try:
        with pytest.raises(SessionNotFound, match="removed") as caught:
            # No periodic re-check within the bound: the removal's event ends the wait.
            wait_record(
                session.trials.path / "1",
                "trial.json",
                1,
                20,
                poll_interval=NO_POLL,
                identity=identity,
            )
    finally:
        remover.join(10)
    assert isinstance(caught.value, LookupError)


def rewrite_manifest(session: Session, **changes: object) -> None:
    manifest = orjson.loads((session.path / MANIFEST).read_bytes())
    (session.path / MANIFEST).write_bytes(orjson.dumps({**manifest, **changes}))


def test_a_new_session_in_the_same_directory_inode_is_told_by_its_manifest(
    tmp_path: Path,
) -> None:
    # A filesystem may give a new directory the inode of one just removed: the
    # manifest's creation time tells the sessions apart.
    session = new_session(tmp_path / "store")
    identity = identify(session)
    rewrite_manifest(session, created_at="2031-01-01T00:00:00.000000Z")
    complete_trial(session)
    with pytest.raises(SessionNotFound):
        wait_record(session.trials.path / "1", "trial.json", 1, 0, identity=identity)


def test_the_sessions_own_manifest_changes_keep_the_wait(tmp_path: Path) -> None:
    workspace = tmp_path / "raw"
    workspace.mkdir()
    raw = Session.open(workspace)
    identity = identify(raw)  # a raw workspace: no manifest, no creation time
    made = new_session(tmp_path / "made")
    os.rename(made.path / MANIFEST, workspace / MANIFEST)  # as a mirror copies one in
    complete_trial(raw)
    record = wait_record(raw.trials.path / "1", "trial.json", 1, 0, identity=identity)
    assert record.state is RecordState.COMPLETED
    session = new_session(tmp_path / "store")
    identity = identify(session)
    session.finish({})  # rewrites the manifest (status), same creation time
    complete_trial(session)
    record = wait_record(session.trials.path / "1", "trial.json", 1, 0, identity=identity)
    assert record.state is RecordState.COMPLETED


def test_identify_refuses_a_session_gone_already(tmp_path: Path) -> None:
    session = new_session(tmp_path / "store")
    shutil.rmtree(session.path)
    with pytest.raises(SessionNotFound):
        identify(session)

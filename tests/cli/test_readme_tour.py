"""The README's tour is a script: run it literally, so README and behaviour cannot drift apart."""

from __future__ import annotations

import contextlib
import os
import re
import signal
import subprocess
import sys
import sysconfig
from pathlib import Path

import orjson

from sessionstore.store.session import RecordState, Store

ROOT = Path(__file__).resolve().parents[2]
TOKEN = b"hf_tour_0123456789abcdefghij"


def tour_script() -> str:
    """The first `sh` block after the README's tour heading."""
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    tour = readme[readme.index("## A 60-second tour") :]
    match = re.search(r"```sh\n(.*?)```", tour, re.S)
    assert match is not None, "README's tour has no ```sh block"
    return match.group(1)


def test_readme_tour_runs_top_to_bottom(tmp_path: Path) -> None:
    home, store, work = tmp_path / "home", tmp_path / "store", tmp_path / "work"
    for directory in (home, work):
        directory.mkdir()
    scripts = sysconfig.get_path("scripts")  # the console script of the installed package
    env = {
        **os.environ,
        "PATH": f"{scripts}{os.pathsep}{os.environ.get('PATH', '')}",
        "HOME": str(home),
        "SESSIONSTORE_HOME": str(store),
        "NO_COLOR": "1",
    }
    env.pop("HF_TOKEN", None)  # the tour sets what it needs itself
    # Its own process group: a hang (or a failed step) must not leak the background mirror.
    tour = subprocess.Popen(
        ["bash", "-euo", "pipefail", "-c", tour_script()],
        cwd=work,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        start_new_session=True,
    )
    try:
        stdout, stderr = tour.communicate(timeout=120)
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(tour.pid, signal.SIGKILL)
        tour.wait(timeout=60)
    assert tour.returncode == 0, stderr.decode(errors="replace")
    out = stdout.decode()
    assert "trial 1 completed" in out
    assert "\npass\n" in out, "check judged trial 1 by its log's last line"
    assert re.search(r"tune-llama +done", out), "inspect lists the finished session"

    (session,) = Store(store).sessions()
    assert [r.state for r in session.trials.records()] == [RecordState.COMPLETED]
    assert (session.path / "trials/1/task.yml").read_bytes() == b"model: llama\n"
    assert b"ttft 182 ms" in (session.path / "trials/1/run.log").read_bytes()
    # The last command's JSON is the session as scripts see it.
    detail = orjson.loads(out[out.rindex("\n{") :])
    assert detail["id"] == session.id
    # The contract points the agent at its workspace, the mirror's source.
    assert str(work / "workspace" / "trials") in (work / "prompt.md").read_text()
    # The token is redacted in the session and nothing else was created.
    for path in store.rglob("*"):
        assert not path.is_file() or TOKEN not in path.read_bytes(), path
    assert list(home.iterdir()) == [], "the tour must not create a second store in ~"
    assert sorted(p.name for p in work.iterdir()) == ["prompt.md", "workspace"]


def test_readme_python_block_runs(tmp_path: Path) -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    match = re.search(r"```python\n(.*?)```", readme[readme.index("From Python") :], re.S)
    assert match is not None, "README has no Python block after 'From Python'"
    store, work = tmp_path / "store", tmp_path / "work"
    (work / "workspace").mkdir(parents=True)
    env = {**os.environ, "SESSIONSTORE_HOME": str(store), "HF_TOKEN": TOKEN.decode()}
    result = subprocess.run(
        [sys.executable, "-c", match.group(1)],
        cwd=work,
        env=env,
        capture_output=True,
        timeout=120,
        check=False,
    )
    assert result.returncode == 0, result.stderr.decode(errors="replace")
    assert result.stdout.decode().split() == ["1", "completed", "None"]
    (session,) = Store(store).sessions()
    assert session.report().state is RecordState.COMPLETED
    assert (session.path / "trials/1/task.yml").read_bytes() == b"model: llama\r\n"

"""Every reader while another process cycles an entry through file, FIFO, symlink and directory.

One process cycles one entry of a session (a marker, the log, a record
directory, `trials/`, the manifest, the constraints, the report) through a
regular file, a FIFO, a symlink to an outside secret and a directory, in a
bounded loop, while `inspect`, `inspect --json`, `wait --json`, `check` and
`export --best` run as real processes. Laws: each returns before its
timeout (no FIFO waited on), none prints a traceback, and the outside
secret appears in no output and no export.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from inspect_helpers import metrics, run_cli, trial

from sessionstore.store.session import Store

SECRET = "OUTSIDE-SECRET-d41c"
MAX_CYCLES = 200_000

# Cycles `target` through regular file -> FIFO -> symlink -> directory (each made
# under a side name and renamed over it) until `stop` exists or MAX_CYCLES pass.
CYCLER = """
import os, shutil, sys
target, outside, stop, cycles = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
side = target + ".side"
content = open(target, "rb").read() if os.path.isfile(target) else b"{}"
def swap(make):
    if os.path.isdir(side) and not os.path.islink(side):
        shutil.rmtree(side)
    elif os.path.lexists(side):
        os.unlink(side)
    make(side)
    if os.path.isdir(target) and not os.path.islink(target) and not os.path.isdir(side):
        shutil.rmtree(target)
    elif os.path.lexists(target) and os.path.isdir(side) and not os.path.islink(side):
        if os.path.isdir(target) and not os.path.islink(target):
            shutil.rmtree(target)
        else:
            os.unlink(target)
    os.rename(side, target)
def regular(p):
    with open(p, "wb") as f:
        f.write(content)
def directory(p):
    os.mkdir(p)
    with open(os.path.join(p, "trial.json"), "wb") as f:
        f.write(content)
makers = [regular, os.mkfifo, lambda p: os.symlink(outside, p), directory]
for i in range(cycles):
    if i % 8 == 0 and os.path.exists(stop):
        break
    swap(makers[i % 4])
"""


def _session(tmp_path: Path) -> tuple[Path, Path]:
    store = tmp_path / "store"
    session = Store(store).create(id="swap", pid=None, constraints={"max_ttft_ms": 500})
    for value in (10.0, 20.0):
        trial(
            session,
            metrics(value, output_contract={"log": "run.log"}),
            {"run.log": "PASS\n", "task.yml": "x: 1\n"},
        )
    session.finish({"status": "done"})
    outside = tmp_path / "outside"
    outside.mkdir()
    for name in ("trial.json", "session.json", "run.log", "constraints.json", "report.json"):
        (outside / name).write_text(f'{{"secret": "{SECRET}"}}\nFAIL: {SECRET}\n')
    for n in ("1", "2"):  # `trials` linked here would hold these records
        (outside / n).mkdir()
        (outside / n / "trial.json").write_text(f'{{"secret": "{SECRET}"}}')
        (outside / n / "run.log").write_text(f"FAIL: {SECRET}\n")
    return store, outside


TARGETS = [
    "trials/2/trial.json",
    "trials/2/run.log",
    "trials/2",
    "trials",
    "session.json",
    "constraints.json",
    "report.json",
]


@pytest.mark.parametrize("entry", TARGETS)
def test_readers_under_a_cycling_entry_never_hang_crash_or_read_outside(
    tmp_path: Path, entry: str
) -> None:
    store, outside = _session(tmp_path)
    target = store / "swap" / entry
    # A file is linked to the outside file of its name, a directory to the outside tree.
    link_to = outside / Path(entry).name if "." in Path(entry).name else outside
    stop = tmp_path / "stop"
    proc = subprocess.Popen(
        [sys.executable, "-c", CYCLER, str(target), str(link_to), str(stop), str(MAX_CYCLES)]
    )
    runs = [
        ("inspect", "--store", str(store)),
        ("inspect", "--store", str(store), "--json"),
        ("inspect", "swap", "--store", str(store)),
        ("inspect", "swap", "--store", str(store), "--json"),
        ("wait", "swap", "--trial", "2", "--json", "--timeout", "2", "--store", str(store)),
        ("check", "swap", "--trial", "2", "--store", str(store)),
        ("check", "swap", "--trial", "2", "--log", "run.log", "--json", "--store", str(store)),
    ]
    try:
        for args in runs * 2:
            result = run_cli(*args, timeout=30)
            assert "Traceback" not in result.stderr, (args, result.stderr[-3000:])
            assert SECRET not in result.stdout + result.stderr, args
        for i in range(3):
            dest = tmp_path / f"export{i}"
            result = run_cli("export", "swap", str(dest), "--best", "--store", str(store))
            assert "Traceback" not in result.stderr, result.stderr[-3000:]
            assert SECRET not in result.stdout + result.stderr
            if dest.exists():
                for path in dest.rglob("*"):
                    assert path.is_dir() or SECRET.encode() not in path.read_bytes()
    finally:
        stop.touch()
        proc.wait(timeout=60)
    assert proc.returncode == 0
    assert os.path.lexists(target)

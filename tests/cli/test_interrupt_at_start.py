"""A Ctrl-C while a command is still starting (importing click and the command, parsing
the group's options) exits 130 silently, as one during the command does: never a
traceback, never click's "Aborted!", never a lost Ctrl-C."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

# Sends SIGINT to itself as MODULE is first imported, then runs ARGS through `main`.
LAUNCH = """
import os, signal, sys
module, args = sys.argv[1], sys.argv[2:]
class Trap:
    def find_spec(self, name, path=None, target=None):
        if name == module:
            os.kill(os.getpid(), signal.SIGINT)
        return None
sys.meta_path.insert(0, Trap())
from sessionstore.cli import main
sys.exit(main(args))
"""


@pytest.mark.parametrize(
    ("module", "args"),
    [
        ("sessionstore.cli.group", ["wait", "--store", "{store}", "s1", "1"]),
        ("sessionstore.cli.group", ["inspect", "s1", "--store", "{store}"]),
        ("click", ["new", "--store", "{store}"]),
        ("sessionstore.cli.mirror_run", ["mirror", "{store}", "{tmp}/dst", "--once"]),
        # While click parses the group's own options: `--store` is converted there.
        ("sessionstore.storage.s3_path", ["--store", "{store}", "new"]),
    ],
    ids=["wait", "inspect", "new", "mirror", "group-options"],
)
def test_a_ctrl_c_while_starting_exits_130_silently(
    tmp_path: Path, module: str, args: list[str]
) -> None:
    store = tmp_path / "store"
    store.mkdir()
    argv = [a.format(store=store, tmp=tmp_path) for a in args]
    done = subprocess.run(
        [sys.executable, "-c", LAUNCH, module, *argv], capture_output=True, timeout=60, check=False
    )
    assert (done.returncode, done.stdout, done.stderr) == (130, b"", b"")
    assert sorted(p.name for p in store.iterdir()) == []  # nothing was made

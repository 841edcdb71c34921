"""What the daemon prints holds no secret and no source path, one line per problem.

Real daemon processes: watchdog's own warnings about a directory below one
whose name holds the secret.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any

import pytest
from cli_runner import environ
from mirror_helpers import DaemonProcess, write

pytestmark = pytest.mark.timeout(120)

SECRET = "hfSuperSecretTok3nXYZ0987"
RAW_CONTROL = re.compile("[\x00-\x09\x0b-\x1f\x7f-\x9f]")  # all but the line feed
STAMPED = re.compile(r"\d\d:\d\d:\d\d ")  # the daemon's progress lines


def move_out_and_back(tree: Path, outside: Path) -> None:
    """Make watchdog warn, once per directory of `tree`, with every watched path in the text.

    watchdog keeps watching a directory moved out of a recursive watch; moved
    back, it is watched again and each directory's watch is one watchdog holds
    already. Deterministic, where the reproducer's churn (chains 40 deep made
    and removed quickly) only races watchdog's walk of each new directory.
    """
    os.rename(tree, outside)
    os.rename(outside, tree)


def assert_one_line_each(err: str) -> None:
    assert not RAW_CONTROL.search(err), err
    assert "Traceback" not in err
    for line in err.splitlines():
        assert STAMPED.match(line) or line.startswith("mirror: "), line


def test_watchdog_warnings_under_a_secret_name_never_reach_stderr(src: Path, dst: Path) -> None:
    secret_dir = src / f"proj_{SECRET}_\x1b[31m"
    write(secret_dir / "notes.txt", b"x")
    (secret_dir / "tree").joinpath(*["d"] * 10).mkdir(parents=True)
    env = environ(TOK=SECRET, NO_COLOR="1")
    daemon = DaemonProcess(src, dst, "--json", "--secret-env", "TOK", env=env)
    out: list[dict[str, Any]] = []
    try:
        out.append(daemon.next())
        move_out_and_back(secret_dir / "tree", src.parent / "outside")
        write(src / "after-move.txt", b"its events come after the moves")
        for _ in range(100):  # bounded: each pass is a line, and next() has a hang guard
            out.append(daemon.next())
            if "after-move.txt" in out[-1]["copied"]:
                break
        else:
            raise AssertionError("after-move.txt was never mirrored")
    finally:
        code, err = daemon.stop()
    assert code == 0, err
    assert SECRET not in repr(out) and SECRET not in err
    assert_one_line_each(err)
    assert "mirror: warning" not in err  # bookkeeping that loses no event: dropped
    assert "copied proj_REDACTED_\\x1b[31m/notes.txt" in err  # redacted, then escaped

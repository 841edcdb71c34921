"""What the daemon prints holds no secret and no source path, one line per problem.

Real daemon processes: watchdog's own warnings about a directory below one
whose name holds the secret, and the warnings, thread deaths and ignored errors of any
library, whose texts spell paths as reprs (`b'p\\xc3\\xa4...'`) that no
redaction can be trusted to match.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from cli_runner import environ
from mirror_helpers import DaemonProcess, write

from sessionstore._display import escape

pytestmark = pytest.mark.timeout(120)

SECRET = "hfSuperSecretTok3nXYZ0987"
# Non-ASCII: a bytes repr spells it `p\xc3\xa4...`, which redacting the text would miss.
WIDE_SECRET = "pässwört-Tok3n-0987"
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


# A daemon whose process warns, loses a thread and ignores an error once it runs,
# each with the secret's path in its text, in the spellings libraries use.
_NOISY_DAEMON = """
import os, runpy, signal, sys, threading, time, warnings

src, dst, name = sys.argv[1:]
path = os.path.join(src, name)


class Finalized:
    def __del__(self):
        raise OSError(2, "No such file or directory", path)


def noise():
    deadline = time.monotonic() + 30
    while not os.path.exists(os.path.join(dst, ".sessionstore-mirror.pid")):
        if time.monotonic() > deadline:
            os._exit(3)
        time.sleep(0.01)
    warnings.warn(f"cannot watch {os.fsencode(path)!r}\\n  {path}", RuntimeWarning)
    dying = threading.Thread(target=lambda: {}[os.fsencode(path)])
    dying.start()
    dying.join()
    Finalized()
    os.kill(os.getpid(), signal.SIGTERM)


threading.Thread(target=noise, daemon=True).start()
sys.argv = ["sessionstore", "mirror", src, dst, "--secret-env", "TOK"]
runpy.run_module("sessionstore", run_name="__main__")
"""


def test_library_warnings_and_errors_are_one_line_without_their_text(src: Path, dst: Path) -> None:
    name = f"proj_{WIDE_SECRET}\n'\""
    (src / name).mkdir(parents=True)
    proc = subprocess.run(
        [sys.executable, "-c", _NOISY_DAEMON, str(src), str(dst), name],
        capture_output=True, text=True, timeout=60, check=False,
        env=environ(TOK=WIDE_SECRET, NO_COLOR="1"),
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    err = proc.stderr
    for spelling in (WIDE_SECRET, repr(os.fsencode(WIDE_SECRET))[2:-1], str(src)):
        assert spelling not in err and spelling not in proc.stdout
    assert_one_line_each(err)
    said = [line for line in err.splitlines() if line.startswith("mirror: ")]
    assert said == [
        f"mirror: warning: RuntimeWarning at <string>:{_line_of('warnings.warn(')}",
        "mirror: a watcher thread stopped: KeyError",
        "mirror: an error was ignored: FileNotFoundError",  # OSError(ENOENT, ...)
    ]


def _line_of(text: str) -> int:
    """The line of `_NOISY_DAEMON` that holds `text`, as `python -c` numbers it."""
    return next(n for n, line in enumerate(_NOISY_DAEMON.split("\n"), 1) if text in line)


def test_names_are_printed_as_they_are_never_as_rich_renders_them(src: Path, dst: Path) -> None:
    # rich's console turned `:red_heart:` into ❤, and its markup escape doubled a trailing
    # backslash: a line named another file than the one copied.
    names = ["c:red_heart:d.txt", "[bold]x[\\bold]", "\\[red]y", "a:thumbs_up:b", "ends\\"]
    for name in names:
        write(src / name, b"x")
    daemon = DaemonProcess(src, dst, "--json", "--full-every", "3600", env=environ(NO_COLOR="1"))
    assert sorted(daemon.next()["copied"]) == sorted(names)  # the initial pass
    code, err = daemon.stop()
    assert code == 0, err
    copied = [line.split(" copied ", 1)[1] for line in err.splitlines() if " copied " in line]
    assert sorted(copied) == sorted(map(escape, names))  # escaped once: `ends\\`, no markup

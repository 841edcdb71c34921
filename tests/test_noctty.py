"""A terminal planted where a file is opened never becomes our controlling terminal.

A process that leads a session and has no controlling terminal (a daemon under systemd,
`setsid`) acquires the first terminal it opens without `O_NOCTTY`: from then on a hangup
of that terminal sends it SIGHUP. Only root can bind-mount a terminal into a tree.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from sessionstore.format.names import MIRROR_LOCK
from sessionstore.store.session import Store

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="only root can bind-mount a terminal")

# Runs in a new session with no controlling terminal; prints its tty_nr (0: none) after
# `action`. The third field of /proc/self/stat's tail, after the command name's ")".
_PROBE = """
import os, sys
{action}
print(open("/proc/self/stat").read().rsplit(")", 1)[1].split()[4])
"""


def _tty_after(action: str, terminal: Path) -> int:
    """Run `action` where `terminal` is a pty's terminal end; its tty_nr afterwards (0: none).

    A device node of a pty made outside its devpts cannot be opened (EIO), so the
    terminal is bind-mounted over the file `terminal`, in a mount namespace of the
    probe's own: nothing outside the test sees it, and it goes with the probe.
    """
    master, slave = os.openpty()
    name = os.ttyname(slave)
    os.close(slave)
    terminal.touch()
    try:
        done = subprocess.run(
            [
                "unshare",
                "--mount",
                "--propagation",
                "private",
                "sh",
                "-c",
                'mount --bind "$1" "$2" && exec "$3" -c "$4"',
                "sh",
                name,
                str(terminal),
                sys.executable,
                _PROBE.format(action=action),
            ],
            start_new_session=True,
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=120,
        )
    finally:
        os.close(master)
    assert done.returncode == 0, done.stderr
    return int(done.stdout.split()[-1])


def test_the_probe_sees_a_terminal_opened_without_o_noctty(tmp_path: Path) -> None:
    tty = tmp_path / "tty"
    assert _tty_after(f"os.open({str(tty)!r}, os.O_RDWR)", tty) != 0


def test_a_terminal_in_the_destination_is_not_acquired_by_a_pass(tmp_path: Path) -> None:
    src, dst = tmp_path / "src", tmp_path / "dst"
    src.mkdir()
    dst.mkdir()
    (src / "f").write_bytes(b"x")
    # Compared with the source's file before it is replaced, so opened: by name, once.
    action = f"from sessionstore import Mirror; Mirror({str(src)!r}, {str(dst)!r}).run_once()"
    assert _tty_after(action, dst / "f") == 0


def test_a_terminal_at_the_lock_name_is_not_acquired_by_a_daemon(tmp_path: Path) -> None:
    src, dst = tmp_path / "src", tmp_path / "dst"
    src.mkdir()
    dst.mkdir()
    action = (
        "from sessionstore import Mirror\n"
        "from sessionstore.errors import InvalidInput\n"
        "from sessionstore.mirror.lock import acquire_lock\n"
        f"m = Mirror({str(src)!r}, {str(dst)!r})\n"
        "try:\n    acquire_lock(m)\nexcept InvalidInput as exc:\n    print(exc, file=sys.stderr)"
    )
    assert _tty_after(action, dst / MIRROR_LOCK) == 0


def test_a_terminal_at_a_sessions_lock_name_is_not_acquired_by_a_reader(tmp_path: Path) -> None:
    session = Store(tmp_path).create(id="abc", pid=None)
    action = (
        "from sessionstore.store.lifecycle import mirror_daemon\n"
        "from sessionstore.store.session import Store\n"
        f"assert mirror_daemon(Store({str(tmp_path)!r}).open('abc')) is None"
    )
    assert _tty_after(action, session.path / MIRROR_LOCK) == 0

"""Shared helpers for the mirror tests (no fixtures magic: plain functions)."""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import queue
import signal
import stat
import struct
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import cli_runner
import orjson
import pytest

from sessionstore._fs.atomic import is_temp_name
from sessionstore.mirror.mirror import CACHE_NAME, RESERVED_PREFIX, Mirror, PassReport

# Wider than the default racy window (10 ms or one tick), so a file written
# before `settle()` is always trusted by the next pass.
SETTLE_S = 0.02


def settle() -> None:
    """Let every file written so far leave the racy window."""
    time.sleep(SETTLE_S)


def write(path: Path, data: bytes, mode: int | None = None) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    if mode is not None:
        path.chmod(mode)
    return path


def tree(root: Path) -> dict[str, bytes]:
    """Every regular file under `root` (relative path -> bytes), minus our cache, locks, temps."""
    found: dict[str, bytes] = {}
    if not root.exists():
        return found
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames.sort()
        for name in filenames:
            if name.startswith(RESERVED_PREFIX) or is_temp_name(name):
                continue
            p = Path(dirpath, name)
            if p.is_symlink() or not p.is_file():
                continue
            found[p.relative_to(root).as_posix()] = p.read_bytes()
    return found


def temps(root: Path) -> list[str]:
    """Our temp files anywhere under `root`."""
    return [
        os.path.join(d, n)
        for d, dirs, files in os.walk(root)
        for n in files + dirs
        if is_temp_name(n)
    ]


def run(src: Path, dst: Path, **kwargs: object) -> PassReport:
    """One pass with defaults suited to tests (no fsync unless asked)."""
    kwargs.setdefault("durable", False)
    return Mirror(src, dst, **kwargs).run_once()  # type: ignore[arg-type]


def converge(src: Path, dst: Path, passes: int = 20, **kwargs: object) -> PassReport:
    """Run passes until one has nothing unstable, nothing held back, nothing copied."""
    report = run(src, dst, **kwargs)
    for _ in range(passes):
        if not (report.unstable or report.held_back or report.copied or report.errors):
            return report
        settle()
        report = run(src, dst, **kwargs)
    return report


def paths(items: list[dict[str, str]]) -> list[str]:
    return [item["path"] for item in items]


def snapshot(root: Path) -> dict[str, tuple[object, ...]]:
    """Every entry under `root`, symlinks not followed: kind, mode, and bytes or link target.

    For "nothing outside the destination changed": compare one before and one after.
    """
    found: dict[str, tuple[object, ...]] = {".": ("dir", stat.S_IMODE(root.lstat().st_mode))}
    for dirpath, dirnames, filenames in os.walk(root):
        for name in sorted(dirnames + filenames):
            p = Path(dirpath, name)
            st = p.lstat()
            rel, mode = p.relative_to(root).as_posix(), stat.S_IMODE(st.st_mode)
            if stat.S_ISLNK(st.st_mode):
                found[rel] = ("symlink", os.readlink(p))
            elif stat.S_ISDIR(st.st_mode):
                found[rel] = ("dir", mode)
            elif stat.S_ISREG(st.st_mode):
                found[rel] = ("file", mode, p.read_bytes())
            else:
                found[rel] = ("special", mode, stat.S_IFMT(st.st_mode))
    return found


def outside_tree(root: Path) -> Path:
    """A tree the mirror must never touch: files with distinct modes, a nested record."""
    write(root / "keep.txt", b"keep me", 0o600)
    write(root / "1" / "precious.txt", b"precious", 0o640)
    write(root / "1" / "log.txt", b"same bytes as the source's\n", 0o600)
    write(root / "1" / "trial.json", b'{"outside": true}', 0o644)
    return root


def mirror_cli(
    *args: str | Path, timeout: float = 60, cwd: Path | None = None
) -> subprocess.CompletedProcess[str]:
    """`sessionstore mirror ARGS` in a real process, never allowed to hang."""
    return cli_runner.run("mirror", *args, timeout=timeout, cwd=cwd)


def make_deep(root: Path, levels: int, name: str = "d") -> None:
    """`root/d/d/.../d/bottom.txt`, `levels` deep, built through dir fds (the path is too long)."""
    root.mkdir(parents=True, exist_ok=True)
    fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY)
    try:
        for _ in range(levels):
            os.mkdir(name, dir_fd=fd)
            child = os.open(name, os.O_RDONLY | os.O_DIRECTORY, dir_fd=fd)
            os.close(fd)
            fd = child
        out = os.open("bottom.txt", os.O_WRONLY | os.O_CREAT, 0o644, dir_fd=fd)
        os.write(out, b"at the bottom")
        os.close(out)
    finally:
        os.close(fd)


def depth_of(root: Path, name: str = "d") -> int:
    """How many `name` directories are chained under `root` (through dir fds)."""
    fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY)
    levels = 0
    try:
        while True:
            try:
                child = os.open(name, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW, dir_fd=fd)
            except FileNotFoundError:
                return levels
            os.close(fd)
            fd, levels = child, levels + 1
    finally:
        os.close(fd)


def remove_deep(root: Path, name: str = "d") -> None:
    """Remove what `make_deep` built, a level at a time from the top, through one dir fd.

    Not bottom up with a descriptor per level: a user at the default limit of
    1,024 cannot hold 10,000 (and shutil.rmtree recurses per level). Each step
    moves `name/name` up beside `name`, removes the emptied `name` and renames
    the moved one into its place.
    """
    fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY)
    try:
        while True:
            try:
                os.rename(f"{name}/{name}", ".deeper", src_dir_fd=fd, dst_dir_fd=fd)
            except FileNotFoundError:
                break
            os.rmdir(name, dir_fd=fd)
            os.rename(".deeper", name, src_dir_fd=fd, dst_dir_fd=fd)
        if os.path.lexists(root / name):  # the bottom level, with its file
            bottom = os.open(name, os.O_RDONLY | os.O_DIRECTORY, dir_fd=fd)
            try:
                for entry in os.listdir(bottom):
                    os.unlink(entry, dir_fd=bottom)
            finally:
                os.close(bottom)
            os.rmdir(name, dir_fd=fd)
    finally:
        os.close(fd)
    root.rmdir()


class DaemonProcess:
    """`sessionstore mirror ARGS` (a daemon) whose `--json` lines are waited for with a timeout.

    Both pipes are drained by threads from the start, so the daemon never
    blocks on a full pipe and nothing is read twice; `stop()` sends SIGINT.
    """

    def __init__(self, *args: str | Path, env: dict[str, str] | None = None) -> None:
        self.proc = cli_runner.popen("mirror", *args, env=env, text=True)
        self._lines: queue.Queue[str] = queue.Queue()
        self._err: list[str] = []
        assert self.proc.stdout is not None and self.proc.stderr is not None
        out, err = self.proc.stdout, self.proc.stderr

        def pump() -> None:
            for line in out:
                self._lines.put(line)

        self._threads = [
            threading.Thread(target=pump, daemon=True),
            threading.Thread(target=lambda: self._err.extend(err), daemon=True),
        ]
        for thread in self._threads:
            thread.start()

    def next(self, timeout: float = 30) -> dict[str, Any]:
        """The next pass's JSON report."""
        try:
            line = self._lines.get(timeout=timeout)
        except queue.Empty:
            raise AssertionError(f"no pass reported within {timeout} s") from None
        report: dict[str, Any] = orjson.loads(line)
        return report

    def running(self) -> bool:
        return self.proc.poll() is None

    def stop(self, timeout: float = 60) -> tuple[int, str]:
        """SIGINT, then (exit status, everything it wrote on stderr)."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGINT)
        assert self.proc.stdout is not None and self.proc.stderr is not None
        try:
            code = self.proc.wait(timeout=timeout)
        finally:
            if self.proc.poll() is None:
                self.proc.kill()
                self.proc.wait()
            for thread in self._threads:
                thread.join(timeout=timeout)
            # Closed on failure too: an unclosed pipe is a ResourceWarning that fails the run.
            self.proc.stdout.close()
            self.proc.stderr.close()
        return code, "".join(self._err)


class SourceReads:
    """Counts opens and reads of files under the source (not the cache, not the dest)."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch, src: Path) -> None:
        self.opens: list[str] = []
        self.reads = 0
        real_open, real_read = os.open, os.read
        src_fds: set[int] = set()

        def counting_open(path: object, flags: int, *args: object, **kwargs: object) -> int:
            fd = real_open(path, flags, *args, **kwargs)  # type: ignore[arg-type]
            if os.readlink(f"/proc/self/fd/{fd}").startswith(str(src)) and not os.path.isdir(
                f"/proc/self/fd/{fd}"
            ):
                self.opens.append(str(path))
                src_fds.add(fd)
            return fd

        def counting_read(fd: int, n: int) -> bytes:
            if fd in src_fds:
                self.reads += 1
            return real_read(fd, n)

        monkeypatch.setattr(os, "open", counting_open)
        monkeypatch.setattr(os, "read", counting_read)


def dest_state(dst: Path) -> dict[str, tuple[int, int]]:
    return {
        p.relative_to(dst).as_posix(): (p.stat().st_ino, p.stat().st_mtime_ns)
        for p in dst.rglob("*")
        if p.is_file() and p.name != CACHE_NAME
    }


# The change cache's groups as docs/mirror.md describes them, coded here on their own (not
# by the module under test): packed, a JSON string of the hex of a uint32 count, the
# count x 8 int64 entries and the names NUL-separated, little-endian; or wide, the JSON
# object of version 3.


def unpack_group(text: bytes) -> dict[str, list[int]]:
    """A group's entries by name, packed or wide (an assertion error if it is neither)."""
    value = orjson.loads(text)
    if isinstance(value, dict):
        return value
    data = bytes.fromhex(value)
    (n,) = struct.unpack_from("<I", data)
    ints = struct.unpack_from(f"<{8 * n}q", data, 4)
    names = data[4 + 64 * n :].split(b"\0")
    assert len(names) == n
    return {os.fsdecode(name): list(ints[8 * i : 8 * i + 8]) for i, name in enumerate(names)}


def pack_group(group: dict[str, list[int]]) -> bytes:
    """A packed group as the format describes it (whatever the names hold)."""
    ints = [v for entry in group.values() for v in entry]
    data = struct.pack(f"<I{len(ints)}q", len(group), *ints)
    data += b"\0".join(os.fsencode(name) for name in group)
    return b'"' + data.hex().encode() + b'"'


@contextlib.contextmanager
def lowered_sysctl(name: str, value: str) -> Iterator[None]:
    """The machine-wide sysctl `name` (`fs.inotify.max_queued_events`) set to `value` until
    the block ends, then restored, even when the test fails.

    Needs root (CI has it): the test is skipped otherwise. An flock on the sysctl file
    itself keeps two test processes from saving each other's `value` as the one to
    restore, and leaves no lock file behind.
    """
    path = "/proc/sys/" + name.replace(".", "/")
    fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        with open(path) as f:
            old = f.read().strip()
        try:
            with open(path, "w") as f:
                f.write(value)
        except OSError as exc:
            if exc.errno not in (errno.EACCES, errno.EPERM, errno.EROFS):
                raise
            pytest.skip(f"needs root: lowers the machine-wide {name}")
        try:
            yield
        finally:
            with open(path, "w") as f:
                f.write(old)
    finally:
        os.close(fd)  # releases the flock


def in_namespace(flags: str, script: str, *args: str, timeout: float = 110) -> Any:
    """What `script` prints (JSON), run by this Python in new namespaces (`unshare
    flags`: `-r` a user namespace, `-rm` with a private mount namespace too), which
    take every change it makes (a limit, a mount) with them; skipped where
    unshare cannot make them."""
    probe = subprocess.run(["unshare", flags, "true"], capture_output=True, check=False)
    if probe.returncode != 0:
        pytest.skip(f"unshare {flags} cannot make namespaces here")
    done = subprocess.run(
        ["unshare", flags, sys.executable, "-c", script, *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        check=True,
    )
    return orjson.loads(done.stdout)

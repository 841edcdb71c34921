"""Shared helpers for the mirror tests (no fixtures magic: plain functions)."""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

from sessionstore.atomic import is_temp_name
from sessionstore.mirror import RESERVED_PREFIX, Mirror, PassReport

# Wider than the default racy window (10 ms or one tick), so a file written
# before `settle()` is always trusted by the next pass.
SETTLE_S = 0.02
SESSIONSTORE = [sys.executable, "-m", "sessionstore"]


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

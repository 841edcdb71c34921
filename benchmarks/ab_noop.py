"""Two checkouts' `mirror --once` no-op passes, interleaved round by round: wall, CPU, RSS.

Each checkout runs as `PYTHONPATH=CHECKOUT python -P -m sessionstore mirror SRC
DST --once -q` into a destination of its own (made by a first pass, then one
warm-up), under GNU time for CPU (user + system, its 10 ms grain) and peak
RSS. Prints the medians per source tree. A baseline, not a gate.

    python benchmarks/ab_noop.py --before OLD --after NEW [--rounds 31] [--dir DIR] SRC...
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def one_pass(checkout: Path, src: Path, dst: Path) -> tuple[float, float, float]:
    """(wall ms, CPU ms, peak RSS MiB) of one pass."""
    env = dict(os.environ, PYTHONPATH=str(checkout))
    env.pop("PYTHONDONTWRITEBYTECODE", None)  # the .pyc files are part of a real start-up
    cmd = ["/usr/bin/time", "-f", "%U %S %M", sys.executable, "-P", "-m", "sessionstore"]
    cmd += ["mirror", str(src), str(dst), "--once", "-q"]
    start = time.perf_counter()
    done = subprocess.run(cmd, env=env, capture_output=True, text=True, check=False)
    wall = time.perf_counter() - start
    if done.returncode:
        sys.exit(f"{checkout}: {done.stderr.strip()}")
    user, system, kib = done.stderr.split()[-3:]
    return wall * 1000, (float(user) + float(system)) * 1000, int(kib) / 1024


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--before", type=Path, required=True, help="a checkout's root")
    parser.add_argument("--after", type=Path, required=True, help="a checkout's root")
    parser.add_argument("--rounds", type=int, default=31)
    parser.add_argument("--dir", type=Path, default=None, help="for the destinations")
    parser.add_argument("sources", type=Path, nargs="+")
    args = parser.parse_args()
    if not Path("/usr/bin/time").exists():
        sys.exit("needs GNU time (/usr/bin/time)")
    work = Path(tempfile.mkdtemp(prefix="ab-noop-", dir=args.dir))
    checkouts = {"before": args.before.resolve(), "after": args.after.resolve()}
    try:
        dests = {(s, c): work / f"{c}-{i}" for i, s in enumerate(args.sources) for c in checkouts}
        for (src, name), dst in dests.items():
            for _ in range(2):  # the first pass, then a warm-up
                one_pass(checkouts[name], src, dst)
        found: dict[tuple[Path, str], list[tuple[float, float, float]]] = {k: [] for k in dests}
        for _ in range(args.rounds):
            for (src, name), dst in dests.items():
                found[(src, name)].append(one_pass(checkouts[name], src, dst))
        for src in args.sources:
            cells = []
            for name in checkouts:
                runs = found[(src, name)]
                wall, cpu, rss = (statistics.median(r[i] for r in runs) for i in range(3))
                cells.append(f"{name}: {wall:.1f} ms wall, CPU {cpu:.0f} ms, {rss:.2f} MiB")
            print(f"{src}  " + " | ".join(cells))
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()

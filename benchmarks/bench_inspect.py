"""`sessionstore inspect --json` over a big store vs the physical floor of reading its files.

Builds a store of SESSIONS x TRIALS completed trials (plain file writes, so
the build is quick), then times, as whole processes, median of REPEATS after
one warm-up each:

  inspect:  sessionstore inspect --json --store S > /dev/null
  floor:    find S -name '*.json' -exec cat {} + > /dev/null

and prints both and their ratio. Goal: ratio <= 1.5. A baseline, not a gate.

    python benchmarks/bench_inspect.py [--sessions 1000] [--trials 50] [--repeats 5] [--dir PATH]
"""

from __future__ import annotations

import argparse
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import orjson

from sessionstore import Store

MARKER = orjson.dumps(
    {
        "failed": False,
        "context_length": 8192,
        "benchmark": {
            "metrics": {
                "output_tok_per_s": 1234.5,
                "ttft_ms": {"mean": 120.0, "p50": 110.0, "p99": 240.0},
                "tpot_ms": {"mean": 12.0, "p50": 11.0, "p99": 30.0},
            }
        },
        "learned": "batch 32 beats 16 on this GPU",
    },
    option=orjson.OPT_INDENT_2,
)


def build(root: Path, sessions: int, trials: int) -> None:
    store = Store(root)
    for s in range(sessions):
        session = store.create(
            id=f"s{s:05d}", name=f"bench {s}", trials=trials, constraints={"max_ttft_ms": 200}
        )
        for n in range(1, trials + 1):
            record = session.trials.path / str(n)
            record.mkdir()
            (record / "trial.json").write_bytes(MARKER)


def timed(command: list[str], repeats: int) -> list[float]:
    subprocess.run(command, check=True, stdout=subprocess.DEVNULL)  # warm-up
    samples = []
    for _ in range(repeats):
        start = time.perf_counter()
        subprocess.run(command, check=True, stdout=subprocess.DEVNULL)
        samples.append(time.perf_counter() - start)
    return samples


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--sessions", type=int, default=1000)
    parser.add_argument("--trials", type=int, default=50)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--dir", type=Path, default=None, help="where to build (default: temp)")
    args = parser.parse_args()
    print(f"python {sys.version.split()[0]} on {platform.platform()}, {os.cpu_count()} cpus")
    base = Path(tempfile.mkdtemp(prefix="bench-inspect-", dir=args.dir))
    try:
        root = base / "store"
        start = time.perf_counter()
        build(root, args.sessions, args.trials)
        files = sum(1 for _ in root.rglob("*.json"))
        print(
            f"store: {args.sessions} sessions x {args.trials} trials, {files} JSON files, "
            f"built in {time.perf_counter() - start:.1f} s"
        )
        exe = shutil.which("sessionstore") or "sessionstore"
        inspect = timed([exe, "inspect", "--json", "--store", str(root)], args.repeats)
        floor = timed(
            ["sh", "-c", f"find '{root}' -name '*.json' -exec cat {{}} + > /dev/null"],
            args.repeats,
        )
        med_i, med_f = statistics.median(inspect), statistics.median(floor)
        for label, samples, med in (
            ("inspect --json", inspect, med_i),
            ("find -exec cat", floor, med_f),
        ):
            lo, hi = min(samples), max(samples)
            print(f"{label}  median {med:.3f} s  (min {lo:.3f}, max {hi:.3f})")
        print(f"ratio {med_i / med_f:.2f}x (goal <= 1.5x)")
    finally:
        shutil.rmtree(base, ignore_errors=True)


if __name__ == "__main__":
    main()

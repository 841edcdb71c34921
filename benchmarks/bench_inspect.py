"""`sessionstore inspect --json` over a big store vs the physical floor of reading its files.

Builds a store of SESSIONS x TRIALS completed trials (plain file writes, so
the build is quick), waits until its markers are older than the summary
index's settling time (`store.index.SETTLE_NS`), then times, as whole
processes, interleaved (one of each per round), median of REPEATS rounds
after one warm-up round:

  inspect:  sessionstore inspect --json --store S > /dev/null
            (the summary indexes in place: the warm-up round wrote them)
  cold:     the same, each session's index removed before the run (not timed):
            every marker is read and every index written
  table:    sessionstore inspect --store S > /dev/null (the list as people read it,
            80 columns: the same summaries laid out)
  one:      inspect --json read by one process (`store.halves` never forks), to show
            what the second reader gains
  floor:    find S -name '*.json' ! -name .sessionstore-index.json -exec cat {} + > /dev/null

and prints each and the ratios to the floor. Goal (issue 16): inspect <= 1.0x
the floor at 1,000 x 50 and at 10,000 x 10; the table is printed as a ratio
to `inspect --json` (what it adds: the layout, rich's import). A baseline,
not a gate.

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
from sessionstore.format.names import INDEX
from sessionstore.store.index import SETTLE_NS

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


# `sessionstore ARGS` with the listing read by one process, as before `store.halves`.
ONE_PROCESS = (
    "import sys; import sessionstore.store.halves as h; h.MIN_ITEMS = 10**9; "
    "from sessionstore.cli import main; sys.exit(main(sys.argv[1:]))"
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


def drop_indexes(root: Path) -> None:
    for index in root.glob(f"*/{INDEX}"):
        index.unlink()


def rounds(commands: dict[str, list[str]], root: Path, repeats: int) -> dict[str, list[float]]:
    """Each command once per round, in the same order, after one warm-up round."""
    samples: dict[str, list[float]] = {name: [] for name in commands}
    for round_ in range(repeats + 1):
        for name, command in commands.items():
            if name == "cold":
                drop_indexes(root)
            start = time.perf_counter()
            subprocess.run(command, check=True, stdout=subprocess.DEVNULL)
            if round_:
                samples[name].append(time.perf_counter() - start)
    return samples


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--sessions", type=int, default=1000)
    parser.add_argument("--trials", type=int, default=50)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--dir", type=Path, default=None, help="where to build (default: temp)")
    args = parser.parse_args()
    if args.dir:  # a work directory named on the command line may be new
        args.dir.mkdir(parents=True, exist_ok=True)
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
        # A marker younger than the settling time is read, not cached: wait it out.
        time.sleep(max(0.0, SETTLE_NS / 1e9 - (time.perf_counter() - start) + 0.5))
        exe = shutil.which("sessionstore") or "sessionstore"
        inspect = [exe, "inspect", "--json", "--store", str(root)]
        floor = f"find '{root}' -name '*.json' ! -name '{INDEX}' -exec cat {{}} + > /dev/null"
        table = [exe, "inspect", "--store", str(root)]
        one = [sys.executable, "-c", ONE_PROCESS, "inspect", "--json", "--store", str(root)]
        samples = rounds(
            {
                "inspect": inspect,
                "cold": inspect,
                "table": table,
                "one": one,
                "floor": ["sh", "-c", floor],
            },
            root,
            args.repeats,
        )
        medians = {name: statistics.median(values) for name, values in samples.items()}
        labels = {
            "inspect": "inspect --json",
            "cold": "inspect --json, no index",
            "table": "inspect (the table)",
            "one": "inspect --json, 1 process",
            "floor": "find -exec cat",
        }
        for name, values in samples.items():
            print(
                f"{labels[name]:<26} median {medians[name]:.3f} s  "
                f"(min {min(values):.3f}, max {max(values):.3f})"
            )
        print(
            f"ratio {medians['inspect'] / medians['floor']:.2f}x (goal <= 1.0x), "
            f"without the index {medians['cold'] / medians['floor']:.2f}x; "
            f"the table {medians['table'] / medians['inspect']:.2f}x inspect --json; "
            f"one process {medians['one'] / medians['floor']:.2f}x"
        )
    finally:
        shutil.rmtree(base, ignore_errors=True)


if __name__ == "__main__":
    main()

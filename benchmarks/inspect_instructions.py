"""User-space instructions of `sessionstore inspect --json` per record, per checkout.

    python benchmarks/inspect_instructions.py [--dir DIR] [--sessions 40] [--trials 50] CHECKOUT...
    python benchmarks/inspect_instructions.py ../old-checkout .   # before/after

Builds two stores of completed trials (as bench_inspect.py does), of
SESSIONS and of 2 x SESSIONS sessions of TRIALS trials, then runs `python -m
sessionstore inspect --json` on each, whole process, once per checkout
(PYTHONPATH) under `valgrind --tool=callgrind` (or `perf stat`), after one
unmeasured run that caches the bytecode. The difference divided by
SESSIONS x TRIALS is the cost of one record (its share of its session's
reads included), without the interpreter's start or the imports (an empty
store imports less than a full one, so it is no baseline). Wall time on a
shared VM varies by 10-30% between runs; this count does not (PYTHONHASHSEED=0).
Prints one line per checkout and the ratio of each to the first.
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_inspect import build
from noop_instructions import count, counter, environ


def instructions(tool: str, checkout: Path, store: Path, work: Path) -> int:
    env = environ(checkout, work)
    py = [sys.executable, "-m", "sessionstore", "inspect", "--json", "--store", str(store)]
    subprocess.run(py, env=env, cwd=work, check=True, stdout=subprocess.DEVNULL)  # bytecode
    return count(tool, py, env, work)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("checkouts", type=Path, nargs="+", help="checkout roots")
    parser.add_argument("--dir", type=Path, default=None, help="work directory (default: tmp)")
    parser.add_argument("--sessions", type=int, default=40)
    parser.add_argument("--trials", type=int, default=50)
    args = parser.parse_args()
    if args.dir:  # a work directory named on the command line may be new
        args.dir.mkdir(parents=True, exist_ok=True)
    tool = counter()
    work = Path(tempfile.mkdtemp(prefix="inspect-instr-", dir=args.dir))
    try:
        small, large = work / "small", work / "large"
        build(small, args.sessions, args.trials)
        build(large, 2 * args.sessions, args.trials)
        records = args.sessions * args.trials
        print(f"{args.sessions} sessions x {args.trials} trials, {tool}", file=sys.stderr)
        results = []
        for checkout in args.checkouts:
            root = checkout.resolve()
            cost = instructions(tool, root, large, work) - instructions(tool, root, small, work)
            results.append((str(checkout), cost / records))
        first = results[0][1]
        for name, per_record in results:
            ratio = per_record / first
            print(f"{name:40} {per_record / 1e3:8.1f} k instructions/record  {ratio:5.3f}x")
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()

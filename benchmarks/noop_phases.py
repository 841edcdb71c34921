"""Where a no-op `mirror --once` pass spends its CPU before, in and after its walk.

Each checkout runs the pass in a child interpreter that wraps the pass's own
steps (`Cache.load`, `split.plan`'s pass start, the fork, `Pass.walk`,
`finish_pass`) and prints the process CPU time (`time.process_time`) at each,
so the phases read the same under other load (wall time on a shared VM does
not). Checkouts alternate round by round, each into a destination of its own;
medians per phase, in ms of CPU. A baseline, not a gate.

    python benchmarks/noop_phases.py [--rounds 9] [--before OLD] SRC

SRC: a source tree (`bench_mirror.generate` makes one). The parent's phases
only: the forked verifier's CPU is its own.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

# Run in the child interpreter: `sessionstore mirror SRC DST --once -q`, the pass's
# steps wrapped, CPU time at each.
_DRIVER = r"""
import json, sys, time
marks = {}
def mark(name):
    marks.setdefault(name, time.process_time() * 1e3)
from sessionstore.mirror import cache, split, walk
mark("imported")
load = cache.Cache.load
def timed_load(*args):
    mark("load")
    found = load(*args)
    mark("loaded")
    return found
cache.Cache.load = timed_load
start = split.start
def timed_start(*args):
    mark("fork")
    found = start(*args)
    mark("forked")
    return found
split.start = timed_start
run_walk = walk.Pass.walk
def timed_walk(self, *args):
    mark("walk")
    run_walk(self, *args)
    mark("walked")
walk.Pass.walk = timed_walk
from sessionstore.cli import main
sys.argv = ["sessionstore", "mirror", sys.argv[1], sys.argv[2], "--once", "-q"]
try:
    main()
except SystemExit as end:
    if end.code:
        raise
mark("done")
print(json.dumps(marks))
"""

# Phase name -> (first mark, last mark).
PHASES = {
    "start-up and imports": ("", "imported"),
    "cache load": ("load", "loaded"),
    "root listing and split plan": ("loaded", "fork"),
    "fork": ("fork", "forked"),
    "walk": ("walk", "walked"),
    "end of pass": ("walked", "done"),
    "whole pass": ("", "done"),
}


def phases(checkout: Path, src: Path, dst: Path) -> dict[str, float]:
    env = dict(os.environ, PYTHONPATH=str(checkout))
    env.pop("PYTHONDONTWRITEBYTECODE", None)  # the .pyc files are part of a real start-up
    cmd = [sys.executable, "-P", "-c", _DRIVER, str(src), str(dst)]
    done = subprocess.run(cmd, env=env, capture_output=True, text=True, check=False)
    if done.returncode:
        sys.exit(f"{checkout}: {done.stderr.strip()}")
    marks = json.loads(done.stdout.splitlines()[-1])
    marks[""] = 0.0
    # A pass too small to split has no fork: its plan and fork take no time.
    marks.setdefault("fork", marks["walk"])
    marks.setdefault("forked", marks["fork"])
    return {name: marks[b] - marks[a] for name, (a, b) in PHASES.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("src", type=Path)
    parser.add_argument("--rounds", type=int, default=9)
    parser.add_argument("--before", type=Path, default=None, help="another checkout to compare")
    parser.add_argument("--dir", type=Path, default=None, help="work directory (default: tmp)")
    args = parser.parse_args()
    here = Path(__file__).resolve().parent.parent
    checkouts = {"this": here} | ({"before": args.before.resolve()} if args.before else {})
    work = Path(tempfile.mkdtemp(prefix="noop-phases-", dir=args.dir))
    try:
        runs: dict[str, list[dict[str, float]]] = {name: [] for name in checkouts}
        for name, checkout in checkouts.items():
            phases(checkout, args.src, work / name)  # the first copy
            phases(checkout, args.src, work / name)  # a warm-up no-op
        for r in range(args.rounds):
            order = list(checkouts.items())
            for name, checkout in order[r % len(order) :] + order[: r % len(order)]:
                runs[name].append(phases(checkout, args.src, work / name))
        print(f"CPU ms of the parent, medians of {args.rounds} rounds: {args.src}")
        print(f"{'phase':30}" + "".join(f"{name:>10}" for name in checkouts))
        for phase in PHASES:
            cells = [statistics.median(run[phase] for run in runs[n]) for n in checkouts]
            print(f"{phase:30}" + "".join(f"{cell:10.1f}" for cell in cells))
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()

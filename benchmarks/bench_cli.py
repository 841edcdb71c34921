"""Whole-process CLI timings against `python -c pass`, interleaved in one run (issue 16).

    python benchmarks/bench_cli.py [--trials 10000] [--repeats 15] [--dir PATH]

Builds an empty store and a store of one session with TRIALS completed
trials (plain file writes), then runs each command below once per round,
in the same order every round, REPEATS rounds after one warm-up round,
and prints each command's median and p90 and the median's difference to
the floor (`python -c pass`, the interpreter's own start):

  floor          python -c pass
  --version      sessionstore --version              goal: <= floor + 25 ms
  inspect empty  sessionstore inspect --store EMPTY  goal: <= 60 ms
  inspect ID     sessionstore inspect ID             goal: <= 0.5 s (default view)
  inspect --all  sessionstore inspect ID --all       goal: <= 1 s
  inspect --json sessionstore inspect ID --json      (the peer the issue names)

Bytecode is written and used (PYTHONDONTWRITEBYTECODE unset), as an
installed package runs; the tables render to a pipe at 120 columns. A
baseline, not a gate: under load, read the differences and ratios, which
share the run's noise, rather than the absolute figures.

    python benchmarks/bench_cli.py --instructions [--trials 10000]
    python benchmarks/bench_cli.py --against /path/to/other/checkout

counts each command's user-space instructions instead, once each under
callgrind (`noop_instructions.count`): independent of the machine's load,
and their ratio to the floor's count is the start-up cost in units of
`python -c pass`. `--against CHECKOUT` adds the start-up commands run from
another checkout's package (PYTHONPATH), interleaved, for a before/after.
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

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_inspect import build
from noop_instructions import count

# What the console script runs (for a checkout given by PYTHONPATH too: --against).
LAUNCH = "import sys; from sessionstore.cli import main; sys.exit(main())"

Command = tuple[list[str], dict[str, str]]  # argv, and the environment's overrides


def _cli() -> list[str]:
    # What the console script runs, not the script itself: pip's script imports `re` to
    # fix up argv[0] (~15 ms, 25 M instructions) and uv's does not, so the installer would
    # decide the start-up figures.
    return [sys.executable, "-c", LAUNCH]


def commands(empty: Path, big: Path, against: Path | None, work: Path) -> dict[str, Command]:
    cli = _cli()
    cmds: dict[str, Command] = {
        "floor": ([sys.executable, "-c", "pass"], {}),
        "--version": ([*cli, "--version"], {}),
        "inspect empty": ([*cli, "inspect", "--store", str(empty)], {}),
        "inspect ID": ([*cli, "inspect", "s00000", "--store", str(big)], {}),
        "inspect ID --all": ([*cli, "inspect", "s00000", "--store", str(big), "--all"], {}),
        "inspect ID --json": ([*cli, "inspect", "s00000", "--store", str(big), "--json"], {}),
    }
    if against is not None:
        # Start-up only: the other checkout's bytecode goes to a cache of its own, not
        # into its tree.
        other = {"PYTHONPATH": str(against), "PYTHONPYCACHEPREFIX": str(work / "pycache")}
        cmds["--version (against)"] = ([*cli, "--version"], other)
        cmds["inspect empty (against)"] = ([*cli, "inspect", "--store", str(empty)], other)
    return cmds


def _env(overrides: dict[str, str]) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    env.update(COLUMNS="120", NO_COLOR="1", **overrides)
    return env


def count_each(cmds: dict[str, Command], work: Path) -> None:
    """One callgrind count per command, after a plain run that writes the bytecode."""
    floor = 0
    for name, (argv, overrides) in cmds.items():
        env = _env(overrides)
        subprocess.run(argv, check=True, stdout=subprocess.DEVNULL, env=env, cwd=work)
        n = count("callgrind", argv, env, work)
        floor = floor or n
        print(f"{name:<18} {n / 1e6:9.1f} M instructions  {n / floor:6.2f}x floor")


def run_rounds(cmds: dict[str, Command], repeats: int, work: Path) -> dict[str, list[float]]:
    samples: dict[str, list[float]] = {name: [] for name in cmds}
    for round_ in range(repeats + 1):
        for name, (argv, overrides) in cmds.items():
            env = _env(overrides)
            start = time.perf_counter()
            # In the work directory: `python -c` puts its cwd first on sys.path, and a
            # checkout's cwd would shadow the package (--against) of the other.
            subprocess.run(argv, check=True, stdout=subprocess.DEVNULL, env=env, cwd=work)
            if round_:  # the first round warms caches and writes bytecode
                samples[name].append(time.perf_counter() - start)
    return samples


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=10_000)
    parser.add_argument("--repeats", type=int, default=15)
    parser.add_argument("--dir", type=Path, default=None, help="where to build (default: temp)")
    parser.add_argument("--instructions", action="store_true", help="count, do not time")
    parser.add_argument(
        "--against", type=Path, default=None, help="also time start-up of this checkout"
    )
    args = parser.parse_args()
    if args.dir:  # a work directory named on the command line may be new
        args.dir.mkdir(parents=True, exist_ok=True)
    print(f"python {sys.version.split()[0]} on {platform.platform()}, {os.cpu_count()} cpus")
    base = Path(tempfile.mkdtemp(prefix="bench-cli-", dir=args.dir))
    try:
        empty = base / "empty"
        empty.mkdir()
        build(base / "big", 1, args.trials)
        cmds = commands(empty, base / "big", args.against, base)
        if args.instructions:
            print(f"store: 1 session x {args.trials} trials; callgrind, one count each")
            count_each(cmds, base)
            return
        print(f"store: 1 session x {args.trials} trials; {args.repeats} rounds, interleaved")
        samples = run_rounds(cmds, args.repeats, base)
        floor = statistics.median(samples["floor"])
        for name, values in samples.items():
            med = statistics.median(values)
            p90 = statistics.quantiles(values, n=10)[-1] if len(values) > 1 else med
            print(
                f"{name:<18} median {med * 1000:7.1f} ms  p90 {p90 * 1000:7.1f} ms  "
                f"floor + {(med - floor) * 1000:6.1f} ms"
            )
    finally:
        shutil.rmtree(base, ignore_errors=True)


if __name__ == "__main__":
    main()

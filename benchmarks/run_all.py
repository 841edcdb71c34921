"""Every figure of issue 16's table, each against its peer in the same run: one command.

    python benchmarks/run_all.py [--quick] [--only NAME]... [--dir PATH] [--log FILE]
    python benchmarks/run_all.py --list

Runs the benchmark scripts below one after another (never two at once: they
would measure each other), each a subprocess printing its own environment
header, medians and ratios to its peer, interleaved within the script. The
output of each step is streamed as it comes and, with `--log`, copied to a
file; a summary of what ran, how long it took and its exit status ends the
run, and the exit status is 1 if any step failed.

`--quick` runs every step at a small size and one repeat: a smoke run that
shows every script still works (minutes, not an hour), not figures to record.
The full run takes about an hour on the 2-core reference machine; record its
figures in docs/benchmarks.md, misses included.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import time
from pathlib import Path
from typing import TextIO

HERE = Path(__file__).resolve().parent

# (name, what it measures, full arguments, --quick arguments). Each script takes --dir
# except bench_redact.py, which works in memory.
STEPS: list[tuple[str, str, list[str], list[str]]] = [
    (
        "mirror-8k",
        "mirror no-op, durable initial and 1% changed at 8k files vs rsync -a (--fsync)",
        ["bench_mirror.py", "--files", "8000", "--runs", "7", "--durable-runs", "5"],
        ["bench_mirror.py", "--files", "500", "--runs", "1", "--durable-runs", "1"],
    ),
    (
        "mirror-50k",
        "mirror no-op and durable copies at 50k files vs rsync -a (--fsync)",
        ["bench_mirror.py", "--files", "50000", "--runs", "5", "--durable-runs", "3"],
        ["bench_mirror.py", "--files", "1000", "--runs", "1", "--skip-durable"],
    ),
    (
        "mirror-scale",
        "mirror no-op at 8k, 50k, 200k files vs rsync -a and Python floors: per-file drift, RSS",
        ["bench_mirror.py", "--scale", "8000,50000,200000", "--bytes-scale", "0.1", "--runs", "5"],
        ["bench_mirror.py", "--scale", "500,2000", "--bytes-scale", "0.1", "--runs", "1"],
    ),
    (
        "inspect-1000x50",
        "inspect --json, 1,000 sessions x 50 trials vs find -exec cat",
        ["bench_inspect.py", "--sessions", "1000", "--trials", "50", "--repeats", "5"],
        ["bench_inspect.py", "--sessions", "20", "--trials", "5", "--repeats", "1"],
    ),
    (
        "inspect-10000x10",
        "inspect --json, 10,000 sessions x 10 trials vs find -exec cat",
        ["bench_inspect.py", "--sessions", "10000", "--trials", "10", "--repeats", "5"],
        ["bench_inspect.py", "--sessions", "50", "--trials", "2", "--repeats", "1"],
    ),
    (
        "cli",
        "start-up (--version, empty inspect) vs python -c pass; inspect ID of 10,000 trials",
        ["bench_cli.py", "--trials", "10000", "--repeats", "15"],
        ["bench_cli.py", "--trials", "200", "--repeats", "1"],
    ),
    (
        "redact",
        "redaction at 1, 10, 100, 1,000 secrets vs the raw scan; peak memory of 1 GiB",
        ["bench_redact.py"],
        ["bench_redact.py", "--quick", "--repeats", "1"],
    ),
]
NAMES = [name for name, *_ in STEPS]


def _command(script_args: list[str], work: Path | None) -> list[str]:
    script, *args = script_args
    if work is not None and script != "bench_redact.py":
        args = [*args, "--dir", str(work)]
    return [sys.executable, str(HERE / script), *args]


def _run(cmd: list[str], log: TextIO | None) -> int:
    """Run one step, its output (stderr merged) streamed to stdout and the log."""
    with subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True) as proc:
        assert proc.stdout is not None
        for line in proc.stdout:
            sys.stdout.write(line)
            sys.stdout.flush()
            if log is not None:
                log.write(line)
                log.flush()
    return proc.returncode


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="small sizes, one repeat: a smoke run")
    parser.add_argument(
        "--only", action="append", choices=NAMES, metavar="NAME", help=f"one of {', '.join(NAMES)}"
    )
    parser.add_argument("--dir", type=Path, default=None, help="work directory (default: tmp)")
    parser.add_argument("--log", type=Path, default=None, help="also write the output here")
    parser.add_argument("--list", action="store_true", help="print the commands, run nothing")
    args = parser.parse_args()
    if args.dir is not None and not args.list:
        args.dir.mkdir(parents=True, exist_ok=True)  # each script makes its temp dirs in it
    chosen = [step for step in STEPS if not args.only or step[0] in args.only]
    log = args.log.open("w") if args.log is not None else None
    results: list[tuple[str, int, float]] = []
    try:
        for name, what, full, quick in chosen:
            cmd = _command(quick if args.quick else full, args.dir)
            header = f"== {name}: {what}\n$ {' '.join(cmd[1:])}\n"
            sys.stdout.write(header)
            if log is not None:
                log.write(header)
            if args.list:
                continue
            started = time.monotonic()
            code = _run(cmd, log)
            results.append((name, code, time.monotonic() - started))
    finally:
        if log is not None:
            log.close()
    if args.list:
        return 0
    print("\n== summary")
    for name, code, seconds in results:
        print(f"{name:18} {'ok' if code == 0 else f'FAILED (exit {code})':18} {seconds:8.1f} s")
    return 0 if all(code == 0 for _, code, _ in results) else 1


if __name__ == "__main__":
    sys.exit(main())

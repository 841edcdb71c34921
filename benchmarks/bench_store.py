"""Commit latency of a record vs the bare atomic-write floor.

A record commit is `begin()`, two files, `complete()`. The floor writes the
same three files the bare way (temp, write, fsync, rename) with no directory
fsyncs, no mkdir and no checks. Goal: median ratio <= 1.5x.

    python benchmarks/bench_store.py [--iterations 300] [--dir PATH]

`--count N` writes N records after 5 warm-up records, untimed, and nothing
else, for counting one record's system calls or instructions: run it under
`strace -f -c` or `valgrind --tool=callgrind` with N and with 0 and divide the
difference by N (PYTHONPATH at another checkout counts that one).
"""

from __future__ import annotations

import argparse
import os
import platform
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

from sessionstore import Store

CONFIG = b"model: llama\r\nbatch: 32\r\n" * 20
PATCH = bytes(range(256)) * 16
MARKER = b'{"failed": false, "benchmark": {"metrics": {"output_tok_per_s": 1234.5}}}\n'


def bare(directory: Path, i: int) -> None:
    for name, data in (("task.yml", CONFIG), ("patch.diff", PATCH), ("trial.json", MARKER)):
        temp = directory / f".tmp-{i}-{name}"
        fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
        os.write(fd, data)
        os.fsync(fd)
        os.close(fd)
        os.replace(temp, directory / f"{i}-{name}")


def record(store_session: object, _i: int) -> None:
    writer = store_session.trials.begin()  # type: ignore[attr-defined]
    writer.write_bytes("task.yml", CONFIG)
    writer.write_bytes("patch.diff", PATCH)
    writer.complete({"failed": False, "benchmark": {"metrics": {"output_tok_per_s": 1234.5}}})


def timed(fn: object, arg: object, iterations: int) -> list[float]:
    samples = []
    for i in range(iterations):
        start = time.perf_counter()
        fn(arg, i)  # type: ignore[operator]
        samples.append(time.perf_counter() - start)
    return samples


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--iterations", type=int, default=300)
    parser.add_argument(
        "--dir", type=Path, default=None, help="where to write (default: a temp dir)"
    )
    parser.add_argument("--count", type=int, default=None, help="write N records, untimed")
    args = parser.parse_args()
    if args.dir:  # a work directory named on the command line may be new
        args.dir.mkdir(parents=True, exist_ok=True)
    base = Path(tempfile.mkdtemp(prefix="bench-store-", dir=args.dir))
    if args.count is not None:
        session = Store(base / "store").create()
        for i in range(5 + args.count):
            record(session, i)
        shutil.rmtree(base)
        return
    print(f"python {sys.version.split()[0]} on {platform.platform()}, {os.cpu_count()} cpus")
    print(
        f"directory {base} ({os.statvfs(base).f_bsize} byte blocks), {args.iterations} iterations"
    )
    floor_dir = base / "floor"
    floor_dir.mkdir()
    session = Store(base / "store").create()
    # Warm up both paths, then interleave rounds so drift affects both alike.
    timed(bare, floor_dir, 20)
    timed(record, session, 20)
    floor: list[float] = []
    ours: list[float] = []
    rounds = 5
    for _ in range(rounds):
        floor += timed(bare, floor_dir, args.iterations // rounds)
        ours += timed(record, session, args.iterations // rounds)
    f50, o50 = statistics.median(floor), statistics.median(ours)
    f95 = statistics.quantiles(floor, n=20)[18]
    o95 = statistics.quantiles(ours, n=20)[18]
    print(f"{'':28}{'median':>10}{'p95':>10}")
    print(f"{'bare write+fsync+rename x3':28}{f50 * 1e3:>8.3f}ms{f95 * 1e3:>8.3f}ms")
    print(f"{'record begin+2 files+marker':28}{o50 * 1e3:>8.3f}ms{o95 * 1e3:>8.3f}ms")
    print(f"ratio (median): {o50 / f50:.2f}x   goal <= 1.5x")


if __name__ == "__main__":
    main()

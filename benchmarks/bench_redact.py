"""Redaction throughput and memory: a baseline, not a gate.

    python benchmarks/bench_redact.py [--quick]

Streams 64 MiB of generated log text (1 MiB chunks) through a Redactor with
1, 10, 100 and 1,000 registered secrets and compares it with a raw
ahocorasick-rs scan of the same bytes for the same needles, in the same run:
the faster of an overlapping and a leftmost-first DFA scan, so the ratio is
never flattered by picking the slower baseline. Then streams 1 GiB
generated on the fly in a subprocess and reports its peak RSS. Goals:
>= 400 MB/s at 100 secrets, >= 100 MB/s at 1,000, >= 0.7x the raw scan,
peak memory < 64 MiB.
"""

from __future__ import annotations

import argparse
import os
import platform
import random
import resource
import statistics
import subprocess
import sys
import time
from importlib.metadata import version

import ahocorasick_rs

from sessionstore import Redactor

CHUNK = 1 << 20
ALPHABET = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"


def tokens(n: int, seed: int = 1) -> list[str]:
    rng = random.Random(seed)
    return ["".join(rng.choices(ALPHABET, k=rng.randint(20, 40))) for _ in range(n)]


def log_text(size: int, secrets: list[str], seed: int = 2) -> bytes:
    """Deterministic log lines; one line in 10,000 carries a secret."""
    rng = random.Random(seed)
    lines: list[bytes] = []
    total = 0
    i = 0
    while total < size:
        i += 1
        line = (
            f"2024-05-{i % 28 + 1:02d}T12:{i % 60:02d}:{i * 7 % 60:02d}.{i % 1000:03d}Z INFO "
            f"/srv/app/module{i % 97}/handler.py:{i % 500} request id={rng.getrandbits(128):032x} "
            f"took {i % 1000}ms\n"
        )
        if i % 10_000 == 0:
            line = line[:-1] + f" token={rng.choice(secrets)}\n"
        data = line.encode()
        lines.append(data)
        total += len(data)
    return b"".join(lines)[:size]


def stream_mb_s(r: Redactor, data: bytes) -> float:
    view = memoryview(data)
    start = time.perf_counter()
    s = r.stream()
    for pos in range(0, len(data), CHUNK):
        s.feed(bytes(view[pos : pos + CHUNK]))
    s.finish()
    return len(data) / (time.perf_counter() - start) / 1e6


def raw_mb_s(matcher: ahocorasick_rs.BytesAhoCorasick, data: bytes, overlapping: bool) -> float:
    view = memoryview(data)
    start = time.perf_counter()
    for pos in range(0, len(data), CHUNK):
        matcher.find_matches_as_indexes(bytes(view[pos : pos + CHUNK]), overlapping=overlapping)
    return len(data) / (time.perf_counter() - start) / 1e6


def throughput(size: int, repeats: int) -> None:
    print(f"\nStreaming throughput, {size >> 20} MiB, 1 MiB chunks, median of {repeats}")
    print(f"{'secrets':>8} {'needles':>8} {'redact MB/s':>12} {'raw AC MB/s':>12} {'ratio':>6}")
    for n in (1, 10, 100, 1000):
        secrets = tokens(n)
        data = log_text(size, secrets)
        r = Redactor()
        for s in secrets:
            r.add(s)
        needles = sorted(r.needles())
        dfa = ahocorasick_rs.Implementation.DFA
        overlapping = ahocorasick_rs.BytesAhoCorasick(needles, implementation=dfa)
        leftmost = ahocorasick_rs.BytesAhoCorasick(
            needles, matchkind=ahocorasick_rs.MATCHKIND_LEFTMOST_FIRST, implementation=dfa
        )
        stream_mb_s(r, data[:CHUNK])  # warm-up (builds the automaton)
        red = statistics.median(stream_mb_s(r, data) for _ in range(repeats))
        raw = max(
            statistics.median(raw_mb_s(overlapping, data, True) for _ in range(repeats)),
            statistics.median(raw_mb_s(leftmost, data, False) for _ in range(repeats)),
        )
        print(f"{n:>8} {len(needles):>8} {red:>12.0f} {raw:>12.0f} {red / raw:>6.2f}")


def child(total: int, n: int) -> None:
    """Stream `total` bytes generated on the fly; print peak RSS growth in MiB."""
    secrets = tokens(n)
    r = Redactor()
    for secret in secrets:
        r.add(secret)
    block = log_text(CHUNK, secrets, seed=3)
    s = r.stream()
    s.feed(block)  # build and warm everything before the baseline
    base = _peak_kib()
    for _ in range(total // CHUNK - 1):
        s.feed(block)
    s.finish()
    peak = _peak_kib()
    print(f"{peak / 1024:.1f} {(peak - base) / 1024:.1f}")


def _peak_kib() -> int:
    # ru_maxrss survives execve on Linux (it would report the parent's peak);
    # VmHWM belongs to this process image only.
    try:
        with open("/proc/self/status") as f:
            return next(int(line.split()[1]) for line in f if line.startswith("VmHWM:"))
    except OSError:
        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss


def memory(total: int) -> None:
    print(f"\nPeak RSS streaming {total >> 20} MiB generated on the fly (subprocess)")
    print(f"{'secrets':>8} {'peak MiB':>9} {'growth MiB':>11}")
    for n in (100, 1000):
        out = subprocess.run(
            [sys.executable, __file__, "--child", str(total), str(n)],
            check=True,
            capture_output=True,
            text=True,
        ).stdout.split()
        print(f"{n:>8} {float(out[0]):>9.1f} {float(out[1]):>11.1f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="16 MiB, 1 repeat, 256 MiB memory")
    parser.add_argument("--child", nargs=2, type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(*args.child)
        return
    print(f"python {platform.python_version()} on {platform.platform()}")
    print(f"cpus {os.cpu_count()}, ahocorasick-rs {version('ahocorasick-rs')}")
    throughput(16 << 20 if args.quick else 64 << 20, 1 if args.quick else 5)
    memory(256 << 20 if args.quick else 1 << 30)


if __name__ == "__main__":
    main()

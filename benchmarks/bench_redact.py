"""Redaction throughput and memory: a baseline, not a gate.

    python benchmarks/bench_redact.py [--quick] [--repeats N]

Streams 64 MiB of generated log text (1 MiB chunks) through a Redactor with
1, 10, 100 and 1,000 registered secrets, as the mirror does (`feed_parts`: the
mirror writes the parts, views of each chunk around the markers; "joined" is
`feed`, the same output joined into one bytes object), and compares it with raw scans of the
same chunks for the same needles, in the same run, interleaved (redactor,
then each raw scan, N times over; medians): an overlapping and a
leftmost-first ahocorasick-rs DFA scan and, where installed, a Hyperscan
scan that reports every match. The ratio is to the fastest of them, so it is
never flattered by picking a slow baseline. Then streams 1 GiB generated on
the fly in a subprocess, as parts again, and reports its peak memory
(VmHWM). Goals: >= 0.9x the raw scan at every count, >= 400 MB/s at 100
secrets, peak < 64 MiB.
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
from collections.abc import Callable
from importlib.metadata import version

import ahocorasick_rs

from sessionstore import Redactor
from sessionstore.redact.hyperscan_detector import database

try:
    import hyperscan
except ImportError:  # not on this platform: the ahocorasick-rs peers only
    hyperscan = None  # type: ignore[assignment]

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


Scan = Callable[[bytes], object]


def mb_s(
    data: bytes, scan: Scan, finish: Callable[[], object] = lambda: None
) -> tuple[float, float]:
    """MB/s of `scan` over `data` in 1 MiB chunks (fresh bytes objects, as os.read gives).

    Wall clock and this process's CPU time: on a machine shared with other jobs
    the second is steadier, the first is what a user waits.
    """
    view = memoryview(data)
    wall, cpu = time.perf_counter(), time.process_time()
    for pos in range(0, len(data), CHUNK):
        scan(bytes(view[pos : pos + CHUNK]))
    finish()
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    return len(data) / wall / 1e6, len(data) / max(cpu, 1e-9) / 1e6


def redact_mb_s(r: Redactor, data: bytes, *, joined: bool = False) -> tuple[float, float]:
    """The stream as the mirror runs it (`feed_parts`: it writes the parts), or `feed`."""
    s = r.stream()
    return mb_s(data, s.feed, s.finish) if joined else mb_s(data, s.feed_parts, s.finish_parts)


def raw_scans(needles: list[bytes]) -> dict[str, Scan]:
    """The peers: bare scans of the same needles, each reporting every match it finds."""
    dfa = ahocorasick_rs.Implementation.DFA
    overlapping = ahocorasick_rs.BytesAhoCorasick(needles, implementation=dfa)
    leftmost = ahocorasick_rs.BytesAhoCorasick(
        needles, matchkind=ahocorasick_rs.MATCHKIND_LEFTMOST_FIRST, implementation=dfa
    )
    scans: dict[str, Scan] = {
        "AC ovl": lambda b: overlapping.find_matches_as_indexes(b, overlapping=True),
        "AC lf": leftmost.find_matches_as_indexes,
    }
    if hyperscan is not None:
        db = database(needles)  # the compile sessionstore uses; the scan below is bare
        found: list[tuple[int, int]] = []

        def on_match(pattern: int, _from: int, end: int, _flags: int, _ctx: object) -> None:
            found.append((pattern, end))

        def scan(b: bytes) -> None:
            found.clear()
            db.scan(b, match_event_handler=on_match)

        scans["HS"] = scan
    return scans


def throughput(size: int, repeats: int) -> None:
    """One row per secret count: wall MB/s medians, the ratio to the fastest raw scan.

    "ratio" compares wall medians, "cpu" CPU-time medians; "spread" is the
    lowest and highest wall ratio of one round (redactor and peers run back
    to back), which shows how much the machine's load moved the figure.
    """
    print(f"\nStreaming {size >> 20} MiB in 1 MiB chunks, interleaved, median of {repeats}")
    names = ["AC ovl", "AC lf"] + (["HS"] if hyperscan is not None else [])
    heads = "".join(f"{name + ' MB/s':>12}" for name in names)
    tail = f"{'ratio':>6}{'cpu':>6}{'spread':>11}"
    print(f"{'secrets':>7}{'needles':>8}{'redact MB/s':>12}{'joined':>8}{heads}{tail}")
    for n in (1, 10, 100, 1000):
        secrets = tokens(n)
        data = log_text(size, secrets)
        r = Redactor()
        for s in secrets:
            r.add(s)
        scans = raw_scans(sorted(r.needles()))
        redact_mb_s(r, data[: 4 * CHUNK])  # warm-up (builds the matchers)
        runs: dict[str, list[tuple[float, float]]] = {
            name: [] for name in ["redact", "joined", *names]
        }
        rounds: list[float] = []
        for _ in range(repeats):
            runs["redact"].append(redact_mb_s(r, data))
            runs["joined"].append(redact_mb_s(r, data, joined=True))
            for name in names:
                runs[name].append(mb_s(data, scans[name]))
            rounds.append(runs["redact"][-1][0] / max(runs[name][-1][0] for name in names))
        wall = {name: statistics.median(w for w, _ in v) for name, v in runs.items()}
        cpu = {name: statistics.median(c for _, c in v) for name, v in runs.items()}
        ratio = wall["redact"] / max(wall[name] for name in names)
        cpu_ratio = cpu["redact"] / max(cpu[name] for name in names)
        cols = "".join(f"{wall[name]:>12.0f}" for name in names)
        spread = f"{min(rounds):.2f}-{max(rounds):.2f}"
        print(
            f"{n:>7}{len(r.needles()):>8}{wall['redact']:>12.0f}{wall['joined']:>8.0f}{cols}"
            f"{ratio:>6.2f}{cpu_ratio:>6.2f}{spread:>11}"
        )


def child(total: int, n: int) -> None:
    """Stream `total` bytes generated on the fly; print peak memory, its growth, markers."""
    secrets = tokens(n)
    r = Redactor()
    for secret in secrets:
        r.add(secret)
    # 8 MiB of log text (a few secrets) cut into fresh 1 MiB chunks, over and over.
    view = memoryview(log_text(8 * CHUNK, secrets, seed=3))
    s = r.stream()
    # As the mirror streams: the parts, each written (here counted) and dropped.
    markers = _markers(s.feed_parts(bytes(view[:CHUNK])))  # builds and warms the matchers
    base = _peak_kib()
    for i in range(1, total // CHUNK):
        pos = i % 8 * CHUNK
        markers += _markers(s.feed_parts(bytes(view[pos : pos + CHUNK])))
    markers += _markers(s.finish_parts())
    peak = _peak_kib()
    print(f"{peak / 1024:.1f} {(peak - base) / 1024:.1f} {markers}")


def _markers(parts: list[bytes | memoryview]) -> int:
    # A marker is always a part of its own; the generated text holds no "REDACTED".
    return sum(1 for part in parts if part == b"REDACTED")


def _peak_kib() -> int:
    # ru_maxrss survives execve on Linux (it would report the parent's peak);
    # VmHWM belongs to this process image only.
    try:
        with open("/proc/self/status") as f:
            return next(int(line.split()[1]) for line in f if line.startswith("VmHWM:"))
    except OSError:
        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss


def memory(total: int) -> None:
    print(f"\nPeak memory (VmHWM) streaming {total >> 20} MiB made on the fly, in a subprocess")
    print(f"{'secrets':>8} {'peak MiB':>9} {'growth MiB':>11} {'markers':>8}")
    for n in (100, 1000):
        out = subprocess.run(
            [sys.executable, __file__, "--child", str(total), str(n)],
            check=True,
            capture_output=True,
            text=True,
        ).stdout.split()
        print(f"{n:>8} {float(out[0]):>9.1f} {float(out[1]):>11.1f} {out[2]:>8}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="16 MiB, 1 repeat, 256 MiB memory")
    parser.add_argument("--repeats", type=int, help="interleaved runs per row (default 5)")
    parser.add_argument("--child", nargs=2, type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(*args.child)
        return
    print(f"python {platform.python_version()} on {platform.platform()}")
    hs = version("hyperscan") if hyperscan is not None else "not installed"
    print(
        f"cpus {os.cpu_count()}, load {os.getloadavg()[0]:.1f}, ahocorasick-rs "
        f"{version('ahocorasick-rs')}, hyperscan {hs}"
    )
    throughput(16 << 20 if args.quick else 64 << 20, args.repeats or (1 if args.quick else 5))
    memory(256 << 20 if args.quick else 1 << 30)


if __name__ == "__main__":
    main()

"""User-space instructions of one warm in-process mirror no-op pass, per checkout.

    python benchmarks/noop_instructions.py [--dir /tmp/x] [--passes 2] CHECKOUT [CHECKOUT ...]
    python benchmarks/noop_instructions.py /work/base-wt .   # before/after
    python benchmarks/noop_instructions.py --exclude '*.tmp' .   # the cost of patterns
    python benchmarks/noop_instructions.py --files 2000 --passes 1 /work/main .  # quicker

It builds the benchmark tree of bench_mirror.py once (`--files`, default
200 sessions x 10 trials, 10k files), copies it into one destination per checkout (a plain
`Mirror.run_once`, not measured), then for each checkout runs, in a fresh
interpreter importing that checkout's `sessionstore` (PYTHONPATH), one
warm-up no-op pass and then `--passes` no-op passes, under `valgrind
--tool=callgrind` (or, without valgrind, `perf stat -e instructions:u`);
and the same with zero measured passes. The difference divided by
`--passes` is the cost of one warm no-op pass, without the interpreter's
start, the imports or the warm-up. PYTHONHASHSEED=0 and the collector
disabled, as `mirror --once` runs it (cli/mirror_run.py), make it repeatable.
Prints one line per checkout (millions of instructions per pass) and the
ratio of each to the first. `--exclude PATTERN` (repeatable) gives every
checkout's `Mirror` these exclusion patterns.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_mirror import generate

PASS = """
import gc, sys
try:
    from sessionstore.mirror.mirror import Mirror
except ImportError:  # a checkout from before mirror/ was a package
    from sessionstore.mirror import Mirror
patterns = sys.argv[4:]  # --exclude: only passed when given (older checkouts lack it)
m = Mirror(sys.argv[1], sys.argv[2], durable=False, **({"exclude": patterns} if patterns else {}))
gc.disable()
m.run_once()  # warm-up (the first run also copies when the destination is empty)
for _ in range(int(sys.argv[3])):
    r = m.run_once()
    assert not r.copied and not r.errors, r
"""


def counter() -> str:
    if shutil.which("valgrind"):
        return "callgrind"
    if shutil.which("perf"):
        return "perf"
    raise SystemExit("neither valgrind nor perf is installed; use bench_mirror.py --runs 30")


def environ(checkout: Path, work: Path) -> dict[str, str]:
    """That checkout's package first, bytecode cached (so no measured run compiles)."""
    env = {**os.environ, "PYTHONPATH": str(checkout), "PYTHONHASHSEED": "0"}
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    env["PYTHONPYCACHEPREFIX"] = str(work / "pycache" / checkout.name)
    return env


def count(tool: str, py: list[str], env: dict[str, str], work: Path) -> int:
    """User-space instructions of the process `py` (argv), by callgrind or perf."""
    if tool == "callgrind":
        out = work / "callgrind.out"
        cmd = ["valgrind", "--tool=callgrind", f"--callgrind-out-file={out}", *py]
        pattern = r"Collected : (\d+)"
    else:
        cmd = ["perf", "stat", "-x,", "-e", "instructions:u", *py]
        pattern = r"^(\d+),[^,]*,instructions"
    proc = subprocess.run(cmd, env=env, cwd=work, capture_output=True, text=True)
    found = re.search(pattern, proc.stderr, re.M)
    if proc.returncode != 0 or found is None:
        raise SystemExit(f"{cmd[0]} failed:\n{proc.stderr[-2000:]}")
    return int(found.group(1))


def instructions(
    tool: str, checkout: Path, src: Path, dst: Path, n: int, work: Path, exclude: list[str]
) -> int:
    py = [sys.executable, "-c", PASS, str(src), str(dst), str(n), *exclude]
    return count(tool, py, environ(checkout, work), work)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("checkouts", type=Path, nargs="+", help="checkout roots")
    parser.add_argument("--dir", type=Path, default=None, help="work directory (default: tmp)")
    parser.add_argument("--passes", type=int, default=2, help="measured passes per checkout")
    parser.add_argument(
        "--files", type=int, default=10_000, help="tree size (50-file sessions; default 10,000)"
    )
    parser.add_argument(
        "--exclude", action="append", default=[], metavar="PATTERN", help="exclusion pattern"
    )
    args = parser.parse_args()
    if args.dir:  # a work directory named on the command line may be new
        args.dir.mkdir(parents=True, exist_ok=True)
    tool = counter()
    work = Path(tempfile.mkdtemp(prefix="noop-instr-", dir=args.dir))
    try:
        src = work / "src"
        nfiles = generate(src, sessions=max(1, args.files // 50))  # 10k: the figures on record
        time.sleep(0.05)  # let the tree leave the racy window
        print(f"{nfiles} files, {tool}, {args.passes} measured passes", file=sys.stderr)
        results = []
        for i, checkout in enumerate(args.checkouts):
            root = checkout.resolve()
            dst = work / f"dst-{i}"
            copy = [sys.executable, "-c", PASS, str(src), str(dst), "0", *args.exclude]
            # The initial copy (and the bytecode), not measured.
            subprocess.run(copy, env=environ(root, work), cwd=work, check=True)
            base = instructions(tool, root, src, dst, 0, work, args.exclude)
            full = instructions(tool, root, src, dst, args.passes, work, args.exclude)
            results.append((str(checkout), (full - base) / args.passes))
        first = results[0][1]
        for name, per_pass in results:
            print(f"{name:40} {per_pass / 1e6:8.1f} M instructions/pass  {per_pass / first:5.3f}x")
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()

"""User-space instructions and page faults per MiB: the redactor against a raw scan.

    python benchmarks/redact_instructions.py CHECKOUT [CHECKOUT ...] [--secrets N ...] [--peer P]
    python benchmarks/redact_instructions.py /work/base-wt .   # before/after, 10 and 100 secrets

Wall and CPU time swing by 2x on a loaded machine; these two do not. For
each checkout and secret count, 8 MiB of bench_redact.py's log text go, in
fresh 1 MiB chunks, once through `StreamRedactor.feed_parts` (what the mirror
does) and once through a raw scan of the same needles that reports every
match (`--peer`: one of bench_redact.py's, Hyperscan by default; "AC lf" is
the fastest for a few secrets), each in its own interpreter
importing that checkout's `sessionstore` (PYTHONPATH). A warm-up pass runs
first; then only the measured pass is counted, under `valgrind
--tool=callgrind --instr-atstart=no` switched on and off around it with
`callgrind_control`, so interpreter start-up, imports and compiling the
matchers are left out. Page faults (minor faults in /proc/self/stat) of the
same pass come from a run without valgrind: the kernel work they cost is not
in the instruction count. Needs valgrind.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_redact import CHUNK, log_text, tokens
from noop_instructions import environ

SIZE = 8 * CHUNK

PASS = """
import sys
sys.path.insert(0, sys.argv[4])
from bench_redact import CHUNK, raw_scans, tokens
from sessionstore import Redactor

n, mode, path = int(sys.argv[1]), sys.argv[2], sys.argv[3]
data = open(path, "rb").read()
view = memoryview(data)
r = Redactor()
for secret in tokens(n):
    r.add(secret)
scan = raw_scans(sorted(r.needles()))[sys.argv[5]] if mode == "raw" else None

def one_pass():
    if scan is not None:
        for pos in range(0, len(data), CHUNK):
            scan(bytes(view[pos : pos + CHUNK]))
        return
    s = r.stream()
    for pos in range(0, len(data), CHUNK):
        s.feed_parts(bytes(view[pos : pos + CHUNK]))
    s.finish_parts()

def faults():
    with open("/proc/self/stat") as f:
        return int(f.read().rsplit(")", 1)[1].split()[7])

one_pass()  # warm-up: builds the matchers, settles the heap
print("ready", flush=True)
sys.stdin.readline()
before = faults()
one_pass()
print("done", faults() - before, flush=True)
sys.stdin.readline()
"""


def measure(
    checkout: Path, n: int, mode: str, data: Path, work: Path, valgrind: bool, peer: str
) -> int:
    """Instructions (under callgrind) or page faults of one measured pass."""
    env = environ(checkout, work)
    bench = str(Path(__file__).resolve().parent)
    py = [sys.executable, "-c", PASS, str(n), mode, str(data), bench, peer]
    out = work / f"callgrind-{os.getpid()}.out"
    cmd = ["valgrind", "--tool=callgrind", "--instr-atstart=no", f"--callgrind-out-file={out}"]
    proc = subprocess.Popen(
        [*cmd, *py] if valgrind else py,
        env=env,
        cwd=work,  # `-c` puts the cwd first on sys.path, before PYTHONPATH's checkout
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    assert proc.stdin is not None and proc.stdout is not None
    try:
        if proc.stdout.readline().strip() != "ready":
            raise SystemExit(f"the measured process failed ({checkout}, {n}, {mode})")
        if valgrind:
            control(proc.pid, "-z")  # forget the warm-up
            control(proc.pid, "-i", "on")
        proc.stdin.write("go\n")
        proc.stdin.flush()
        done = proc.stdout.readline().split()
        if valgrind:
            control(proc.pid, "-i", "off")
            control(proc.pid, "-d")
        proc.stdin.write("stop\n")
        proc.stdin.flush()
    finally:
        proc.wait(timeout=600)
    if not valgrind:
        return int(done[1])
    totals = [
        int(line.split()[1])
        for dump in work.glob(f"{out.name}*")
        for line in dump.read_text().splitlines()
        if line.startswith("totals:")
    ]
    for dump in work.glob(f"{out.name}*"):
        dump.unlink()
    return max(totals)


def control(pid: int, *args: str) -> None:
    subprocess.run(["callgrind_control", *args, str(pid)], check=True, capture_output=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("checkouts", type=Path, nargs="+", help="checkout roots")
    parser.add_argument("--secrets", type=int, nargs="+", default=[10, 100])
    parser.add_argument("--dir", type=Path, default=None, help="work directory (default: tmp)")
    parser.add_argument(
        "--peer", default="HS", choices=["HS", "AC lf", "AC ovl"], help="the raw scan (default HS)"
    )
    args = parser.parse_args()
    if args.dir:  # a work directory named on the command line may be new
        args.dir.mkdir(parents=True, exist_ok=True)
    if not shutil.which("valgrind") or not shutil.which("callgrind_control"):
        raise SystemExit("valgrind is not installed; use bench_redact.py")
    work = Path(tempfile.mkdtemp(prefix="redact-instr-", dir=args.dir))
    try:
        print(
            f"{'checkout':>30} {'secrets':>7} {'redact M/MiB':>13} {'raw M/MiB':>13} "
            f"{'ratio':>6} {'faults/MiB':>11} {'raw':>5}"
        )
        for n in args.secrets:
            data = work / f"log-{n}.txt"
            data.write_bytes(log_text(SIZE, tokens(n)))
            for checkout in args.checkouts:
                root = checkout.resolve()
                red, raw = (
                    measure(root, n, m, data, work, True, args.peer) / 8 for m in ("red", "raw")
                )
                faults = [
                    measure(root, n, m, data, work, False, args.peer) / 8 for m in ("red", "raw")
                ]
                print(
                    f"{checkout!s:>30} {n:>7} {red / 1e6:>13.3f} {raw / 1e6:>13.3f} "
                    f"{raw / red:>6.3f} {faults[0]:>11.1f} {faults[1]:>5.1f}"
                )
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()

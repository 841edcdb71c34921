"""Benchmark `sessionstore mirror --once` against `rsync -a`, whole-process, same tree, same run.

A baseline, not a gate: it prints an environment header, the median (and p95)
wall time of each scenario over --runs runs with a warm page cache, and the
ratio to rsync next to the goal from issue 4, and the peak RSS of each tool.

    python benchmarks/bench_mirror.py [--runs 5] [--durable-runs 3] [--dir /tmp/x]
    python benchmarks/bench_mirror.py --only-noop --against ../old-checkout  # before/after
    python benchmarks/bench_mirror.py --scale 8000,50000,200000 --bytes-scale 0.1  # issue 16
    python benchmarks/bench_mirror.py --only-durable --files 50000 --durable-runs 3

Scenarios (each tool gets its own destination, prepared identically):
  no-op        nothing changed since the last pass
  1% changed   ~100 of 10,000 files rewritten (new size, so rsync's quick check sees
               them); once with the default (durable) pass, once with --no-fsync.
               They are logs of in-flight trials (the last trial of each session has
               no marker yet): a completed record is sealed and never rewritten.
  copy         initial copy into an empty destination, `--no-fsync` vs `rsync -a`
  durable      initial copy, default (fsync) vs `rsync -a --fsync`, fresh destinations;
               then 1% changed, default (fsync) vs `rsync -a --fsync`
"""

from __future__ import annotations

import argparse
import os
import platform
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

TRIALS = 10  # per session; 5 files each (--files sets the number of sessions)
FILES = {  # name -> typical size in bytes
    "task.dstack.yml": 600,
    "patches/model.diff": 3_000,
    "patches/config.diff": 1_500,
    "log.txt": 8_000,
    "trial.json": 900,
}
BIG_LOG = 3 * 1024 * 1024  # a few trials have MB-sized logs


def generate(src: Path, sessions: int, seed: int = 1, scale: float = 1.0) -> int:
    """The session tree; returns the number of files (50 per session).

    `scale` multiplies every file's size (at least 1 byte).
    """
    rng = random.Random(seed)
    count = 0
    for s in range(sessions):
        for t in range(1, TRIALS + 1):
            rec = src / f"{s:08x}" / "trials" / str(t)
            (rec / "patches").mkdir(parents=True, exist_ok=True)
            for name, size in FILES.items():
                if name == "trial.json" and t == TRIALS:
                    name = "progress.json"  # this trial is in flight: no marker yet
                n = size if rng.random() > 0.002 or name != "log.txt" else BIG_LOG
                n = max(1, int(n * rng.uniform(0.5, 1.5) * scale))
                if name in ("trial.json", "progress.json"):
                    learned = rng.randbytes(n // 2).hex().encode()
                    data = b'{"trial": %d, "learned": "%s"}' % (t, learned)
                else:
                    data = rng.randbytes(n // 2).hex().encode()[:n]
                (rec / name).write_bytes(data)
                count += 1
    return count


def change_one_percent(src: Path, seed: int) -> None:
    rng = random.Random(seed)
    files = sorted(src.glob(f"*/trials/{TRIALS}/log.txt"))  # in-flight trials only
    for p in files:  # 200 logs ...
        if rng.random() < 0.5:  # ... of which ~100 get rewritten
            p.write_bytes(rng.randbytes(rng.randrange(100, 9000)))


def sessionstore_cmd() -> list[str]:
    script = Path(sys.executable).with_name("sessionstore")
    return [str(script)] if script.exists() else [sys.executable, "-m", "sessionstore"]


ENV = dict(os.environ)


PEAK_RSS: dict[str, int] = {}  # command name -> the largest peak RSS seen, in KiB
CPU: dict[str, list[float]] = {}  # command name -> user + system seconds of each run


def timed(
    cmd: list[str], env: dict[str, str] | None = None, cwd: Path | None = None, label: str = ""
) -> float:
    """Wall seconds of `cmd`; its own peak RSS goes to PEAK_RSS.

    The peak RSS comes from GNU time when installed: wait4's `ru_maxrss` of a
    child forked from this (large) process starts at this process's own RSS
    (exec keeps the high-water mark of the memory it replaces).
    """
    name = label or ("rsync" if cmd[0] == "rsync" else "sessionstore")
    rss_file = Path(tempfile.gettempdir()) / f"bench-mirror-rss-{os.getpid()}"
    gnu_time = Path("/usr/bin/time")
    run = [str(gnu_time), "-f", "%U %S %M", "-o", str(rss_file), *cmd]
    if not gnu_time.exists():
        run = cmd
    start = time.perf_counter()
    proc = subprocess.Popen(
        run, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env or ENV, cwd=cwd
    )
    assert proc.stderr is not None
    err = proc.stderr.read()
    _, status, usage = os.wait4(proc.pid, 0)
    elapsed = time.perf_counter() - start
    proc.returncode = os.waitstatus_to_exitcode(status)
    kib, cpu = usage.ru_maxrss, usage.ru_utime + usage.ru_stime
    if run is not cmd:  # the figures come last (after "Command exited with ..." on failure)
        user, system, rss = rss_file.read_text().split()[-3:]
        kib, cpu = int(rss), float(user) + float(system)
        rss_file.unlink()
    if proc.returncode != 0:
        raise SystemExit(f"{cmd[0]} failed ({proc.returncode}): {err.decode()[-500:]}")
    PEAK_RSS[name] = max(PEAK_RSS.get(name, 0), kib)
    CPU.setdefault(name, []).append(cpu)
    return elapsed


def interleaved(runs: int, a: list[str], b: list[str]) -> tuple[list[float], list[float]]:
    """Both commands timed run by run, alternating which goes first, after a warm-up of each."""
    timed(a)
    timed(b)
    ta, tb = [], []
    for i in range(runs):
        if i % 2:
            tb.append(timed(b))
            ta.append(timed(a))
        else:
            ta.append(timed(a))
            tb.append(timed(b))
    return ta, tb


def initial_copies(
    runs: int, work: Path, cmds: tuple[Callable[[Path], list[str]], Callable[[Path], list[str]]]
) -> tuple[list[float], list[float]]:
    """Initial copies by both tools, interleaved, each run into a destination never used.

    Not a deleted and recreated one: right after a large delete this filesystem
    creates inodes ~10x slower for a minute, which the figure would measure
    instead of the copy. The destinations are removed at the end, with the work dir.
    """
    times: tuple[list[float], list[float]] = ([], [])
    for i in range(-1, runs):  # run -1: a warm-up of both, not counted
        for tool in (0, 1) if i % 2 else (1, 0):  # alternate which goes first
            elapsed = timed(cmds[tool](work / f"copy-{tool}-{i + 1}"))
            if i >= 0:
                times[tool].append(elapsed)
    return times


def stats(xs: list[float]) -> tuple[float, float]:
    xs = sorted(xs)
    p95 = xs[min(len(xs) - 1, round(0.95 * (len(xs) - 1)))]
    return statistics.median(xs), p95


def header(src: Path, nfiles: int, sessions: int) -> None:
    rsync = subprocess.run(["rsync", "--version"], capture_output=True, text=True).stdout
    fs = subprocess.run(
        ["stat", "-f", "-c", "%T", str(src)], capture_output=True, text=True
    ).stdout.strip()
    size = sum(p.stat().st_size for p in src.rglob("*") if p.is_file())
    from sessionstore import __version__

    print(f"sessionstore {__version__} | Python {platform.python_version()} | {sys.executable}")
    print(f"{platform.platform()} | {os.cpu_count()} CPUs | filesystem {fs}")
    print(rsync.splitlines()[0])
    print(f"tree: {nfiles} files, {size / 1e6:.1f} MB, {sessions} sessions x {TRIALS} trials")
    startup = [timed([sys.executable, "-c", "pass"]) for _ in range(5)]
    print(f"interpreter start-up (python -c pass): {statistics.median(startup) * 1e3:.0f} ms")
    print()


def changed_rows(
    runs: int, m: list[str], r: list[str], changed: Callable[[int], None]
) -> list[tuple[str, list[float], list[float], str]]:
    """The 1%-changed scenarios; both destinations see the same changes (tools alternate)."""
    print("running: 1% changed ...", file=sys.stderr)
    a, b = [], []
    timed(m)
    timed(r)
    for i in range(runs):
        changed(i)
        a.append(timed(m))
        b.append(timed(r))
    rows = [("1% of files changed (durable vs rsync -a)", a, b, "<= 1.0x")]
    a, b = [], []
    for i in range(runs):
        changed(100 + i)
        a.append(timed([*m, "--no-fsync"]))
        b.append(timed(r))
    rows.append(("1% of files changed (--no-fsync vs rsync -a)", a, b, "<= 1.0x"))
    return rows


def durable_rows(
    runs: int,
    work: Path,
    ss: list[str],
    src: Path,
    changed: Callable[[int], None],
) -> list[tuple[str, list[float], list[float], str]]:
    """Durable initial copy and durable 1% changed, against `rsync -a --fsync` (issue 16).

    Initial copies go to fresh destinations each run (`initial_copies`); the 1%
    changed runs reuse the last run's destinations, each tool its own, both
    seeing the same changes, the tool going first alternating.
    """
    print("running: durable initial copy ...", file=sys.stderr)
    work.mkdir()
    a, b = initial_copies(
        runs,
        work,
        (
            lambda d: [*ss, "mirror", str(src), str(d), "--once"],
            lambda d: ["rsync", "-a", "--fsync", f"{src}/", f"{d}/"],
        ),
    )
    rows = [("initial copy, durable (vs rsync -a --fsync)", a, b, "<= 1.0x")]
    print("running: durable 1% changed ...", file=sys.stderr)
    m = [*ss, "mirror", str(src), str(work / f"copy-0-{runs}"), "--once"]
    r = ["rsync", "-a", "--fsync", f"{src}/", f"{work / f'copy-1-{runs}'}/"]
    a, b = [], []
    for i in range(runs):
        changed(200 + i)
        first, second = (m, r) if i % 2 == 0 else (r, m)
        t1, t2 = timed(first), timed(second)
        a.append(t1 if first is m else t2)
        b.append(t2 if first is m else t1)
    rows.append(("1% changed, durable (vs rsync -a --fsync)", a, b, "<= 0.8x"))
    return rows


def against(
    runs: int, checkout: Path, work: Path, src: Path
) -> tuple[str, list[float], list[float], str]:
    """The no-op pass of the installed sessionstore and of `checkout`'s, alternating.

    Both run as `python -m sessionstore`, each from a directory that decides
    which package `-m` finds (the current directory comes before PYTHONPATH).
    """
    root = checkout.resolve()
    env = {**ENV, "PYTHONPATH": str(root), "PYTHONPYCACHEPREFIX": str(work / "pycache-2")}

    def cmd(dst: str) -> list[str]:
        return [sys.executable, "-m", "sessionstore", "mirror", str(src), str(work / dst), "--once"]

    print(f"running: no-op, installed against {root} ...", file=sys.stderr)
    for _ in range(2):  # the initial copy, then a warm-up
        timed(cmd("dst-a"), cwd=work)
        timed(cmd("dst-b"), env, cwd=root)
    a, b = [], []
    for _ in range(runs):
        a.append(timed(cmd("dst-a"), cwd=work))
        b.append(timed(cmd("dst-b"), env, cwd=root))
    return (f"no-op pass, installed vs {root.name}", a, b, "report")


# The floors of a no-op pass in Python (whole process, no imports but os and gc): list
# every source directory through its fd and lstat each file (as the mirror does), and
# the same plus each destination file's lstat through an O_PATH fd per directory.
FLOOR = """
import gc, os, sys
gc.disable()
O = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
P = os.O_PATH | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
both = len(sys.argv) > 2
stack = [(os.open(sys.argv[1], O), os.open(sys.argv[2], P) if both else -1)]
while stack:
    fd, dfd = stack.pop()
    with os.scandir(fd) as it:
        for e in it:
            if e.is_dir(follow_symlinks=False):
                sub = os.open(e.name, P, dir_fd=dfd) if both else -1
                stack.append((os.open(e.name, O, dir_fd=fd), sub))
            else:
                e.stat(follow_symlinks=False)
                if both:
                    os.lstat(e.name, dir_fd=dfd)
    os.close(fd)
    if both:
        os.close(dfd)
"""

# The lean bound of a no-op pass that checks what the mirror checks (whole process;
# imports os, gc and orjson): per directory the source's open, the `fstat` that it is
# the directory listed, its scandir and close, the destination's O_PATH open and close,
# the cache (version 3) parsed whole up front; per file both lstats and the eight
# integers compared. No names, exclusions, markers, sealing, report or --delete
# listings. Fails (exit 1) unless it vouched for every file (argv[3]): a floor that
# skipped work would flatter.
CHECKS = """
import array, gc, json, os, sys
gc.disable()
O = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
P = os.O_PATH | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
src, dst, want = sys.argv[1], sys.argv[2], int(sys.argv[3])
with open(os.path.join(dst, ".sessionstore-mirror.json"), "rb") as f:
    doc = json.loads(f.read())  # one parse of the whole file (the mirror parses the head)
packed = dict(zip(doc["dirs"], doc["groups"]))
def unpack(text):  # a version 4 group, as the mirror unpacks it
    data = bytes.fromhex(text)
    n = int.from_bytes(data[:4], "little")
    ints = array.array("q")
    ints.frombytes(data[4 : 4 + 64 * n])
    at = iter(ints.tolist())
    names = data[4 + 64 * n :].decode("utf-8", "surrogateescape").split("\\0")
    return dict(zip(names, map(list, zip(*[at] * 8))))
same = 0
stack = [(os.open(src, O), os.open(dst, P), "")]
while stack:
    fd, dfd, rel = stack.pop()
    group = unpack(packed[rel]) if rel in packed else {}
    with os.scandir(fd) as it:
        for e in it:
            if e.is_dir(follow_symlinks=False):
                sub = os.open(e.name, O, dir_fd=fd)
                if os.fstat(sub).st_ino != e.inode():
                    sys.exit("replaced during the walk")
                sub_rel = f"{rel}/{e.name}" if rel else e.name
                stack.append((sub, os.open(e.name, P, dir_fd=dfd), sub_rel))
                continue
            c = group.get(e.name)
            st = e.stat(follow_symlinks=False)
            if c is None or c[2] != st.st_ctime_ns or c[0] != st.st_size:
                continue
            if c[1] != st.st_mtime_ns or c[3] != st.st_ino or c[4] != st.st_dev:
                continue
            d = os.lstat(e.name, dir_fd=dfd)
            same += c[6] == d.st_mtime_ns and c[5] == d.st_size and c[7] == d.st_ino
    os.close(fd)
    os.close(dfd)
sys.exit(0 if same == want else f"vouched for {same} of {want} files")
"""


def rotated(runs: int, cmds: list[tuple[str, list[str]]]) -> list[list[float]]:
    """Each (label, command) timed once per round, the first to go rotating, after a
    warm-up round; CPU and PEAK_RSS by label."""
    for label, cmd in cmds:
        timed(cmd, label=label)
    times: list[list[float]] = [[] for _ in cmds]
    for i in range(runs):
        for k in range(len(cmds)):
            j = (i + k) % len(cmds)
            times[j].append(timed(cmds[j][1], label=cmds[j][0]))
    return times


def noop_at_scale(args: argparse.Namespace, sizes: list[int]) -> None:
    """The no-op pass at each size against `rsync -a` (issue 16): wall and CPU per file, RSS,
    the two Python floors (`FLOOR`) and the lean same-checks bound (`CHECKS`) in the same
    rounds; one line per size as it is done.

    Each size gets a fresh work directory, removed before the next one (three
    trees of 200k files at once would be gigabytes). `--bytes-scale` shrinks the
    files: a no-op pass reads none, and the trees are made and copied faster.
    """
    print(f"no-op pass against rsync -a, medians of {args.runs} rotated runs (whole process)")
    print("ratios are to rsync's median wall time (the floors: Python walks, see FLOOR);")
    print("net: us per file less the start-up (a pass over an empty tree, same rounds)")
    print("goals: ratio <= 0.6x, per-file cost flat within 10%, RSS <= 2x rsync's")
    print(
        f"{'files':>7} {'ss ms':>7} {'rsync':>7} {'ratio':>6} {'ss us/f':>8} {'net':>6}"
        f" {'drift':>6} {'cpu ratio':>9} {'floor src':>9} {'floor both':>10}"
        f" {'RSS MiB':>7} {'rsync':>6} {'ratio':>6}",
        flush=True,
    )
    first = (0.0, 0.0)
    for files in sizes:
        work = Path(tempfile.mkdtemp(prefix="bench-mirror-", dir=args.dir))
        ENV["PYTHONPYCACHEPREFIX"] = str(work / "pycache")
        try:
            nets = _scale_row(args, work, files, first)
            first = first if first[0] else nets
        finally:
            shutil.rmtree(work, ignore_errors=True)


def _scale_row(
    args: argparse.Namespace, work: Path, files: int, first: tuple[float, float]
) -> tuple[float, float]:
    """Measure and print one size of `noop_at_scale`; returns the net us per file of the
    pass and of the both-trees floor (less `python -c pass`), to which later sizes'
    drifts are taken."""
    src = work / "src"
    n = generate(src, max(1, files // (5 * TRIALS)), scale=args.bytes_scale)
    time.sleep(0.05)  # let the tree leave the racy window
    ss = sessionstore_cmd()
    m = [*ss, "mirror", str(src), str(work / "dst-ss"), "--once"]
    r = ["rsync", "-a", f"{src}/", f"{work / 'dst-rsync'}/"]
    print(f"running: {n} files, initial copies ...", file=sys.stderr)
    timed([*m, "--no-fsync"])
    timed(r)
    PEAK_RSS.clear()
    CPU.clear()
    print(f"running: {n} files, no-op ...", file=sys.stderr)
    floor = [sys.executable, "-c", FLOOR, str(src)]
    (work / "empty").mkdir()  # the start-up: a pass over no file at all
    empty = [*ss, "mirror", str(work / "empty"), str(work / "dst-e"), "--once"]
    cmds = [("sessionstore", m), ("rsync", r), ("floor", floor)]
    cmds += [("floor", [*floor, str(work / "dst-ss")]), ("empty", empty)]
    cmds += [("python", [sys.executable, "-c", "pass"])]  # the floors' start-up
    cmds += [("checks", [sys.executable, "-c", CHECKS, str(src), str(work / "dst-ss"), str(n)])]
    if args.against is not None:  # the other checkout: its own copy, in the same rounds
        # -P: `-m` would put the current directory first on sys.path, and from this
        # checkout's root that is this checkout, not the other one (as it was until -P).
        other = ["env", f"PYTHONPATH={args.against.resolve()}", sys.executable, "-P", "-m"]
        other += ["sessionstore", "mirror"]
        timed([*other, str(src), str(work / "dst-other"), "--once", "--no-fsync"], label="copy")
        cmds += [("other", [*other, str(src), str(work / "dst-other"), "--once"])]
        cmds += [("other-empty", [*other, str(work / "empty"), str(work / "dst-oe"), "--once"])]
    medians = [statistics.median(t) for t in rotated(args.runs, cmds)]
    a, b, f_src, f_both, f_empty, f_pass, f_checks = medians[:7]
    ca, cb = statistics.median(CPU["sessionstore"]), statistics.median(CPU["rsync"])
    ss_kib, rs_kib = PEAK_RSS["sessionstore"], PEAK_RSS["rsync"]
    per, net, f_net = a / n * 1e6, (a - f_empty) / n * 1e6, (f_both - f_pass) / n * 1e6
    print(
        f"{n:7} {a * 1e3:7.0f} {b * 1e3:7.0f} {a / b:5.2f}x {per:8.1f} {net:6.1f}"
        f" {net / (first[0] or net) - 1:+6.0%} {ca / cb:8.2f}x {f_src / b:8.2f}x {f_both / b:9.2f}x"
        f" {ss_kib / 1024:7.1f} {rs_kib / 1024:6.1f} {ss_kib / rs_kib:5.2f}x",
        flush=True,
    )
    print(
        f"{'':7} floor both net {f_net:.1f} us/file, drift {f_net / (first[1] or f_net) - 1:+.0%};"
        f" the same checks, lean (CHECKS): {f_checks * 1e3:.0f} ms, {f_checks / b:.2f}x rsync,"
        f" sessionstore {a / f_checks:.2f}x it",
        flush=True,
    )
    if args.against is not None:
        o, o_empty, o_kib = medians[7], medians[8], PEAK_RSS["other"]
        print(
            f"{'':7} {args.against.name}: {o * 1e3:.0f} ms, {o / b:.2f}x rsync,"
            f" net {(o - o_empty) / n * 1e6:.1f} us/file, RSS {o_kib / 1024:.1f} MiB;"
            f" this checkout's time {a / o:.2f}x its, RSS {ss_kib / o_kib:.2f}x",
            flush=True,
        )
    return net, f_net


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument(
        "--files", type=int, default=10_000, help="tree size, rounded to 50-file sessions"
    )
    parser.add_argument(
        "--scale",
        default=None,
        metavar="N,N,...",
        help="only the no-op pass, at each of these tree sizes (8000,50000,200000)",
    )
    parser.add_argument(
        "--bytes-scale",
        type=float,
        default=1.0,
        help="multiply every file's size (with --scale: 0.1 makes big trees ~10x faster)",
    )
    parser.add_argument("--durable-runs", type=int, default=5)
    parser.add_argument("--dir", type=Path, default=None, help="work directory (default: tmp)")
    parser.add_argument("--skip-durable", action="store_true")
    parser.add_argument(
        "--only-noop", action="store_true", help="only the no-op scenario (after one copy)"
    )
    parser.add_argument(
        "--only-durable",
        action="store_true",
        help="only the durable scenarios (initial copy and 1%% changed vs rsync -a --fsync)",
    )
    parser.add_argument(
        "--against",
        type=Path,
        default=None,
        metavar="CHECKOUT",
        help="also time the no-op pass of another checkout's sessionstore (its root"
        " directory) against the installed one, run by run: a before/after ratio"
        " (its second column is that checkout, not rsync; with --scale, a line"
        " under each size)",
    )
    args = parser.parse_args()
    if args.dir:  # a work directory named on the command line may be new
        args.dir.mkdir(parents=True, exist_ok=True)
    if shutil.which("rsync") is None:
        raise SystemExit("rsync is not installed (apt-get install -y rsync)")
    if args.scale is not None:
        ENV.pop("PYTHONDONTWRITEBYTECODE", None)
        noop_at_scale(args, [int(n) for n in args.scale.split(",")])
        return
    work = Path(tempfile.mkdtemp(prefix="bench-mirror-", dir=args.dir))
    # Time what an installed package costs: bytecode cached (as pip does at install),
    # even where PYTHONDONTWRITEBYTECODE is set; the cache goes to the work dir.
    ENV.pop("PYTHONDONTWRITEBYTECODE", None)
    ENV["PYTHONPYCACHEPREFIX"] = str(work / "pycache")
    try:
        src = work / "src"
        sessions = max(1, args.files // (5 * TRIALS))
        nfiles = generate(src, sessions)
        time.sleep(0.05)  # let the tree leave the racy window
        header(src, nfiles, sessions)
        ss = sessionstore_cmd()
        d_ss, d_rs = work / "dst-ss", work / "dst-rsync"

        def changed(_i: int) -> None:
            change_one_percent(src, seed=1000 + _i)
            time.sleep(0.05)

        rows: list[tuple[str, list[float], list[float], str]] = []
        m = [*ss, "mirror", str(src), str(d_ss), "--once"]
        r = ["rsync", "-a", f"{src}/", f"{d_rs}/"]
        if args.only_noop:  # one copy each, then only what the no-op goal needs
            timed([*m, "--no-fsync"])
            timed(r)
        elif not args.only_durable:
            print("running: initial copy --no-fsync ...", file=sys.stderr)
            a, b = initial_copies(
                args.runs,
                work,
                (
                    lambda d: [*ss, "mirror", str(src), str(d), "--once", "--no-fsync"],
                    lambda d: ["rsync", "-a", f"{src}/", f"{d}/"],
                ),
            )
            rows.append(("initial copy (--no-fsync vs rsync -a)", a, b, "<= 1.5x"))
        if not args.only_durable:
            print("running: no-op ...", file=sys.stderr)
            a, b = interleaved(args.runs, m, r)
            rows.append(("no-op pass", a, b, "<= 1.0x"))
        if args.against is not None:
            rows.append(against(args.runs, args.against, work, src))
        if not (args.only_noop or args.only_durable):
            rows += changed_rows(args.runs, m, r, changed)
        if not (args.skip_durable or args.only_noop):
            rows += durable_rows(args.durable_runs, work / "durable", ss, src, changed)

        print(f"{'scenario':46} {'sessionstore':>18} {'rsync':>18} {'ratio':>7}  goal")
        for name, a, b, goal in rows:
            (ma, pa), (mb, pb) = stats(a), stats(b)
            print(
                f"{name:46} {ma * 1e3:8.0f} ms (p95 {pa * 1e3:4.0f}) "
                f"{mb * 1e3:8.0f} ms (p95 {pb * 1e3:4.0f}) {ma / mb:6.2f}x  {goal}"
            )
        print(f"\nmedian of {args.runs} runs ({args.durable_runs} for durable), warm page cache")
        ss_kib, rs_kib = PEAK_RSS.get("sessionstore", 0), PEAK_RSS.get("rsync", 1)
        print(
            f"peak RSS of any run: sessionstore {ss_kib / 1024:.0f} MiB, rsync"
            f" {rs_kib / 1024:.0f} MiB (each rsync process), ratio {ss_kib / rs_kib:.2f}x"
        )
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()

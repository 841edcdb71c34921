"""Benchmark the `sessionstore mirror` daemon: marker latency and idle CPU, beside an rsync poller.

A baseline, not a gate (issue 5 goals: marker p95 <= 100 ms; idle < 1% of one core).

    python benchmarks/bench_daemon.py [--events 200] [--idle-seconds 60] [--files 10000]

Marker latency. The daemon is a real subprocess, `sessionstore mirror SRC DST -q --json` with the
default timing (--json only so the benchmark knows when the initial pass is done and can show the
passes it ran; the line is written after a pass has committed, so it never delays a marker). In
this process a writer plays the agent: it creates `trials/<n>/` with a config file, writes
`trials/<n>/trial.json.tmp` and renames it onto `trial.json` (`os.replace`), and takes the clock
right after the rename. Latency is rename -> `DST/trials/<n>/trial.json` exists.

- spaced: the writer waits for the marker to arrive, then 50-100 ms (random) before the next, so
  each event is measured alone;
- burst: events 5 ms apart, not waiting, so passes see many records at once (max wait 250 ms).

Presence is observed with inotify (ctypes, no dependency) on DST/trials/<n>/: a blocking read that
costs nothing while waiting and wakes within microseconds, where polling every 0.5 ms would keep
a core busy beside the daemon on a small machine. The same events are mirrored in the same run by
the peer a dstack-style poller gives: `rsync -a SRC/ DST2/` started every 1 s (fixed rate) by a
thread here, observed the same way.

Idle CPU. A tree of --files small files (sessions x 10 trials x 5 files) is written, the daemon
(`-q --json`) started on it, and once its "initial" pass line arrives, its CPU time (utime+stime
of all threads, /proc/<pid>/stat) is sampled every 0.1 s for --idle-seconds with nothing changing.
A full re-list runs every 30 s (default --full-every); the samples around each "full" pass line
split the CPU into the cost of one full pass and the baseline between passes.

Linux only (inotify, /proc). The daemon is stopped and the temp directories removed on exit.
"""

from __future__ import annotations

import argparse
import contextlib
import ctypes
import itertools
import json
import math
import os
import platform
import random
import select
import shutil
import signal
import statistics
import struct
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any

GOAL_P95 = 0.100
GOAL_IDLE = 1.0  # % of one core
FULL_EVERY = 30.0  # the daemon's default --full-every
PEER_PERIOD = 1.0  # dstack-style polling interval
# Documented intervals of other tools, for reference only (not measured here).
REFERENCE = "dstack polls every 1 s; lsyncd batches for 15 s; Syncthing waits 10 s"
CONFIG = b"type: task\r\nimage: vllm/vllm-openai\r\ncommands:\r\n  - python bench.py\r\n" * 8
TREE_FILES = {  # name -> size in bytes, per trial of the idle tree
    "task.dstack.yml": 600,
    "patch.diff": 3_000,
    "log.txt": 8_000,
    "metrics.csv": 400,
    "trial.json": 900,
}
TRIALS_PER_SESSION = 10
WAIT_FOR_MARKER = FULL_EVERY + 10  # a lost event still arrives through the full re-list

IN_MOVED_TO = 0x00000080
IN_CREATE = 0x00000100
IN_Q_OVERFLOW = 0x00004000
IN_ONLYDIR = 0x01000000
IN_ISDIR = 0x40000000
_EVENT = struct.Struct("iIII")


# -- observing the destinations ------------------------------------------------------------------


class Arrivals:
    """When each `<root>/trials/<n>/trial.json` first appeared (perf_counter), seen by inotify.

    Watches only `<root>`, `<root>/trials` and `<root>/trials/<n>`; a directory is listed right
    after its watch is added, so an entry created before the watch existed is still seen.
    """

    def __init__(self, root: Path) -> None:
        self.root = root
        self.seen: dict[int, float] = {}
        self.overflows = 0
        self._cond = threading.Condition()
        self._libc = ctypes.CDLL(None, use_errno=True)
        self._fd = self._libc.inotify_init1(os.O_CLOEXEC | os.O_NONBLOCK)
        if self._fd < 0:
            raise OSError(ctypes.get_errno(), "inotify_init1 failed")
        self._wds: dict[int, Path] = {}
        self._wake_r, self._wake_w = os.pipe()
        self._watch(root, time.perf_counter())
        self._thread = threading.Thread(target=self._run, name=f"arrivals-{root.name}", daemon=True)
        self._thread.start()

    def wait(self, n: int, timeout: float) -> float | None:
        with self._cond:
            self._cond.wait_for(lambda: n in self.seen, timeout)
            return self.seen.get(n)

    def wait_all(self, ns: list[int], timeout: float) -> None:
        with self._cond:
            self._cond.wait_for(lambda: all(n in self.seen for n in ns), timeout)

    def close(self) -> None:
        os.write(self._wake_w, b"x")
        self._thread.join(timeout=5)
        for fd in (self._fd, self._wake_r, self._wake_w):
            os.close(fd)

    def _depth(self, path: Path) -> int | None:
        parts = path.relative_to(self.root).parts
        if not parts:
            return 0
        if parts[0] != "trials" or len(parts) > 2 or (len(parts) == 2 and not parts[1].isdigit()):
            return None
        return len(parts)

    def _watch(self, path: Path, now: float) -> None:
        mask = IN_CREATE | IN_MOVED_TO | IN_ONLYDIR
        wd = self._libc.inotify_add_watch(self._fd, os.fsencode(path), mask)
        if wd < 0:
            return  # gone again, or not a directory
        self._wds[wd] = path
        with contextlib.suppress(OSError), os.scandir(path) as entries:
            for entry in entries:
                self._entry(path / entry.name, entry.is_dir(follow_symlinks=False), now)

    def _entry(self, path: Path, is_dir: bool, now: float) -> None:
        if is_dir:
            if self._depth(path) in (1, 2):
                self._watch(path, now)
        elif path.name == "trial.json" and self._depth(path.parent) == 2:
            self._arrived(int(path.parent.name), now)

    def _run(self) -> None:
        while True:
            ready, _, _ = select.select([self._fd, self._wake_r], [], [])
            if self._wake_r in ready:
                return
            try:
                data = os.read(self._fd, 1 << 16)
            except BlockingIOError:
                continue
            now = time.perf_counter()
            offset = 0
            while offset < len(data):
                wd, mask, _cookie, length = _EVENT.unpack_from(data, offset)
                raw = data[offset + _EVENT.size : offset + _EVENT.size + length]
                offset += _EVENT.size + length
                if mask & IN_Q_OVERFLOW:
                    self.overflows += 1
                    self._rescan(now)
                    continue
                parent = self._wds.get(wd)
                if parent is None:
                    continue
                name = os.fsdecode(raw.rstrip(b"\0"))
                self._entry(parent / name, bool(mask & IN_ISDIR), now)

    def _arrived(self, n: int, now: float) -> None:
        with self._cond:
            self.seen.setdefault(n, now)
            self._cond.notify_all()

    def _rescan(self, now: float) -> None:
        trials = self.root / "trials"
        with contextlib.suppress(OSError), os.scandir(trials) as entries:
            for entry in entries:
                if entry.name.isdigit() and (Path(entry.path) / "trial.json").exists():
                    self._arrived(int(entry.name), now)


# -- the daemon and the peer ---------------------------------------------------------------------


def sessionstore_cmd() -> list[str]:
    script = Path(sys.executable).with_name("sessionstore")
    return [str(script)] if script.exists() else [sys.executable, "-m", "sessionstore"]


class DaemonProcess:
    """`sessionstore mirror SRC DST -q --json` as a subprocess; its pass lines, timestamped."""

    def __init__(self, src: Path, dst: Path, log: Path) -> None:
        self.cmd = [*sessionstore_cmd(), "mirror", str(src), str(dst), "-q", "--json"]
        self.log = log
        self._stderr: IO[bytes] = open(log, "wb")  # noqa: SIM115 - closed in stop()
        self.proc = subprocess.Popen(self.cmd, stdout=subprocess.PIPE, stderr=self._stderr)
        self.passes: list[tuple[float, dict[str, Any]]] = []
        self.initial = threading.Event()
        self._reader = threading.Thread(target=self._read, name="daemon-stdout", daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            now = time.perf_counter()
            with contextlib.suppress(ValueError):
                record = json.loads(line)
                self.passes.append((now, record))
                if record.get("pass") == "initial":
                    self.initial.set()
        self.initial.set()  # exited: unblock the waiter, which checks poll()

    def wait_initial(self, timeout: float) -> dict[str, Any]:
        if not self.initial.wait(timeout) or self.proc.poll() is not None:
            self.stop()
            tail = self.log.read_text(errors="replace")[-2000:]
            raise SystemExit(f"daemon gave no initial pass ({self.proc.returncode}): {tail}")
        return next(r for _, r in self.passes if r.get("pass") == "initial")

    def cpu_seconds(self) -> float:
        """utime + stime of every thread of the daemon, in seconds."""
        with open(f"/proc/{self.proc.pid}/stat", "rb") as f:
            fields = f.read().rpartition(b")")[2].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    def rss_mb(self) -> float:
        with open(f"/proc/{self.proc.pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) / 1024
        return float("nan")

    def stop(self) -> int | None:
        """SIGTERM (the daemon runs its final pass), then SIGKILL if it hangs."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self._reader.join(timeout=5)
        self._stderr.close()
        return self.proc.returncode


class RsyncPoller:
    """A dstack-style peer: `rsync -a SRC/ DST/` started every `period` seconds (fixed rate)."""

    def __init__(self, src: Path, dst: Path, period: float) -> None:
        self.cmd = ["rsync", "-a", f"{src}/", f"{dst}/"]
        self.period = period
        self.durations: list[float] = []
        self.failures = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="rsync-poller", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        next_at = time.perf_counter()
        while not self._stop.is_set():
            start = time.perf_counter()
            rc = subprocess.run(
                self.cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False
            ).returncode
            self.durations.append(time.perf_counter() - start)
            if rc not in (0, 24):  # 24: a file vanished mid-run (our temp file), harmless
                self.failures += 1
            next_at += self.period
            self._stop.wait(max(0.0, next_at - time.perf_counter()))

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=30)


# -- the writer ----------------------------------------------------------------------------------


def write_record(src: Path, n: int) -> float:
    """What an agent does for one trial; returns the clock right after the marker's rename."""
    record = src / "trials" / str(n)
    record.mkdir(parents=True)
    (record / "task.dstack.yml").write_bytes(CONFIG)
    marker = json.dumps({"trial": n, "failed": False, "metrics": {"tok_per_s": 1000.0 + n}})
    temp = record / "trial.json.tmp"
    temp.write_bytes(marker.encode())
    os.replace(temp, record / "trial.json")
    return time.perf_counter()


def stats(xs: list[float]) -> tuple[float, float, float]:
    """Median, p95 (nearest rank) and max."""
    s = sorted(xs)
    return statistics.median(s), s[min(len(s) - 1, round(0.95 * (len(s) - 1)))], s[-1]


def latencies(renamed: dict[int, float], arrivals: Arrivals) -> tuple[list[float], list[int]]:
    got = [arrivals.seen[n] - t for n, t in renamed.items() if n in arrivals.seen]
    missing = [n for n in renamed if n not in arrivals.seen]
    return got, missing


# -- the two measurements ------------------------------------------------------------------------


def marker_latency(work: Path, args: argparse.Namespace) -> dict[str, Any]:
    rng = random.Random(args.seed)
    src, dst, peer_dst = work / "lat-src", work / "lat-dst", work / "lat-rsync"
    for d in (src, dst, peer_dst):
        d.mkdir()
    ours, theirs = Arrivals(dst), Arrivals(peer_dst)
    daemon = DaemonProcess(src, dst, work / "lat-daemon.log")
    poller: RsyncPoller | None = None
    try:
        daemon.wait_initial(timeout=60)
        poller = RsyncPoller(src, peer_dst, PEER_PERIOD) if args.peer else None
        n = 0
        print(
            f"running: marker latency, {args.warmup} warm-up + {args.events} spaced ...",
            file=sys.stderr,
        )
        spaced: dict[int, float] = {}
        spaced_start = 0.0
        for i in range(args.warmup + args.events):
            if i == args.warmup:
                spaced_start = time.perf_counter()
            n += 1
            time.sleep(rng.uniform(0.05, 0.10))
            renamed = write_record(src, n)
            if ours.wait(n, WAIT_FOR_MARKER) is None:
                print(f"  marker {n} did not arrive in {WAIT_FOR_MARKER:.0f} s", file=sys.stderr)
            if i >= args.warmup:
                spaced[n] = renamed
        time.sleep(1.0)  # let the last spaced event's passes finish before the burst
        print(f"running: marker latency, {args.events} events 5 ms apart ...", file=sys.stderr)
        burst: dict[int, float] = {}
        start = time.perf_counter()
        for i in range(args.events):
            n += 1
            burst[n] = write_record(src, n)
            time.sleep(max(0.0, start + (i + 1) * 0.005 - time.perf_counter()))
        burst_span = time.perf_counter() - start
        ours.wait_all(list(burst), WAIT_FOR_MARKER)
        if poller is not None:
            theirs.wait_all([*spaced, *burst], 3 * PEER_PERIOD + 30)
            poller.stop()
    finally:
        if poller is not None:
            poller.stop()
        rc = daemon.stop()
        ours.close()
        theirs.close()
    passes = [r for _, r in daemon.passes]
    event_passes = [r for r in passes if r["pass"] == "events"]

    # A pass's line is read after its markers are visible: bound the burst by the final pass.
    burst_end = math.inf

    def passes_between(lo: float, hi: float) -> int:
        return sum(lo <= t <= hi for t, r in daemon.passes if r["pass"] in ("events", "full"))

    return {
        "spaced": latencies(spaced, ours),
        "burst": latencies(burst, ours),
        "peer_spaced": latencies(spaced, theirs) if args.peer else None,
        "peer_burst": latencies(burst, theirs) if args.peer else None,
        "burst_span": burst_span,
        "spaced_passes": passes_between(spaced_start, start),
        "burst_passes": passes_between(start, burst_end),
        "burst_detail": [  # (start after the first burst event, duration, files copied)
            (t - start - r["duration"], r["duration"], len(r["copied"]))
            for t, r in daemon.passes
            if start <= t <= burst_end and r["pass"] in ("events", "full")
        ],
        "event_pass_durations": [r["duration"] for r in event_passes],
        "unstable_reports": sum(len(r["unstable"]) for r in passes),
        "held_back_reports": sum(len(r["held_back"]) for r in passes),
        "rsync_durations": poller.durations if poller else [],
        "rsync_failures": poller.failures if poller else 0,
        "overflows": ours.overflows + theirs.overflows,
        "daemon_rc": rc,
    }


def build_tree(root: Path, files: int) -> int:
    """`sessions x 10 trials x 5` small files (at least `files`); returns the count."""
    rng = random.Random(1)
    per_session = TRIALS_PER_SESSION * len(TREE_FILES)
    count = 0
    for s in range(math.ceil(files / per_session)):
        for t in range(1, TRIALS_PER_SESSION + 1):
            record = root / f"{s:08x}" / "trials" / str(t)
            record.mkdir(parents=True)
            for name, size in TREE_FILES.items():
                if name == "trial.json":
                    data = json.dumps({"trial": t, "failed": False, "pad": "x" * size}).encode()
                else:
                    data = rng.randbytes(size // 2).hex().encode()
                (record / name).write_bytes(data)
                count += 1
    return count


def idle_cpu(work: Path, args: argparse.Namespace) -> dict[str, Any]:
    src, dst = work / "idle-src", work / "idle-dst"
    print(f"running: idle CPU, building a {args.files}-file tree ...", file=sys.stderr)
    nfiles = build_tree(src, args.files)
    time.sleep(0.05)  # let the tree leave the racy window
    daemon = DaemonProcess(src, dst, work / "idle-daemon.log")
    try:
        initial = daemon.wait_initial(timeout=1800)
        initial_cpu = daemon.cpu_seconds()
        print(f"running: idle CPU, sampling for {args.idle_seconds:.0f} s ...", file=sys.stderr)
        samples = [(time.perf_counter(), daemon.cpu_seconds())]
        end = samples[0][0] + args.idle_seconds
        while (now := time.perf_counter()) < end:
            time.sleep(min(0.1, end - now))
            samples.append((time.perf_counter(), daemon.cpu_seconds()))
        rss = daemon.rss_mb()
    finally:
        rc = daemon.stop()
    t0, t1 = samples[0][0], samples[-1][0]
    in_window = [(t, r) for t, r in daemon.passes if t0 <= t <= t1]
    full = [(t, r) for t, r in in_window if r["pass"] == "full"]
    # A full pass's CPU: the samples from just before it started to just after its line.
    busy = [(t - r["duration"] - 0.15, t + 0.15) for t, r in full]
    pass_cpu = base_cpu = base_time = 0.0
    for (ta, ca), (tb, cb) in itertools.pairwise(samples):
        if any(lo <= tb and ta <= hi for lo, hi in busy):
            pass_cpu += cb - ca
        else:
            base_cpu += cb - ca
            base_time += tb - ta
    baseline = base_cpu / base_time if base_time else float("nan")
    busy_time = (t1 - t0) - base_time
    per_pass = (pass_cpu - baseline * busy_time) / len(full) if full else float("nan")
    durations = [r["duration"] for _, r in full]
    period = FULL_EVERY + (statistics.median(durations) if durations else 0.0)
    return {
        "files": nfiles,
        "initial_duration": initial["duration"],
        "initial_copied": len(initial["copied"]),
        "initial_cpu": initial_cpu,
        "window": t1 - t0,
        "cpu": samples[-1][1] - samples[0][1],
        "kinds": [r["pass"] for _, r in in_window],
        "full_durations": durations,
        "full_cpu": per_pass,
        "baseline": baseline,
        "steady": baseline + (per_pass / period if full else 0.0),
        "rss_mb": rss,
        "daemon_rc": rc,
    }


# -- output --------------------------------------------------------------------------------------


def header(work: Path) -> None:
    def run(*cmd: str) -> str:
        out = subprocess.run(cmd, capture_output=True, text=True, check=False).stdout
        return out.strip()

    from importlib.metadata import version

    from sessionstore import __version__

    watches = Path("/proc/sys/fs/inotify/max_user_watches").read_text().strip()
    print(f"sessionstore {__version__} | watchdog {version('watchdog')} | {sys.executable}")
    print(f"Python {platform.python_version()} ({platform.python_implementation()})")
    print(f"{platform.platform()} | kernel {platform.release()}")
    print(
        f"{os.cpu_count()} CPUs ({len(os.sched_getaffinity(0))} usable) | "
        f"load average {' '.join(f'{x:.2f}' for x in os.getloadavg())}"
    )
    print(f"temp dir {work} | filesystem {run('stat', '-f', '-c', '%T', str(work))}")
    print(f"{run('rsync', '--version').splitlines()[0]} | inotify max_user_watches {watches}")
    print(flush=True)


def ms(x: float) -> str:
    return f"{x * 1e3:7.1f} ms"


def show_latency(result: dict[str, Any], args: argparse.Namespace) -> None:
    print(f"Marker latency: rename in SRC -> present in DST ({args.events} events per row)")
    print(f"{'':44} {'p50':>10} {'p95':>10} {'max':>10}  {'vs rsync p50/p95':>16}  goal")
    rows = [
        ("daemon, spaced 50-100 ms", "spaced", "peer_spaced", f"p95 <= {GOAL_P95 * 1e3:.0f} ms"),
        (
            f"daemon, burst 5 ms apart ({result['burst_span']:.2f} s)",
            "burst",
            "peer_burst",
            "report",
        ),
    ]
    for label, key, peer_key, goal in rows:
        got, missing = result[key]
        p50, p95, top = stats(got)
        ratio = ""
        if result[peer_key] is not None:
            q50, q95, _ = stats(result[peer_key][0])
            ratio = f"{p50 / q50:.3f}x / {p95 / q95:.3f}x"
        verdict = ""
        if key == "spaced":
            verdict = "  met" if p95 <= GOAL_P95 else "  MISSED"
        lost = f"  ({len(missing)} never arrived)" if missing else ""
        print(f"{label:44} {ms(p50)} {ms(p95)} {ms(top)}  {ratio:>16}  {goal}{verdict}{lost}")
        if result[peer_key] is not None:
            got, missing = result[peer_key]
            q50, q95, qtop = stats(got)
            lost = f"  ({len(missing)} never arrived)" if missing else ""
            label = f"  rsync -a every {PEER_PERIOD:.0f} s, same events"
            print(f"{label:44} {ms(q50)} {ms(q95)} {ms(qtop)}  {'1x':>16}  -{lost}")
    print(f"reference intervals (documented, not measured): {REFERENCE}")
    durations = result["event_pass_durations"]
    if durations:
        d50, d95, dtop = stats(durations)
        print(
            f"daemon passes: {result['spaced_passes']} for the spaced events, "
            f"{result['burst_passes']} for the burst; event passes take p50 "
            f"{d50 * 1e3:.1f} ms, p95 {d95 * 1e3:.1f} ms, max {dtop * 1e3:.1f} ms; "
            f"unstable reports {result['unstable_reports']}, "
            f"held back {result['held_back_reports']}"
        )
    if result["burst_detail"]:
        detail = ", ".join(
            f"at +{at * 1e3:.0f} ms {d * 1e3:.0f} ms/{n} files"
            for at, d, n in result["burst_detail"]
        )
        print(f"burst passes (start, duration/files copied): {detail}")
    if result["rsync_durations"]:
        r50, r95, _ = stats(result["rsync_durations"])
        print(
            f"rsync runs: {len(result['rsync_durations'])}, each {r50 * 1e3:.0f} ms "
            f"(p95 {r95 * 1e3:.0f} ms), failures {result['rsync_failures']}"
        )
    if result["overflows"]:
        print(f"probe: {result['overflows']} inotify queue overflows (rescanned)")
    print(flush=True)


def show_idle(result: dict[str, Any]) -> None:
    pct = 100 * result["cpu"] / result["window"]
    kinds = {k: result["kinds"].count(k) for k in sorted(set(result["kinds"]))}
    print(f"Idle CPU: daemon watching {result['files']} files, nothing changing")
    print(
        f"initial pass: {result['initial_duration']:.2f} s, {result['initial_copied']} copied; "
        f"daemon CPU from start to its end (incl. interpreter start-up) "
        f"{result['initial_cpu']:.2f} s"
    )
    print(
        f"window {result['window']:.1f} s: CPU {result['cpu']:.2f} s = {pct:.2f}% of one core; "
        f"passes in it {kinds}"
    )
    if result["full_durations"]:
        steady = 100 * result["steady"]
        d = statistics.median(result["full_durations"])
        print(
            f"one full pass (every {FULL_EVERY:.0f} s): {d * 1e3:.0f} ms wall (median of "
            f"{len(result['full_durations'])}), ~{result['full_cpu'] * 1e3:.0f} ms CPU"
        )
        print(
            f"between passes: {100 * result['baseline']:.3f}% of one core; steady state "
            f"(baseline + one full pass per {FULL_EVERY:.0f} s): {steady:.2f}% "
            f"(goal < {GOAL_IDLE:.0f}%) {'met' if steady < GOAL_IDLE else 'MISSED'}"
        )
    else:
        print(
            f"no full pass fell in the window (one runs every {FULL_EVERY:.0f} s): the figure "
            f"above leaves them out; run with --idle-seconds 60 or more"
        )
    print(f"daemon RSS at the end: {result['rss_mb']:.0f} MB")
    print(flush=True)


# -- main ----------------------------------------------------------------------------------------


@contextlib.contextmanager
def workdir(parent: Path | None) -> Iterator[Path]:
    work = Path(tempfile.mkdtemp(prefix="bench-daemon-", dir=parent))
    try:
        yield work
    finally:
        shutil.rmtree(work, ignore_errors=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=200, help="markers per latency row")
    parser.add_argument("--warmup", type=int, default=10, help="spaced markers not counted")
    parser.add_argument("--idle-seconds", type=float, default=60.0)
    parser.add_argument("--files", type=int, default=10_000, help="files in the idle tree")
    parser.add_argument("--dir", type=Path, default=None, help="work directory (default: tmp)")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--no-peer", dest="peer", action="store_false", help="skip rsync")
    parser.add_argument("--skip-latency", action="store_true")
    parser.add_argument("--skip-idle", action="store_true")
    args = parser.parse_args()
    if args.dir:  # a work directory named on the command line may be new
        args.dir.mkdir(parents=True, exist_ok=True)
    if sys.platform != "linux":
        raise SystemExit("Linux only: the probe uses inotify and CPU comes from /proc")
    if args.peer and shutil.which("rsync") is None:
        raise SystemExit("rsync is not installed (apt-get install -y rsync), or pass --no-peer")
    # SIGTERM must unwind through the finally blocks that stop the daemon and remove temp dirs.
    signal.signal(signal.SIGTERM, lambda _signum, _frame: sys.exit(143))
    with workdir(args.dir) as work:
        header(work)
        if not args.skip_latency:
            show_latency(marker_latency(work, args), args)
        if not args.skip_idle:
            show_idle(idle_cpu(work, args))
    print("A baseline, not a gate: a shared VM varies from run to run.")


if __name__ == "__main__":
    main()

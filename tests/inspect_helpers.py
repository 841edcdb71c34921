"""Builders of deterministic sessions for the inspect, summary, lineage and export tests.

Records are written through the public writer API (real files, real fsyncs);
only what the API refuses to write (torn markers, markers the published schema
rejects) is written raw, as a harness in another language could.
"""

from __future__ import annotations

import io
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import cli_runner
import orjson
from rich.console import Console

from sessionstore._fs.atomic import write_atomic
from sessionstore.format.names import MANIFEST
from sessionstore.store.session import Collection, Session, Store

SNAPSHOTS = Path(__file__).parent / "inspect" / "snapshots"
WIDTHS = (60, 80, 120)


def metrics(tok: float, ttft: float | None = None, **extra: Any) -> dict[str, Any]:
    """A trial marker with a benchmark (output tok/s and optionally ttft_ms {mean, p99})."""
    data: dict[str, Any] = {"output_tok_per_s": tok}
    if ttft is not None:
        data["ttft_ms"] = {"mean": ttft, "p99": ttft * 2}
    return {"failed": False, "benchmark": {"metrics": data}, **extra}


def trial(
    session: Session, marker: dict[str, Any] | None, files: dict[str, str | bytes] | None = None
) -> int:
    """Begin a trial, write `files`, complete it with `marker` (None leaves it in flight)."""
    writer = session.trials.begin()
    for rel, content in (files or {}).items():
        writer.write_bytes(rel, content if isinstance(content, bytes) else content.encode())
    if marker is not None:
        writer.complete(marker)
    return writer.n


def torn_trial(session: Session, raw: bytes = b'{"failed": fal') -> int:
    """A trial whose marker exists but does not parse."""
    writer = session.trials.begin()
    (writer.path / "trial.json").write_bytes(raw)
    return writer.n


def attempt(session: Session, marker: dict[str, Any] | None, config: str = "") -> int:
    """A verification attempt with a config; `marker` None leaves it in flight."""
    writer = session.service.begin()
    writer.write_text("service.yml", config or f"attempt: {writer.n}\n")
    if marker is not None:
        writer.complete(marker)
    return writer.n


def planted(collection: Collection, marker: dict[str, Any]) -> int:
    """A record of `collection` completed with `marker` written raw: one the API refuses
    (the published schema rejects it), which readers must take as any other object."""
    writer = collection.begin()
    write_atomic(writer.path / writer.marker, orjson.dumps(marker))
    return writer.n


def set_manifest(session: Session, **fields: Any) -> Session:
    """Rewrite fields of the manifest (e.g. a fixed created_at, a pid) and reopen."""
    manifest = {**(session.manifest or {}), **fields}
    write_atomic(session.path / MANIFEST, orjson.dumps(manifest))
    return Session.open(session.path)


def dead_pid() -> tuple[int, float]:
    """The pid of a process that has exited and been reaped, and a start time for it."""
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid, 1.0


def render(fn: Any, *args: Any, width: int) -> str:
    """What a view prints at `width` columns with no colour, as a string."""
    buffer = io.StringIO()
    console = Console(
        file=buffer, width=width, color_system=None, force_terminal=False, legacy_windows=False
    )
    fn(console, *args)
    return "\n".join(line.rstrip() for line in buffer.getvalue().splitlines()) + "\n"


def demo_store(root: Path) -> Store:
    """A store with one session per interesting case, fixed ids and creation times."""
    store = Store(root)
    long_name = "llama-3.1-70b-instruct-awq-int4-tensor-parallel-2"
    constraints = {"max_ttft_ms": 200, "min_context_length": 8192}

    s = store.create(id="trialing", name=long_name, trials=3, constraints=constraints, pid=None)
    trial(s, metrics(950.5, 150.0, context_length=8192))
    trial(s, metrics(1320.0, 240.0, context_length=8192) | {"failed": True})
    trial(s, None)
    set_manifest(s, created_at="2026-11-30T10:00:00+00:00")

    s = store.create(
        id="verified", name="qwen", trials=2, constraints={"max_ttft_ms": 300}, pid=None
    )
    trial(s, metrics(800.0, 120.0))
    trial(s, metrics(1100.25, 180.0))
    attempt(s, {"trial": 2, "status": "failed", "reason": "health check timed out"})
    attempt(s, {"trial": 2, "status": "verified"})
    s.finish({"best_trial": 2, "constraints": {"max_ttft_ms": 300}, "verified": {"ttft_ms": 180}})
    set_manifest(s, created_at="2026-11-29T09:30:00+00:00")

    s = store.create(
        id="all-failed", name="mistral", constraints={"min_context_length": 32768}, pid=None
    )
    trial(s, metrics(700.0, context_length=16384))
    trial(s, metrics(900.0, context_length=8192) | {"failed": True})
    torn_trial(s)
    os.mkdir(s.trials.path / "notes")
    set_manifest(s, created_at="2026-11-28T08:15:00+00:00")

    pid, started = dead_pid()
    s = store.create(id="crashed", name="phi", trials=5, pid=None)
    trial(s, metrics(400.0))
    set_manifest(s, created_at="2026-11-27T07:00:00+00:00", pid=pid, pid_started_at=started)
    return store


def run_cli(*args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    """`python -m sessionstore ARGS` as a real process; `timeout` is a hang guard only."""
    env = cli_runner.environ(NO_COLOR="1", COLUMNS="200")
    return cli_runner.run(*args, timeout=timeout, env=env)

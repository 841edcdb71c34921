"""`sessionstore demo`: a fake agent session mirrored by the real daemon, in a few seconds.

Everything the demo shows is produced by the real code paths: the store
creates the session, a fake agent writes trials into a scratch workspace the
way a real one does (with the store's writer, plus the mistakes real agents
make), the mirror daemon copies the workspace into the session with a secret
redacted, and the inspect view is rendered from the mirrored files.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import shutil
import signal
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

from sessionstore._fs.atomic import temp_name
from sessionstore.inspect.best import best_trial, report_fields
from sessionstore.mirror.daemon import WatchConfig, running
from sessionstore.mirror.mirror import Mirror
from sessionstore.redact.redactor import Redactor
from sessionstore.store.session import Session, Store

TOKEN_ENV = "DEMO_AGENT_TOKEN"


@dataclass
class DemoResult:
    """Where the demo left things."""

    session: Session
    workspace: Path
    token_found_in_session: bool
    held_back: list[dict[str, str]]
    # The line of the mirrored trials/1/run.log that printed the token ("?" if none).
    token_line: str = "?"


def _fake_agent(workspace: Path, token: str, pause: Callable[[], None]) -> None:
    """Write four trials and one verification attempt the way an agent would."""
    ws = Session.open(workspace)

    # Trial 1: a clean, completed trial with CRLF config, a binary patch and a log.
    t1 = ws.trials.begin()
    t1.write_bytes("task.yml", b"model: fake-7b\r\nbatch_size: 32\r\nkv_cache: fp8\r\n")
    t1.write_bytes(
        "patches/0001-kernel.diff", b"--- a/k.cu\n+++ b/k.cu\n@@ -1 +1 @@\n-\x00\xff\n+\x01\xfe\n"
    )
    t1.write_text(
        "run.log",
        f"starting server\nusing token {token}\nbenchmark: 812.5 tok/s, ttft 180 ms\nPASS\n",
    )
    t1.complete(
        {
            "failed": False,
            "benchmark": {"metrics": {"output_tok_per_s": 812.5, "ttft_ms": 180}},
            "learned": "fp8 kv cache fits batch 32",
            "output_contract": {"log": "run.log"},
        }
    )
    pause()

    # Trial 2: the agent rewrites its config in place, mid-flight, then records a failure.
    t2 = ws.trials.begin()
    config = t2.write_bytes("task.yml", b"model: fake-7b\nbatch_size: 64\n")
    log = t2.path / "run.log"
    with open(log, "wb") as f:
        f.write(b"starting server\n")
    pause()
    with open(config, "r+b") as f:  # same size, rewritten in place: no rename, no new inode
        f.write(b"model: fake-7b\nbatch_size: 48\n")
    with open(log, "ab") as f:
        f.write(b"benchmark: 1040.0 tok/s, ttft 410 ms\nFAIL:ttft 410 ms > 250 ms\n")
    t2.complete(
        {
            "failed": True,
            "benchmark": {"metrics": {"output_tok_per_s": 1040.0, "ttft_ms": 410}},
            "learned": "batch 48 breaks the ttft budget",
            "output_contract": {"log": "run.log"},
        }
    )
    pause()

    # Trial 3: the agent writes its marker non-atomically and dies half-way: torn.
    t3 = ws.trials.begin()
    t3.write_bytes("task.yml", b"model: fake-7b\nbatch_size: 40\n")
    (t3.path / "trial.json").write_bytes(b'{"failed": false, "benchmark": {"metr')

    # Trial 4: still running when the demo stops: in flight.
    t4 = ws.trials.begin()
    t4.write_bytes("task.yml", b"model: fake-7b\nbatch_size: 36\n")
    t4.write_text("run.log", "starting server\n")

    # A verification attempt of the best trial that met the constraints.
    v1 = ws.service.begin()
    v1.write_bytes("service.yml", b"trial: 1\r\nreplicas: 2\r\n")
    v1.complete({"trial": 1, "run_name": "fake-7b-svc", "status": "verified"})
    pause()


def run_demo(
    store_root: Path, pause_seconds: float = 0.3, *, keep_workspace: bool = False
) -> DemoResult:
    """Create a session in `store_root`, run the fake agent under the mirror daemon.

    The scratch workspace holds the raw token, so it is deleted before this
    returns (unless `keep_workspace`) and on any error or Ctrl-C, together with
    the half-built session; a Ctrl-C during either deletion waits for it to end.
    """
    store = Store(store_root)
    # No writer pid: the demo process exits, and the session should not read as
    # interrupted because of that.
    session = store.create(
        name="demo: tune fake-7b",
        trials=4,
        constraints={"max_ttft_ms": 250},
        labels={"demo": "true"},
        pid=None,
    )
    workspace = Path(tempfile.mkdtemp(prefix="sessionstore-demo-"))
    token = f"demo-{secrets.token_hex(16)}"
    try:
        with _env(TOKEN_ENV, token):  # what an agent's environment would hold
            redactor = Redactor()
            redactor.add_env(TOKEN_ENV)
            mirror = Mirror(workspace, session.path, redactor)
            with running(mirror, WatchConfig(full_every=5.0)) as daemon:
                _fake_agent(workspace, token, lambda: time.sleep(pause_seconds))
    except BaseException:
        # Ctrl-C or an error mid-demo: the workspace holds the raw token and the
        # session is half-built; neither may outlive the demo.
        with deferred_interrupt():
            shutil.rmtree(workspace, ignore_errors=True)
            _discard(session.path)
        raise
    if not keep_workspace:
        with deferred_interrupt():
            shutil.rmtree(workspace, ignore_errors=True)
    # Ended as a harness ends its session (`sessionstore finish`), so demo sessions never
    # pile up as running ones: `prune` may remove them, and never a running one.
    constraints = session.constraints()
    session.finish(report_fields(best_trial(session.trials.records(), constraints), constraints))
    final = daemon.last_report
    found = any(
        token.encode() in path.read_bytes() for path in session.path.rglob("*") if path.is_file()
    )
    log = (session.path / "trials" / "1" / "run.log").read_text()
    return DemoResult(
        session=Session.open(session.path),
        workspace=workspace,
        token_found_in_session=found,
        held_back=list(final.held_back) if final else [],
        token_line=next((li for li in log.splitlines() if li.startswith("using token")), "?"),
    )


@contextlib.contextmanager
def _env(name: str, value: str) -> Iterator[None]:
    """Set an environment variable for the block, then restore what was there."""
    old = os.environ.get(name)
    os.environ[name] = value
    try:
        yield
    finally:
        if old is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = old


def _discard(session_dir: Path) -> None:
    """Remove a session whole: renamed to a temp name readers ignore, then deleted."""
    hidden = session_dir.with_name(temp_name())
    try:
        os.rename(session_dir, hidden)
    except OSError:
        return  # not there (or not ours to move): nothing half-visible was left by us
    shutil.rmtree(hidden, ignore_errors=True)


@contextlib.contextmanager
def deferred_interrupt() -> Iterator[None]:
    """Hold a Ctrl-C until the block ends, then raise it: for clean-up that must finish.

    Replaces the Python-level SIGINT handler rather than masking the signal, so it
    works whichever thread the C handler runs in; off the main thread (where the
    handler cannot be changed) the block simply runs.
    """
    caught: list[int] = []
    try:
        old = signal.signal(signal.SIGINT, lambda signum, _frame: caught.append(signum))
    except ValueError:  # not the main thread
        yield
        return
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, old)
    if caught:
        raise KeyboardInterrupt

"""A minimal agent harness built on sessionstore.

Creates a session, mirrors the agent's scratch workspace into it while the
agent runs, then finishes the session with a report naming the best trial.
The "agent" here is a subprocess that writes two trials; replace it with
your own.

    python examples/harness.py [--store DIR]
"""

from __future__ import annotations

import argparse
import contextlib
import os
import shutil
import signal
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

from sessionstore import Mirror, Redactor, Session, Store, best_trial, report_fields

# The agent: a separate process that only knows the workspace layout. It uses
# the store's writer on the raw workspace (Session.open works without a manifest).
AGENT = """
import sys
from sessionstore import Session

workspace = Session.open(sys.argv[1])
for tok_per_s in (640.0, 910.0):
    trial = workspace.trials.begin()
    trial.write_text("task.yml", f"batch_size: {int(tok_per_s // 20)}\\n")
    trial.write_text("run.log", "token in use: " + sys.argv[2] + "\\nPASS\\n")
    trial.complete({"failed": False, "benchmark": {"metrics": {"output_tok_per_s": tok_per_s}}})
"""


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--store", default=os.environ.get("SESSIONSTORE_HOME", "~/.sessionstore"))
    args = parser.parse_args()
    try:
        return run(Store(args.store))
    except KeyboardInterrupt:
        # A session already created stays without a report: inspect shows it interrupted.
        print("interrupted", file=sys.stderr)
        return 130


def run(store: Store) -> int:
    session = store.create(name="example harness", trials=2)
    token = "example-api-token-0123456789"  # in real life: os.environ["SOME_API_TOKEN"]
    workspace = Path(tempfile.mkdtemp(prefix="agent-workspace-"))
    try:
        run_agent(session, workspace, token)
    finally:
        # The workspace holds the raw token (the session holds it redacted): never keep it,
        # and let a Ctrl-C wait until it is gone.
        with deferred_interrupt():
            shutil.rmtree(workspace, ignore_errors=True)

    # The report keeps the requested constraints beside the values actually reached.
    constraints = session.constraints()
    best = best_trial(session.trials.records(), constraints)
    session.finish(report_fields(best, constraints))
    print(f"session {session.id} at {session.path}; best trial: {best.n if best else None}")
    print(f"inspect it: sessionstore inspect {session.id} --store {store.root}")
    return 0


def run_agent(session: Session, workspace: Path, token: str) -> None:
    """Run the agent in `workspace` while the mirror daemon copies it into `session`."""
    redactor = Redactor()
    redactor.add(token, origin="example token")
    # The daemon runs beside the agent; leaving the block runs a final full pass. The agent
    # gets a session of its own: a Ctrl-C reaches the harness, which stops it.
    with Mirror(workspace, session.path, redactor).running():
        cmd = [sys.executable, "-c", AGENT, str(workspace), token]
        subprocess.run(cmd, check=True, start_new_session=True)


@contextlib.contextmanager
def deferred_interrupt() -> Iterator[None]:
    """Hold a Ctrl-C until the block ends, then raise it: for clean-up that must finish."""
    caught: list[int] = []
    old = signal.signal(signal.SIGINT, lambda signum, _frame: caught.append(signum))
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, old)
    if caught:
        raise KeyboardInterrupt


if __name__ == "__main__":
    sys.exit(main())

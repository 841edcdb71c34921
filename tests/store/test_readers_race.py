"""A log or a record swapped for a symlink to an outside file while the judge reads it.

Another process toggles the path in a bounded loop (it stops at a stop file
or after a fixed number of swaps) while the verdict is computed thousands of
times in-process and `sessionstore check` runs as real processes. Law: the
outside file's content never appears in any verdict or output.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import orjson
from inspect_helpers import run_cli

from sessionstore.harness.verdict import Outcome, evaluate_output_contract
from sessionstore.store.session import Session, Store, read_record

SECRET = "OUTSIDE-SECRET-7f3a"
MAX_SWAPS = 2_000_000

# Swaps `target` between its real entry and a symlink to `outside`, by two renames
# through side names, until `stop` exists (or MAX_SWAPS): argv = target outside stop.
TOGGLER = """
import os, sys
target, outside, stop = sys.argv[1:4]
real, link = target + ".real", target + ".link"
os.symlink(outside, link)
for i in range(int(sys.argv[4])):
    if i % 64 == 0 and os.path.exists(stop):
        break
    os.rename(target, real)
    os.rename(link, target)
    os.rename(target, link)
    os.rename(real, target)
"""


@contextmanager
def toggling(target: Path, outside: Path, tmp_path: Path) -> Iterator[None]:
    stop = tmp_path / "stop"
    proc = subprocess.Popen(
        [sys.executable, "-c", TOGGLER, str(target), str(outside), str(stop), str(MAX_SWAPS)]
    )
    try:
        yield
    finally:
        stop.touch()
        proc.wait(timeout=60)
    assert proc.returncode == 0


def make_session(tmp_path: Path) -> tuple[Session, Path]:
    session = Store(tmp_path / "store").create(id="race", pid=None)
    for _ in range(2):
        writer = session.trials.begin()
        writer.write_text("run.log", "building\nPASS\n")
        writer.complete({"output_contract": {"log": "run.log"}})
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.log").write_text(f"token {SECRET}\nFAIL: {SECRET}\n")
    (outside / "trial.json").write_bytes(orjson.dumps({"output_contract": {"log": "secret.log"}}))
    (outside / "run.log").write_text(f"FAIL: {SECRET}\n")
    return session, outside


def judge_while_toggling(session: Session, n: int) -> set[str]:
    """Judge record `n` until both a clean read and a refusal were seen (bounded), return all."""
    seen: set[str] = set()
    for i in range(200_000):
        record = read_record(n, session.trials.path / str(n), "trial.json")
        verdict = evaluate_output_contract(record, "run.log")
        assert SECRET not in str(verdict) + repr(record.data)
        assert verdict.outcome is not Outcome.FAIL
        seen.add(str(verdict.outcome))
        if i >= 2000 and seen == {"pass", "indeterminate"}:
            break
    return seen


def check_runs(session: Session, n: int) -> None:
    for _ in range(8):
        for extra in ([], ["--log", "run.log"], ["--json"]):
            result = run_cli(
                "check", "race", "--trial", str(n), *extra, "--store", str(session.path.parent)
            )
            assert SECRET not in result.stdout + result.stderr
            assert result.returncode in (0, 4), result.stderr


def test_a_log_toggled_to_a_symlink_is_never_followed(tmp_path: Path) -> None:
    session, outside = make_session(tmp_path)
    with toggling(session.trials.path / "1" / "run.log", outside / "secret.log", tmp_path):
        # Both states were really met: the race ran, and every outcome was safe.
        assert judge_while_toggling(session, 1) == {"pass", "indeterminate"}
        check_runs(session, 1)


def test_a_record_toggled_to_a_symlinked_directory_is_never_entered(tmp_path: Path) -> None:
    session, outside = make_session(tmp_path)
    with toggling(session.trials.path / "2", outside, tmp_path):
        assert judge_while_toggling(session, 2) == {"pass", "indeterminate"}
        check_runs(session, 2)
        listed = run_cli("inspect", "race", "--json", "--store", str(session.path.parent))
        assert listed.returncode == 0 and SECRET not in listed.stdout

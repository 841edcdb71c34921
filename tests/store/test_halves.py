"""`store.halves`: a big local listing read by two processes, its values exactly one's.

Real forks, real pipes and real signals, each case in a fresh interpreter: a
function that reports whether it ran in the child shows which process derived
each value. A child that crashes, stops,
raises or derives a value JSON cannot carry costs only time: the parent
derives what it did not send. Nothing is left running or unreaped.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Set
from pathlib import Path
from typing import Any

import orjson
import pytest
from cli_runner import TIMEOUT, run
from inspect_helpers import metrics, trial

from sessionstore import _fork
from sessionstore.store.halves import MIN_ITEMS
from sessionstore.store.session import Store

N = MIN_ITEMS + 51
FORKS = _fork.may_fork()  # one CPU, or SIGCHLD taken: one process reads all

# Each case runs in a fresh interpreter: `halves` never forks beside another thread, and
# the test process has had threads (servers, watchers) since other tests ran. It prints
# the values as `[i, derived in the child]`, and whether any child is left unreaped.
CASE = """
import itertools, json, os, signal, sys, threading, time
from sessionstore.store import halves as h

case, n = sys.argv[1], int(sys.argv[2])
parent, calls, error = os.getpid(), [], None

def where(i):
    return [i, os.getpid() != parent]

def func(i):
    child = os.getpid() != parent
    if case == "json" and i == 7:
        return [i, child, 2**70]
    if case == "raises" and i == 11:
        calls.append(child)
        raise ValueError(f"item {i} is bad")
    if case == "dies" and i == 101 and child:
        os.kill(os.getpid(), signal.SIGKILL)
    if case == "stops" and i == 51 and child:
        os.kill(os.getpid(), signal.SIGSTOP)
    if case == "writes" and child:  # a write by the atomic recipe, as an index's
        temp = os.path.join(sys.argv[3], f"{i}.tmp")
        with open(temp, "w"):
            time.sleep(0.02)
        os.rename(temp, os.path.join(sys.argv[3], str(i)))
    elif case == "writes":  # the parent stops halfway through the child's next write
        time.sleep(0.01)
    return where(i)

h.STALL = 0.3
stop = threading.Event()
if case == "thread":
    threading.Thread(target=stop.wait).start()
values = h.halves(func, range(n))
if case in ("early", "writes"):
    got = list(itertools.islice(values, 5))
    getattr(values, "close", lambda: None)()  # a generator where it forked
elif case == "raises":
    got = list(itertools.islice(values, 11))
    try:
        next(values)
    except ValueError as exc:
        error = str(exc)
else:
    got = list(values)
stop.set()
try:
    os.waitpid(-1, os.WNOHANG)
    reaped = False
except ChildProcessError:
    reaped = True
print(json.dumps({"values": got, "calls": calls, "error": error, "reaped": reaped}))
"""


def _case(case: str, n: int = N, where: Path | None = None) -> dict[str, Any]:
    result = subprocess.run(
        [sys.executable, "-c", CASE, case, str(n), str(where)],
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    value: dict[str, Any] = orjson.loads(result.stdout)
    return value


def _check(found: dict[str, Any], derived_by_parent: Set[int] = frozenset()) -> None:
    """Every value, in order; the odd ones from the child unless it was gone by then."""
    values = [v[:2] for v in found["values"]]
    assert [i for i, _ in values] == list(range(len(values)))
    for i, by_child in values:
        assert by_child == (FORKS and i % 2 == 1 and i not in derived_by_parent), i
    assert found["reaped"]


def test_a_fork_is_allowed_exactly_where_there_is_a_second_cpu() -> None:
    # The cases below expect a child where `may_fork` says so: it must not just say no.
    assert (len(os.sched_getaffinity(0)) > 1) == FORKS


def test_every_other_value_comes_from_the_child_in_order() -> None:
    found = _case("every")
    assert len(found["values"]) == N
    _check(found)


def test_few_items_are_read_in_one_process() -> None:
    found = _case("every", MIN_ITEMS - 1)
    assert found["values"] == [[i, False] for i in range(MIN_ITEMS - 1)]


def test_a_value_json_cannot_carry_is_derived_by_the_parent() -> None:
    found = _case("json")
    assert found["values"][7] == [7, False, 2**70]
    _check(found, derived_by_parent={7})


def test_what_raises_in_the_child_raises_in_the_parent_when_it_is_reached() -> None:
    found = _case("raises")
    assert [v[0] for v in found["values"]] == list(range(11))
    assert found["error"] == "item 11 is bad"
    # The child's own call raised there, unseen; the parent's raised where it was read.
    assert found["calls"] == [False]
    assert found["reaped"]  # the generator ended with the error, and reaped its child


def test_a_child_that_dies_costs_only_time() -> None:
    _check(_case("dies"), derived_by_parent=set(range(101, N)))


def test_a_stopped_child_is_killed_after_the_stall_and_the_parent_reads_the_rest() -> None:
    _check(_case("stops"), derived_by_parent=set(range(51, N)))


def test_a_reader_that_stops_early_leaves_no_child() -> None:
    found = _case("early")
    assert [v[0] for v in found["values"]] == list(range(5))
    assert found["reaped"]


def test_a_reader_that_stops_early_lets_the_child_end_its_write(tmp_path: Path) -> None:
    # The child is killed only if it does not end at its next line: what it writes for the
    # item it is on (a summary index) is never left half done.
    found = _case("writes", where=tmp_path)
    assert found["reaped"]
    written = {p.name for p in tmp_path.iterdir()}
    assert not [name for name in written if name.endswith(".tmp")], written
    assert written <= {str(i) for i in range(1, N, 2)}
    assert bool(written) == FORKS


def test_no_fork_beside_another_thread() -> None:
    found = _case("thread")
    assert found["values"] == [[i, False] for i in range(N)]


def _one_process(*args: str) -> bytes:
    """`sessionstore ARGS` as one process reads it (`halves` never forks)."""
    code = (
        "import sys; import sessionstore.store.halves as h; h.MIN_ITEMS = 10**9; "
        "from sessionstore.cli import main; sys.exit(main(sys.argv[1:]))"
    )
    result = subprocess.run(
        [sys.executable, "-c", code, *args], capture_output=True, timeout=TIMEOUT, check=False
    )
    assert result.returncode == 0, result.stderr
    return result.stdout


@pytest.fixture(scope="module")
def big_store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("halves") / "store"
    store = Store(root)
    for s in range(N):
        session = store.create(id=f"s{s:04d}", name=f"n{s % 7}", pid=None, trials=3)
        if s % 3:
            trial(session, metrics(100.0 + s % 11))
    return root


@pytest.mark.parametrize(
    "args",
    [
        ["inspect", "--json"],
        ["inspect", "--nl", "--sort", "best"],
        ["inspect", "--csv", "--sort", "name", "--status", "running"],
        ["inspect"],
    ],
)
def test_the_listing_is_byte_for_byte_one_processs(big_store: Path, args: list[str]) -> None:
    full = [*args, "--store", str(big_store)]
    two = run(*full, text=False)
    assert two.returncode == 0, two.stderr
    assert two.stdout == _one_process(*full)
    if args == ["inspect", "--json"]:
        assert len(orjson.loads(two.stdout)) == N

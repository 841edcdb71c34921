"""`store.halves`: a big local listing read by two processes, its values exactly one's.

Real forks, real pipes and real signals: a function that reports the pid it
ran in shows which process derived each value. A child that crashes, stops,
raises or derives a value JSON cannot carry costs only time: the parent
derives what it did not send. Nothing is left running or unreaped.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
from collections.abc import Iterator, Set
from itertools import islice
from pathlib import Path
from typing import Any

import orjson
import pytest
from cli_runner import TIMEOUT, run
from inspect_helpers import metrics, trial

from sessionstore import _fork
from sessionstore.store import halves as halves_module
from sessionstore.store.halves import MIN_ITEMS, halves
from sessionstore.store.session import Store

N = MIN_ITEMS + 51
PARENT = os.getpid()
FORKS = _fork.may_fork()  # one CPU, or SIGCHLD taken: one process reads all


def _where(i: int) -> list[int]:
    return [i, os.getpid()]


def _no_children() -> bool:
    try:
        os.waitpid(-1, os.WNOHANG)
    except ChildProcessError:
        return True
    return False


def _check(values: Iterator[Any], derived_by_parent: Set[int] = frozenset()) -> None:
    got = list(values)
    assert [v[0] for v in got] == list(range(N))
    for i, (_, pid) in enumerate(got):
        by_child = FORKS and i % 2 == 1 and i not in derived_by_parent
        assert (pid != PARENT) == by_child, (i, pid)
    assert _no_children()


def test_every_other_value_comes_from_the_child_in_order() -> None:
    _check(halves(_where, range(N)))


def test_few_items_are_read_in_one_process() -> None:
    values = list(halves(_where, range(MIN_ITEMS - 1)))
    assert values == [[i, PARENT] for i in range(MIN_ITEMS - 1)]


def test_a_value_json_cannot_carry_is_derived_by_the_parent() -> None:
    def func(i: int) -> list[int]:
        return [i, os.getpid(), 2**70] if i == 7 else _where(i)

    got = list(halves(func, range(N)))
    assert got[7] == [7, PARENT, 2**70]
    assert all(v[1] != PARENT for v in got[9::2]) == FORKS


def test_what_raises_in_the_child_raises_in_the_parent_when_it_is_reached() -> None:
    calls: list[int] = []

    def func(i: int) -> list[int]:
        if i == 11:
            calls.append(os.getpid())
            raise ValueError(f"item {i} is bad")
        return _where(i)

    values = halves(func, range(N))
    assert [v[0] for v in islice(values, 11)] == list(range(11))
    with pytest.raises(ValueError, match="item 11 is bad"):
        next(values)
    assert calls == [PARENT]  # the child's own call raised in the child, unseen
    assert _no_children()


def test_a_child_that_dies_costs_only_time() -> None:
    def func(i: int) -> list[int]:
        if i == 101 and os.getpid() != PARENT:
            os.kill(os.getpid(), signal.SIGKILL)
        return _where(i)

    _check(halves(func, range(N)), derived_by_parent=set(range(101, N)))


def test_a_stopped_child_is_killed_after_the_stall_and_the_parent_reads_the_rest(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(halves_module, "STALL", 0.3)

    def func(i: int) -> list[int]:
        if i == 51 and os.getpid() != PARENT:
            os.kill(os.getpid(), signal.SIGSTOP)
        return _where(i)

    _check(halves(func, range(N)), derived_by_parent=set(range(51, N)))


def test_a_reader_that_stops_early_leaves_no_child() -> None:
    values = halves(_where, range(N))
    assert [v[0] for v in islice(values, 5)] == list(range(5))
    values.close()  # type: ignore[attr-defined]  # a generator where it forked
    assert _no_children()


def test_no_fork_beside_another_thread() -> None:
    stop = threading.Event()
    thread = threading.Thread(target=stop.wait)
    thread.start()
    try:
        values = list(halves(_where, range(N)))
    finally:
        stop.set()
        thread.join()
    assert values == [[i, PARENT] for i in range(N)]


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

"""`sessionstore._watch.Watcher` on real watchdog threads and a real inotify instance.

The directory chains here are one level deeper than this interpreter's
recursion limit, moved in whole: watchdog walks a directory that is moved into
a recursive watch with `os.walk`, which recurses once per level before Python
3.12, so the walk fails where it would in the daemon.
"""

from __future__ import annotations

import os
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from cli_runner import wait_for
from mirror_helpers import make_deep, remove_deep

from sessionstore._watch import Watcher

# Deeper than any walk that recurses per level can follow (the limit counts frames).
TOO_DEEP = sys.getrecursionlimit() + 100
SOON = 10.0  # a hang guard: threads end within milliseconds


@pytest.fixture
def deep(tmp_path: Path) -> Iterator[Path]:
    """`stage/d/d/...`, TOO_DEEP levels, outside any watch; removed afterwards wherever it is."""
    stage = tmp_path / "stage"
    make_deep(stage, TOO_DEEP)
    yield stage
    for place in (stage, tmp_path / "src" / "stage"):
        if place.exists():
            remove_deep(place)


@pytest.fixture
def thread_deaths(monkeypatch: pytest.MonkeyPatch) -> list[BaseException]:
    """The exceptions that end threads during the test (collected, not printed)."""
    deaths: list[BaseException] = []

    def collect(args: threading.ExceptHookArgs) -> None:
        assert args.exc_value is not None
        deaths.append(args.exc_value)

    monkeypatch.setattr(threading, "excepthook", collect)
    return deaths


def test_a_dead_inotify_reader_makes_the_watcher_unhealthy(
    tmp_path: Path, deep: Path, thread_deaths: list[BaseException]
) -> None:
    src = tmp_path / "src"
    src.mkdir()
    watcher = Watcher(lambda change: None)
    watcher.watch(str(src), recursive=True, content_only=True)
    watcher.start()
    try:
        assert watcher.healthy()
        os.rename(deep, src / "stage")  # the reader walks it to watch it, and dies
        wait_for(lambda: bool(thread_deaths), "the reader to die", SOON)
        assert [type(exc) for exc in thread_deaths] == [RecursionError]
        # The observer and emitter threads live on, waiting for events that never come.
        assert watcher.observer.is_alive()
        assert all(emitter.is_alive() for emitter in watcher.observer.emitters)
        wait_for(lambda: not watcher.healthy(), "the watcher to be unhealthy", SOON)
    finally:
        watcher.stop(timeout=SOON)


def _started(path: Path) -> tuple[Watcher, list[threading.Thread]]:
    """A watcher started on `path`, and the threads that started meanwhile (the test starts none).

    Created inside the count: watchdog starts its inotify reader with the observer.
    """
    before = set(threading.enumerate())
    watcher = Watcher(lambda change: None)
    watcher.watch(str(path), recursive=True, content_only=True)
    watcher.start()
    return watcher, [thread for thread in threading.enumerate() if thread not in before]


def test_any_thread_of_the_watcher_that_ends_makes_it_unhealthy(tmp_path: Path) -> None:
    """Each thread watchdog starts for a watcher, ended alone, is noticed: whatever holds it.

    Ended with `stop()`, watchdog's own way (`watchdog.utils.BaseThread`); the
    threads are told apart by their class, so a watchdog release that adds or
    moves one is still covered.
    """
    from watchdog.utils import BaseThread

    probe, threads = _started(tmp_path)
    try:  # every thread it started is one healthy() looks at (7.1.1's dispatcher was not)
        assert set(threads) <= set(probe._started_threads())
    finally:
        probe.stop(timeout=SOON)
    # Those watchdog lets end alone: the observer, an emitter, the inotify reader on Linux.
    kinds = {type(thread) for thread in threads if isinstance(thread, BaseThread)}
    assert len(kinds) >= 3, kinds
    for kind in kinds:
        watcher, started = _started(tmp_path)
        try:
            assert watcher.healthy()
            (victim,) = [thread for thread in started if type(thread) is kind]
            victim.stop()
            victim.join(SOON)
            assert not watcher.healthy(), kind.__name__
        finally:
            watcher.stop(timeout=SOON)


def test_a_watcher_that_cannot_start_leaves_no_thread_or_descriptor(tmp_path: Path) -> None:
    """watchdog starts its inotify reader with the observer; a start that fails stops it."""
    src = tmp_path / "src"
    make_deep(src, TOO_DEEP)
    try:
        threads, fds = set(threading.enumerate()), set(os.listdir("/proc/self/fd"))
        watcher = Watcher(lambda change: None)
        watcher.watch(str(src), recursive=True, content_only=True)
        with pytest.raises(RecursionError):
            watcher.start()  # its walk of the tree, in this thread
        assert set(threading.enumerate()) == threads
        assert set(os.listdir("/proc/self/fd")) == fds  # the inotify instance, its pipe
    finally:
        remove_deep(src)

"""The mirror daemon with real watchdog observers, threads and processes."""

from __future__ import annotations

import logging
import os
import signal
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import orjson
import pytest
from cli_runner import SESSIONSTORE, environ, popen, run
from mirror_helpers import lowered_sysctl, write

from sessionstore.errors import InvalidInput, LockHeld
from sessionstore.format.names import MIRROR_PID as PID_NAME
from sessionstore.mirror.daemon import Daemon, WatchConfig, running
from sessionstore.mirror.mirror import Mirror, PassReport

# Event-driven passes happen within milliseconds; these bounds only keep a
# broken daemon from hanging the suite.
SOON = 10.0
QUIET = WatchConfig(debounce=3600, max_wait=3600, full_every=3600)


def eventually(check: Callable[[], bool], timeout: float = SOON) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            raise AssertionError(f"not true after {timeout} s")
        time.sleep(0.01)


def content(path: Path) -> bytes | None:
    try:
        return path.read_bytes()
    except FileNotFoundError:
        return None


@pytest.fixture
def src(tmp_path: Path) -> Path:
    path = tmp_path / "src"
    path.mkdir()
    return path


class Passes:
    """Collects (kind, report) of every pass."""

    def __init__(self) -> None:
        self.items: list[tuple[str, PassReport]] = []
        self.lock = threading.Lock()

    def __call__(self, report: PassReport, kind: str) -> None:
        with self.lock:
            self.items.append((kind, report))

    def kinds(self) -> list[str]:
        with self.lock:
            return [k for k, _ in self.items]

    def unstable_paths(self) -> set[str]:
        with self.lock:
            return {u["path"] for _, r in self.items for u in r.unstable}


def test_changes_appear_in_the_destination(src: Path, dst: Path) -> None:
    passes = Passes()
    with running(Mirror(src, dst), on_pass=passes):
        (src / "trials" / "1").mkdir(parents=True)
        (src / "trials" / "1" / "task.yml").write_bytes(b"a: 1\r\n")
        eventually(lambda: content(dst / "trials" / "1" / "task.yml") == b"a: 1\r\n")
        (src / "trials" / "1" / "trial.json").write_bytes(b'{"failed": false}')
        eventually(lambda: content(dst / "trials" / "1" / "trial.json") == b'{"failed": false}')
    assert "events" in passes.kinds(), "changes must be picked up by event-driven passes"


def test_final_pass_on_stop_even_when_the_body_raises(src: Path, dst: Path) -> None:
    passes = Passes()
    mirror = Mirror(src, dst)
    with pytest.raises(RuntimeError, match="agent crashed"), running(mirror, QUIET, passes) as d:
        # After the initial pass (a slow observer start let it see the file) and with
        # no event pass due, only the final pass can mirror what is written now.
        eventually(lambda: passes.kinds() == ["initial"])
        (src / "late.txt").write_bytes(b"written just before the crash")
        raise RuntimeError("agent crashed")
    assert content(dst / "late.txt") == b"written just before the crash"
    assert d.last_report is not None and "late.txt" in d.last_report.copied


def test_the_final_pass_waits_for_a_marker_written_just_before_the_stop(
    src: Path, dst: Path
) -> None:
    """The record's files are settled, its marker is not (written right before the stop,
    inside the racy window): the final pass is held back as unstable, and the passes
    after it, within the grace, seal the record (CI lost a harness's last trial so)."""
    passes = Passes()
    mirror = Mirror(src, dst, racy_window_ns=300_000_000)
    record = src / "trials" / "1"
    with running(mirror, QUIET, passes) as d:
        eventually(lambda: passes.kinds() == ["initial"])
        write(record / "log.txt", b"PASS\n")
        time.sleep(0.4)  # settled: older than the window when the final pass runs
        write(record / "trial.json", b'{"failed": false}')
    assert content(dst / "trials" / "1" / "trial.json") == b'{"failed": false}'
    assert d.last_report is not None and "trials/1/trial.json" in d.last_report.copied
    held = [r for k, r in passes.items if k == "final" and r.held_back]
    assert held and held[0].held_back[0]["reason"].startswith("unstable: ")
    assert not held[0].unstable  # only the marker: what the old loop stopped on


def test_watch_blocks_until_the_stop_event(src: Path, dst: Path) -> None:
    mirror = Mirror(src, dst)
    stop = threading.Event()
    result: list[PassReport] = []
    thread = threading.Thread(target=lambda: result.append(mirror.watch(stop)))
    thread.start()
    (src / "a.txt").write_bytes(b"a")
    eventually(lambda: content(dst / "a.txt") == b"a")
    assert thread.is_alive()
    stop.set()
    thread.join(SOON)
    assert not thread.is_alive() and len(result) == 1


def test_second_daemon_on_the_same_destination_is_refused(src: Path, dst: Path) -> None:
    with running(Mirror(src, dst)):
        with pytest.raises(LockHeld) as info, running(Mirror(src, dst)):
            pass
        assert info.value.pid == os.getpid()
        assert f"process {os.getpid()}" in str(info.value)
    # Released on exit: a new daemon may start.
    with running(Mirror(src, dst)):
        pass


def test_source_created_late_is_waited_for(tmp_path: Path, dst: Path) -> None:
    src = tmp_path / "not-yet"
    with running(Mirror(src, dst), WatchConfig(source_poll=0.05)):
        time.sleep(0.2)
        assert not (dst / "f.txt").exists()
        src.mkdir()
        (src / "f.txt").write_bytes(b"hello")
        eventually(lambda: content(dst / "f.txt") == b"hello")


def test_missed_events_converge_through_the_periodic_full_pass(src: Path, dst: Path) -> None:
    passes = Passes()
    config = WatchConfig(debounce=0.01, max_wait=0.05, full_every=0.5)
    with running(Mirror(src, dst), config, passes) as daemon:
        eventually(lambda: daemon.observer is not None and passes.kinds() != [])
        assert daemon.observer is not None
        daemon.observer.observer.unschedule_all()  # from here on, no event arrives
        (src / "sub").mkdir()
        (src / "sub" / "unseen.txt").write_bytes(b"no event announced me")
        eventually(lambda: content(dst / "sub" / "unseen.txt") == b"no event announced me")
    assert "events" not in passes.kinds()
    assert "full" in passes.kinds()


def test_a_dead_observer_thread_is_restarted_and_a_full_pass_runs(src: Path, dst: Path) -> None:
    passes = Passes()
    config = WatchConfig(debounce=0.01, max_wait=0.05, full_every=3600, health_every=0.2)
    with running(Mirror(src, dst), config, passes) as daemon:
        eventually(lambda: daemon.observer is not None and passes.kinds() != [])
        first = daemon.observer
        assert first is not None
        for emitter in list(first.observer.emitters):
            emitter.stop()  # the emitter thread ends: no event will ever arrive from it
            emitter.join()
        (src / "after-death.txt").write_bytes(b"seen by the full pass")
        eventually(lambda: content(dst / "after-death.txt") == b"seen by the full pass")
        assert daemon.observer is not None and daemon.observer is not first
    assert "full" in passes.kinds()


@pytest.fixture
def tiny_inotify_queue() -> Iterator[None]:
    """New inotify instances get a 16-event queue, so a burst overflows it for real."""
    with lowered_sysctl("fs.inotify.max_queued_events", "16"):
        yield


def test_inotify_queue_overflow_triggers_a_full_pass(
    src: Path, dst: Path, tiny_inotify_queue: None
) -> None:
    passes = Passes()
    overflow_seen = threading.Event()

    class Spy(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            if "overflow" in record.getMessage():
                overflow_seen.set()

    spy = Spy(logging.WARNING)
    logging.getLogger("watchdog").addHandler(spy)
    # Slow event passes down so the burst below outruns the observer thread.
    config = WatchConfig(debounce=5, max_wait=5, full_every=3600)
    try:
        with running(Mirror(src, dst), config, passes):
            eventually(lambda: passes.kinds() == ["initial"])
            for i in range(2000):
                (src / f"f{i}.txt").write_bytes(b"x")
            eventually(overflow_seen.is_set)
            eventually(lambda: all((dst / f"f{i}.txt").exists() for i in range(2000)), 30)
    finally:
        logging.getLogger("watchdog").removeHandler(spy)
    assert "full" in passes.kinds()[1:], "an overflow must trigger a full pass"


def test_file_rewritten_continuously_is_unstable_then_committed(src: Path, dst: Path) -> None:
    passes = Passes()
    target = src / "hot.log"
    target.write_bytes(b"0" * 4096)
    stop_writing = threading.Event()

    def rewrite_in_place() -> None:
        i = 0
        with open(target, "r+b") as f:
            while not stop_writing.is_set():
                i += 1
                f.seek(0)
                f.write(str(i % 10).encode() * 4096)
                f.flush()

    config = WatchConfig(debounce=0.005, max_wait=0.05, retry_min=0.01, retry_max=0.1)
    with running(Mirror(src, dst), config, passes):
        writer = threading.Thread(target=rewrite_in_place)
        writer.start()
        eventually(lambda: "hot.log" in passes.unstable_paths())
        stop_writing.set()
        writer.join()
        final = target.read_bytes()
        eventually(lambda: content(dst / "hot.log") == final)


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT, signal.SIGHUP])
def test_cli_daemon_stops_on_signal_with_a_final_pass(src: Path, dst: Path, sig: int) -> None:
    quiet = ["--full-every", "3600", "--debounce", "3600", "--max-wait", "3600"]
    proc = popen("mirror", src, dst, "--json", *quiet, env=environ(NO_COLOR="1"))
    try:
        eventually(lambda: (dst / PID_NAME).exists())
        (src / "before-signal.txt").write_bytes(b"must not be lost")
        proc.send_signal(sig)
        out, err = proc.communicate(timeout=SOON)
    finally:
        proc.kill()
    assert proc.returncode == 0, err
    assert content(dst / "before-signal.txt") == b"must not be lost"
    lines = [orjson.loads(line) for line in out.splitlines()]
    assert lines[0]["pass"] == "initial" and lines[-1]["pass"] == "final"
    assert {line["pass"] for line in lines} == {"initial", "final"}
    assert any("before-signal.txt" in line["copied"] for line in lines)


def test_cli_daemon_keeps_the_signals_it_was_started_ignoring(src: Path, dst: Path) -> None:
    # As `nohup` (SIGHUP) and a script's background job (SIGINT) start it: a hangup or a
    # Ctrl-C meant for the terminal's job is not for the daemon. SIGTERM still stops it.
    import subprocess

    quiet = ["--full-every", "3600", "--debounce", "3600", "--max-wait", "3600"]
    ignoring = ["sh", "-c", 'trap "" INT HUP; exec "$@"', "sh", *SESSIONSTORE]
    proc = subprocess.Popen(
        [*ignoring, "mirror", str(src), str(dst), "--json", *quiet],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=environ(NO_COLOR="1"),
    )  # fmt: skip
    try:
        eventually(lambda: (dst / PID_NAME).exists())
        for sig in (signal.SIGINT, signal.SIGHUP):
            proc.send_signal(sig)
        # A daemon these stop is gone within milliseconds (the test above); this one is
        # still watching a second later, and its final pass comes with SIGTERM.
        with pytest.raises(subprocess.TimeoutExpired):
            proc.wait(timeout=1.0)
        (src / "after-signals.txt").write_bytes(b"seen")
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=SOON)
    finally:
        proc.kill()
    assert proc.returncode == 0, err
    lines = [orjson.loads(line) for line in out.splitlines()]
    assert lines[0]["pass"] == "initial" and lines[-1]["pass"] == "final"
    assert {line["pass"] for line in lines} == {"initial", "final"}
    assert content(dst / "after-signals.txt") == b"seen"


# Run in a child: the handler replaces pytest's own SIGINT handling while installed.
_SIGNAL_INSIDE_THE_LOCK = """
import os, sys, threading
from sessionstore.cli.mirror_run import stop_on_signals

stop, wake = threading.Event(), threading.Event()
stop_on_signals(stop, wake)
with wake._cond:  # where wait() and clear() are when the signal lands
    os.kill(os.getpid(), int(sys.argv[1]))
    [n for n in range(10000)]  # bytecodes: the handler runs here, holding the lock
print(stop.wait(30) and wake.wait(30))
"""


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_cli_signal_handler_sets_events_the_interrupted_code_holds_locked(sig: int) -> None:
    """The handler runs in the main thread anywhere, even inside an event's lock: no hang."""
    import subprocess
    import sys

    proc = subprocess.run(
        [sys.executable, "-c", _SIGNAL_INSIDE_THE_LOCK, str(int(sig))],
        capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert (proc.returncode, proc.stdout, proc.stderr) == (0, "True\n", "")


def test_cli_second_daemon_exits_1_naming_the_holder(src: Path, dst: Path) -> None:
    first = popen("mirror", src, dst, "-q", env=environ(NO_COLOR="1"))
    try:
        eventually(lambda: (dst / PID_NAME).exists())
        second = run("mirror", src, dst, timeout=SOON, text=False)
        assert second.returncode == 1
        assert f"already locked by process {first.pid}".encode() in second.stderr
        assert second.stderr.count(b"\n") == 1
    finally:
        first.terminate()
        first.communicate(timeout=SOON)
    assert first.returncode == 0


@pytest.mark.parametrize("option", ["--full-every", "--debounce", "--max-wait"])
def test_cli_nan_seconds_are_a_usage_error(src: Path, dst: Path, option: str) -> None:
    # A float range lets NaN through: --full-every nan made the daemon spin on a CPU,
    # --debounce nan never passed over a change.
    done = run("mirror", src, dst, option, "nan", timeout=SOON)
    assert done.returncode == 2, done.stderr
    assert f"Invalid value for '{option}': nan is not a number of seconds" in done.stderr
    assert not dst.exists()


@pytest.mark.parametrize("field", ["full_every", "debounce", "max_wait", "health_every"])
def test_a_nan_timing_is_refused_by_the_api_too(field: str) -> None:
    with pytest.raises(InvalidInput, match=f"{field}: nan is not a number of seconds"):
        WatchConfig(**{field: float("nan")})


@pytest.mark.parametrize(
    ("field", "value"),
    [("full_every", 0.0), ("health_every", 0.0), ("retry_min", -1.0), ("debounce", -0.5)],
)
def test_a_timing_that_would_spin_the_loop_is_refused(field: str, value: float) -> None:
    # full_every=0 ran a full pass every turn of the loop: thousands a second, a CPU busy.
    with pytest.raises(InvalidInput, match=f"{field}: must be at least .* seconds, not {value}"):
        WatchConfig(**{field: value})


def test_cli_daemon_reports_progress_for_people(src: Path, dst: Path) -> None:
    proc = popen("mirror", src, dst, "--full-every", "3600", env=environ(NO_COLOR="1"))
    try:
        eventually(lambda: (dst / PID_NAME).exists())
        (src / "notes.txt").write_bytes(b"x")
        eventually(lambda: (dst / "notes.txt").exists())
        proc.terminate()
        _, err = proc.communicate(timeout=SOON)
    finally:
        proc.kill()
    assert proc.returncode == 0
    assert b"copied notes.txt" in err


def test_daemon_object_runs_in_the_caller_thread(src: Path, dst: Path) -> None:
    stop = threading.Event()
    passes = Passes()
    daemon = Daemon(Mirror(src, dst), QUIET, passes)
    (src / "x.txt").write_bytes(b"x")
    threading.Timer(0.3, stop.set).start()
    final = daemon.run(stop)
    assert content(dst / "x.txt") == b"x"
    kinds = passes.kinds()
    assert kinds[0] == "initial" and kinds[-1] == "final" and daemon.passes == len(kinds)
    assert final is daemon.last_report


def test_hints_mark_directories_inside_the_source_only(tmp_path: Path) -> None:
    from sessionstore.mirror.hints import Hints

    hints = Hints(str(tmp_path), threading.Event())
    hints.mark(str(tmp_path / "..notes"), is_directory=False)
    hints.mark(str(tmp_path / "trials" / "3" / "run.log"), is_directory=False)
    hints.mark(str(tmp_path / "service"), is_directory=True)
    hints.mark(str(tmp_path.parent / "elsewhere.txt"), is_directory=False)
    dirty, lost = hints.take()
    assert dirty == {"", "trials/3", "service"} and not lost
    assert hints.wake.is_set()

"""Readers against what an agent can plant: FIFOs, symlinks, huge and deep markers, odd manifests.

Every fault is a real file made from outside (os.mkfifo, os.symlink, a sparse
truncate, a hand-written manifest); every reader runs as a real CLI process
with a timeout, which guards against a hang and is not a speed check.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import orjson
import pytest
from inspect_helpers import metrics, run_cli, trial

from sessionstore._fs import read as fsread
from sessionstore._fs.atomic import write_atomic
from sessionstore._json import MAX_MARKER_BYTES
from sessionstore.format.names import MANIFEST
from sessionstore.store.session import RecordState, Session, Store

FIFO = "is a FIFO, not a regular file"
SYMLINK = "is a symlink (never followed), not a regular file"


def make_store(tmp_path: Path) -> tuple[Store, Session, Session]:
    """A store with a healthy session `good` and a session `bad` to plant faults in."""
    store = Store(tmp_path / "store")
    good = store.create(id="good", name="fine", pid=None)
    trial(good, metrics(100.0))
    bad = store.create(id="bad", name="planted", pid=None)
    trial(bad, metrics(50.0), {"run.log": "PASS\n"})
    return store, good, bad


def listing(store: Store) -> dict[str, Any]:
    result = run_cli("inspect", "--json", "--store", str(store.root))
    assert result.returncode == 0, result.stderr
    return {item["id"] or Path(item["path"]).name: item for item in orjson.loads(result.stdout)}


def detail(store: Store, target: str) -> dict[str, Any]:
    result = run_cli("inspect", target, "--json", "--store", str(store.root))
    assert result.returncode == 0, result.stderr
    value: dict[str, Any] = orjson.loads(result.stdout)
    return value


def assert_tables_render(store: Store, target: str) -> str:
    """The human list and detail views also finish and exit 0; returns the detail's text."""
    listed = run_cli("inspect", "--store", str(store.root))
    assert listed.returncode == 0, listed.stderr
    assert "good" in listed.stdout
    shown = run_cli("inspect", target, "--store", str(store.root))
    assert shown.returncode == 0, shown.stderr
    return shown.stdout


def replace_with_fifo(path: Path) -> None:
    if path.exists():
        path.unlink()
    os.mkfifo(path)


def test_a_fifo_marker_is_torn_and_the_listing_of_every_session_goes_on(tmp_path: Path) -> None:
    store, _, bad = make_store(tmp_path)
    replace_with_fifo(bad.trials.path / "1" / "trial.json")
    listed = listing(store)
    assert listed["good"]["trial_counts"]["completed"] == 1
    assert listed["bad"]["trial_counts"] == {"completed": 0, "in_flight": 0, "torn": 1}
    one = detail(store, "bad")
    assert one["trials"][0]["state"] == "torn"
    assert one["trials"][0]["error"] == f"trial.json: {FIFO}"
    assert f"trial.json: {FIFO}" in assert_tables_render(store, "bad")


def test_a_fifo_manifest_constraints_or_report_is_reported_not_waited_on(tmp_path: Path) -> None:
    store, _, bad = make_store(tmp_path)
    for name in ("session.json", "constraints.json", "report.json"):
        replace_with_fifo(bad.path / name)
    listed = listing(store)
    entry = listed["bad"]
    assert entry["manifest_error"] == f"session.json: {FIFO}"
    assert entry["constraints_error"] == f"constraints.json: {FIFO}"
    assert entry["status"] == "running"  # a torn report never ends a session
    assert listed["good"]["status"] == "running"
    one = detail(store, str(bad.path))
    assert one["report"]["state"] == "torn" and one["report"]["error"] == f"report.json: {FIFO}"
    shown = assert_tables_render(store, str(bad.path))
    assert f"constraints: constraints.json: {FIFO}" in shown
    # Not read is not torn: the list's cell says only that it could not be read.
    table = run_cli("inspect", "--store", str(store.root)).stdout
    assert "unreadable constraints.json" in table and "torn" not in table


def test_a_fifo_verification_marker_is_torn(tmp_path: Path) -> None:
    store, _, bad = make_store(tmp_path)
    writer = bad.service.begin()
    os.mkfifo(writer.path / "verification.json")
    one = detail(store, "bad")
    assert one["service"][0]["error"] == f"verification.json: {FIFO}"
    assert one["phase"] == "verifying"


def test_a_fifo_collection_holds_no_records_and_wait_returns(tmp_path: Path) -> None:
    store, _, bad = make_store(tmp_path)
    for name in ("trials", "service"):
        os.rename(bad.path / name, bad.path / f"{name}-old")
        os.mkfifo(bad.path / name)
    assert listing(store)["bad"]["trial_counts"] == {"completed": 0, "in_flight": 0, "torn": 0}
    result = run_cli("wait", "bad", "--trial", "1", "--timeout", "2", "--store", str(store.root))
    assert result.returncode == 1
    assert "trial.json: not read: 'trials' is a FIFO, not a directory" in result.stderr
    checked = run_cli("check", "bad", "--attempt", "1", "--store", str(store.root))
    assert checked.returncode == 4


def test_wait_on_a_fifo_marker_returns_torn_within_its_timeout(tmp_path: Path) -> None:
    store, _, bad = make_store(tmp_path)
    writer = bad.trials.begin()
    os.mkfifo(writer.path / "trial.json")
    os.mkfifo(bad.path / "report.json")
    for what in (["--trial", "2"], ["--report"]):
        result = run_cli("wait", "bad", *what, "--timeout", "2", "--store", str(store.root))
        assert result.returncode == 1, result.stderr
        assert FIFO in result.stderr
        assert len(result.stderr.strip().splitlines()) == 1
    as_json = run_cli(
        "wait", "bad", "--trial", "2", "--timeout", "2", "--json", "--store", str(store.root)
    )
    assert as_json.returncode == 1
    assert orjson.loads(as_json.stdout)["error"] == f"trial.json: {FIFO}"


def test_check_of_a_fifo_log_is_indeterminate(tmp_path: Path) -> None:
    store, _, bad = make_store(tmp_path)
    replace_with_fifo(bad.trials.path / "1" / "run.log")
    result = run_cli("check", "bad", "--trial", "1", "--log", "run.log", "--store", str(store.root))
    assert result.returncode == 4, result.stderr
    assert result.stdout == f"indeterminate: log 'run.log' {FIFO}\n"


def test_export_skips_a_fifo_inside_the_record_and_says_so(tmp_path: Path) -> None:
    store, _, bad = make_store(tmp_path)
    os.mkdir(bad.trials.path / "1" / "out")
    os.mkfifo(bad.trials.path / "1" / "out" / "pipe")
    dest = tmp_path / "export"
    result = run_cli(
        "export", "bad", str(dest), "--trial", "1", "--json", "--store", str(store.root)
    )
    assert result.returncode == 0, result.stderr
    assert result.stderr == f"skipped out/pipe: {FIFO}\n"
    skipped = [{"file": "out/pipe", "reason": FIFO}]
    assert orjson.loads(result.stdout)["skipped"] == skipped
    manifest = orjson.loads((dest / "sessionstore-export.json").read_bytes())
    assert manifest["skipped"] == skipped and "out/pipe" not in manifest["files"]
    assert (dest / "run.log").read_text() == "PASS\n"
    assert not (dest / "out" / "pipe").exists()


def test_export_lists_every_symlink_it_skips_and_copies_nothing_outside(tmp_path: Path) -> None:
    store, _, bad = make_store(tmp_path)
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.txt").write_text("OUTSIDE-SECRET")
    record = bad.trials.path / "1"
    (record / "to-dir").symlink_to(outside, target_is_directory=True)
    (record / "to-file").symlink_to(outside / "secret.txt")
    dest = tmp_path / "export"
    result = run_cli("export", "bad", str(dest), "--trial", "1", "--store", str(store.root))
    assert result.returncode == 0, result.stderr
    symlink = "is a symlink (never followed), not a regular file"
    assert result.stderr == f"skipped to-dir: {symlink}\nskipped to-file: {symlink}\n"
    copied = [p.read_bytes() for p in dest.rglob("*") if p.is_file()]
    assert all(b"OUTSIDE-SECRET" not in data for data in copied)
    assert sorted(os.listdir(dest)) == ["run.log", "sessionstore-export.json", "trial.json"]


def test_symlinks_are_torn_or_foreign_and_nothing_outside_is_ever_read(tmp_path: Path) -> None:
    store, _, bad = make_store(tmp_path)
    outside = tmp_path / "outside"
    (outside / "1").mkdir(parents=True)
    secret = {"benchmark": {"metrics": {"output_tok_per_s": 1e9}}, "token": "OUTSIDE-SECRET"}
    (outside / "marker.json").write_bytes(orjson.dumps(secret))
    (outside / "1" / "trial.json").write_bytes(orjson.dumps(secret))
    (outside / "1" / "run.log").write_text("FAIL: OUTSIDE-SECRET\n")
    marker = bad.trials.path / "1" / "trial.json"
    marker.unlink()
    marker.symlink_to(outside / "marker.json")
    (bad.trials.path / "2").symlink_to(outside / "1", target_is_directory=True)
    other = store.create(id="other", pid=None)
    os.rmdir(other.trials.path)
    other.trials.path.symlink_to(outside, target_is_directory=True)

    outputs = [
        run_cli("inspect", "--json", "--store", str(store.root)),
        run_cli("inspect", "bad", "--json", "--store", str(store.root)),
        run_cli("inspect", "other", "--json", "--store", str(store.root)),
        run_cli("inspect", "bad", "--store", str(store.root)),
        run_cli("wait", "bad", "--trial", "2", "--timeout", "2", "--store", str(store.root)),
        run_cli("check", "bad", "--trial", "2", "--log", "run.log", "--store", str(store.root)),
        run_cli("export", "bad", str(tmp_path / "e"), "--best", "--store", str(store.root)),
    ]
    for result in outputs:
        assert "OUTSIDE-SECRET" not in result.stdout + result.stderr
    one = orjson.loads(outputs[1].stdout)
    assert one["trials"] == [
        {"n": 1, "state": "torn", "record": None, "error": f"trial.json: {SYMLINK}"}
    ]
    assert one["foreign"] == {"trials": ["2"]}
    assert orjson.loads(outputs[2].stdout)["trials"] == []
    not_a_dir = "is a symlink (never followed), not a directory"
    assert outputs[4].returncode == 1
    assert f"trial.json: not read: '2' {not_a_dir}" in outputs[4].stderr
    assert outputs[5].returncode == 4
    assert outputs[6].returncode == 1  # no trial can be ranked: the only marker is torn


def rss_kib_of(*args: str) -> tuple[subprocess.CompletedProcess[str], int]:
    """Run the CLI under a parent that reports its child's peak RSS (getrusage, KiB)."""
    probe = (
        "import resource, subprocess, sys\n"
        "r = subprocess.run([sys.executable, '-m', 'sessionstore', *sys.argv[1:]],"
        " capture_output=True, text=True, timeout=120)\n"
        "sys.stderr.write(r.stderr)\n"
        "print(r.returncode, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)\n"
        "sys.stdout.write(r.stdout)\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", probe, *args], capture_output=True, text=True, timeout=180
    )
    head, _, rest = result.stdout.partition("\n")
    code, rss = map(int, head.split())
    return subprocess.CompletedProcess(args, code, rest, result.stderr), rss


def test_a_huge_sparse_marker_is_torn_unread(tmp_path: Path) -> None:
    store, _, bad = make_store(tmp_path)
    huge = 300 * 1024 * 1024
    with open(bad.trials.path / "1" / "trial.json", "r+b") as f:
        f.truncate(huge)  # sparse: no disk used, but reading it whole takes 300 MiB
    with open(bad.path / "report.json", "wb") as f:
        f.truncate(huge)
    outputs: list[Any] = []
    for args in (
        ["inspect", "--json", "--store", str(store.root)],
        ["inspect", "bad", "--json", "--store", str(store.root)],
        ["wait", "bad", "--trial", "1", "--json", "--timeout", "2", "--store", str(store.root)],
    ):
        result, rss_kib = rss_kib_of(*args)
        assert result.returncode in (0, 1), result.stderr
        # Well under the 64 MiB cap: the marker was refused by its fstat size, not read up to it.
        assert rss_kib < 48 * 1024, f"{args[0]} peaked at {rss_kib} KiB"
        outputs.append(orjson.loads(result.stdout))
    listed, one, waited = outputs
    assert next(s for s in listed if s["id"] == "bad")["trial_counts"]["torn"] == 1
    too_big = f"larger than {MAX_MARKER_BYTES} bytes"
    assert one["trials"][0]["error"] == one["report"]["error"].replace("report", "trial")
    assert one["trials"][0]["error"] == waited["error"] == f"trial.json: {too_big}"


def nested(depth: int) -> bytes:
    return b'{"deep": ' + b"[" * depth + b"]" * depth + b"}"


@pytest.mark.parametrize("depth", [246, 254, 300, 1000])
def test_a_marker_too_deep_to_write_back_is_torn_and_json_output_never_crashes(
    tmp_path: Path, depth: int
) -> None:
    store, _, bad = make_store(tmp_path)
    (bad.trials.path / "1" / "trial.json").write_bytes(nested(depth))
    (bad.path / "constraints.json").write_bytes(nested(depth))
    (bad.path / "report.json").write_bytes(nested(depth))
    listed = listing(store)
    assert listed["bad"]["trial_counts"]["torn"] == 1
    assert "nested too deeply" in listed["bad"]["constraints_error"]
    one = detail(store, "bad")
    assert "nested too deeply" in one["trials"][0]["error"]
    assert "nested too deeply" in one["report"]["error"]
    waited = run_cli(
        "wait", "bad", "--trial", "1", "--json", "--timeout", "2", "--store", str(store.root)
    )
    assert waited.returncode == 1, waited.stderr
    assert orjson.loads(waited.stdout)["state"] == "torn"
    assert_tables_render(store, "bad")


def test_a_manifest_too_deep_to_write_back_is_torn(tmp_path: Path) -> None:
    store, _, bad = make_store(tmp_path)
    (bad.path / MANIFEST).write_bytes(nested(300))
    entry = listing(store)["bad"]
    assert entry["id"] is None and "nested too deeply" in entry["manifest_error"]
    assert detail(store, str(bad.path))["manifest"] is None


def test_a_deep_but_writable_marker_is_completed(tmp_path: Path) -> None:
    store, _, bad = make_store(tmp_path)
    (bad.trials.path / "1" / "trial.json").write_bytes(nested(245))  # 246 levels with its object
    assert bad.trials.records()[0].state is RecordState.COMPLETED
    assert detail(store, "bad")["trials"][0]["record"] == orjson.loads(nested(245))


@pytest.mark.parametrize(
    ("field", "raw", "problem"),
    [
        (
            "pid",
            "2147483648",
            "pid must be an integer from 1 to 2147483647 or null, not 2147483648",
        ),
        ("pid", "18446744073709551616", "pid must be an integer from 1 to 2147483647 or null"),
        ("pid", '"x"', 'pid must be an integer from 1 to 2147483647 or null, not "x"'),
        ("pid", "0", "pid must be an integer from 1 to 2147483647 or null, not 0"),
        ("pid_started_at", '"soon"', 'pid_started_at must be a finite number or null, not "soon"'),
        ("status", "3", "status must be running, done or failed, not 3"),
        ("trials", '"three"', 'trials must be an integer >= 1 or null, not "three"'),
        ("previous", '"abc"', 'previous must be an array of strings, not "abc"'),
        ("created_at", "5", "created_at must be a string, not 5"),
    ],
)
def test_out_of_range_or_wrong_typed_manifest_fields_make_the_status_unknown(
    tmp_path: Path, field: str, raw: str, problem: str
) -> None:
    store, _, bad = make_store(tmp_path)
    manifest = {**(bad.manifest or {}), "pid": 1, field: "RAW"}  # a live pid (init) unless replaced
    (bad.path / MANIFEST).write_bytes(orjson.dumps(manifest).replace(b'"RAW"', raw.encode()))
    listed = listing(store)
    assert listed["good"]["status"] == "running"
    assert listed["bad"]["status"] == "unknown"
    assert listed["bad"]["manifest_error"].startswith(f"session.json: {problem}")
    text = assert_tables_render(store, "bad")
    assert "status: unknown" in text and problem[:30] in text


def test_a_report_still_ends_a_session_whose_manifest_fields_are_odd(tmp_path: Path) -> None:
    store, _, bad = make_store(tmp_path)
    bad.finish({"best_trial": 1})
    write_atomic(bad.path / MANIFEST, orjson.dumps({**(bad.manifest or {}), "pid": 2**31}))
    entry = listing(store)["bad"]
    assert entry["status"] == "done" and "pid must be" in entry["manifest_error"]


def test_a_creation_time_outside_the_epochs_range_still_sorts(tmp_path: Path) -> None:
    store, _, bad = make_store(tmp_path)
    early = "0001-01-01T00:00:00+01:00"  # before datetime.min once converted to UTC
    write_atomic(bad.path / MANIFEST, orjson.dumps({**(bad.manifest or {}), "created_at": early}))
    assert set(listing(store)) == {"good", "bad"}


@contextmanager
def socket_at(path: Path) -> Iterator[None]:
    """A Unix socket bound at `path` (relative to its directory: socket paths must be short)."""
    cwd = os.getcwd()
    sock = socket.socket(socket.AF_UNIX)
    try:
        os.chdir(path.parent)
        sock.bind(path.name)
    finally:
        os.chdir(cwd)
    try:
        yield
    finally:
        sock.close()


def test_a_socket_marker_or_log_is_refused_at_once(tmp_path: Path) -> None:
    store, _, bad = make_store(tmp_path)
    record = bad.trials.path / "1"
    (record / "trial.json").unlink()
    (record / "run.log").unlink()
    with socket_at(record / "trial.json"), socket_at(record / "run.log"):
        one = detail(store, "bad")
        assert one["trials"][0]["error"] == "trial.json: is a socket, not a regular file"
        waited = run_cli(
            "wait", "bad", "--trial", "1", "--timeout", "2", "--store", str(store.root)
        )
        assert waited.returncode == 1 and "is a socket" in waited.stderr
        writer = bad.trials.begin()
        os.rename(record / "run.log", writer.path / "run.log")
        writer.complete({})
        checked = run_cli(
            "check", "bad", "--trial", "2", "--log", "run.log", "--store", str(store.root)
        )
        assert checked.stdout == "indeterminate: log 'run.log' is a socket, not a regular file\n"


def test_a_real_device_is_refused_before_any_read() -> None:
    dev = os.open("/dev", os.O_RDONLY | os.O_DIRECTORY)
    try:
        with pytest.raises(fsread.WrongKind) as caught:
            fsread.open_file("zero", dev)  # reading it would never end
    finally:
        os.close(dev)
    assert fsread.problem(caught.value) == "is a character device, not a regular file"


def test_names_that_are_not_utf8_never_break_json_output(tmp_path: Path) -> None:
    store, _, bad = make_store(tmp_path)
    record = os.fsencode(bad.trials.path / "1")
    os.mkdir(os.fsencode(bad.trials.path) + b"/x\xff")
    with open(record + b"/data-\xfe.bin", "wb") as f:
        f.write(b"payload")
    one = detail(store, "bad")
    assert one["foreign"] == {"trials": ["x\\xff"]}
    dest = tmp_path / "export"
    exported = run_cli(
        "export", "bad", str(dest), "--trial", "1", "--json", "--store", str(store.root)
    )
    assert exported.returncode == 0, exported.stderr
    manifest = orjson.loads((dest / "sessionstore-export.json").read_bytes())
    assert "data-\\xfe.bin" in manifest["files"]
    assert b"data-\xfe.bin" in os.listdir(os.fsencode(dest))

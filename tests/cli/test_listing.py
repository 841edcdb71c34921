"""The listing options every listing shares (inspect of a store, resume, scan, prune
--dry-run): --json, --nl and --csv streamed; --limit, --status, --label and --sort."""

from __future__ import annotations

import csv
import io
import os
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import orjson
import pytest
from cli_runner import environ, invoke, popen, reap, run
from inspect_helpers import dead_pid, metrics, set_manifest, torn_trial, trial

from sessionstore.store.session import Store

FAKE = "fake-token-for-listing-tests"


def ok(*args: str | Path) -> str:
    result = invoke(*args)
    assert result.exit_code == 0, result.output
    return result.stdout


@pytest.fixture
def store(tmp_path: Path) -> Path:
    """Four sessions, newest first: b-run (running, team=infra), a-done (done, best 900,
    team=infra, tier=gold), c-fail (failed, best 1500, team=ml), unnamed (interrupted)."""
    store = Store(tmp_path / "store")
    pid, started = dead_pid()
    s = store.create(id="s4", pid=None)
    set_manifest(s, created_at="2026-11-01T00:00:00+00:00", pid=pid, pid_started_at=started)
    s = store.create(id="s3", name="c-fail", labels={"team": "ml"}, pid=None)
    trial(s, metrics(1500.0))
    s.finish({}, "failed")
    set_manifest(s, created_at="2026-11-02T00:00:00+00:00")
    s = store.create(id="s2", name="a-done", labels={"team": "infra", "tier": "gold"}, pid=None)
    trial(s, metrics(900.0))
    s.finish({})
    set_manifest(s, created_at="2026-11-03T00:00:00+00:00")
    s = store.create(id="s1", name="b-run", labels={"team": "infra"}, trials=2, pid=None)
    trial(s, metrics(100.0))
    set_manifest(s, created_at="2026-11-04T00:00:00+00:00")
    return tmp_path / "store"


def ids(stdout: str, fmt: str = "json") -> list[str]:
    if fmt == "json":
        return [row["id"] for row in orjson.loads(stdout)]
    if fmt == "nl":
        return [orjson.loads(line)["id"] for line in stdout.splitlines()]
    return [row["id"] for row in csv.DictReader(io.StringIO(stdout))]


def test_json_is_byte_for_byte_the_whole_list_indented(store: Path) -> None:
    stdout = ok("inspect", "--store", store, "--json")
    rows = orjson.loads(stdout)
    assert stdout.encode() == orjson.dumps(rows, option=orjson.OPT_INDENT_2) + b"\n"
    assert [r["id"] for r in rows] == ["s1", "s2", "s3", "s4"]


def test_nl_is_one_object_a_line_with_the_json_rows(store: Path) -> None:
    rows = orjson.loads(ok("inspect", "--store", store, "--json"))
    lines = ok("inspect", "--store", store, "--nl").splitlines()
    assert [orjson.loads(line) for line in lines] == rows


def test_csv_has_a_header_and_nested_values_as_json(store: Path) -> None:
    rows = list(csv.DictReader(io.StringIO(ok("inspect", "--store", store, "--csv"))))
    assert [r["id"] for r in rows] == ["s1", "s2", "s3", "s4"]
    by_id = {r["id"]: r for r in rows}
    assert by_id["s2"]["status"] == "done"
    assert by_id["s4"]["name"] == ""  # None is an empty cell
    assert orjson.loads(by_id["s3"]["best"])["value"] == 1500.0
    assert orjson.loads(by_id["s1"]["trial_counts"]) == {"completed": 1, "in_flight": 0, "torn": 0}


@pytest.mark.parametrize("fmt", ["json", "nl", "csv"])
def test_status_label_sort_and_limit_choose_the_rows(store: Path, fmt: str) -> None:
    def listed(*args: str) -> list[str]:
        return ids(ok("inspect", "--store", store, f"--{fmt}", *args), fmt)

    assert listed("--status", "done", "--status", "failed") == ["s2", "s3"]
    assert listed("--label", "team=infra") == ["s1", "s2"]
    assert listed("--label", "team=infra", "--label", "tier=gold") == ["s2"]
    assert listed("--label", "team=nobody") == []
    assert listed("--sort", "name") == ["s2", "s1", "s3", "s4"]  # the unnamed last
    assert listed("--sort", "best") == ["s3", "s2", "s1", "s4"]  # no best trial last
    assert listed("--sort", "best", "--limit", "2") == ["s3", "s2"]
    assert listed("--limit", "0") == []


def test_sort_best_follows_the_objective_direction(store: Path) -> None:
    stdout = ok("inspect", "--store", store, "--json", "--sort", "best", "--lower")
    assert ids(stdout) == ["s1", "s2", "s3", "s4"]


def test_the_table_takes_the_same_filters(store: Path) -> None:
    table = ok("inspect", "--store", store, "--status", "running", "--sort", "name")
    assert "b-run" in table and "a-done" not in table
    empty = ok("inspect", "--store", store, "--label", "x=y")
    assert " ".join(empty.split()) == f"no matching sessions in {store}"  # rich may wrap it


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("--json", "--nl"), "give at most one of --json, --nl and --csv"),
        (("--label", "novalue"), "'novalue' is not KEY=VALUE"),
        (("--sort", "size"), "'size' is not one of"),
        (("--status", "sleeping"), "'sleeping' is not one of"),
        (("--limit", "-1"), "-1 is not in the range x>=0"),
        (("s1", "--nl"), "list the store's sessions: give no TARGET"),
    ],
)
def test_bad_listing_options_are_usage_errors(
    store: Path, args: tuple[str, ...], message: str
) -> None:
    result = invoke("inspect", "--store", store, *args)
    assert result.exit_code == 2
    assert message in result.stderr


@contextmanager
def nl_listing(root: Path, command: str = "inspect") -> Iterator[subprocess.Popen[bytes]]:
    """`COMMAND --store ROOT --nl` left running; killed (if need be) and its pipes closed."""
    proc = popen(command, "--store", root, "--nl", *(("-n",) if command == "prune" else ()))
    try:
        yield proc
    finally:
        reap(proc)


def test_rows_stream_before_the_last_session_is_read(tmp_path: Path) -> None:
    # Each row is over 2 KiB, so the pipe (64 KiB) holds a few dozen: while the first is
    # unread the process blocks long before the last session. What is changed in the
    # last session after the first row arrives must show in its row.
    store = Store(tmp_path)
    for n in range(120):
        s = store.create(id=f"s{n:03d}", name="x" * 2048, pid=None)
        set_manifest(s, created_at=f"2026-11-01T00:{n // 60:02d}:{n % 60:02d}+00:00")
    last = store.open("s000")
    with nl_listing(tmp_path) as proc:
        assert proc.stdout is not None
        first = orjson.loads(proc.stdout.readline())
        assert first["id"] == "s119"
        trial(last, metrics(1.0))
        # Read on through the same buffered reader: it may hold more than the first line.
        rest = proc.stdout.read()
        code = proc.wait(timeout=60)
    assert code == 0
    rows = [orjson.loads(line) for line in rest.splitlines()]
    assert len(rows) == 119
    assert rows[-1]["id"] == "s000"
    assert rows[-1]["trial_counts"]["completed"] == 1


def test_a_session_removed_while_the_list_streams_is_left_out(tmp_path: Path) -> None:
    store = Store(tmp_path)
    for n in range(120):
        s = store.create(id=f"s{n:03d}", name="x" * 2048, pid=None)
        set_manifest(s, created_at=f"2026-11-01T00:{n // 60:02d}:{n % 60:02d}+00:00")
    with nl_listing(tmp_path) as proc:
        assert proc.stdout is not None
        assert orjson.loads(proc.stdout.readline())["id"] == "s119"
        assert invoke("rm", "s000", "--store", tmp_path).exit_code == 0
        rest = proc.stdout.read()
        code = proc.wait(timeout=60)
    ids = [orjson.loads(line)["id"] for line in rest.splitlines()]
    assert (code, len(ids), ids[-1]) == (0, 118, "s001")


def test_a_reader_that_stops_early_ends_the_listing_quietly(tmp_path: Path) -> None:
    store = Store(tmp_path)
    for n in range(60):  # 60 rows of 3 KiB: more than a pipe holds
        store.create(id=f"s{n:03d}", name="y" * 3072, pid=None)
    with nl_listing(tmp_path) as proc:
        assert proc.stdout is not None and proc.stderr is not None
        assert orjson.loads(proc.stdout.readline())["name"] == "y" * 3072
        proc.stdout.close()  # as `| head -1` does
        code = proc.wait(timeout=60)
        err = proc.stderr.read()
    assert (code, err) == (1, b"")  # click's convention: no message, no traceback


def test_store_before_the_command_and_the_commands_own_wins(store: Path, tmp_path: Path) -> None:
    assert ids(ok("--store", store, "inspect", "--json")) == ["s1", "s2", "s3", "s4"]
    empty = tmp_path / "empty"
    empty.mkdir()
    assert ok("--store", store, "inspect", "--store", empty, "--json") == "[]\n"
    assert ok("--store", empty, "inspect", "--store", store, "--nl").count("\n") == 4
    # A real process, the environment's store overridden by both.
    done = run(
        "--store", store, "resume", "s1", "--json", env=environ(SESSIONSTORE_HOME=str(empty))
    )
    assert (done.returncode, orjson.loads(done.stdout)["id"]) == (0, "s1")


def test_a_store_that_does_not_exist_is_an_error(tmp_path: Path) -> None:
    for args in (
        ("inspect", "--store", tmp_path / "nope"),
        ("--store", tmp_path / "nope", "inspect"),
    ):
        done = run(*args, "--json")
        assert (done.returncode, done.stdout) == (1, "")
        assert done.stderr == f"Error: {tmp_path / 'nope'}: no such store directory\n"
    done = run("inspect", env=environ(SESSIONSTORE_HOME=str(tmp_path / "nope")))
    assert (done.returncode, done.stderr) == (
        1,
        f"Error: {tmp_path / 'nope'}: no such store directory\n",
    )
    # A path that is there but no directory is said to be so, not to be missing.
    (tmp_path / "file").write_text("x")
    os.mkfifo(tmp_path / "fifo")
    for name in ("file", "fifo"):
        done = run("inspect", "--store", tmp_path / name)
        assert (done.returncode, done.stdout) == (1, "")
        assert done.stderr == f"Error: {tmp_path / name}: is not a directory\n"
    home = tmp_path / "home"
    home.mkdir()
    env = {k: v for k, v in environ(HOME=str(home)).items() if k != "SESSIONSTORE_HOME"}
    fresh = run("inspect", "--json", env=env)  # the default store, not made yet: empty
    assert (fresh.returncode, fresh.stdout) == (0, "[]\n")


def test_prune_dry_run_lists_as_data_and_its_filters_choose_what_goes(store: Path) -> None:
    rows = orjson.loads(ok("prune", "--store", store, "--dry-run", "--json"))
    assert [r["id"] for r in rows] == ["s2", "s3", "s4"]
    assert set(rows[0]) == {"id", "path", "status", "created_at", "age_s"}
    csv_rows = list(csv.DictReader(io.StringIO(ok("prune", "--store", store, "-n", "--csv"))))
    assert [(r["id"], r["status"]) for r in csv_rows] == [
        ("s2", "done"),
        ("s3", "failed"),
        ("s4", "interrupted"),
    ]
    labelled = ok("prune", "--store", store, "-n", "--nl", "--label", "team=infra")
    assert ids(labelled, "nl") == ["s2"]  # s1 is infra too, but running: never pruned
    assert ids(ok("prune", "--store", store, "-n", "--json", "--sort", "name")) == [
        "s2",
        "s3",
        "s4",
    ]
    # What the dry run lists is what goes: only the one labelled session.
    removed = ok("prune", "--store", store, "--label", "team=infra", "--yes", "-v")
    assert removed == f"removed s2  done  {store / 's2'}\npruned 1 session\n"
    assert sorted(p.name for p in store.iterdir()) == ["s1", "s3", "s4"]
    assert ok("prune", "--store", store, "--limit", "1", "--yes", "-q") == ""
    assert sorted(p.name for p in store.iterdir()) == ["s1", "s4"]


def test_prune_prints_data_only_for_a_dry_run(store: Path) -> None:
    result = invoke("prune", "--store", store, "--yes", "--json")
    assert result.exit_code == 2
    assert "--json, --nl and --csv print the list of --dry-run" in result.stderr
    assert sorted(p.name for p in store.iterdir()) == ["s1", "s2", "s3", "s4"]


def test_resume_rows_one_per_record(tmp_path: Path) -> None:
    session = Store(tmp_path).create(id="r1", pid=None)
    trial(session, metrics(1.0))
    trial(session, metrics(2.0) | {"failed": True})
    torn_trial(session)
    trial(session, None)
    lines = ok("resume", "r1", "--store", tmp_path, "--nl").splitlines()
    rows = [orjson.loads(line) for line in lines]
    assert [(r["collection"], r["n"], r["status"], r["action"]) for r in rows] == [
        ("trials", 1, "completed", "keep"),
        ("trials", 2, "failed", "keep"),
        ("trials", 3, "torn", "redo"),
        ("trials", 4, "in_flight", "redo"),
    ]
    assert rows[3]["path"] == str(session.trials.path / "4")
    assert rows[2]["error"] and rows[0]["error"] is None
    redo = ok(
        "resume", "r1", "--store", tmp_path, "--csv", "--status", "torn", "--status", "in_flight"
    )
    assert [r["n"] for r in csv.DictReader(io.StringIO(redo))] == ["3", "4"]
    limited = ok("resume", "r1", "--store", tmp_path, "--nl", "--limit", "1")
    assert [orjson.loads(line)["n"] for line in limited.splitlines()] == [1]
    # --json stays the whole plan; filters choose rows of --nl and --csv only.
    assert orjson.loads(ok("resume", "r1", "--store", tmp_path, "--json"))["trials"]["next"] == 5
    refused = invoke("resume", "r1", "--store", tmp_path, "--json", "--status", "torn")
    assert refused.exit_code == 2 and "choose the rows of --nl or --csv" in refused.stderr


def test_scan_nl_csv_and_limit(tmp_path: Path) -> None:
    tree = tmp_path / "tree"
    tree.mkdir()
    for name in ("a.log", "b.log", "c.log"):
        (tree / name).write_text(f"x {FAKE} y\n")
    env = environ(LISTING_TOKEN=FAKE)
    done = run("scan", tree, "--secret-env", "LISTING_TOKEN", "--nl", env=env)
    rows = [orjson.loads(line) for line in done.stdout.splitlines()]
    assert done.returncode == 1
    assert sorted(r["path"] for r in rows) == [str(tree / n) for n in ("a.log", "b.log", "c.log")]
    assert {(r["type"], r["offset"], r["kind"], r["source"]) for r in rows} == {
        ("finding", 2, "raw", "LISTING_TOKEN")
    }
    done = run("scan", tree, "--secret-env", "LISTING_TOKEN", "--csv", "--limit", "2", env=env)
    found = list(csv.DictReader(io.StringIO(done.stdout)))
    assert (done.returncode, len(found), found[0]["type"]) == (1, 2, "finding")
    assert "stopped at --limit 2" in done.stderr
    assert FAKE not in done.stdout + done.stderr
    quiet = run("scan", tree, "--secret-env", "LISTING_TOKEN", "-q", env=env)
    assert (quiet.returncode, quiet.stdout.count("\n"), quiet.stderr) == (1, 3, "")
    zero = run("scan", tree, "--secret-env", "LISTING_TOKEN", "--limit", "0", env=env)
    assert zero.returncode == 2 and "a scan of nothing is no audit" in zero.stderr


HOSTILE = ['=HYPERLINK("http://x")', "+1+cmd|' /C calc'!A0", "-2+3", "@SUM(A1)", "\tx", "\rx"]


def test_csv_cells_a_spreadsheet_would_run_are_neutralised(tmp_path: Path) -> None:
    # Names, labels and paths an agent chose: each cell that starts a formula gets a `'`.
    store = Store(tmp_path / "@store")
    for n, name in enumerate(HOSTILE):
        s = store.create(id=f"h{n}", name=name, labels={"k": name}, pid=None)
        set_manifest(s, created_at=f"2026-11-0{n + 1}T00:00:00+00:00")
    s = store.create(id="n1", name="-5", pid=None)  # a name that is a number stays one
    set_manifest(s, created_at="2026-10-01T00:00:00+00:00")
    done = run("inspect", "--store", "@store", "--csv", cwd=tmp_path, text=False)
    assert done.returncode == 0, done.stderr
    rows = list(csv.DictReader(io.StringIO(done.stdout.decode(), newline="")))
    names = {r["id"]: r["name"] for r in rows}
    # A leading tab or carriage return is escaped (`\\t`), which starts no formula.
    shown = ["'" + name for name in HOSTILE[:4]] + ["\\tx", "\\rx"]
    assert names == {f"h{n}": name for n, name in enumerate(shown)} | {"n1": "-5"}
    assert {r["path"] for r in rows} == {f"'@store/{r['id']}" for r in rows}
    # JSON keeps every value exact: only the spreadsheet format is defused.
    exact = orjson.loads(run("inspect", "--store", "@store", "--json", cwd=tmp_path).stdout)
    assert {r["id"]: r["name"] for r in exact} == {
        f"h{n}": name for n, name in enumerate(HOSTILE)
    } | {"n1": "-5"}


def test_csv_rows_are_one_line_each_with_control_characters_escaped(tmp_path: Path) -> None:
    # A name an agent chose must neither split a row nor reach the terminal as a command.
    name = "a\r\nb\x1b]0;pwned\x07\x9b2J\u202e"
    store = Store(tmp_path / "store")
    store.create(id="h1", name=name, labels={"k": name}, constraints={name: name}, pid=None)
    done = run("inspect", "--store", tmp_path / "store", "--csv", text=False)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.split(b"\r\n")
    assert (len(lines), lines[-1]) == (3, b"")  # the header, one row, the last line end
    for char in ("\n", "\r", "\x1b", "\x07", "\x9b", "\u202e"):
        assert char.encode() not in done.stdout.replace(b"\r\n", b""), repr(char)
    row = next(csv.DictReader(io.StringIO(done.stdout.decode(), newline="")))
    assert row["name"] == "a\\r\\nb\\x1b]0;pwned\\x07\\x9b2J\\u202e"
    # A nested value stays JSON, the same value once parsed.
    assert orjson.loads(row["constraints"]) == {name: name}


def test_csv_numbers_stay_numbers_negative_ones_included(tmp_path: Path) -> None:
    store = Store(tmp_path)
    future = store.create(id="f1", pid=None)
    set_manifest(future, created_at="2999-01-01T00:00:00+00:00").finish({})
    rows = list(csv.DictReader(io.StringIO(ok("prune", "--store", tmp_path, "-n", "--csv"))))
    assert len(rows) == 1
    age = rows[0]["age_s"]
    assert age.startswith("-") and float(age) < 0  # created in the future: a negative age


def test_csv_of_hostile_file_names_in_a_scan(tmp_path: Path) -> None:
    tree = tmp_path / "=tree"
    tree.mkdir()
    for name in ("@evil.log", "-1+1.log"):
        (tree / name).write_text(f"x {FAKE}\n")
    env = environ(LISTING_TOKEN=FAKE)
    done = run("scan", "=tree", "--secret-env", "LISTING_TOKEN", "--csv", env=env, cwd=tmp_path)
    rows = list(csv.DictReader(io.StringIO(done.stdout, newline="")))
    assert sorted(r["path"] for r in rows) == ["'=tree/-1+1.log", "'=tree/@evil.log"]
    assert {r["offset"] for r in rows} == {"2"}


def test_csv_of_a_name_that_is_not_utf8(tmp_path: Path) -> None:
    (tmp_path / os.fsdecode(b"bad-\xff")).write_text(FAKE)
    env = environ(LISTING_TOKEN=FAKE)
    done = run("scan", tmp_path, "--secret-env", "LISTING_TOKEN", "--csv", env=env)
    assert (done.returncode, "Traceback" in done.stderr) == (1, False)
    assert [r["path"] for r in csv.DictReader(io.StringIO(done.stdout))] == [
        f"{tmp_path}/bad-\\xff"
    ]


def test_prune_dry_run_rows_stream_before_the_last_session_is_judged(tmp_path: Path) -> None:
    # A long store path makes each row over 1 KiB, so the pipe holds a few dozen: while
    # the first is unread, the process blocks long before it judges the oldest session.
    # That one, running when the listing starts, ends before it is judged: it is listed.
    root = tmp_path.joinpath(*["d" * 200] * 6)
    store = Store(root)
    for n in range(150):
        s = store.create(id=f"s{n:03d}", pid=None)
        s = set_manifest(s, created_at=f"2026-11-01T00:{n // 60:02d}:{n % 60:02d}+00:00")
        if n:
            s.finish({})
    with nl_listing(root, "prune") as proc:
        assert proc.stdout is not None
        assert orjson.loads(proc.stdout.readline())["id"] == "s149"
        store.open("s000").finish({})
        rest = proc.stdout.read()
        code = proc.wait(timeout=60)
    rows = [orjson.loads(line) for line in rest.splitlines()]
    assert (code, len(rows)) == (0, 149)
    assert (rows[-1]["id"], rows[-1]["status"]) == ("s000", "done")

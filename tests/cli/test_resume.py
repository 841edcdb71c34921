"""`sessionstore resume`: the restart plan, for a person and as JSON."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import cli_runner
import orjson
from inspect_helpers import dead_pid, set_manifest, torn_trial

from sessionstore.cli.resume import RECORD_COLUMNS
from sessionstore.store.session import Session, Store


def ss(store: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return cli_runner.run(args[0], "--store", store, *args[1:])


def _crashed(store: Path) -> Session:
    """A session whose harness died: trial 1 ok, 2 failed, 3 torn, 4 in flight, attempt 1."""
    session = Store(store).create(id="abc", trials=5, pid=None)
    session.trials.begin().complete({"failed": False})
    session.trials.begin().complete({"failed": True})
    torn_trial(session)
    writer = session.trials.begin()
    writer.write_text("task.yml", "model: llama\n")
    writer.write_text("logs/run.log", "half\n")
    session.service.begin()
    pid, started = dead_pid()
    return set_manifest(session, pid=pid, pid_started_at=started)


def test_the_plan_as_json(tmp_path: Path) -> None:
    session = _crashed(tmp_path)
    result = ss(tmp_path, "resume", "abc", "--json")
    assert result.returncode == 0, result.stderr
    plan = orjson.loads(result.stdout)
    trials = session.path / "trials"
    assert plan["status"] == "interrupted" and plan["finished"] is False
    assert plan["writer"]["alive"] is False and plan["mirror"] is None
    assert plan["trials"]["completed"] == [1, 2] and plan["trials"]["failed"] == [2]
    assert plan["trials"]["next"] == 5
    redo = plan["trials"]["redo"]
    assert [(r["n"], r["state"], r["path"]) for r in redo] == [
        (3, "torn", str(trials / "3")),
        (4, "in_flight", str(trials / "4")),
    ]
    assert redo[0]["files"] == ["trial.json"] and redo[0]["error"].startswith("trial.json: ")
    assert redo[1]["files"] == ["logs/run.log", "task.yml"] and redo[1]["error"] is None
    assert plan["service"]["redo"][0]["n"] == 1 and plan["service"]["next"] == 2


def test_the_plan_for_a_person(tmp_path: Path) -> None:
    session = _crashed(tmp_path)
    result = ss(tmp_path, "resume", "ab")
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0] == f"session abc: interrupted, not finished; {session.path}"
    assert lines[1].startswith("writer: pid ") and lines[1].endswith(", not alive")
    assert lines[2] == "trials: completed (keep) 1 2; failed 2; next 5"
    assert lines[3].startswith("  redo 3: torn (trial.json: ")
    assert lines[4] == (
        f"  redo 4: in flight; holds logs/run.log, task.yml; {session.path / 'trials' / '4'}"
    )
    assert lines[5] == "attempts: completed (keep) none; failed none; next 2"


def test_a_live_writer_and_a_finished_session(tmp_path: Path) -> None:
    session = Store(tmp_path).create(id="abc", pid=os.getpid())
    plan = orjson.loads(ss(tmp_path, "resume", "abc", "--json").stdout)
    assert plan["writer"] == {"kind": "writer", "pid": os.getpid(), "alive": True}
    assert plan["status"] == "running" and plan["trials"]["next"] == 1
    session.finish({})
    plan = orjson.loads(ss(tmp_path, "resume", "abc", "--json").stdout)
    assert plan["finished"] is True and plan["status"] == "done"


def test_control_characters_are_escaped_for_a_person(tmp_path: Path) -> None:
    session = Store(tmp_path).create(id="abc", pid=None)
    writer = session.trials.begin()
    writer.write_text("evil\x1b[31m.log", "x")
    result = ss(tmp_path, "resume", "abc")
    assert "\x1b" not in result.stdout and "evil\\x1b[31m.log" in result.stdout
    plan = orjson.loads(ss(tmp_path, "resume", "abc", "--json").stdout)
    assert plan["trials"]["redo"][0]["files"] == ["evil\x1b[31m.log"]


def test_a_foreign_name_is_escaped_as_every_name_is(tmp_path: Path) -> None:
    # Not by repr: a byte that is not UTF-8 shows as \xff, as in every other output.
    session = Store(tmp_path).create(id="abc", pid=None)
    os.mkdir(os.path.join(os.fsencode(session.trials.path), b"odd\xff\x1b"))
    lines = ss(tmp_path, "resume", "abc").stdout.splitlines()
    assert "  foreign entry odd\\xff\\x1b (not a record; ignored)" in lines


def test_next_is_the_number_begin_allocates_past_foreign_numbered_entries(
    tmp_path: Path,
) -> None:
    session = Store(tmp_path).create(id="abc", pid=None)
    session.trials.begin()
    os.mkfifo(session.path / "trials" / "2")  # foreign, yet its name takes number 2
    (session.path / "trials" / "3").symlink_to(tmp_path / "nowhere")
    (session.path / "trials" / "5").write_text("")
    planned = orjson.loads(ss(tmp_path, "resume", "abc", "--json").stdout)["trials"]["next"]
    begun = ss(tmp_path, "begin", "abc", "--trial")
    assert begun.returncode == 0, begun.stderr
    assert planned == int(begun.stdout.split()[0]) == 4


def test_resume_of_no_session(tmp_path: Path) -> None:
    result = ss(tmp_path, "resume", "nope")
    assert result.returncode == 1 and "no session 'nope'" in result.stderr


def test_rows_sorted_best_created_and_name(tmp_path: Path) -> None:
    session = Store(tmp_path).create(id="srt", pid=None)
    for loss in (0.5, 0.2, None, 0.9):  # trial 3 has no loss; trial 5 stays in flight
        session.trials.begin().complete({"failed": False, "loss": loss})
    session.trials.begin()
    session.service.begin().complete({"ok": True})

    def order(*args: str) -> list[tuple[str, int]]:
        result = ss(tmp_path, "resume", "srt", "--nl", *args)
        assert result.returncode == 0, result.stderr
        return [(r["collection"], r["n"]) for r in map(orjson.loads, result.stdout.splitlines())]

    begun = [("trials", n) for n in range(1, 6)] + [("service", 1)]
    assert order() == begun
    best = order("--sort", "best", "--objective", "loss", "--lower")
    assert best == [("trials", 2), ("trials", 1), ("trials", 4), ("trials", 3), ("trials", 5),
                    ("service", 1)]  # fmt: skip
    higher = order("--sort", "best", "--objective", "loss", "--higher")
    assert higher[:3] == [("trials", 4), ("trials", 1), ("trials", 2)]
    assert order("--sort", "created")[:2] == [("trials", 5), ("trials", 4)]
    assert order("--sort", "name") == sorted(begun)
    assert order("--sort", "best", "--limit", "1", "--objective", "loss", "--lower") == [
        ("trials", 2)
    ]
    plain = ss(tmp_path, "resume", "srt", "--sort", "best")
    assert plain.returncode == 2 and "--sort choose the rows of --nl or --csv" in plain.stderr


def test_label_keeps_the_rows_of_a_session_that_carries_it(tmp_path: Path) -> None:
    session = Store(tmp_path).create(id="lab", pid=None, labels={"team": "ml"})
    session.trials.begin().complete({"failed": False})
    kept = ss(tmp_path, "resume", "lab", "--nl", "--label", "team=ml")
    assert [orjson.loads(line)["n"] for line in kept.stdout.splitlines()] == [1]
    other = ss(tmp_path, "resume", "lab", "--csv", "--label", "team=web")
    assert (other.returncode, other.stdout.strip()) == (0, ",".join(RECORD_COLUMNS))
    plain = ss(tmp_path, "resume", "lab", "--label", "team=ml")
    assert plain.returncode == 2 and "--label" in plain.stderr


def test_next_is_none_once_no_record_number_is_left(tmp_path: Path) -> None:
    session = Store(tmp_path).create(id="full", pid=None)
    (session.path / "trials" / "999999999999999999").mkdir(mode=0o700)
    begun = ss(tmp_path, "begin", "full", "--trial")
    assert begun.returncode == 1 and "no record number left" in begun.stderr
    plan = orjson.loads(ss(tmp_path, "resume", "full", "--json").stdout)
    assert plan["trials"]["next"] is None and plan["service"]["next"] == 1
    text = ss(tmp_path, "resume", "full").stdout
    assert "; next none left (start a new session)\n" in text

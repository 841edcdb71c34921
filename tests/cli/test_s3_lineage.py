"""`new --previous` on an `s3://` store: the lineage copies of format v1, made on the
server, checked through the CLI (real processes against moto) and the bucket's keys."""

from __future__ import annotations

import json

import pytest
from cli_runner import run
from s3_proxy import counting_proxy
from s3_servers import S3Server
from s3_store import S3Store, s3_store

from sessionstore.store.lineage import include_previous

# What lineage copies of `finished_session`, as locally (tests/store/test_lineage.py).
EXPECTED = sorted(
    [
        "constraints.json",
        "report.json",
        *(f"service/1/{name}" for name in ("service.yml", "verification.json")),
        *(f"trials/1/patches/{name}" for name in ("deep/b.diff", "fix.diff")),
        *(f"trials/1/{name}" for name in ("task.yml", "trial.json")),
        "trials/2/task.yml",  # in flight: its config, no marker
    ]
)


@pytest.fixture
def s3(moto_s3: S3Server, monkeypatch: pytest.MonkeyPatch) -> S3Store:
    return s3_store(moto_s3, monkeypatch)


def finished_session(s3: S3Store, session_id: str) -> None:
    """A finished session with every kind of object lineage must copy or skip."""
    session = s3.store().create(id=session_id, constraints={"max_ttft_ms": 200}, pid=None)
    first = session.trials.begin()
    for rel, data in {
        "task.yml": b"files: [patches/fix.diff]\r\n",
        "patches/fix.diff": b"+x\n",
        "patches/deep/b.diff": b"+y\n",
        "agent.log": b"noise\n",
        "logs/run.txt": b"noise\n",
        "odd.yml/inner": b"a prefix where a config object would be\n",
    }.items():
        s3.put(f"{session_id}/trials/1/{rel}", data)
    first.complete({"benchmark": {"metrics": {"output_tok_per_s": 100.0}}})
    session.trials.begin()
    s3.put(f"{session_id}/trials/2/task.yml", b"in flight\n")
    s3.put(f"{session_id}/trials/2/stdout.log", b"noise\n")
    attempt = session.service.begin()
    s3.put(f"{session_id}/service/1/service.yml", b"port: 1\n")
    s3.put(f"{session_id}/service/1/server.log", b"noise\n")
    attempt.complete({"trial": 1, "status": "verified"})
    s3.put(f"{session_id}/trials/README", b"foreign\n")
    session.finish({"best_trial": 1})


def below(s3: S3Store, prefix: str) -> list[str]:
    start = len(f"runs/{prefix}/")
    return [k[start:] for k in s3.objects() if k.startswith(f"runs/{prefix}/")]


def test_new_previous_copies_the_same_files_as_locally(s3: S3Store) -> None:
    finished_session(s3, "old")
    done = s3.cli("new", "--id", "new", "--previous", "old")
    assert done.returncode == 0, done.stderr
    assert done.stdout == "new\n"
    assert done.stderr == (
        "warning: previous session old: trials/1/odd.yml is a prefix (a directory), "
        "not an object; not copied\n"
    )
    assert below(s3, "new/previous/old") == EXPECTED
    for rel in EXPECTED:
        assert s3.get(f"new/previous/old/{rel}") == s3.get(f"old/{rel}")
    shown = json.loads(s3.ok("inspect", "new", "--json"))
    assert shown["previous"] == ["old"]
    assert shown["lineage"] == [
        {
            "id": "old",
            "path": f"{s3.url}/new/previous/old",
            "copied": True,
            "trials": 2,
            "service": 1,
            "problem": None,
        }
    ]


def test_a_running_or_missing_previous_session_is_refused_and_nothing_is_written(
    s3: S3Store,
) -> None:
    s3.ok("new", "--id", "busy")  # no writer recorded, no report: running
    running = s3.cli("new", "--id", "new", "--previous", "busy")
    assert running.returncode == 1
    assert running.stderr.count("\n") == 1 and "busy" in running.stderr
    missing = s3.cli("new", "--id", "new", "--previous", "ghost")
    assert missing.returncode == 1
    assert f"no session 'ghost' in store {s3.url}" in missing.stderr
    assert below(s3, "new") == []


def test_a_previous_session_without_records_is_warned_about_and_not_copied(
    s3: S3Store,
) -> None:
    s3.ok("new", "--id", "empty")
    s3.ok("finish", "empty", "--report", "{}")
    done = s3.cli("new", "--id", "new", "--previous", "empty")
    assert done.returncode == 0, done.stderr
    assert done.stderr == "warning: previous session empty has no records; nothing copied from it\n"
    assert below(s3, "new") == ["constraints.json", "session.json"]
    lineage = json.loads(s3.ok("inspect", "new", "--json"))["lineage"]
    assert lineage[0]["copied"] is False and lineage[0]["trials"] is None


def test_a_chain_gap_is_warned_about_as_locally(s3: S3Store) -> None:
    finished_session(s3, "first")
    s3.ok("new", "--id", "second", "--previous", "first")
    s3.ok("finish", "second", "--report", "{}")
    done = s3.cli("new", "--id", "third", "--previous", "second")
    assert done.returncode == 0, done.stderr
    assert "previous session 'second' builds on 'first', which is not included" in done.stderr
    # A copy does not carry the previous session's own previous/.
    assert not [k for k in below(s3, "third/previous/second") if k.startswith("previous/")]


def test_include_previous_completes_a_damaged_copy(s3: S3Store) -> None:
    finished_session(s3, "old")
    s3.ok("new", "--id", "new", "--previous", "old")
    client = s3.server.client()
    client.delete_object(Bucket=s3.bucket, Key="runs/new/previous/old/trials/1/trial.json")
    s3.put("new/previous/old/trials/9/stray.yml", b"not the previous session's\n")
    store = s3.store()
    with pytest.warns(match="odd.yml is a prefix"):
        copies = include_previous(store, store.open("new"))
    assert [str(p) for p in copies] == [f"{s3.url}/new/previous/old"]
    assert below(s3, "new/previous/old") == EXPECTED


def test_a_failed_copy_leaves_nothing_and_the_id_stays_free(s3: S3Store) -> None:
    finished_session(s3, "old")
    with counting_proxy(s3.server.endpoint) as proxy:
        proxy.refuse = "/new/previous/old/trials/1/trial.json"  # that CopyObject gets 403
        env = {**s3.env, "AWS_ENDPOINT_URL": proxy.endpoint}
        failed = run("new", "--id", "new", "--previous", "old", env=env)
    assert failed.returncode == 1
    assert failed.stderr.count("\n") == 1 and "access denied" in failed.stderr
    assert below(s3, "new") == []  # not even the constraints that claimed the id
    assert s3.ok("new", "--id", "new", "--previous", "old") == "new\n"
    assert below(s3, "new/previous/old") == EXPECTED

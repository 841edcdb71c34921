"""A session of an `s3://` store named by a unique prefix of its id (git-style), for every
TARGET and for the mirror's DST, as locally; an ambiguous prefix is an error listing the
candidates. Real processes against moto on loopback."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from cli_runner import run
from mirror_helpers import settle, write
from s3_servers import S3Server
from s3_store import S3Store, s3_store


@pytest.fixture
def s3(moto_s3: S3Server, monkeypatch: pytest.MonkeyPatch) -> S3Store:
    store = s3_store(moto_s3, monkeypatch)
    writer = store.store().create(id="abc123", pid=None).trials.begin()
    store.put("abc123/trials/1/run.log", b"PASS\n")
    writer.complete({"output_contract": {"log": "run.log"}})
    store.store().create(id="abd456", pid=None)
    store.store().create(id="xyz789", pid=None)
    # A prefix without a manifest is no session: never a candidate.
    store.put("abe000/constraints.json", b"{}")
    return store


def ambiguous(s3: S3Store, prefix: str) -> str:
    return (
        f"Error: session prefix '{prefix}' is ambiguous in store {s3.url}: it matches "
        "abc123, abd456; give more characters of the id\n"
    )


# Each TARGET command, as `{}` the target: what it prints for abc123 is checked below.
COMMANDS = [
    ["inspect", "{}", "--json"],
    ["contract", "{}"],
    ["wait", "{}", "--trial", "1", "--json"],
    ["check", "{}", "--trial", "1", "--json"],
    ["resume", "{}", "--json"],
    ["doctor", "{}"],
    ["scan", "{}", "--secret-env", "AWS_SECRET_ACCESS_KEY"],
    ["report", "{}", "-o", "-"],
    ["begin", "{}", "--trial", "--json"],
]


@pytest.mark.parametrize("args", COMMANDS, ids=lambda args: args[0])
def test_every_target_takes_a_unique_prefix_and_refuses_an_ambiguous_one(
    s3: S3Store, args: list[str]
) -> None:
    by_prefix = s3.cli(*[a.replace("{}", "abc") for a in args])
    assert by_prefix.returncode == 0, by_prefix.stderr
    if args[0] == "begin":
        assert json.loads(by_prefix.stdout)["path"] == f"{s3.url}/abc123/trials/2"
    else:
        by_id = s3.cli(*[a.replace("{}", "abc123") for a in args])
        assert by_prefix.stdout == by_id.stdout
    before = s3.objects()
    refused = s3.cli(*[a.replace("{}", "ab") for a in args])
    # `check` says 4 for "could not judge", whatever the reason (as locally).
    assert (refused.returncode, refused.stdout) == (4 if args[0] == "check" else 1, "")
    assert refused.stderr == ambiguous(s3, "ab")
    assert s3.objects() == before


def test_the_commands_that_change_a_session_take_a_prefix(s3: S3Store, tmp_path: Path) -> None:
    s3.ok("begin", "abc1", "--trial")
    s3.ok("complete", "abc1", "--trial", "2", "--marker", '{"n": 2}')
    assert json.loads(s3.get("abc123/trials/2/trial.json")) == {"n": 2}
    s3.ok("export", "abc", str(tmp_path / "out"), "--trial", "1")
    assert (tmp_path / "out" / "run.log").read_bytes() == b"PASS\n"
    s3.ok("finish", "abc", "--report", '{"status": "done"}')
    assert json.loads(s3.get("abc123/report.json"))["status"] == "done"
    for args in (
        ["complete", "ab", "--trial", "1", "--marker", "{}"],
        ["finish", "ab"],
        ["rm", "ab"],
    ):
        refused = s3.cli(*args)
        assert (refused.returncode, refused.stderr) == (1, ambiguous(s3, "ab"))
    s3.ok("rm", "abc", "x")
    assert not [k for k in s3.objects() if k.startswith(("runs/abc123/", "runs/xyz789/"))]
    assert "runs/abd456/session.json" in s3.objects()


def test_a_session_url_may_end_in_a_prefix(s3: S3Store) -> None:
    env = {k: v for k, v in s3.env.items() if k != "SESSIONSTORE_HOME"}
    shown = run("inspect", f"{s3.url}/xy", "--json", env=env)
    assert shown.returncode == 0, shown.stderr
    assert json.loads(shown.stdout)["path"] == f"{s3.url}/xyz789"
    refused = run("inspect", f"{s3.url}/ab", env=env)
    assert (refused.returncode, refused.stderr) == (1, ambiguous(s3, "ab"))
    missing = run("inspect", f"{s3.url}/abe", env=env)
    assert missing.returncode == 1
    assert f"no session 'abe' in store {s3.url}" in missing.stderr


def test_the_mirror_destination_takes_a_prefix(s3: S3Store, tmp_path: Path) -> None:
    src = tmp_path / "src"
    write(src / "logs/extra.txt", b"more\n")
    write(src / "notes.txt", b"notes\n")
    settle()
    done = s3.cli("mirror", str(src), "xy", "--once", "--json")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["copied"] == ["notes.txt", "logs/extra.txt"]
    assert s3.get("xyz789/notes.txt") == b"notes\n"
    dry = s3.cli("mirror", str(src), "abc", "-n", "--json")
    assert dry.returncode == 0, dry.stderr
    assert json.loads(dry.stdout)["copied"] == ["notes.txt", "logs/extra.txt"]
    before = s3.objects()
    refused = s3.cli("mirror", str(src), "ab", "--once")
    assert (refused.returncode, refused.stderr) == (1, ambiguous(s3, "ab"))
    typo = s3.cli("mirror", str(src), "abe", "--once")  # no session starts so: a likely typo
    assert typo.returncode == 2, typo.stderr
    assert s3.objects() == before


def test_a_new_local_directory_is_a_destination_with_an_s3_store_too(
    s3: S3Store, tmp_path: Path
) -> None:
    # As with a local store (docs/mirror.md): `./out` is a new directory, a bare name that
    # is no session a likely mistyped id, refused with that hint.
    src = tmp_path / "src"
    write(src / "notes.txt", b"notes\n")
    before = s3.objects()
    out = tmp_path / "out"
    done = s3.cli("mirror", str(src), str(out), "--once")
    assert done.returncode == 0, done.stderr
    assert (out / "notes.txt").read_bytes() == b"notes\n"
    typo = s3.cli("mirror", str(src), "abf999", "--once")
    assert typo.returncode == 2
    assert typo.stderr.splitlines()[-1] == (
        f"Error: Invalid value for DST: no session 'abf999' in store {s3.url}; "
        "to mirror into a new directory of that name, write ./abf999"
    )
    assert s3.objects() == before


@pytest.mark.parametrize("dst", ["s3:x", "s3:/bucket/x", "S3:bucket"])
def test_a_mistyped_bucket_url_is_said_so(tmp_path: Path, dst: str) -> None:
    (tmp_path / "src").mkdir()
    done = run("mirror", tmp_path / "src", dst, "--once", cwd=tmp_path)
    assert done.returncode == 2
    assert done.stderr.splitlines()[-1] == (
        f"Error: Invalid value for DST: {dst}: not an s3://BUCKET/PREFIX/ID URL, nor a directory"
    )
    assert sorted(p.name for p in tmp_path.iterdir()) == ["src"]

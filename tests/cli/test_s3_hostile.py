"""An `s3://` store under hostile conditions, through the CLI against moto on loopback: a
malformed endpoint, a session removed while it is waited on, a listing the server fails.
Each ends in one line and exit 1, never a traceback, a hang or a wrong answer."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from cli_runner import finish, popen, run, wait_for
from s3_proxy import counting_proxy
from s3_servers import S3Server
from s3_store import S3Store, s3_store


@pytest.fixture
def s3(moto_s3: S3Server, monkeypatch: pytest.MonkeyPatch) -> S3Store:
    return s3_store(moto_s3, monkeypatch)


@pytest.mark.parametrize(
    ("endpoint", "problem"),
    [
        ("http://127.0.0.1:99999", "port"),
        ("http://127.0.0.1:-1", "port"),
        ("http://ep-user:ep-pass-5e1@[::1", "host"),
        ("http://ho st:80", "space or a control character"),
        ("http://:80", "host"),
        ("127.0.0.1:9000", "http:// or https://"),
        ("ftp://ep-user:ep-pass-5e1@127.0.0.1/", "http:// or https://"),
        # An empty query or fragment: the client sent to the server's top, and a store
        # holding sessions had none, a new id was "already" taken.
        ("http://127.0.0.1:9000?", "query"),
        ("http://127.0.0.1:9000/#", "fragment"),
    ],
)
@pytest.mark.parametrize("command", [["inspect"], ["new"], ["mirror", ".", "s3://b-x/p/s", "-n"]])
def test_a_malformed_endpoint_is_one_line_not_a_panic(
    moto_s3: S3Server, endpoint: str, problem: str, command: list[str], tmp_path: Path
) -> None:
    env = moto_s3.env(AWS_ENDPOINT_URL=endpoint, SESSIONSTORE_HOME="s3://b-x/p")
    done = run(*command, env=env, cwd=tmp_path)
    assert done.returncode == 1, done.stderr
    assert done.stderr.count("\n") == 1, done.stderr
    assert done.stderr.startswith("Error: AWS_ENDPOINT_URL: ") and problem in done.stderr
    assert "ep-pass-5e1" not in done.stdout + done.stderr
    assert "ep-user" not in done.stdout + done.stderr


@pytest.mark.parametrize(
    ("variable", "value", "problem"),
    [
        # Read as unset here, but as an endpoint by the client, which panicked on it.
        ("AWS_ENDPOINT_URL", "", "AWS_ENDPOINT_URL: is set but empty"),
        ("AWS_ENDPOINT_URL_S3", "", "AWS_ENDPOINT_URL_S3: is set but empty"),
        # Sent in a header: a control character made the client panic.
        ("AWS_REGION", "us-east-1\x1b", "AWS_REGION: holds a control character"),
        ("AWS_ACCESS_KEY_ID", "key-id-5e1\x01", "AWS_ACCESS_KEY_ID: holds a control character"),
        ("AWS_SESSION_TOKEN", "token-5e1\nx", "AWS_SESSION_TOKEN: holds a control character"),
        # Read by the client alone: its own refusal, in one line.
        (
            "AWS_SKIP_SIGNATURE",
            "maybe",
            "configure a client: Generic Config error: failed to parse",
        ),
        ("AWS_CHECKSUM_ALGORITHM", "bogus", "configure a client: Generic Config error:"),
    ],
)
def test_a_hostile_aws_variable_is_one_line_not_a_panic(
    moto_s3: S3Server, variable: str, value: str, problem: str, tmp_path: Path
) -> None:
    env = moto_s3.env(SESSIONSTORE_HOME="s3://b-x/p")
    env[variable] = value
    if variable == "AWS_ENDPOINT_URL_S3":
        env["AWS_ENDPOINT_URL"] = moto_s3.endpoint  # the empty one is read first
    done = run("inspect", env=env, cwd=tmp_path)
    assert (done.returncode, done.stdout) == (1, "")
    assert done.stderr.count("\n") == 1, done.stderr
    assert done.stderr.startswith("Error: ") and problem in done.stderr
    assert "5e1" not in done.stderr  # a credential's value is never shown


@pytest.mark.parametrize("recreate", [False, True])
def test_a_wait_on_a_session_removed_meanwhile_ends(s3: S3Store, recreate: bool) -> None:
    s3.ok("new", "--id", "abc")
    s3.ok("begin", "abc", "--trial")
    with counting_proxy(s3.server.endpoint) as proxy:
        waiter = popen(
            "wait", "abc", "--trial", "1", env={**s3.env, "AWS_ENDPOINT_URL": proxy.endpoint}
        )
        # Polling: a few reads of the marker (and of the manifest) went through the proxy.
        wait_for(lambda: proxy.snapshot().get("GET", 0) >= 8 or waiter.poll() is not None, "polls")
        s3.ok("rm", "abc")
        if recreate:  # a new session under the same id: its record 1 is not the one waited for
            s3.ok("new", "--id", "abc")
            s3.ok("begin", "abc", "--trial")
            s3.ok("complete", "abc", "--trial", "1", "--marker", "{}")
        code, out, err = finish(waiter)
    assert code == 1, out + err
    assert err.count("\n") == 1
    assert err == (
        f"Error: no session 'abc' in store {s3.url}; it was removed (or replaced by another) "
        "during the wait\n"
    )


def test_a_collection_the_server_fails_to_list_is_an_error_not_empty(s3: S3Store) -> None:
    s3.ok("new", "--id", "abc")
    s3.ok("begin", "abc", "--trial")
    s3.ok("complete", "abc", "--trial", "1", "--marker", "{}")
    with counting_proxy(s3.server.endpoint) as proxy:
        env = {**s3.env, "AWS_ENDPOINT_URL": proxy.endpoint}
        proxy.fail = ("prefix=runs%2Fabc%2Ftrials", 500)
        failed = (
            f"Error: abc/trials: runs/abc/trials in bucket {s3.bucket!r} at {proxy.endpoint}: "
            "request failed (InternalError)\n"
        )
        # Read as no records, the session looked empty and healthy, and begin took number 1.
        for command in (
            ["inspect"],
            ["inspect", "abc"],
            ["doctor", "abc"],
            ["begin", "abc", "--trial"],
        ):
            done = run(*command, env=env)
            assert (done.returncode, done.stderr) == (1, failed), (command, done.stdout)
        proxy.fail = None
    assert s3.ok("begin", "abc", "--trial").strip().startswith("2 ")


# Keys S3 takes but obstore cannot parse: a control character, an empty or '.' component.
_ODD_KEYS = ["ctl\x1b[31mX/session.json", "abc/trials/2\x07/trial.json", "abc/trials/1/a//b"]


def test_keys_obstore_cannot_parse_break_no_listing_and_go_with_rm(s3: S3Store) -> None:
    s3.ok("new", "--id", "abc")
    s3.ok("begin", "abc", "--trial")
    s3.ok("complete", "abc", "--trial", "1", "--marker", "{}")
    for key in _ODD_KEYS:
        s3.put(key, b"{}")
    assert [line.split()[0] for line in s3.ok("inspect").splitlines()[1:2]] == ["abc"]
    assert s3.ok("inspect", "ab").splitlines()[0] == "abc"  # a prefix: the top is listed
    s3.ok("new", "--id", "ctab")  # a prefix that also starts the odd name: no HEAD of it
    assert s3.ok("inspect", "ct").splitlines()[0] == "ctab"
    shown = json.loads(s3.ok("inspect", "abc", "--json"))
    assert [t["n"] for t in shown["trials"]] == [1]
    assert shown["trials"][0]["state"] == "completed"
    assert shown["foreign"] == {"trials": ["2\x07"]}
    doctor = s3.cli("doctor", "abc")
    assert doctor.returncode == 1
    foreign = "foreign: not a record of trials/ (ignored by every reader)"
    assert doctor.stdout == f"{s3.url}/abc/trials/2\\x07: {foreign}\n"  # escaped
    s3.ok("rm", "abc", "ctab")
    assert s3.objects() == [f"runs/{_ODD_KEYS[0]}"]  # the sessions whole, nothing else
    s3.ok("new", "--id", "abc")  # the id is free again


def test_a_mirror_into_a_prefix_holding_such_keys_still_runs(
    moto_s3: S3Server, tmp_path: Path
) -> None:
    bucket = moto_s3.new_bucket()
    for key in _ODD_KEYS[1:]:
        moto_s3.client().put_object(Bucket=bucket, Key=f"runs/s1/{key}", Body=b"theirs")
    (tmp_path / "a.txt").write_bytes(b"ours")
    for _ in range(2):  # the second with --delete: what it did not write stays
        done = run(
            "mirror", tmp_path, f"s3://{bucket}/runs/s1", "--once", "--delete", env=moto_s3.env()
        )
        assert done.returncode == 0, done.stdout + done.stderr
    assert moto_s3.keys(bucket) == sorted(
        ["runs/s1/.sessionstore-mirror.json", "runs/s1/a.txt"]
        + [f"runs/s1/{key}" for key in _ODD_KEYS[1:]]
    )


def test_a_marker_or_report_the_server_fails_to_send_is_not_acted_on_as_torn(
    s3: S3Store, tmp_path: Path
) -> None:
    s3.ok("new", "--id", "abc")
    s3.ok("begin", "abc", "--trial")
    with counting_proxy(s3.server.endpoint) as proxy:
        env = {**s3.env, "AWS_ENDPOINT_URL": proxy.endpoint}
        where = f"in bucket {s3.bucket!r} at {proxy.endpoint}: request failed (InternalError)"
        # Read as torn, the record was refused for good ("begin a new one"), and a session
        # with no report was refused as finished already.
        proxy.fail = ("trials/1/trial.json", 503)
        done = run("complete", "abc", "--trial", "1", "--marker", "{}", env=env)
        assert (done.returncode, done.stderr) == (
            1,
            f"Error: abc/trials/1/trial.json: runs/abc/trials/1/trial.json {where}\n",
        )
        s3.put("abc/trials/1/trial.json", b"{}")  # completed by another writer meanwhile
        done = run("export", "abc", str(tmp_path / "out"), "--trial", "1", env=env)
        assert (done.returncode, done.stderr) == (
            1,
            f"Error: {s3.url}/abc/trials/1: record is torn (trial.json: runs/abc/trials/1/"
            f"trial.json {where}); export a completed one\n",
        )
        proxy.fail = ("abc/report.json", 500)
        done = run("begin", "abc", "--trial", env=env)
        assert (done.returncode, done.stderr) == (
            1,
            f"Error: abc/report.json: runs/abc/report.json {where}\n",
        )
        proxy.fail = None
    assert s3.ok("begin", "abc", "--trial").startswith("2 ")


def test_a_record_file_obstore_cannot_name_is_skipped_by_lineage_and_named_by_export(
    s3: S3Store, tmp_path: Path
) -> None:
    s3.ok("new", "--id", "prev")
    s3.ok("begin", "prev", "--trial")
    s3.put("prev/trials/1/a\x01.json", b"{}")
    s3.put("prev/trials/1/ok.json", b"{}")
    s3.ok("complete", "prev", "--trial", "1", "--marker", "{}")
    s3.ok("finish", "prev")
    made = s3.cli("new", "--id", "next", "--previous", "prev")
    assert made.returncode == 0, made.stderr
    assert made.stderr == (
        "warning: previous session prev: trials/1/a\\x01.json has a name obstore cannot "
        "address (a control character, or an empty, '.' or '..' component); not copied\n"
    )
    copied = [k for k in s3.objects() if k.startswith("runs/next/previous/prev/trials/")]
    assert copied == [
        "runs/next/previous/prev/trials/1/ok.json",
        "runs/next/previous/prev/trials/1/trial.json",
    ]
    export = s3.cli("export", "prev", str(tmp_path / "out"), "--trial", "1")
    assert export.returncode == 1
    assert export.stderr.count("\n") == 1
    assert "trials/1/a\\x01.json in bucket" in export.stderr
    assert "a key obstore cannot address" in export.stderr


@pytest.mark.parametrize("odd", ["a//b.txt", "../../up.txt", "./here.txt"])
def test_a_key_with_an_empty_or_dot_component_is_one_unreadable_file_not_the_end(
    s3: S3Store, tmp_path: Path, odd: str
) -> None:
    # Such a key reached the base key check, which ended the whole scan (naming no bucket);
    # export made the staging tree's directory `..` of it: it chmodded DEST's parents 0700.
    s3.ok("new", "--id", "abc")
    s3.ok("begin", "abc", "--trial")
    s3.put(f"abc/trials/1/{odd}", b"{}")
    s3.put("abc/trials/1/z.txt", b"token=hunter2-very-secret\n")
    s3.ok("complete", "abc", "--trial", "1", "--marker", "{}")
    env = {**s3.env, "LEAKED": "hunter2-very-secret"}
    scan = run("scan", "abc", "--secret-env", "LEAKED", env=env)
    assert scan.returncode == 1
    assert scan.stdout == f"{s3.url}/abc/trials/1/z.txt:6 raw LEAKED\n"  # past the odd key
    unreadable = f"runs/abc/trials/1/{odd} in bucket {s3.bucket!r}"
    assert unreadable in scan.stderr
    assert "a key obstore cannot address" in scan.stderr
    assert scan.stderr.splitlines()[-1] == "scan: 1 finding in 5 files (0 skipped, 1 error)"
    parent = tmp_path / "p1" / "p2"
    parent.mkdir(parents=True)
    for folder in (parent, parent.parent):
        folder.chmod(0o711)
    export = s3.cli("export", "abc", str(parent / "out"), "--trial", "1")
    assert export.returncode == 1
    assert export.stderr.count("\n") == 1
    assert unreadable in export.stderr
    assert "a key obstore cannot address" in export.stderr
    assert list(tmp_path.rglob("*")) == [parent.parent, parent]  # nothing made, nor changed
    assert [folder.stat().st_mode & 0o777 for folder in (parent, parent.parent)] == [0o711] * 2


def test_folder_markers_are_no_files_and_go_with_rm(s3: S3Store, tmp_path: Path) -> None:
    # What the AWS console's "Create folder" (and s3fs, rclone) leave: zero-byte `a/` objects.
    s3.ok("new", "--id", "abc")
    s3.ok("begin", "abc", "--trial")
    for folder in ("abc/", "abc/trials/", "abc/trials/1/", "abc/trials/1/sub/"):
        s3.put(folder, b"")
    s3.put("abc/trials/1/log.txt", b"PASS\n")
    s3.ok("complete", "abc", "--trial", "1", "--marker", "{}")
    s3.ok("export", "abc", str(tmp_path / "out"), "--trial", "1")
    exported = sorted(p.name for p in (tmp_path / "out").iterdir())
    assert exported == ["log.txt", "sessionstore-export.json", "trial.json"]
    s3.ok("rm", "abc")
    assert s3.objects() == []


def test_the_proxy_passes_a_heads_size_on(s3: S3Store) -> None:
    # check reads a log's size by a HEAD: through the proxy it read every log as empty.
    s3.ok("new", "--id", "abc")
    s3.ok("begin", "abc", "--trial")
    s3.put("abc/trials/1/run.log", b"PASS\n")
    s3.ok("complete", "abc", "--trial", "1", "--marker", '{"output_contract": {"log": "run.log"}}')
    with counting_proxy(s3.server.endpoint) as proxy:
        env = {**s3.env, "AWS_ENDPOINT_URL": proxy.endpoint}
        assert run("check", "abc", "--trial", "1", env=env).stdout == "pass\n"

"""Every store command on an `s3://` store, as real processes against moto on loopback,
checked through the CLI's outputs and the keys in the bucket (format v1, same layout)."""

from __future__ import annotations

import json
import subprocess
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from cli_runner import finish, popen, run
from s3_proxy import counting_proxy
from s3_servers import S3Server
from s3_store import S3Store, s3_store

from sessionstore import Session, Store
from sessionstore.storage.s3 import CLAIM


@pytest.fixture
def s3(moto_s3: S3Server, monkeypatch: pytest.MonkeyPatch) -> S3Store:
    return s3_store(moto_s3, monkeypatch)


def test_new_writes_the_format_v1_layout_and_refuses_a_taken_id(s3: S3Store) -> None:
    assert s3.ok("new", "--id", "abc", "--name", "tune", "--trials", "3").strip() == "abc"
    assert s3.objects() == ["runs/abc/constraints.json", "runs/abc/session.json"]
    taken = s3.cli("new", "--id", "abc")
    assert taken.returncode == 1
    assert taken.stderr.strip() == (
        f"Error: {s3.url}/abc: session already exists; choose another --id or open it"
    )
    generated = s3.ok("new").strip()
    assert len(generated) == 8 and generated != "abc"


def test_a_record_from_begin_to_export(s3: S3Store, tmp_path: Path) -> None:
    s3.ok("new", "--id", "abc", "--trials", "2")
    begun = json.loads(s3.ok("begin", "abc", "--trial", "--json"))
    assert begun == {"n": 1, "path": f"{s3.url}/abc/trials/1"}
    assert f"runs/abc/trials/1/{CLAIM}" in s3.objects()
    s3.put("abc/trials/1/task.yml", b"log: trials/1/run.log\n")
    s3.put("abc/trials/1/run.log", b"step 1\nPASS\n")
    marker: dict[str, object] = {"benchmark": {"metrics": {"output_tok_per_s": 7}}}
    marker["output_contract"] = {"log": "run.log"}
    s3.ok("complete", "abc", "--trial", "1", "--marker", json.dumps(marker))
    again = s3.cli("complete", "abc", "--trial", "1", "--marker", "{}")
    assert again.returncode == 1 and "completed and immutable" in again.stderr
    assert "trial 1 completed" in s3.ok("wait", "abc", "--trial", "1")
    check = json.loads(s3.ok("check", "abc", "--trial", "1", "--json"))
    assert check["outcome"] == "pass"
    dest = tmp_path / "export"
    s3.ok("export", "abc", str(dest), "--trial", "1")
    assert (dest / "run.log").read_bytes() == b"step 1\nPASS\n"
    assert json.loads((dest / "trial.json").read_bytes()) == marker
    assert sorted(p.name for p in dest.iterdir()) == [
        "run.log",
        "sessionstore-export.json",
        "task.yml",
        "trial.json",
    ]
    shown = json.loads(s3.ok("inspect", "abc", "--json"))
    assert shown["path"] == f"{s3.url}/abc"
    assert [t["n"] for t in shown["trials"]] == [1]
    assert shown["trials"][0]["state"] == "completed"
    assert shown["best"]["n"] == 1


def test_records_sort_numerically_and_numbers_continue(s3: S3Store) -> None:
    session = s3.store().create(id="abc")
    for n in range(1, 12):
        writer = session.trials.begin()
        assert writer.n == n
        if n != 5:
            writer.complete({"i": n})
    assert json.loads(s3.ok("begin", "abc", "--trial", "--json"))["n"] == 12
    shown = json.loads(s3.ok("inspect", "abc", "--json"))
    assert [t["n"] for t in shown["trials"]] == list(range(1, 13))
    assert [t["record"] for t in shown["trials"][9:11]] == [{"i": 10}, {"i": 11}]
    assert shown["trial_counts"] == {"completed": 10, "in_flight": 2, "torn": 0}
    resume = json.loads(s3.ok("resume", "abc", "--json"))
    assert resume["trials"]["next"] == 13
    assert [r.n for r in s3.store().open("abc").trials.records()] == list(range(1, 13))


def test_torn_and_foreign_entries_are_read_as_locally(s3: S3Store) -> None:
    s3.ok("new", "--id", "abc")
    s3.ok("begin", "abc", "--trial")
    s3.put("abc/trials/1/trial.json", b"[1, 2]")
    s3.put("abc/trials/notes.txt", b"x")
    shown = json.loads(s3.ok("inspect", "abc", "--json"))
    assert shown["trials"][0]["state"] == "torn"
    assert "trial.json" in shown["trials"][0]["error"]
    doctor = s3.cli("doctor", "abc")
    assert doctor.returncode == 1
    assert f"{s3.url}/abc/trials/1/trial.json: torn" in doctor.stdout
    assert f"{s3.url}/abc/trials/notes.txt: foreign" in doctor.stdout


def test_wait_polls_until_another_process_completes(s3: S3Store) -> None:
    s3.ok("new", "--id", "abc")
    s3.ok("begin", "abc", "--trial")
    waiter = popen("wait", "abc", "--trial", "1", "--json", env=s3.env)
    s3.ok("complete", "abc", "--trial", "1", "--marker", '{"done": true}')
    code, out, err = finish(waiter)
    assert code == 0, err
    assert json.loads(out)["record"] == {"done": True}
    timed = s3.cli("wait", "abc", "--trial", "2", "--timeout", "0.3")
    assert timed.returncode == 3


def test_wait_polls_through_server_errors_and_stops_at_a_refusal(s3: S3Store) -> None:
    s3.ok("new", "--id", "abc")
    s3.ok("begin", "abc", "--trial")
    s3.ok("begin", "abc", "--trial")
    with counting_proxy(s3.server.endpoint) as proxy:
        env = {**s3.env, "AWS_ENDPOINT_URL": proxy.endpoint}
        proxy.fail = ("trials/1/trial.json", 500)  # the marker's server fails a while
        waiter = popen("wait", "abc", "--trial", "1", "--json", env=env)
        for _ in range(600):
            if proxy.snapshot().get("FAILED", 0) >= 8 or waiter.poll() is not None:
                break
            time.sleep(0.05)
        s3.ok("complete", "abc", "--trial", "1", "--marker", '{"done": true}')
        proxy.fail = None
        code, out, err = finish(waiter)
        assert code == 0, err  # a 5xx is no answer about the marker: not torn
        assert json.loads(out)["record"] == {"done": True}
        proxy.fail = ("trials/2/trial.json", 403)
        refused = run("wait", "abc", "--trial", "2", env=env)
    assert refused.returncode == 1
    assert refused.stderr.count("\n") == 1 and "access denied" in refused.stderr
    assert "torn" not in refused.stderr


def test_finish_then_lifecycle_commands(s3: S3Store) -> None:
    s3.ok("new", "--id", "old")
    s3.ok("new", "--id", "live")
    s3.ok("finish", "old", "--report", '{"status": "failed"}')
    again = s3.cli("finish", "old", "--report", "{}")
    assert again.returncode == 1
    begin = s3.cli("begin", "old", "--trial")
    assert begin.returncode == 1 and "report" in begin.stderr
    listing = json.loads(s3.ok("inspect", "--json"))
    assert {s["id"]: s["status"] for s in listing} == {"old": "failed", "live": "running"}
    pruned = s3.ok("prune", "--yes", "--status", "failed")
    assert "old" in pruned
    assert not [k for k in s3.objects() if k.startswith("runs/old/")]
    s3.ok("rm", "live")
    assert s3.objects() == []
    gone = s3.cli("inspect", "live")
    assert gone.returncode == 1 and f"no session 'live' in store {s3.url}" in gone.stderr


def test_the_store_option_and_a_session_url_name_the_same_session(s3: S3Store) -> None:
    env = {k: v for k, v in s3.env.items() if k != "SESSIONSTORE_HOME"}
    made = run("new", "--id", "abc", "--store", s3.url + "/", env=env)
    assert made.returncode == 0, made.stderr
    by_url = run("inspect", f"{s3.url}/abc", "--json", env=env)
    by_prefix = run("inspect", "ab", "--store", s3.url, "--json", env=env)
    assert json.loads(by_url.stdout)["id"] == json.loads(by_prefix.stdout)["id"] == "abc"
    assert Session.open(f"{s3.url}/abc").id == s3.store().open("abc").id == "abc"
    contract = run("contract", "abc", "--store", s3.url, env=env)
    assert f"{s3.url}/abc/trials/<n>/trial.json" in contract.stdout


def test_scan_finds_a_secret_in_an_object(s3: S3Store) -> None:
    s3.ok("new", "--id", "abc")
    s3.ok("begin", "abc", "--trial")
    s3.put("abc/trials/1/env.txt", b"token=hunter2-very-secret\n")
    env = {**s3.env, "LEAKED": "hunter2-very-secret"}
    found = run("scan", "abc", "--secret-env", "LEAKED", env=env)
    assert found.returncode == 1
    assert found.stdout == f"{s3.url}/abc/trials/1/env.txt:6 raw LEAKED\n"
    assert "hunter2" not in found.stdout + found.stderr


def test_scan_finds_a_secret_a_key_spells_across_a_slash(s3: S3Store) -> None:
    s3.ok("new", "--id", "abc")
    s3.put("abc/hunter2/very-secret/x.txt", b"clean\n")  # no one name holds it
    env = {**s3.env, "LEAKED": "hunter2/very-secret"}
    found = run("scan", "abc", "--secret-env", "LEAKED", env=env)
    assert found.returncode == 1
    assert found.stdout == f"{s3.url}/abc/REDACTED:path raw LEAKED\n"
    assert "hunter2" not in found.stdout + found.stderr


@pytest.mark.parametrize("named", ["url", "store"])
def test_scan_of_a_store_url_chooses_its_sessions_by_status(s3: S3Store, named: str) -> None:
    for sid in ("live", "old"):
        s3.ok("new", "--id", sid)
        s3.put(f"{sid}/notes.txt", b"token=hunter2-very-secret\n")
    s3.ok("finish", "old")
    env = {**s3.env, "LEAKED": "hunter2-very-secret"}
    where = [s3.url] if named == "url" else ["--store", s3.url, s3.url]
    found = run("scan", *where, "--secret-env", "LEAKED", "--status", "running", env=env)
    assert found.returncode == 1, found.stderr
    assert found.stdout == f"{s3.url}/live/notes.txt:6 raw LEAKED\n"


@pytest.mark.parametrize(
    ("url", "problem"),
    [
        ("s3://Bad_Bucket/x", "not a valid S3 bucket name"),
        ("s3://bucket/a//b", "empty, '.' or '..' component"),
        ("s3://user:pw@bucket/x", "must not hold credentials"),
    ],
)
def test_a_malformed_url_is_a_usage_error(s3: S3Store, url: str, problem: str) -> None:
    done = s3.cli("inspect", "--store", url)
    assert done.returncode == 2
    assert problem in done.stderr and "pw" not in done.stderr


@pytest.mark.parametrize(
    ("args", "what"),
    [
        (["export", "abc", "s3://BUCKET/out", "--trial", "1"], "'DEST'"),
        (["report", "abc", "-o", "S3://BUCKET/r.html"], "'-o' / '--output'"),
        (["mirror", "s3://BUCKET/runs/abc", "./dst", "--once"], "'SRC'"),
    ],
)
def test_a_url_where_a_local_path_is_taken_is_a_usage_error(
    s3: S3Store, tmp_path: Path, args: list[str], what: str
) -> None:
    # Read as a path it was ./s3:/BUCKET/...: an error naming that mangled path, or an
    # export made into it when such a local directory was there.
    s3.ok("new", "--id", "abc")
    s3.ok("begin", "abc", "--trial")
    s3.ok("complete", "abc", "--trial", "1", "--marker", "{}")
    (tmp_path / "s3:" / s3.bucket).mkdir(parents=True)
    args = [arg.replace("BUCKET", s3.bucket) for arg in args]
    done = run(*args, env=s3.env, cwd=tmp_path)
    assert done.returncode == 2
    assert done.stderr.splitlines()[-1] == (
        f"Error: Invalid value for {what}: is an s3:// URL, but this takes a local path "
        "(./s3:... for a directory so named)"
    )
    assert list(tmp_path.rglob("*")) == [tmp_path / "s3:", tmp_path / "s3:" / s3.bucket]


def test_a_missing_bucket_and_an_unreachable_endpoint_are_one_line(
    moto_s3: S3Server,
) -> None:
    missing = run("inspect", "--store", "s3://no-such-bucket-x/p", env=moto_s3.env())
    assert missing.returncode == 1
    assert missing.stderr.count("\n") == 1
    assert f"bucket 'no-such-bucket-x' does not exist at {moto_s3.endpoint}" in missing.stderr
    env = moto_s3.env(AWS_ENDPOINT_URL="http://127.0.0.1:9")
    down = run("inspect", "--store", "s3://some-bucket/p", env=env)
    assert down.returncode == 1
    assert down.stderr.count("\n") == 1
    assert "cannot reach http://127.0.0.1:9" in down.stderr
    assert "AWS_ENDPOINT_URL_S3, AWS_ENDPOINT_URL, the profile's endpoint_url or AWS_ENDPOINT" in (
        down.stderr
    )
    assert moto_s3.secret_key not in missing.stderr + down.stderr


@pytest.mark.parametrize(
    "command",
    [
        ["inspect", "--store", "s3://b-x/p"],
        ["new", "--store", "s3://b-x/p"],
        ["mirror", ".", "s3://b-x/p/s", "--once"],
    ],
)
def test_credentials_in_the_endpoint_url_are_never_shown(
    moto_s3: S3Server, command: list[str], tmp_path: Path
) -> None:
    # A proxy's basic auth in the endpoint (http://USER:PASSWORD@host) is a credential too.
    env = moto_s3.env(AWS_ENDPOINT_URL="http://ep-user:ep-pass-5e1@127.0.0.1:9")
    done = run(*command, env=env, cwd=tmp_path)
    assert done.returncode == 1
    assert done.stderr.count("\n") == 1
    assert "cannot reach http://***@127.0.0.1:9" in done.stderr
    assert "ep-user" not in done.stdout + done.stderr
    assert "ep-pass-5e1" not in done.stdout + done.stderr


def test_bad_credentials_are_one_line_without_the_secret(weed_s3: S3Server) -> None:
    bucket = weed_s3.new_bucket()
    env = weed_s3.env(AWS_SECRET_ACCESS_KEY="not-the-secret-4f9a", AWS_SESSION_TOKEN="tok-77x")
    done = run("new", "--store", f"s3://{bucket}/p", env=env)
    assert done.returncode == 1
    assert done.stderr.count("\n") == 1
    assert "access denied" in done.stderr and weed_s3.endpoint in done.stderr
    for secret in ("not-the-secret-4f9a", "tok-77x", weed_s3.secret_key):
        assert secret not in done.stdout + done.stderr


def test_a_server_ignoring_conditions_is_refused_unless_single_writer(
    rclone_s3: S3Server,
) -> None:
    url = f"s3://{rclone_s3.new_bucket()}/p"
    env = rclone_s3.env(SESSIONSTORE_HOME=url)
    refused = run("new", "--id", "abc", env=env)
    assert refused.returncode == 1
    assert f"the server at {rclone_s3.endpoint} ignores If-None-Match: *" in refused.stderr
    assert "--single-writer" in refused.stderr
    assert rclone_s3.keys(url[5:].split("/")[0]) == []  # the probe cleaned up
    flagged = run("new", "--id", "abc", "--single-writer", env=env)
    assert flagged.returncode == 0, flagged.stderr
    # A reader writes nothing, so it needs no probe and no flag.
    read = run("inspect", "abc", "--json", env=env)
    assert read.returncode == 0, read.stderr
    assert json.loads(read.stdout)["id"] == "abc"
    single = {**env, "SESSIONSTORE_S3_SINGLE_WRITER": "1"}
    by_env = run("inspect", "abc", "--json", env=single)
    assert json.loads(by_env.stdout)["id"] == "abc"
    # The server would overwrite; the store's own check still writes the report once.
    assert run("finish", "abc", "--report", '{"status": "done"}', env=single).returncode == 0
    again = run("finish", "abc", "--report", '{"status": "failed"}', env=single)
    assert again.returncode == 1 and "report" in again.stderr
    taken = run("new", "--id", "abc", env=single)
    assert taken.returncode == 1 and "already exists" in taken.stderr


def test_a_local_store_never_imports_obstore(tmp_path: Path) -> None:
    code = (
        "import sys\n"
        "from sessionstore import Store\n"
        "from sessionstore.cli import main\n"
        f"s = Store({str(tmp_path / 'store')!r})\n"
        "w = s.create(id='abc').trials.begin(); w.complete({'x': 1})\n"
        "[x.trials.records() for x in s.sessions()]\n"
        "assert not [m for m in sys.modules if m.startswith('obstore')], 'obstore imported'\n"
    )
    done = subprocess.run(
        [__import__("sys").executable, "-c", code], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr


def test_a_reader_sends_no_probe_and_no_write(s3: S3Store) -> None:
    s3.ok("new", "--id", "abc")
    s3.ok("begin", "abc", "--trial")
    s3.ok("complete", "abc", "--trial", "1", "--marker", "{}")
    with counting_proxy(s3.server.endpoint) as proxy:
        env = {**s3.env, "AWS_ENDPOINT_URL": proxy.endpoint}
        for args in (["inspect", "--json"], ["inspect", "ab", "--json"], ["doctor", "abc"]):
            assert run(*args, env=env).returncode == 0
        read = proxy.snapshot()
        assert set(read) <= {"GET", "HEAD", "LIST"}, read
        assert run("begin", "abc", "--trial", env=env).returncode == 0
        wrote = proxy.snapshot()
    assert wrote["PUT"] >= 4  # the probe's three PUTs, then the claim


def _fill(store: Store, put: Callable[[str, bytes | None], None]) -> None:
    """The same sessions in any store: a finished one with attempts, one without its
    constraints, one whose report and constraints names are prefixes, a torn report."""
    done = store.create(id="done", constraints={"max_ttft_ms": 200})
    for n in range(1, 4):
        done.trials.begin().complete({"benchmark": {"metrics": {"output_tok_per_s": n}}})
    done.service.begin().complete({"passed": True})
    done.finish({"best_trial": 3})
    store.create(id="bare").trials.begin()
    put("bare/constraints.json", None)
    store.create(id="dirs")
    put("dirs/report.json/x", b"1")
    put("dirs/constraints.json", None)
    put("dirs/constraints.json/y", b"1")
    store.create(id="torn")
    put("torn/report.json", b"[1, 2]")


def test_the_listing_reads_each_session_top_once_and_shows_what_a_local_store_shows(
    s3: S3Store, tmp_path: Path
) -> None:
    local = tmp_path / "store"

    def put_local(key: str, data: bytes | None) -> None:
        path = local / key
        if data is None:
            path.unlink()
        else:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(data)

    def put_s3(key: str, data: bytes | None) -> None:
        if data is None:
            s3.server.client().delete_object(Bucket=s3.bucket, Key=f"runs/{key}")
        else:
            s3.put(key, data)

    _fill(Store(local), put_local)
    _fill(s3.store(), put_s3)
    with counting_proxy(s3.server.endpoint) as proxy:
        listed = json.loads(
            run("inspect", "--json", env={**s3.env, "AWS_ENDPOINT_URL": proxy.endpoint}).stdout
        )
        counts = proxy.snapshot()
    locally = json.loads(s3.ok("inspect", "--json", "--store", str(local)))

    def comparable(rows: list[dict[str, object]]) -> dict[object, dict[str, object]]:
        return {
            r["id"]: {k: v for k, v in r.items() if k not in ("path", "created_at")} for r in rows
        }

    listed, locally = comparable(listed), comparable(locally)

    # A bucket has no directory where constraints.json would be: no object, so no error.
    assert locally["dirs"].pop("constraints_error") == (
        "constraints.json: is a directory, not a regular file"
    )
    assert listed["dirs"].pop("constraints_error") is None
    assert listed == locally
    assert listed["done"]["status"] == "done" and listed["torn"]["status"] == "running"
    # The store's LIST; per session its manifest's GET and one LIST of its top; then only
    # what is there: done's report, constraints, trials (3 markers) and service (1);
    # bare's trials (an in-flight record, its marker asked for); torn's constraints and
    # report; dirs' two names that are prefixes, asked of the server (the listing cannot
    # tell whether an object has the name too).
    assert counts == {"LIST": 1 + 4 + 2 + 1, "GET": 4 + (2 + 3 + 1) + 1 + 2 + 2}, counts

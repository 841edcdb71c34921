"""The mirror into a bucket under faults: a reader during a pass, kill -9, request counts,
bad configuration. Real servers on loopback (moto; SeaweedFS, which checks signatures); a
counting proxy (tests/s3_proxy.py) where requests matter.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import cli_runner
import orjson
import pytest
from mirror_helpers import settle, write
from mirror_s3_helpers import pass_json, settings
from s3_proxy import counting_proxy
from s3_servers import S3Server, free_port

from sessionstore.mirror.mirror import Mirror
from sessionstore.storage.s3_config import parse_s3_url
from sessionstore.storage.s3_tree_io import S3Dest

# A reader of the bucket in its own process: lists the prefix as fast as it can until the
# stop file appears, and reports every listing in which a record's marker was there before
# one of the record's files.
_READER = r"""
import json, os, sys, time
import boto3
endpoint, bucket, prefix, expected, stop = sys.argv[1:6]
expected = json.loads(expected)
client = boto3.client("s3", endpoint_url=endpoint, region_name="us-east-1",
                      aws_access_key_id="k", aws_secret_access_key="s")
polls, seen_markers, violations = 0, 0, []
deadline = time.monotonic() + 120
while not os.path.exists(stop) and time.monotonic() < deadline:
    pages = client.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix)
    keys = {o["Key"][len(prefix):] for p in pages for o in p.get("Contents", [])}
    polls += 1
    if polls == 1:
        print("ready", flush=True)
    for record, files in expected.items():
        if record + "/trial.json" in keys:
            seen_markers += 1
            missing = [f for f in files if f not in keys]
            if missing:
                violations.append({"record": record, "missing": missing})
print(json.dumps({"polls": polls, "markers": seen_markers, "violations": violations}))
"""


@pytest.fixture
def bucket(moto_s3: S3Server) -> str:
    return moto_s3.new_bucket()


def test_a_reader_never_sees_a_marker_before_its_files(
    moto_s3: S3Server, bucket: str, src: Path, tmp_path: Path
) -> None:
    expected: dict[str, list[str]] = {}
    for n in range(1, 7):
        files = [f"trials/{n}/f{i}.txt" for i in range(6)]
        if n == 3:
            files.append("trials/3/big.bin")  # a multipart upload, held by the proxy
        for rel in files:
            write(src / rel, os.urandom(20 << 20) if rel.endswith(".bin") else rel.encode())
        write(src / f"trials/{n}/trial.json", b'{"n": %d}' % n)
        expected[f"trials/{n}"] = files
    settle()
    stop = tmp_path / "stop"
    reader = subprocess.Popen(
        [
            sys.executable,
            "-c",
            _READER,
            moto_s3.endpoint,
            bucket,
            "p/r/",
            json.dumps(expected),
            str(stop),
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert reader.stdout is not None
        assert reader.stdout.readline() == "ready\n"  # it watches before the pass starts
        with counting_proxy(moto_s3.endpoint) as proxy:
            proxy.part_delay = 0.5
            env = moto_s3.env(AWS_ENDPOINT_URL=proxy.endpoint)
            done = cli_runner.run("mirror", src, f"s3://{bucket}/p/r", "--once", "--json", env=env)
        out = pass_json(done)
    finally:
        stop.touch()
        seen, _ = reader.communicate(timeout=60)
    assert out["errors"] == [] and out["held_back"] == []
    result = json.loads(seen)
    assert result["violations"] == []
    assert result["polls"] >= 3  # it watched the pass, not just its end
    assert set(moto_s3.keys(bucket, "p/r/trials/3/")) >= {"p/r/trials/3/big.bin"}


def test_kill_9_mid_upload_leaves_no_object_and_the_next_pass_converges(
    moto_s3: S3Server, bucket: str, src: Path
) -> None:
    data = os.urandom(40 << 20)
    write(src / "big.bin", data)
    write(src / "small.txt", b"small")
    settle()
    url = f"s3://{bucket}/p/k"
    client = moto_s3.client()
    with counting_proxy(moto_s3.endpoint) as proxy:
        proxy.part_delay = 1.0
        env = moto_s3.env(AWS_ENDPOINT_URL=proxy.endpoint)
        child = cli_runner.popen("mirror", src, url, "--once", env=env)
        try:
            cli_runner.wait_for(lambda: proxy.snapshot().get("PART", 0) >= 1, "a part upload")
        finally:
            child.send_signal(signal.SIGKILL)
            child.communicate(timeout=30)
    assert child.returncode == -signal.SIGKILL
    assert "p/k/big.bin" not in moto_s3.keys(bucket)
    uploads = client.list_multipart_uploads(Bucket=bucket).get("Uploads", [])
    assert [u["Key"] for u in uploads] == ["p/k/big.bin"]  # the dead upload, hidden
    done = cli_runner.run("mirror", src, url, "--once", "--json", env=moto_s3.env())
    out = pass_json(done)
    assert "big.bin" in out["copied"]
    body = client.get_object(Bucket=bucket, Key="p/k/big.bin")["Body"].read()
    assert body == data
    assert client.list_multipart_uploads(Bucket=bucket).get("Uploads", []) == []
    assert "p/k/.sessionstore-mirror-dirty" not in moto_s3.keys(bucket)


def _noop_requests(server: S3Server, bucket: str, root: Path, n: int) -> dict[str, int]:
    """Mirror a tree of `n` files, then count the requests of a no-op pass over it."""
    for i in range(n):
        write(root / f"d{i % 20}" / f"f{i}.txt", b"x" * (i % 7))
    settle()
    url = f"s3://{bucket}/p/n{n}"
    assert pass_json(cli_runner.run("mirror", root, url, "--once", "--json", env=server.env()))
    with counting_proxy(server.endpoint) as proxy:
        env = server.env(AWS_ENDPOINT_URL=proxy.endpoint)
        out = pass_json(cli_runner.run("mirror", root, url, "--once", "--json", env=env))
        counts = proxy.snapshot()
    assert out["copied"] == [] and out["unchanged"] == n
    return counts


def test_a_no_op_pass_makes_a_handful_of_requests_whatever_the_size(
    moto_s3: S3Server, bucket: str, tmp_path: Path
) -> None:
    small = _noop_requests(moto_s3, bucket, tmp_path / "small", 20)
    large = _noop_requests(moto_s3, bucket, tmp_path / "large", 1500)
    # No HEAD or GET per file: the probe (3 PUTs, 1 DELETE), the LIST (1,000 keys a page)
    # and the change cache's GET.
    assert large.get("HEAD", 0) == 0 and large.get("GET", 0) == 1
    assert large["LIST"] == small["LIST"] + 1
    assert sum(large.values()) <= 8


def test_bad_credentials_one_line_exit_1_no_secret(weed_s3: S3Server, src: Path) -> None:
    bucket = weed_s3.new_bucket()
    write(src / "a.txt", b"a")
    wrong = "wrong-secret-never-printed"
    env = weed_s3.env(AWS_SECRET_ACCESS_KEY=wrong)
    done = cli_runner.run("mirror", src, f"s3://{bucket}/p/x", "--once", env=env)
    assert done.returncode == 1
    assert len(done.stderr.splitlines()) == 1 and "access denied" in done.stderr, done.stderr
    for secret in (wrong, weed_s3.secret_key):
        assert secret not in done.stdout + done.stderr


def test_unreachable_endpoint_and_missing_bucket(moto_s3: S3Server, src: Path) -> None:
    write(src / "a.txt", b"a")
    env = moto_s3.env(AWS_ENDPOINT_URL=f"http://127.0.0.1:{free_port()}")
    done = cli_runner.run("mirror", src, "s3://some-bucket/p/x", "--once", env=env)
    assert done.returncode == 1
    assert len(done.stderr.splitlines()) == 1 and "cannot reach" in done.stderr, done.stderr
    assert moto_s3.secret_key not in done.stdout + done.stderr
    done = cli_runner.run("mirror", src, "s3://no-such-bucket/p/x", "--once", env=moto_s3.env())
    assert done.returncode == 1
    assert len(done.stderr.splitlines()) == 1 and "does not exist" in done.stderr, done.stderr


def test_a_failed_upload_keeps_its_record_unsealed_until_a_pass_succeeds(
    moto_s3: S3Server, bucket: str, src: Path
) -> None:
    """PUTs run in the background: one refused after its commit returned holds the marker."""
    for i in range(10):
        write(src / f"trials/1/f{i}.txt", b"%d" % i)
    write(src / "trials/1/trial.json", b"{}")
    write(src / "other.txt", b"other")
    settle()
    url = f"s3://{bucket}/p/f"
    with counting_proxy(moto_s3.endpoint) as proxy:
        proxy.refuse = "/trials/1/f7.txt"
        env = moto_s3.env(AWS_ENDPOINT_URL=proxy.endpoint)
        done = cli_runner.run("mirror", src, url, "--once", "--json", env=env)
    assert done.returncode == 1
    out = orjson.loads(done.stdout)
    assert [e["path"] for e in out["errors"]] == ["trials/1/f7.txt"]
    assert "access denied" in out["errors"][0]["error"]
    assert out["held_back"] == [
        {"path": "trials/1/trial.json", "reason": "waiting for files whose upload failed"}
    ]
    assert "trials/1/f7.txt" not in out["copied"] and "other.txt" in out["copied"]
    assert "p/f/trials/1/trial.json" not in moto_s3.keys(bucket)
    again = pass_json(cli_runner.run("mirror", src, url, "--once", "--json", env=moto_s3.env()))
    assert again["copied"] == ["trials/1/f7.txt", "trials/1/trial.json"]
    assert "p/f/trials/1/trial.json" in moto_s3.keys(bucket)


def test_the_index_is_never_clobbered_by_a_second_writer(
    moto_s3: S3Server, bucket: str, src: Path
) -> None:
    """The change cache is PUT with If-Match: one rewritten meanwhile is left as it is."""
    write(src / "a.txt", b"a")
    settle()
    url = f"s3://{bucket}/p/i"
    pass_json(cli_runner.run("mirror", src, url, "--once", "--json", env=moto_s3.env()))
    write(src / "b.txt", b"b")
    settle()
    client = moto_s3.client()
    theirs = b'{"version": 1, "redactor": null, "files": {}}'

    def rewrite(rel: str) -> None:  # another mirror writes the index during our pass
        client.put_object(Bucket=bucket, Key="p/i/.sessionstore-mirror.json", Body=theirs)

    dest = S3Dest(parse_s3_url(url), settings(moto_s3))
    result = Mirror(src, dest, _on_chunk=rewrite).run_once()
    assert result.copied == ["b.txt"]
    assert result.errors == [
        {
            "path": ".sessionstore-mirror.json",
            "error": "cannot write the change cache: changed by another writer since this "
            "pass read it; not overwritten",
        }
    ]
    body = client.get_object(Bucket=bucket, Key="p/i/.sessionstore-mirror.json")["Body"].read()
    assert body == theirs

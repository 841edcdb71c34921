"""`mirror --dry-run/-n` into a bucket (moto on loopback): only reads are sent, the bucket's
listing and the mirror's index are unchanged, and what it reports is what a local dry run
of the same state reports, and what the next real pass does."""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import cli_runner
import orjson
from mirror_helpers import settle, write
from mirror_s3_helpers import pass_json
from s3_proxy import counting_proxy
from s3_servers import S3Server

from sessionstore.mirror.cache import CACHE_NAME
from sessionstore.mirror.layout import DIRTY_NAME


def listing(server: S3Server, bucket: str) -> list[tuple[str, int, str]]:
    """Every object of the bucket: key, size and ETag (another byte anywhere changes it)."""
    pages = server.client().get_paginator("list_objects_v2").paginate(Bucket=bucket)
    return sorted(
        (item["Key"], item["Size"], item["ETag"])
        for page in pages
        for item in page.get("Contents", [])
    )


def busy(tmp: Path, server: S3Server, url: str) -> tuple[Path, Path]:
    """A source, a local destination and `url` where a real pass would do one of everything
    (the two destinations in the same state)."""
    src, dst = tmp / "src", tmp / "dst"
    write(src / "same.txt", b"same")
    write(src / "changed.txt", b"v1")
    write(src / "gone.txt", b"gone")
    write(src / "trials/1/log.txt", b"log")
    write(src / "trials/1/trial.json", b"{}")
    settle()
    for where in (str(dst), url):
        done = cli_runner.run("mirror", src, where, "--once", "-q", env=server.env())
        assert done.returncode == 0, done.stderr
    write(src / "changed.txt", b"v2, longer")
    (src / "gone.txt").unlink()
    write(src / "trials/1/log.txt", b"rewritten after sealing")
    write(src / "trials/2/log.txt", b"new record")
    write(src / "trials/2/trial.json", b"{torn")
    write(src / "trials/3/log.txt", b"a record")
    write(src / "trials/3/trial.json", b'{"n": 3}')
    write(src / "new/deep/file.bin", b"\0\1")
    (src / "link").symlink_to("/etc/hostname")
    settle()
    return src, dst


def dry(server: S3Server, src: Path, where: str, *args: str) -> subprocess.CompletedProcess[str]:
    return cli_runner.run("mirror", src, where, "-n", "--delete", *args, env=server.env())


def test_a_dry_run_sends_only_reads_and_reports_as_locally(
    moto_s3: S3Server, tmp_path: Path
) -> None:
    bucket = moto_s3.new_bucket()
    url = f"s3://{bucket}/runs/abc"
    src, dst = busy(tmp_path, moto_s3, url)
    moto_s3.client().put_object(Bucket=bucket, Key=f"runs/abc/{DIRTY_NAME}", Body=b"")
    before = listing(moto_s3, bucket)
    index = moto_s3.client().get_object(Bucket=bucket, Key=f"runs/abc/{CACHE_NAME}")["Body"].read()
    local = dry(moto_s3, src, str(dst))
    with counting_proxy(moto_s3.endpoint) as proxy:
        env = moto_s3.env(AWS_ENDPOINT_URL=proxy.endpoint)
        remote = cli_runner.run("mirror", src, url, "-n", "--delete", env=env)
        sent = proxy.snapshot()
    assert set(sent) <= {"GET", "LIST", "HEAD"}, sent  # no PUT, POST or DELETE: not the probe
    assert listing(moto_s3, bucket) == before
    body = moto_s3.client().get_object(Bucket=bucket, Key=f"runs/abc/{CACHE_NAME}")["Body"].read()
    assert body == index
    # The same lines as the local dry run, one per change or problem, but the directories
    # a local pass would create ("A new/"): a bucket has none to create.
    local_lines = [line for line in local.stdout.splitlines() if not line.endswith("/")]
    assert remote.returncode == local.returncode == 0
    assert (
        remote.stdout.splitlines()
        == local_lines
        == [
            "M changed.txt",
            "D gone.txt",
            "S link: symlink",
            "A new/deep/file.bin",
            "X trials/1: the source changed after the record was sealed; not applied (log.txt)",
            "A trials/2/log.txt",
            "H trials/2/trial.json: not a JSON object: unexpected character, expected a string "
            "key at line 1 column 2",
            "A trials/3/log.txt",
            "A trials/3/trial.json",
        ]
    )
    assert (
        remote.stderr
        == local.stderr
        == (
            "mirror (dry run, nothing written): 5 copied, 2 unchanged, 0 unstable, 1 held back, "
            "1 skipped, 0 errors, 1 diverged, 1 deleted\n"
        )
    )


def test_the_dry_run_json_is_what_the_real_pass_does(moto_s3: S3Server, tmp_path: Path) -> None:
    bucket = moto_s3.new_bucket()
    url = f"s3://{bucket}/runs/abc"
    src, dst = busy(tmp_path, moto_s3, url)
    predicted: dict[str, Any] = orjson.loads(dry(moto_s3, src, url, "--json").stdout)
    local: dict[str, Any] = orjson.loads(dry(moto_s3, src, str(dst), "--json").stdout)
    real = pass_json(
        cli_runner.run("mirror", src, url, "--once", "--delete", "--json", env=moto_s3.env())
    )
    assert (predicted["dry_run"], local["dry_run"], real["dry_run"]) == (True, True, False)
    assert predicted["copied"] == [p for p in local["copied"] if not p.endswith("/")]
    for key in ("copied", "deleted", "held_back", "diverged", "skipped", "unchanged", "errors"):
        assert predicted[key] == real[key], key
        if key != "copied":
            assert predicted[key] == local[key], key
    assert predicted["copied"] and predicted["deleted"] == ["gone.txt"]


def test_a_dry_run_into_an_empty_prefix_and_a_session_id(moto_s3: S3Server, tmp_path: Path) -> None:
    bucket = moto_s3.new_bucket()
    client = moto_s3.client()
    client.put_object(Bucket=bucket, Key="st/abc123/session.json", Body=b'{"format": 1}')
    src = tmp_path / "src"
    write(src / "trials/1/trial.json", b"{}")
    write(src / "session.json", b"{}")
    settle()
    before = listing(moto_s3, bucket)
    fresh = pass_json(dry(moto_s3, src, f"s3://{bucket}/new/s1", "--json"))
    assert sorted(fresh["copied"]) == ["session.json", "trials/1/trial.json"]
    by_id = dry(moto_s3, src, "abc123", "--store", f"s3://{bucket}/st", "--json")
    out = pass_json(by_id)
    assert out["copied"] == ["trials/1/trial.json"] and out["dry_run"] is True
    assert listing(moto_s3, bucket) == before


def test_a_name_no_key_can_hold_is_one_error_in_the_dry_run_as_in_the_pass(
    moto_s3: S3Server, tmp_path: Path
) -> None:
    bucket = moto_s3.new_bucket()
    url = f"s3://{bucket}/runs/abc"
    src = tmp_path / "src"
    write(src / "bad\nname\x1b[31m.txt", b"hostile name")
    write(src / "fine.txt", b"fine")
    settle()
    line = (
        "E bad\\nname\\x1b[31m.txt: a control character in the name cannot be part of an object key"
    )
    predicted = dry(moto_s3, src, url)
    assert predicted.returncode == 1
    assert predicted.stdout.splitlines() == [line, "A fine.txt"]
    assert moto_s3.keys(bucket) == []
    real = cli_runner.run("mirror", src, url, "--once", "-v", env=moto_s3.env())
    assert real.returncode == 1
    assert real.stdout.splitlines() == [line, "A fine.txt"]
    assert [k for k in moto_s3.keys(bucket) if not k.startswith("runs/abc/.sessionstore-")] == [
        "runs/abc/fine.txt"
    ]

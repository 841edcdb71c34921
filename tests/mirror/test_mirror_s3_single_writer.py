"""The mirror into a server that ignores `If-None-Match: *` (`rclone serve s3` on loopback):
refused as a store is, unless `--single-writer` accepts one writer at a time.

Real processes (`python -m sessionstore mirror`), checked through their output and the
bucket's keys.
"""

from __future__ import annotations

from pathlib import Path

import cli_runner
from mirror_helpers import settle, write
from mirror_s3_helpers import pass_json
from s3_servers import S3Server


def source(src: Path) -> None:
    write(src / "notes.txt", b"one\n")
    write(src / "trials/1/log.txt", b"step 1\n")
    write(src / "trials/1/trial.json", b'{"ok": true}')
    settle()


def test_refused_naming_the_endpoint_and_nothing_written(rclone_s3: S3Server, src: Path) -> None:
    source(src)
    bucket = rclone_s3.new_bucket()
    done = cli_runner.run("mirror", src, f"s3://{bucket}/p/s1", "--once", env=rclone_s3.env())
    assert done.returncode == 1
    assert done.stderr.count("\n") == 1
    assert done.stderr.startswith(
        f"Error: s3://{bucket}/p/s1: the server at {rclone_s3.endpoint} ignores "
        "If-None-Match: * (conditional create), so another writer could overwrite a sealed "
        "record;"
    )
    assert "--single-writer" in done.stderr and rclone_s3.secret_key not in done.stderr
    assert rclone_s3.keys(bucket) == []  # the probe removed its key


def test_single_writer_mirrors_and_still_seals_records(rclone_s3: S3Server, src: Path) -> None:
    source(src)
    bucket = rclone_s3.new_bucket()
    url = f"s3://{bucket}/p/s1"
    env = rclone_s3.env()
    first = pass_json(
        cli_runner.run("mirror", src, url, "--once", "--json", "--single-writer", env=env)
    )
    assert first["errors"] == [] and first["held_back"] == []
    assert sorted(first["copied"]) == ["notes.txt", "trials/1/log.txt", "trials/1/trial.json"]
    client = rclone_s3.client()
    for rel, data in [("notes.txt", b"one\n"), ("trials/1/trial.json", b'{"ok": true}')]:
        assert client.get_object(Bucket=bucket, Key=f"p/s1/{rel}")["Body"].read() == data
    # The variable accepts it too; the second pass is a no-op vouched for by the index.
    single = {**env, "SESSIONSTORE_S3_SINGLE_WRITER": "1"}
    again = pass_json(cli_runner.run("mirror", src, url, "--once", "--json", env=single))
    assert again["copied"] == [] and again["unchanged"] == 3
    # A sealed record is never rewritten, on this server too.
    write(src / "trials/1/trial.json", b'{"ok": false}')
    settle()
    later = pass_json(cli_runner.run("mirror", src, url, "--once", "--json", env=single))
    assert [d["path"] for d in later["diverged"]] == ["trials/1"]
    body = client.get_object(Bucket=bucket, Key="p/s1/trials/1/trial.json")["Body"].read()
    assert body == b'{"ok": true}'


def test_single_writer_with_a_session_of_an_s3_store(rclone_s3: S3Server, src: Path) -> None:
    source(src)
    bucket = rclone_s3.new_bucket()
    store = f"s3://{bucket}/st"
    env = rclone_s3.env(SESSIONSTORE_HOME=store)
    made = cli_runner.run("new", "--id", "abc", "--single-writer", env=env)
    assert made.returncode == 0, made.stderr
    refused = cli_runner.run("mirror", src, "abc", "--once", env=env)
    assert refused.returncode == 1 and "ignores If-None-Match" in refused.stderr
    done = pass_json(
        cli_runner.run("mirror", src, "abc", "--once", "--json", "--single-writer", env=env)
    )
    assert "trials/1/trial.json" in done["copied"]
    assert "st/abc/trials/1/trial.json" in rclone_s3.keys(bucket)

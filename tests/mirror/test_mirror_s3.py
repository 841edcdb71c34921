"""The mirror into a bucket (`mirror SRC s3://BUCKET/PREFIX/ID`), against moto on loopback.

Byte-exactness and redaction, a session id of an s3 store as DST, sealing
against a second writer, `--delete` of only what the mirror wrote, and the
daemon. Faults, request counts and bad configurations are in
test_mirror_s3_faults.py.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
from pathlib import Path

import cli_runner
import pytest
from mirror_helpers import settle, write
from mirror_s3_helpers import pass_json, settings
from s3_servers import S3Server

from sessionstore.mirror.mirror import Mirror
from sessionstore.storage.s3_config import parse_s3_url
from sessionstore.storage.s3_tree_io import S3Dest

SECRET = "hf_s3mirrorSECRETvalue42"


@pytest.fixture
def bucket(moto_s3: S3Server) -> str:
    return moto_s3.new_bucket()


def objects(server: S3Server, bucket: str, prefix: str) -> dict[str, bytes]:
    """Every object below `prefix/` (relative key -> bytes), the mirror's own excepted."""
    client = server.client()
    found = {}
    for key in server.keys(bucket, prefix + "/"):
        rel = key[len(prefix) + 1 :]
        if not rel.startswith(".sessionstore-"):
            found[rel] = client.get_object(Bucket=bucket, Key=key)["Body"].read()
    return found


def mirror(server: S3Server, *args: str | Path) -> subprocess.CompletedProcess[str]:
    return cli_runner.run("mirror", *args, env=server.env())


def test_bytes_and_names_are_exact_and_redacted(moto_s3: S3Server, bucket: str, src: Path) -> None:
    big = os.urandom(9 << 20) + SECRET.encode() + os.urandom(1 << 20)  # a multipart upload
    files = {
        "crlf.txt": b"a\r\nb\r\n",
        "nul.bin": b"\0\0\xff\xfe\0",
        "latin1.txt": "caf\xe9".encode("latin-1"),
        "empty": b"",
        f"dir-{SECRET}/in.txt": f"token={SECRET}\n".encode(),
        "trials/1/log.txt": f"x {SECRET} y\n".encode(),
        "trials/1/trial.json": b'{"ok": true}',
        "trials/2/big.bin": big,
    }
    for rel, data in files.items():
        write(src / rel, data)
    settle()
    url = f"s3://{bucket}/store/s1"
    env = moto_s3.env(TOKEN=SECRET)
    done = cli_runner.run("mirror", src, url, "--once", "--json", "--secret-env", "TOKEN", env=env)
    out = pass_json(done)
    assert out["errors"] == [] and out["held_back"] == []
    got = objects(moto_s3, bucket, "store/s1")
    marker = "REDACTED"
    expected = {
        rel.replace(SECRET, marker): data.replace(SECRET.encode(), marker.encode())
        for rel, data in files.items()
    }
    assert got == expected
    keys = moto_s3.keys(bucket)
    assert not any(SECRET in key for key in keys)
    assert SECRET not in done.stdout + done.stderr
    # The second pass is a no-op: nothing copied, everything vouched for by the index.
    again = pass_json(
        cli_runner.run("mirror", src, url, "--once", "--json", "--secret-env", "TOKEN", env=env)
    )
    assert again["copied"] == [] and again["unchanged"] == len(files)


def test_a_session_id_of_an_s3_store(moto_s3: S3Server, bucket: str, src: Path) -> None:
    client = moto_s3.client()
    client.put_object(Bucket=bucket, Key="st/abc123/session.json", Body=b'{"format": 1}')
    write(src / "session.json", b'{"forged": true}')
    write(src / "trials/1/trial.json", b"{}")
    settle()
    out = pass_json(
        mirror(moto_s3, src, "abc123", "--store", f"s3://{bucket}/st", "--once", "--json")
    )
    assert out["copied"] == ["trials/1/trial.json"]
    assert out["skipped"] == [
        {"path": "session.json", "reason": "the store owns it (the destination is a session)"}
    ]
    body = client.get_object(Bucket=bucket, Key="st/abc123/session.json")["Body"].read()
    assert body == b'{"format": 1}'
    # SESSIONSTORE_HOME names the store as well.
    env = moto_s3.env(SESSIONSTORE_HOME=f"s3://{bucket}/st")
    again = cli_runner.run("mirror", src, "abc123", "--once", "--json", env=env)
    assert pass_json(again)["unchanged"] == 1
    # An id the store does not hold is refused as a likely typo (exit 2), as locally.
    missing = cli_runner.run("mirror", src, "nosuch1", "--once", env=env)
    assert missing.returncode == 2, missing.stderr


def test_a_sealed_record_is_never_overwritten(
    moto_s3: S3Server, bucket: str, tmp_path: Path
) -> None:
    url = f"s3://{bucket}/p/s"
    first, second = tmp_path / "a", tmp_path / "b"
    write(first / "trials/1/trial.json", b'{"who": "first"}')
    write(first / "trials/1/log.txt", b"first\n")
    write(second / "trials/1/trial.json", b'{"who": "second"}')
    write(second / "trials/1/log.txt", b"second\n")
    settle()
    pass_json(mirror(moto_s3, first, url, "--once", "--json"))
    # A second writer (another mirror, no shared cache) only compares the sealed record.
    client = moto_s3.client()
    client.delete_object(Bucket=bucket, Key="p/s/.sessionstore-mirror.json")
    out = pass_json(mirror(moto_s3, second, url, "--once", "--json"))
    assert out["copied"] == []
    assert [d["path"] for d in out["diverged"]] == ["trials/1"]
    assert objects(moto_s3, bucket, "p/s") == {
        "trials/1/trial.json": b'{"who": "first"}',
        "trials/1/log.txt": b"first\n",
    }


def test_a_record_sealed_during_the_pass_is_held_back(
    moto_s3: S3Server, bucket: str, src: Path
) -> None:
    """The marker's create is conditional: a marker PUT by someone else meanwhile wins."""
    write(src / "trials/1/log.txt", b"ours\n")
    write(src / "trials/1/trial.json", b'{"who": "us"}')
    settle()
    client = moto_s3.client()

    def seal_first(rel: str) -> None:
        if rel == "trials/1/trial.json":
            client.put_object(Bucket=bucket, Key="p/s/trials/1/trial.json", Body=b'{"who": "them"}')

    dest = S3Dest(parse_s3_url(f"s3://{bucket}/p/s"), settings(moto_s3))
    result = Mirror(src, dest, _on_chunk=seal_first).run_once()
    assert result.held_back == [
        {
            "path": "trials/1/trial.json",
            "reason": "sealed meanwhile in the destination; not overwritten",
        }
    ]
    marker = client.get_object(Bucket=bucket, Key="p/s/trials/1/trial.json")["Body"].read()
    assert marker == b'{"who": "them"}'


def test_delete_removes_only_what_the_mirror_wrote(
    moto_s3: S3Server, bucket: str, src: Path
) -> None:
    url = f"s3://{bucket}/p/d"
    for name in ("gone.txt", "edited.txt", "kept.txt"):
        write(src / name, name.encode())
    write(src / "trials/1/trial.json", b"{}")
    write(src / "trials/1/part.txt", b"sealed")
    settle()
    pass_json(mirror(moto_s3, src, url, "--once", "--json"))
    client = moto_s3.client()
    client.put_object(Bucket=bucket, Key="p/d/foreign.txt", Body=b"not the mirror's")
    client.put_object(Bucket=bucket, Key="p/d/edited.txt", Body=b"changed in the bucket")
    for name in ("gone.txt", "edited.txt", "trials/1/part.txt"):
        (src / name).unlink()
    out = pass_json(mirror(moto_s3, src, url, "--once", "--json", "--delete"))
    assert out["deleted"] == ["gone.txt"]
    assert {
        "path": "edited.txt",
        "reason": "not deleted: changed in the destination since this mirror wrote it",
    } in out["skipped"]
    assert sorted(objects(moto_s3, bucket, "p/d")) == [
        "edited.txt",
        "foreign.txt",
        "kept.txt",
        "trials/1/part.txt",
        "trials/1/trial.json",
    ]


def test_delete_removes_a_directory_the_source_replaced_by_a_file(
    moto_s3: S3Server, bucket: str, src: Path
) -> None:
    # A bucket holds a key and a prefix of one name side by side: the file was written,
    # and the old directory's objects stayed in every --delete pass after.
    url = f"s3://{bucket}/p/d"
    write(src / "a" / "f", b"x")
    write(src / "a" / "b" / "g", b"z")
    settle()
    pass_json(mirror(moto_s3, src, url, "--once", "--json"))
    shutil.rmtree(src / "a")
    write(src / "a", b"a file now")
    settle()
    out = pass_json(mirror(moto_s3, src, url, "--once", "--json", "--delete"))
    assert out["copied"] == ["a"] and out["deleted"] == ["a/b/g", "a/f"]
    assert objects(moto_s3, bucket, "p/d") == {"a": b"a file now"}
    out = pass_json(mirror(moto_s3, src, url, "--once", "--json", "--delete"))
    assert out["copied"] == out["deleted"] == []


def test_the_daemon_mirrors_into_the_bucket(moto_s3: S3Server, bucket: str, src: Path) -> None:
    url = f"s3://{bucket}/p/daemon"
    write(src / "first.txt", b"one")
    settle()
    env = moto_s3.env()
    daemon = cli_runner.popen("mirror", src, url, "-q", "--full-every", "0.5", env=env)
    try:
        cli_runner.wait_for(
            lambda: "p/daemon/first.txt" in moto_s3.keys(bucket), "the initial pass"
        )
        lease = "p/daemon/.sessionstore-mirror.lock"
        assert lease in moto_s3.keys(bucket)
        # A second daemon on the same destination is refused: the lease is held.
        second = cli_runner.run("mirror", src, url, "-q", env=env, timeout=60)
        assert second.returncode == 1
        assert "already locked" in second.stderr and len(second.stderr.splitlines()) == 1
        write(src / "trials/1/log.txt", b"later\n")
        write(src / "trials/1/trial.json", b'{"n": 1}')
        cli_runner.wait_for(
            lambda: "p/daemon/trials/1/trial.json" in moto_s3.keys(bucket), "an event pass"
        )
    finally:
        daemon.send_signal(signal.SIGTERM)
        _out, err = daemon.communicate(timeout=60)
    assert daemon.returncode == 0, err
    assert objects(moto_s3, bucket, "p/daemon") == {
        "first.txt": b"one",
        "trials/1/log.txt": b"later\n",
        "trials/1/trial.json": b'{"n": 1}',
    }
    assert "p/daemon/.sessionstore-mirror.lock" not in moto_s3.keys(bucket)

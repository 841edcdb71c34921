"""Listings a server should never send, through the CLI against moto behind a loopback
proxy that rewrites LIST answers: a key outside the prefix asked for (a sibling session
`s10` when `s1` was asked), a page served again and again (a continuation token that
does not advance). Each is one line and exit 1; nothing outside the session is deleted
and nothing pages forever."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from cli_runner import run
from s3_proxy import counting_proxy
from s3_servers import S3Server
from s3_store import S3Store, s3_store

# A hang guard, never a timed assert: a listing that pages forever is killed at this.
_HANG = 60.0


@pytest.fixture
def s3(moto_s3: S3Server, monkeypatch: pytest.MonkeyPatch) -> S3Store:
    return s3_store(moto_s3, monkeypatch)


def _sessions(s3: S3Store) -> None:
    for name in ("s1", "s10"):
        s3.ok("new", "--id", name)
        s3.ok("begin", name, "--trial")
        s3.ok("complete", name, "--trial", "1", "--marker", "{}")


def test_a_listing_holding_another_sessions_keys_deletes_none_of_them(s3: S3Store) -> None:
    _sessions(s3)
    before = s3.objects()
    stray = (
        b"<Contents><Key>runs/s10/session.json</Key><Size>2</Size><ETag>&quot;e&quot;</ETag>"
        b"<LastModified>2026-01-01T00:00:00.000Z</LastModified></Contents>"
    )

    def sibling(path: str, body: bytes) -> bytes:
        # The server ignores where `s1/` ends: it lists `s10`'s manifest as well.
        if "prefix=runs%2Fs1%2F" in path and "delimiter" not in path:
            return body.replace(b"</ListBucketResult>", stray + b"</ListBucketResult>")
        return body

    with counting_proxy(s3.server.endpoint) as proxy:
        proxy.listing = sibling
        done = run("rm", "s1", env={**s3.env, "AWS_ENDPOINT_URL": proxy.endpoint})
    assert done.returncode == 1, done.stdout
    assert done.stderr.count("\n") == 1, done.stderr
    assert "holds a key outside the prefix asked for" in done.stderr
    assert [k for k in before if k.startswith("runs/s10/")] == [
        k for k in s3.objects() if k.startswith("runs/s10/")
    ]
    assert s3.ok("inspect", "s10", "--json")  # whole, as ever


def test_a_page_served_forever_ends_in_one_line(s3: S3Store, tmp_path: Path) -> None:
    _sessions(s3)
    first: dict[str, bytes] = {}

    def again(path: str, body: bytes) -> bytes:
        # Every page of keys says there is one more, and the next is the first again. (Not
        # a page of none, nor of prefixes: obstore follows a token without a bound, and a
        # loop of those is nothing the store can see.)
        prefix = re.search(r"prefix=([^&]*)", path)
        asked = prefix.group(1) if prefix else ""
        if "continuation-token" in path:
            return first[asked]
        if "delimiter" in path or b"<Contents>" not in body:
            return body
        first[asked] = body.replace(
            b"<IsTruncated>false</IsTruncated>",
            b"<IsTruncated>true</IsTruncated><NextContinuationToken>x</NextContinuationToken>",
        )
        return first[asked]

    with counting_proxy(s3.server.endpoint) as proxy:
        proxy.listing = again
        env = {**s3.env, "AWS_ENDPOINT_URL": proxy.endpoint}
        for command in (["rm", "s1"], ["export", "s10", "--trial", "1", str(tmp_path / "out")]):
            done = run(*command, env=env, timeout=_HANG)
            assert done.returncode == 1, (command, done.stdout)
            assert done.stderr.count("\n") == 1, done.stderr
            assert "names a key again and again" in done.stderr
        assert proxy.snapshot()["LIST"] < 200

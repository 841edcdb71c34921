"""`S3Store`: an `s3://` store in a fresh bucket of a loopback server, for CLI tests.

`s3_store(server, monkeypatch)` makes one: a new bucket, the store
`s3://BUCKET/runs` as `SESSIONSTORE_HOME` of the child processes (`cli`,
`ok`), and the server's AWS variables set in this process too (`store()`).
"""

from __future__ import annotations

import subprocess
from dataclasses import dataclass

import pytest
from cli_runner import run
from s3_servers import S3Server

from sessionstore import Store


@dataclass
class S3Store:
    server: S3Server
    bucket: str
    url: str
    env: dict[str, str]

    def cli(self, *args: str, input: str | None = None) -> subprocess.CompletedProcess[str]:
        return run(*args, env=self.env, input=input)

    def ok(self, *args: str) -> str:
        done = self.cli(*args)
        assert done.returncode == 0, done.stderr
        return done.stdout

    def objects(self) -> list[str]:
        return self.server.keys(self.bucket)

    def store(self) -> Store:
        """The store in this process (the AWS variables are this test's: monkeypatched)."""
        return Store(self.url)

    def put(self, key: str, data: bytes) -> None:
        self.server.client().put_object(Bucket=self.bucket, Key=f"runs/{key}", Body=data)

    def get(self, key: str) -> bytes:
        body = self.server.client().get_object(Bucket=self.bucket, Key=f"runs/{key}")["Body"]
        return bytes(body.read())


def s3_store(server: S3Server, monkeypatch: pytest.MonkeyPatch) -> S3Store:
    bucket = server.new_bucket()
    url = f"s3://{bucket}/runs"
    env = server.env(SESSIONSTORE_HOME=url)
    for name, value in env.items():
        if name.startswith("AWS_"):
            monkeypatch.setenv(name, value)
    return S3Store(server, bucket, url, env)

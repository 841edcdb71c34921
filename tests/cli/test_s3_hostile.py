"""An `s3://` store under hostile conditions, through the CLI against moto on loopback: a
malformed endpoint. Each ends in one line and exit 1, never a traceback or a hang."""

from __future__ import annotations

from pathlib import Path

import pytest
from cli_runner import run
from s3_servers import S3Server


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

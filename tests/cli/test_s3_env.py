"""The `AWS_*` variables obstore reads on its own (`storage.s3_env`), through the CLI
against moto on loopback: none sends a request where the store's settings do not say,
and a malformed one is one line naming it, never a panic."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from cli_runner import environ, run
from s3_servers import S3Server

from sessionstore.storage.s3_config import S3Settings

NO_KEYS = ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY")


@pytest.mark.parametrize(
    ("variable", "value", "unset", "problem"),
    [
        # obstore's alias of AWS_ENDPOINT_URL: the client panicked on these.
        ("AWS_ENDPOINT", "http://127.0.0.1:99999", ("AWS_ENDPOINT_URL",), "port"),
        ("AWS_ENDPOINT", "http://ep-user:ep-5e1@[::1", ("AWS_ENDPOINT_URL",), "no valid host"),
        ("AWS_ENDPOINT", "", (), "is set but empty"),
        # obstore's alias of AWS_SESSION_TOKEN, in a header.
        ("AWS_TOKEN", "token-5e1\x01", (), "holds a control character"),
        # Unset for the AWS CLI, an empty token header for the client.
        ("AWS_SESSION_TOKEN", "", (), "is set but empty"),
        ("AWS_TOKEN", "", (), "is set but empty"),
        # In the host name of AWS's endpoint when none is set.
        ("AWS_REGION", "us east", ("AWS_ENDPOINT_URL",), "letters, digits and '-'"),
        ("AWS_REGION", "127.0.0.1:99999", ("AWS_ENDPOINT_URL",), "letters, digits and '-'"),
        # The credential providers' endpoints, asked without a key pair.
        ("AWS_METADATA_ENDPOINT", "http://127.0.0.1:99999", NO_KEYS, "port"),
        ("AWS_METADATA_ENDPOINT", "", NO_KEYS, "is set but empty"),
        ("AWS_CONTAINER_CREDENTIALS_RELATIVE_URI", ":99999/x", NO_KEYS, "starting with '/'"),
        ("AWS_ENDPOINT_URL_STS", "http://ep-user:ep-5e1@h:99999", NO_KEYS, "port"),
    ],
)
def test_a_variable_only_the_client_reads_is_checked_as_the_stores_own(
    moto_s3: S3Server,
    variable: str,
    value: str,
    unset: tuple[str, ...],
    problem: str,
    tmp_path: Path,
) -> None:
    env = moto_s3.env(SESSIONSTORE_HOME="s3://b-x/p")
    for name in unset:
        del env[name]
    env[variable] = value
    done = run("inspect", env=env, cwd=tmp_path)
    assert (done.returncode, done.stdout) == (1, ""), done.stderr
    assert done.stderr.count("\n") == 1, done.stderr
    assert done.stderr.startswith(f"Error: {variable}: ") and problem in done.stderr
    assert "5e1" not in done.stderr  # a credential's value is never shown


def test_obstores_endpoint_alias_alone_is_the_endpoint_named(moto_s3: S3Server) -> None:
    bucket = moto_s3.new_bucket()
    env = moto_s3.env(SESSIONSTORE_HOME=f"s3://{bucket}/runs")
    env["AWS_ENDPOINT"] = env.pop("AWS_ENDPOINT_URL")
    done = run("new", "--id", "abc", env=env)
    assert done.returncode == 0, done.stderr
    assert moto_s3.keys(bucket) == ["runs/abc/constraints.json", "runs/abc/session.json"]
    env["SESSIONSTORE_HOME"] = "s3://no-such-bucket-5e1/runs"
    done = run("inspect", env=env)
    assert done.returncode == 1
    assert f"does not exist at {moto_s3.endpoint}" in done.stderr, done.stderr


@pytest.mark.parametrize("variable", ["AWS_VIRTUAL_HOSTED_STYLE_REQUEST", "AWS_S3_EXPRESS"])
def test_no_variable_sends_to_another_bucket(moto_s3: S3Server, variable: str) -> None:
    # With either, the client sent to the endpoint as if it were the bucket's own host: a
    # path-style server read the store's prefix as the bucket, and the probe landed there.
    bucket, other = moto_s3.new_bucket(), moto_s3.new_bucket()
    env = moto_s3.env(SESSIONSTORE_HOME=f"s3://{bucket}/{other}", **{variable: "true"})
    done = run("new", "--id", "abc", env=env)
    assert done.returncode == 0, done.stderr
    assert moto_s3.keys(other) == []
    assert moto_s3.keys(bucket) == [f"{other}/abc/constraints.json", f"{other}/abc/session.json"]


def test_a_short_credential_is_masked_only_where_it_stands_alone(moto_s3: S3Server) -> None:
    # Masked everywhere, a key id `e` turned this line into `buck*** 'nosuch-buck***'...`.
    env = moto_s3.env(
        AWS_ACCESS_KEY_ID="e", AWS_SECRET_ACCESS_KEY="t", SESSIONSTORE_HOME="s3://no-such-t/e"
    )
    done = run("inspect", env=env)
    assert done.stderr == f"Error: bucket 'no-such-t' does not exist at {moto_s3.endpoint}\n"
    settings = S3Settings(moto_s3.endpoint, "us-east-1", "e", "t")
    assert settings.scrub("e/t/t.json: key t, 'e' test") == "***/***/t.json: key ***, '***' test"


def test_an_aws_file_that_is_a_fifo_or_endless_is_never_waited_on(
    moto_s3: S3Server, tmp_path: Path
) -> None:
    # The profile's files were read by configparser: a FIFO with no writer blocked
    # every command for good, and /dev/zero was read until memory ran out.
    os.mkfifo(tmp_path / "config")
    bucket = moto_s3.new_bucket()
    env = moto_s3.env(
        SESSIONSTORE_HOME=f"s3://{bucket}/runs",
        AWS_CONFIG_FILE=str(tmp_path / "config"),
        AWS_SHARED_CREDENTIALS_FILE="/dev/zero",
    )
    done = run("new", "--id", "abc", env=env, timeout=30)
    assert done.returncode == 0, done.stderr
    env["AWS_PROFILE"] = "team"
    done = run("inspect", env=env, timeout=30)
    assert (done.returncode, done.stderr) == (
        1,
        "Error: AWS_PROFILE: profile 'team' is in neither AWS file\n",
    )


def test_a_url_or_profile_with_a_backslash_or_esc_is_escaped_once(tmp_path: Path) -> None:
    """They were repr'd, then escaped: `'a\\\\\\\\b'` for the bucket `a\\b`."""
    empty = str(tmp_path / "none")
    env = environ(AWS_CONFIG_FILE=empty, AWS_SHARED_CREDENTIALS_FILE=empty)
    errors = {
        "s3://a\\b/x": r"s3://a\\b: bucket 'a\\b' is not a valid S3 bucket name (",
        "s3://abc/x\\y/../z": r"prefix of s3://abc: 'x\\y/../z' has an empty, '.' or '..' ",
    }
    for url, message in errors.items():
        done = run("inspect", "--store", url, env=env)
        assert done.returncode == 2
        assert f"Error: Invalid value for '--store': {message}" in done.stderr
    env["AWS_PROFILE"] = "t\\e\x1b"
    done = run("inspect", "--store", "s3://abc/x", env=env)
    expected = r"Error: AWS_PROFILE: profile 't\\e\x1b' is in neither AWS file"
    assert (done.returncode, done.stderr) == (1, expected + "\n")

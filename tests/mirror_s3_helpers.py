"""Helpers of the mirror's S3 tests (tests/mirror/test_mirror_s3*.py): plain functions."""

from __future__ import annotations

import subprocess
from typing import Any

import orjson
from s3_servers import REGION, S3Server

from sessionstore.storage.s3_config import S3Settings


def settings(server: S3Server) -> S3Settings:
    """The settings a child gets from `server.env()`, for a Mirror in this process."""
    return S3Settings(server.endpoint, REGION, server.access_key, server.secret_key)


def pass_json(done: subprocess.CompletedProcess[str]) -> dict[str, Any]:
    """The --json report of a `mirror --once` that must have succeeded."""
    assert done.returncode == 0, done.stderr
    parsed: dict[str, Any] = orjson.loads(done.stdout)
    return parsed

"""Shared test setup: hypothesis profiles, and a temp root the suite removes.

`ci` (selected by CI=true, as .ci/run sets) runs enough examples to mean
something while keeping the whole suite within CI's budget; `dev` is quicker
for local iteration. Override with HYPOTHESIS_PROFILE.

pytest keeps its temp directories in /tmp/pytest-of-<user> after a run; the
suite instead uses a fresh directory it deletes at the end, so a run leaves
/tmp as it found it (and an earlier root run leaves nothing a user cannot
replace). TMPDIR points inside it for the run, so what tests and their
children make with `tempfile` goes too. `--basetemp DIR` keeps pytest's own
behaviour, for debugging.
"""

from __future__ import annotations

import os
import signal
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings
from s3_servers import S3Server, moto_server, rclone_server, seaweedfs_server

settings.register_profile(
    "ci",
    max_examples=200,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
    print_blob=True,
)
settings.register_profile("dev", max_examples=50, deadline=None)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci" if os.environ.get("CI") else "dev"))


_OWN_BASETEMP = pytest.StashKey[str]()


def pytest_configure(config: pytest.Config) -> None:
    # Tests press Ctrl-C on children (`wait`, `view`, the demo) and expect what a
    # terminal gets. Started from a script without job control (`pytest &`), the run
    # inherits SIGINT ignored and passes that on through exec, so Python in each child
    # would rightly keep ignoring it. A handler here is reset to the default by exec.
    if signal.getsignal(signal.SIGINT) == signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)
    if config.option.basetemp is None:
        base = tempfile.mkdtemp(prefix="sessionstore-tests-")
        config.option.basetemp = os.path.join(base, "pytest")
        config.stash[_OWN_BASETEMP] = base
        # tempfile users (tests, the demo, the children they start) land inside it too.
        os.mkdir(os.path.join(base, "tmp"), 0o700)
        os.environ["TMPDIR"] = tempfile.tempdir = os.path.join(base, "tmp")


def pytest_unconfigure(config: pytest.Config) -> None:
    base = config.stash.get(_OWN_BASETEMP, None)
    if base is not None:
        # coreutils walk iteratively (fts), so the 10,000-level trees some tests build go
        # too (shutil.rmtree and os.walk recurse); chmod first because tests make read-only
        # directories. Neither follows a symlink out of the tree.
        subprocess.run(["chmod", "-R", "u+rwx", base], check=False, capture_output=True)
        subprocess.run(["rm", "-rf", base], check=False, capture_output=True)


@pytest.fixture
def src(tmp_path: Path) -> Path:
    """A mirror source path, not created (modules that need a populated tree override it)."""
    return tmp_path / "src"


@pytest.fixture
def dst(tmp_path: Path) -> Path:
    """A mirror destination path, not created."""
    return tmp_path / "dst"


# Real S3 servers on loopback (tests/s3_servers.py), one of each per test run, started on
# first use and stopped at the end.


@pytest.fixture(scope="session")
def moto_s3() -> Iterator[S3Server]:
    """moto in server mode: the functional suite's S3."""
    with moto_server() as server:
        yield server


@pytest.fixture(scope="session")
def weed_s3(tmp_path_factory: pytest.TempPathFactory) -> Iterator[S3Server]:
    """SeaweedFS (`weed mini`): atomic conditional writes and real signature checks."""
    with seaweedfs_server(tmp_path_factory.mktemp("weed")) as server:
        yield server


@pytest.fixture(scope="session")
def rclone_s3(tmp_path_factory: pytest.TempPathFactory) -> Iterator[S3Server]:
    """`rclone serve s3`: a server that ignores `If-None-Match: *`."""
    with rclone_server(tmp_path_factory.mktemp("rclone")) as server:
        yield server

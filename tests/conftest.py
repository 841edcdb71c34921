"""Shared test setup: hypothesis profiles, and a temp root the suite removes.

`ci` (selected by CI=true, as .ci/run sets) runs enough examples to mean
something while keeping the whole suite within CI's budget; `dev` is quicker
for local iteration. Override with HYPOTHESIS_PROFILE.

pytest keeps its temp directories in /tmp/pytest-of-<user> after a run; the
suite instead uses a fresh directory it deletes at the end, so a run leaves
/tmp as it found it (and an earlier root run leaves nothing a user cannot
replace). TMPDIR points inside it for the run, so what tests and their
children make with `tempfile` goes too. Each test's `tmp_path` is removed
once the test is torn down, by a background process while the next tests
run: the suite leaves about a million entries (split passes need a thousand
directories a tree), whose removal at the end took 80-100 s of CI's budget.
`--basetemp DIR` keeps pytest's own behaviour, for debugging.
"""

from __future__ import annotations

import os
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
_REMOVALS = pytest.StashKey[list["subprocess.Popen[bytes]"]]()
_MAX_REMOVALS = 2  # running at once; a test that starts one more waits for the oldest
# chmod first: tests make read-only directories. coreutils walk iteratively (fts), so
# the 10,000-level trees some tests build go too (shutil.rmtree and os.walk recurse).
# Neither follows a symlink out of the tree.
_REMOVE = 'chmod -R u+rwx "$1" 2>/dev/null; exec rm -rf "$1"'


def pytest_configure(config: pytest.Config) -> None:
    if config.option.basetemp is None:
        base = tempfile.mkdtemp(prefix="sessionstore-tests-")
        config.option.basetemp = os.path.join(base, "pytest")
        config.stash[_OWN_BASETEMP] = base
        # tempfile users (tests, the demo, the children they start) land inside it too.
        os.mkdir(os.path.join(base, "tmp"), 0o700)
        os.environ["TMPDIR"] = tempfile.tempdir = os.path.join(base, "tmp")


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_teardown(item: pytest.Item) -> Iterator[None]:
    yield  # the test's fixtures are finalized: its servers and children have stopped
    funcargs = getattr(item, "funcargs", {})
    tmp = funcargs.get("tmp_path") if isinstance(funcargs, dict) else None
    if tmp is None or item.config.stash.get(_OWN_BASETEMP, None) is None:
        return
    removals = item.config.stash.setdefault(_REMOVALS, [])
    removals[:] = [proc for proc in removals if proc.poll() is None]
    if len(removals) >= _MAX_REMOVALS:
        removals.pop(0).wait()
    removals.append(
        subprocess.Popen(
            ["sh", "-c", _REMOVE, "sh", str(tmp)],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
    )


def pytest_unconfigure(config: pytest.Config) -> None:
    for proc in config.stash.get(_REMOVALS, []):
        proc.wait()
    base = config.stash.get(_OWN_BASETEMP, None)
    if base is not None:
        subprocess.run(["sh", "-c", _REMOVE, "sh", base], check=False, capture_output=True)


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

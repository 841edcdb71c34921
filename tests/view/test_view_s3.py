"""`sessionstore view` of an `s3://` store: the same pages and JSON, read from a real S3
server (moto on loopback), with the record's files listed and served from the bucket."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from cli_runner import run
from inspect_helpers import metrics, trial
from s3_proxy import counting_proxy
from s3_servers import S3Server
from view_helpers import Viewer, sibling, soup, viewer

from sessionstore import Store
from sessionstore.view.files import READ_LIMIT
from sessionstore.view.record_page import MAX_RENDERED

# Past the read limit: tailed by a ranged GET, served by a streamed one.
HUGE_LOG = b"".join(b"step %08d\n" % i for i in range(READ_LIMIT // 14 + 10)) + b"PASS\n"
# Under the read limit but of several 1 MiB chunks: typed by all of them, sent in chunks.
SEVERAL = b"a" * ((1 << 20) - 1) + "é".encode() + b"b" * (2 << 20)


@pytest.fixture
def s3_viewer(
    moto_s3: S3Server, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> Iterator[tuple[Viewer, str]]:
    url = f"s3://{moto_s3.new_bucket()}/runs"
    for name, value in moto_s3.env().items():
        if name.startswith("AWS_"):
            monkeypatch.setenv(name, value)
    session = Store(url).create(id="ab12cd34", name="in-a-bucket", pid=None)
    files: dict[str, str | bytes] = {
        "run.log": "ttft 182 ms\nPASS\n",
        "task.yml": "model: x\n",
        "huge.log": HUGE_LOG,
        "several.txt": SEVERAL,
        "several.bin": SEVERAL + b"\xff",
    }
    trial(session, metrics(812.5), files)
    trial(session, None, {"progress.log": "step 3\n"})
    with viewer(url, log_dir=tmp_path) as running:
        yield running, url


def test_view_serves_an_s3_store_as_it_serves_a_local_one(s3_viewer: tuple[Viewer, str]) -> None:
    site, url = s3_viewer
    status, _, body = site.get("/api/sessions/ab12cd34")
    assert status == 200
    inspected = run("inspect", "ab12cd34", "--json", "--store", url)
    assert inspected.returncode == 0, inspected.stderr
    assert json.loads(body) == json.loads(inspected.stdout)

    status, _, page = site.get("/s/ab12cd34")
    assert status == 200
    text = soup(page).get_text(" ")
    assert "in-a-bucket" in text and "812.5" in text and "in_flight" in text

    status, _, record = site.get("/s/ab12cd34/trials/1")
    assert status == 200
    names = {a.get_text() for a in soup(record).find_all("a")}
    assert {"run.log", "task.yml", "trial.json"} <= names
    status, headers, raw = site.get("/s/ab12cd34/trials/1/files/run.log")
    assert (status, raw) == (200, b"ttft 182 ms\nPASS\n")
    assert headers["X-Content-Type-Options"] == "nosniff"
    assert site.get("/s/ab12cd34/trials/1/files/..%2f..%2fsession.json")[0] == 404
    huge = next(h for h in soup(record).find_all("h3") if h.get_text() == "huge.log")
    assert sibling(huge, "p").get_text().endswith(f" of {len(HUGE_LOG)} bytes")
    assert sibling(huge, "pre").get_text().endswith("PASS\n")
    status, headers, raw = site.get("/s/ab12cd34/trials/1/files/huge.log")
    assert (status, headers["Content-Type"]) == (200, "text/plain; charset=utf-8")
    assert raw == HUGE_LOG
    assert site.get("/s/ab12cd34", method="POST")[0] == 405


def test_a_key_with_a_dot_component_is_listed_as_skipped_not_a_500(
    s3_viewer: tuple[Viewer, str], moto_s3: S3Server
) -> None:
    # A bucket holds any key: `.../1/../x` lists `..` below the record, and listing or
    # reading below `..` is refused by the storage seam (InvalidInput): the page was a 500.
    site, url = s3_viewer
    bucket = url.removeprefix("s3://").split("/")[0]
    for key in ("1/../../../other/secret.txt", "1/./dot.txt", "1/.."):
        moto_s3.client().put_object(Bucket=bucket, Key=f"runs/ab12cd34/trials/{key}", Body=b"x")
    status, _, page = site.get("/s/ab12cd34/trials/1")
    assert status == 200, page
    doc = soup(page)
    assert [li.get_text() for li in doc.select("ul.skipped li")] == [
        ".: is not a name a file can have ('.' or '..'); not read",
        "..: is not a name a file can have ('.' or '..'); not read",
    ]
    assert {"run.log", "task.yml", "trial.json"} <= {a.get_text() for a in doc.select("a.mono")}


def test_files_past_the_shown_ones_are_sized_by_a_head(
    s3_viewer: tuple[Viewer, str], moto_s3: S3Server
) -> None:
    # Past `MAX_RENDERED` a file is sized, not read: by a HEAD alone (a zero-length ranged
    # GET after it, which obstore refuses, listed every such file as unreadable).
    site, url = s3_viewer
    bucket, prefix = url.removeprefix("s3://").split("/", 1)
    client = moto_s3.client()
    for n in range(MAX_RENDERED):
        key = f"{prefix}/ab12cd34/trials/2/f{n:03d}.txt"
        client.put_object(Bucket=bucket, Key=key, Body=b"x\n")
    client.put_object(Bucket=bucket, Key=f"{prefix}/ab12cd34/trials/2/zz.bin", Body=b"\0" * 5)
    status, _, page = site.get("/s/ab12cd34/trials/2")
    assert status == 200, page
    row = next(
        r for r in soup(page).select("table.files tr") if r.td and r.td.get_text() == "zz.bin"
    )
    assert [td.get_text() for td in row.find_all("td")] == ["zz.bin", "5", "not shown", "raw"]


def _headers(answer: bytes) -> dict[str, str]:
    lines = answer.partition(b"\r\n\r\n")[0].decode("latin-1").split("\r\n")[1:]
    return dict(line.split(": ", 1) for line in lines)


def test_a_download_cut_short_by_the_bucket_is_never_claimed_whole(
    moto_s3: S3Server, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    # A raw file streamed from S3 was sent without Content-Length: when the bucket's
    # connection broke mid-body, the viewer closed its own and the client took the
    # first megabytes for the whole file.
    url = f"s3://{moto_s3.new_bucket()}/runs"
    for name, value in moto_s3.env().items():
        if name.startswith("AWS_"):
            monkeypatch.setenv(name, value)
    trial(Store(url).create(id="cut00001", pid=None), metrics(1.0), {"huge.log": HUGE_LOG})
    with counting_proxy(moto_s3.endpoint) as proxy:
        monkeypatch.setenv("AWS_ENDPOINT_URL", proxy.endpoint)
        with viewer(url, log_dir=tmp_path) as site:
            whole = site.raw("HEAD /s/cut00001/trials/1/files/huge.log HTTP/1.0")
            assert _headers(whole)["Content-Length"] == str(len(HUGE_LOG))
            proxy.cut = ("huge.log", 3 << 20)
            answer = site.raw("GET /s/cut00001/trials/1/files/huge.log HTTP/1.0")
    assert answer.startswith(b"HTTP/1.0 200 ")
    assert _headers(answer)["Content-Length"] == str(len(HUGE_LOG))
    body = answer.partition(b"\r\n\r\n")[2]
    assert len(body) < len(HUGE_LOG) and HUGE_LOG.startswith(body)  # short: the client knows
    log = (tmp_path / "view.log").read_text()
    assert "error: Unavailable: cut00001/trials/1/huge.log: " in log, log
    assert "Traceback" not in log


@pytest.mark.parametrize("endpoint", ["moto", "http://127.0.0.1:9"])
def test_a_missing_bucket_or_an_unreachable_endpoint_is_one_line_not_a_server_of_500s(
    moto_s3: S3Server, endpoint: str
) -> None:
    # `view` listened and answered every page 500, the reason only in its log.
    env = moto_s3.env(**({} if endpoint == "moto" else {"AWS_ENDPOINT_URL": endpoint}))
    done = run("view", "--store", "s3://no-such-bucket-x/p", "--port", "0", env=env, timeout=60)
    assert (done.returncode, done.stdout) == (1, "")
    assert done.stderr.count("\n") == 1
    problem = "bucket 'no-such-bucket-x' does not exist" if endpoint == "moto" else "cannot reach"
    assert done.stderr.startswith("Error: ") and problem in done.stderr
    assert moto_s3.secret_key not in done.stderr


def test_a_file_of_several_chunks_is_typed_by_all_and_sent_whole(
    s3_viewer: tuple[Viewer, str],
) -> None:
    # Checked by a second GET, chunk by chunk, then sent from the first: never held whole.
    site, _ = s3_viewer
    for name, data, kind in (
        ("several.txt", SEVERAL, "text/plain; charset=utf-8"),
        ("several.bin", SEVERAL + b"\xff", "application/octet-stream"),
    ):
        status, headers, body = site.get(f"/s/ab12cd34/trials/1/files/{name}")
        assert (status, headers["Content-Type"], body == data) == (200, kind, True), name

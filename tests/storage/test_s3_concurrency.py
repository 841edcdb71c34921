"""Many writers, one bucket, no lock: against SeaweedFS, whose `If-None-Match: *` is atomic
(moto's conditional check is not, so races are tested here)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from s3_servers import S3Server

from sessionstore import Store

PROCESSES = 8
RECORDS = 25

# One writer process: begin()+complete() RECORDS times, printing the numbers it got.
_WRITER = """
import json, sys
from sessionstore import Store
coll = Store(sys.argv[1]).open("race").trials
got = []
for i in range({records}):
    writer = coll.begin()
    writer.write_text("who.txt", sys.argv[2])
    writer.complete({{"writer": sys.argv[2], "i": i}})
    got.append(writer.n)
print(json.dumps(got))
"""

# One creator: Store.create(id="same") once; prints "won" or the error's class.
_CREATOR = """
import sys
from sessionstore import Store
from sessionstore.errors import SessionExists
store = Store(sys.argv[1])
sys.stdin.readline()  # all start together
try:
    store.create(id=sys.argv[2], name=sys.argv[3], constraints={"by": sys.argv[3]})
    print("won")
except SessionExists:
    print("lost")
"""


def _spawn(code: str, server: S3Server, *args: str, stdin: bool = False) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-c", code, *args],
        env=server.env(),
        stdin=subprocess.PIPE if stdin else subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def test_parallel_writers_get_unique_gap_free_numbers(
    weed_s3: S3Server, monkeypatch: pytest.MonkeyPatch
) -> None:
    url = f"s3://{weed_s3.new_bucket()}/runs"
    _apply(weed_s3.env(), monkeypatch)
    Store(url).create(id="race")
    procs = [
        _spawn(_WRITER.format(records=RECORDS), weed_s3, url, f"w{i}") for i in range(PROCESSES)
    ]
    numbers: list[int] = []
    for proc in procs:
        out, err = proc.communicate(timeout=240)
        assert proc.returncode == 0, err
        numbers += json.loads(out)
    total = PROCESSES * RECORDS
    assert sorted(numbers) == list(range(1, total + 1))  # unique and gap-free
    records = Store(url).open("race").trials.records()
    assert [r.n for r in records] == list(range(1, total + 1))
    assert all(r.state == "completed" for r in records)
    by_writer: dict[str, int] = {}
    for r in records:
        assert r.data is not None
        by_writer[r.data["writer"]] = by_writer.get(r.data["writer"], 0) + 1
    assert by_writer == {f"w{i}": RECORDS for i in range(PROCESSES)}


def test_two_processes_creating_one_id_exactly_one_wins(
    weed_s3: S3Server, monkeypatch: pytest.MonkeyPatch
) -> None:
    url = f"s3://{weed_s3.new_bucket()}/runs"
    _apply(weed_s3.env(), monkeypatch)
    for round_ in range(5):
        session_id = f"same-{round_}"
        procs = [_spawn(_CREATOR, weed_s3, url, session_id, f"p{i}", stdin=True) for i in (0, 1)]
        for proc in procs:
            assert proc.stdin is not None
            proc.stdin.write("go\n")
            proc.stdin.flush()
        outs = []
        for proc in procs:
            out, err = proc.communicate(timeout=120)
            assert proc.returncode == 0, err
            outs.append(out.strip())
        assert sorted(outs) == ["lost", "won"]
        winner = f"p{outs.index('won')}"
        session = Store(url).open(session_id)
        # The winner's session whole: its manifest and its own constraints, never the loser's.
        assert session.manifest is not None and session.manifest["name"] == winner
        assert session.constraints() == {"by": winner}


def _apply(env: dict[str, str], monkeypatch: pytest.MonkeyPatch) -> None:
    """This process's AWS variables for the server (the test's own Store calls)."""
    for name, value in env.items():
        if name.startswith("AWS_"):
            monkeypatch.setenv(name, value)

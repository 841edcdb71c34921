"""`sessionstore report`: one self-contained HTML file, parsed (never grepped) for what it shows."""

from __future__ import annotations

import os
import resource
import select
import signal
import stat
import threading
import time
from pathlib import Path

from bs4 import BeautifulSoup, Tag
from cli_runner import run
from inspect_helpers import metrics, trial
from view_helpers import (
    HOSTILE_NAME,
    big_session,
    external_refs,
    hover,
    one,
    rich_session,
    sibling,
    soup,
)

from sessionstore._display import escape
from sessionstore._fs.atomic import write_atomic
from sessionstore.inspect.summary import SessionView
from sessionstore.store.session import Store
from sessionstore.view.report import render_report


def _report(store: Path, target: str, tmp_path: Path) -> BeautifulSoup:
    out = tmp_path / "report.html"
    result = run("report", target, "--store", store, "-o", out)
    assert result.returncode == 0, result.stderr
    assert result.stdout == ""
    assert f"report written to {out}" in result.stderr
    return soup(out.read_bytes())


def _table(doc: BeautifulSoup, css: str) -> list[list[str]]:
    table = doc.select_one(f"table.{css}")
    assert isinstance(table, Tag), f"no table.{css}"
    return [[td.get_text() for td in tr.find_all("td")] for tr in table.select("tbody tr")]


def test_report_of_a_session_shows_every_part(tmp_path: Path) -> None:
    store = Store(tmp_path / "store")
    rich_session(store)
    doc = _report(store.root, "rich0001", tmp_path)
    # The name is text: the parser finds it in the title and h1, and no element came of it.
    assert doc.title is not None and doc.title.get_text().startswith(escape(HOSTILE_NAME))
    h1 = doc.find("h1")
    assert h1 is not None and h1.get_text() == escape(HOSTILE_NAME)
    assert [s for s in doc.find_all("script") if "pwned" in s.get_text()] == []
    assert len(doc.find_all("script")) == 1
    facts = {dt.get_text(): sibling(dt, "dd").get_text() for dt in doc.select("dl dt")}
    assert facts["status"] == "running"
    assert facts["progress"] == "verified (2/6)"
    assert facts["constraints"] == "max_ttft_ms.mean = 200"
    assert "team=infra" in facts["labels"] and "kind=<b>bold</b>" in facts["labels"]
    # Best: trial 1 meets the constraints (ttft 150 <= 200, its log says PASS).
    assert facts["best"].startswith("#1 output_tok_per_s = 950.5")
    assert "meets the constraints" in facts["best"] and "log: pass" in facts["best"]
    rows = _table(doc, "trials")
    assert [r[0] for r in rows] == ["1", "2", "3", "4"]
    assert [r[1] for r in rows] == ["completed", "completed", "torn", "in_flight"]
    assert rows[0][2] == "950.5" and rows[1][2] == "1320"
    header = [th.get_text() for th in doc.select("table.trials th")]
    assert header[-2:] == ["log", "note"]
    log, note = header.index("log"), header.index("note")
    assert rows[0][log] == "pass" and rows[1][log] == "fail: ttft 240 ms"
    assert rows[0][note].startswith("best") and "fp8 fits" in rows[0][note]
    assert "ttft_ms.mean 240 > max 200" in rows[1][note]
    assert "invalid JSON" in rows[2][note]
    assert _table(doc, "service") == [["1", "completed", "1", "verified", ""]]
    foreign = doc.select_one("ul.foreign")
    assert foreign is not None
    assert "notes.txt" in foreign.get_text()
    assert escape(os.fsdecode(b"bad-\xff\x1b[2J")) in foreign.get_text()  # \xff\x1b shown
    # Every record's marker is in the file, as the anchors' targets.
    assert {d["id"] for d in doc.find_all("details")} == {
        "trial-1",
        "trial-2",
        "trial-3",
        "trial-4",
        "attempt-1",
    }
    best_link = doc.select_one("dd a")
    assert best_link is not None and best_link["href"] == "#trial-1"


def test_report_chart_marks_failed_best_and_the_threshold(tmp_path: Path) -> None:
    store = Store(tmp_path / "store")
    rich_session(store)
    doc = _report(store.root, "rich0001", tmp_path)
    charts = doc.find_all("svg")
    assert len(charts) == 2  # the objective, then the ttft constraint's metric
    objective, ttft = charts
    # Hover text of each point is its <title>; trial 2 (fails ttft) is red, the best ringed.
    points = {hover(c): c["class"] for c in objective.find_all("circle")}
    assert points == {
        "trial 2: 1320 (fails max_ttft_ms.mean)": ["pt-failed"],
        "best: trial 1: 950.5": ["pt-best"],
    }
    assert [t.get_text() for t in objective.select("text.best")] == ["best #1"]
    limit = ttft.select_one("line.limit")
    assert limit is not None and hover(limit) == "max_ttft_ms.mean 200"
    assert [hover(c) for c in ttft.find_all("circle")] == [
        "trial 2: 240 (fails max_ttft_ms.mean)",
        "best: trial 1: 150",
    ]


def test_report_has_no_external_reference_and_forbids_other_scripts(tmp_path: Path) -> None:
    store = Store(tmp_path / "store")
    rich_session(store)
    doc = _report(store.root, "rich0001", tmp_path)
    assert external_refs(doc) == []
    assert doc.find_all("link", rel="stylesheet") == [] and doc.find_all("img") == []
    assert all(not s.get("src") for s in doc.find_all("script"))
    csp = doc.find("meta", attrs={"http-equiv": "Content-Security-Policy"})
    assert csp is not None
    policy = str(csp["content"])
    assert "default-src 'none'" in policy and "script-src 'sha256-" in policy
    assert "unsafe-inline" not in policy


def test_report_to_stdout(tmp_path: Path) -> None:
    store = Store(tmp_path / "store")
    rich_session(store)
    result = run("report", "rich0001", "--store", store.root, "-o", "-", text=False)
    assert result.returncode == 0, result.stderr
    doc = soup(result.stdout)
    assert doc.find("table", class_="trials") is not None
    assert result.stderr == b""


def test_report_quiet_says_nothing_verbose_gives_the_size(tmp_path: Path) -> None:
    store = Store(tmp_path / "store")
    rich_session(store)
    out = tmp_path / "r.html"
    quiet = run("report", "rich0001", "--store", store.root, "-o", out, "-q")
    assert (quiet.returncode, quiet.stdout, quiet.stderr) == (0, "", "")
    assert soup(out.read_bytes()).find("table", class_="trials") is not None
    loud = run("report", "rich0001", "--store", store.root, "-o", out, "-v")
    size = out.stat().st_size
    assert (loud.returncode, loud.stderr) == (0, f"report written to {out} ({size} bytes)\n")
    both = run("report", "rich0001", "--store", store.root, "-o", out, "-q", "-v")
    assert both.returncode == 2 and "cannot be combined" in both.stderr


def test_report_of_1000_trials_is_small_and_complete(tmp_path: Path) -> None:
    store = Store(tmp_path / "store")
    big_session(store)
    out = tmp_path / "big.html"
    result = run("report", "big00001", "--store", store.root, "-o", out)
    assert result.returncode == 0, result.stderr
    assert out.stat().st_size < 2 * 1024 * 1024
    doc = soup(out.read_bytes())
    assert len(_table(doc, "trials")) == 1000
    circles = one(doc, "svg").find_all("circle")
    assert len(circles) == 1000
    failed = [c for c in circles if c["class"] == ["pt-failed"]]
    # Every tenth says failed; the others fail where their ttft (100 + 13n mod 300) > 300.
    expected = [n for n in range(1, 1001) if n % 10 == 0 or 100 + (n * 13) % 300 > 300]
    assert [int(hover(c).split(":")[0].split()[-1]) for c in failed] == expected


def test_report_errors_are_one_line(tmp_path: Path) -> None:
    result = run("report", "nosuch", "--store", tmp_path / "store", "-o", tmp_path / "x.html")
    assert result.returncode == 1
    assert result.stderr.startswith("Error: no session 'nosuch'")
    assert not (tmp_path / "x.html").exists()
    missing = run("report", "nosuch", "--store", tmp_path / "store")
    assert missing.returncode == 2 and "-o" in missing.stderr


def test_report_ranks_by_the_objective_given(tmp_path: Path) -> None:
    store = Store(tmp_path / "store")
    rich_session(store)
    out = tmp_path / "r.html"
    args = ("--objective", "benchmark.metrics.ttft_ms.mean", "--lower")
    result = run("report", "rich0001", "--store", store.root, "-o", out, *args)
    assert result.returncode == 0, result.stderr
    doc = soup(out.read_bytes())
    facts = {dt.get_text(): sibling(dt, "dd").get_text() for dt in doc.select("dl dt")}
    assert facts["objective"] == "benchmark.metrics.ttft_ms.mean, lower"
    assert facts["best"].startswith("#1 mean = 150")
    caption = one(doc, "figcaption").get_text()
    assert caption == "benchmark.metrics.ttft_ms.mean (lower is better)"


def test_report_charts_extreme_values(tmp_path: Path) -> None:
    # An agent's metric can be any finite JSON number: the chart's span (here ~3.6e308)
    # overflows a float, and must still place every point inside the plot.
    store = Store(tmp_path / "store")
    session = store.create(id="extreme1", name="extreme", pid=None)
    values = (1e308, -1e308, 5e-324, 1.7976931348623157e308)
    for value in values:
        trial(session, metrics(value))
    doc = _report(store.root, "extreme1", tmp_path)
    svg = one(doc, "svg")
    # html.parser lowercases attribute names: viewBox is "viewbox".
    width, height = (float(v) for v in str(svg["viewbox"]).split()[2:])
    circles = svg.find_all("circle")
    assert len(circles) == len(values)
    for circle in circles:
        x, y = float(str(circle["cx"])), float(str(circle["cy"]))
        assert 0 <= x <= width and 0 <= y <= height, (x, y)
    ticks = [t for t in svg.find_all("text") if t.get("text-anchor") == "end"]
    assert len(ticks) >= 2  # the value axis is labelled
    assert [hover(c) for c in circles][-1].startswith("best: trial 4: ")


def test_report_output_that_is_a_directory_is_a_clear_error(tmp_path: Path) -> None:
    store = Store(tmp_path / "store")
    rich_session(store)
    (tmp_path / "out").mkdir()
    result = run("report", "rich0001", "--store", store.root, "-o", tmp_path / "out")
    assert result.returncode == 1
    assert result.stderr == f"Error: {tmp_path / 'out'}: is a directory; give a file name\n"
    assert os.listdir(tmp_path / "out") == []
    missing = run("report", "rich0001", "--store", store.root, "-o", tmp_path / "no" / "r.html")
    assert missing.returncode == 1
    assert missing.stderr.startswith(f"Error: {tmp_path / 'no' / 'r.html'}: ")
    assert len(missing.stderr.splitlines()) == 1


def test_an_empty_output_is_a_usage_error_not_the_current_directory(tmp_path: Path) -> None:
    store = Store(tmp_path / "store")
    rich_session(store)
    result = run("report", "rich0001", "--store", store.root, "-o", "", cwd=tmp_path)
    assert (result.returncode, result.stdout) == (2, "")
    assert result.stderr.splitlines()[-1] == (
        "Error: Invalid value for '-o' / '--output': is empty; name a file, or - for "
        "standard output"
    )
    assert sorted(os.listdir(tmp_path)) == ["store"]


def test_report_into_a_session_is_refused_and_writes_nothing(tmp_path: Path) -> None:
    # `-o session.json` from inside the session (a slip of tab completion) replaced its
    # manifest with HTML: the session was gone. Any session of the store is refused, the
    # one reported or another, reached directly or through a link; beside them is fine.
    store = Store(tmp_path / "store")
    session = rich_session(store)
    other = store.create(id="other001", pid=None)
    os.symlink(session.path, tmp_path / "link")
    manifests = {
        s.path / "session.json": (s.path / "session.json").read_bytes() for s in (session, other)
    }
    outputs = {
        session.path / "session.json": "is inside the session it reports",
        session.trials.path / "1" / "r.html": "is inside the session it reports",
        tmp_path / "link" / "session.json": "is inside the session it reports",
        other.path / "session.json": f"is inside other001/ of the store {store.root}, where "
        "sessions are",
        # Named as a session, with no manifest (yet): never a place for a report either.
        store.root / "newdir01" / "r.html": f"is inside newdir01/ of the store {store.root}, "
        "where sessions are",
    }
    (store.root / "newdir01").mkdir()
    for out, problem in outputs.items():
        result = run("report", "rich0001", "--store", store.root, "-o", out)
        assert result.returncode == 1, (out, result.stderr)
        assert result.stderr == f"Error: {out}: {problem}; write it elsewhere\n"
    assert {path: path.read_bytes() for path in manifests} == manifests
    assert not (session.trials.path / "1" / "r.html").exists()
    # By path, from inside it: refused too.
    inside = run("report", session.path, "-o", "r.html", cwd=session.path)
    assert inside.returncode == 1 and not (session.path / "r.html").exists()
    beside = run("report", "rich0001", "--store", store.root, "-o", store.root / "r.html", "-q")
    assert (beside.returncode, beside.stderr) == (0, "")


def _small_files() -> None:
    # Writes past 4 KiB fail with EFBIG (the signal ignored): a full disk, unprivileged.
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    resource.setrlimit(resource.RLIMIT_FSIZE, (4096, 4096))


def test_report_that_cannot_be_written_names_its_file(tmp_path: Path) -> None:
    # A failed write names no file ("Error: No space left on device"): the error names
    # FILE, and no temp file is left beside it.
    store = Store(tmp_path / "store")
    rich_session(store)
    out = tmp_path / "out" / "r.html"
    out.parent.mkdir()
    # No bytecode written under the limit: a cut-off .pyc would break every later import.
    env = {**os.environ, "PYTHONDONTWRITEBYTECODE": "1"}
    args = ("report", "rich0001", "--store", store.root, "-o", out)
    full = run(*args, env=env, preexec_fn=_small_files)
    assert (full.returncode, full.stderr) == (1, f"Error: {out}: File too large\n")
    assert os.listdir(out.parent) == []
    device = run("report", "rich0001", "--store", store.root, "-o", "/dev/full")
    assert (device.returncode, device.stderr) == (1, "Error: /dev/full: No space left on device\n")


def test_report_into_a_fifo_writes_through_it_and_leaves_it_a_fifo(tmp_path: Path) -> None:
    # -o /dev/stdout, a FIFO, a device: written into, as a shell's `>` does; renaming a
    # temp file over it would replace the node itself (as root even /dev/null).
    store = Store(tmp_path / "store")
    rich_session(store)
    fifo = tmp_path / "pipe.html"
    os.mkfifo(fifo)
    reader = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)  # a reader, so the writer opens
    received: list[bytes] = []
    done = threading.Event()

    def drain() -> None:  # until the report has run and the pipe is empty
        while True:
            ready, _, _ = select.select([reader], [], [], 0.1)
            chunk = os.read(reader, 1 << 16) if ready else b""
            if chunk:
                received.append(chunk)
            elif done.is_set():
                return
            else:
                time.sleep(0.01)  # no writer yet: a FIFO reads empty at once

    thread = threading.Thread(target=drain)
    thread.start()
    try:
        result = run("report", "rich0001", "--store", store.root, "-o", fifo, "-q")
    finally:
        done.set()
        thread.join(30)
        os.close(reader)
    assert (result.returncode, result.stderr) == (0, "")
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode)
    assert soup(b"".join(received)).find("table", class_="trials") is not None


# A marker that a parse-and-dump would misstate: a duplicate key, `1.10`, `1e3`, an escape.
SPELLED_MARKER = b'{"failed": false, "lr": 0.10, "lr": 1.10, "n": 1e3, "name": "caf\\u00e9"}'


def test_report_shows_each_marker_as_its_file_spells_it(tmp_path: Path) -> None:
    store = Store(tmp_path / "store")
    session = store.create(id="spell001", pid=None)
    trial(session, {"failed": False})
    write_atomic(session.trials.path / "1" / "trial.json", SPELLED_MARKER)
    doc = _report(store.root, "spell001", tmp_path)
    shown = one(one(doc, "details#trial-1"), "pre").get_text()
    assert shown == (
        '{\n  "failed": false,\n  "lr": 0.10,\n  "lr": 1.10,\n  "n": 1e3,\n'
        '  "name": "caf\\u00e9"\n}'
    )


def test_report_says_when_a_marker_vanished_or_cannot_be_read(tmp_path: Path) -> None:
    # Read once for the page, each marker again for its fold: between the two an agent
    # may remove one, or swap it for a symlink to a file outside or a FIFO (never followed,
    # never waited on).
    store = Store(tmp_path / "store")
    session = store.create(id="gone0001", pid=None)
    for n in range(4):
        trial(session, {"failed": False, "n": n})
    view = SessionView.load(session)
    outside = tmp_path / "outside.json"
    outside.write_bytes(b'{"secret": "outside the store"}')
    for n in (1, 2, 3):
        os.unlink(session.trials.path / str(n) / "trial.json")
    os.symlink(outside, session.trials.path / "2" / "trial.json")
    os.mkfifo(session.trials.path / "3" / "trial.json")
    doc = soup(render_report(view))
    assert one(doc, "details#trial-1 p.torn").get_text() == "removed since the session was read"
    assert one(doc, "details#trial-2 p.torn").get_text() == (
        "is a symlink (never followed), not a regular file"
    )
    assert one(doc, "details#trial-3 p.torn").get_text() == "is a FIFO, not a regular file"
    assert "outside the store" not in doc.get_text()
    assert one(doc, "details#trial-4 pre").get_text() == '{\n  "failed": false,\n  "n": 3\n}'

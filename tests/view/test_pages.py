"""The pages and JSON `sessionstore view` serves, from a real server process, parsed."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import quote, urlencode

import pytest
from bs4 import BeautifulSoup, Tag
from cli_runner import run
from inspect_helpers import metrics, set_manifest, trial
from view_helpers import (
    BAD_BYTES_NAME,
    HOSTILE_NAME,
    SECRET_NAME,
    Viewer,
    big_session,
    external_refs,
    one,
    rich_session,
    sibling,
    soup,
    viewer,
)

from sessionstore._display import escape
from sessionstore.harness.verdict import LINE_LIMIT, Outcome, evaluate_output_contract
from sessionstore.store.session import Session, Store
from sessionstore.view.files import READ_LIMIT
from sessionstore.view.html import VALUE_LIMIT
from sessionstore.view.render import SHOW_LIMIT

MANY = 120  # sessions beyond the rich one: three pages of 50
# Past the 16 MiB a page reads whole: tailed from the end, served in chunks.
HUGE_LOG = b"".join(b"step %08d\n" % i for i in range(READ_LIMIT // 14 + 10)) + b"PASS\n"
# JSON that a parse-and-dump would misstate: a duplicate key, number spellings, escapes.
SPELLED_JSON = (
    b'{"lr": 0.10, "lr": 1e-3, "steps": [1, [2, 3], []], "opt": {},'
    b' "note": "\\u00e9 \\" ,:{<b>", "ok": true, "none": null}'
)
SPELLED_SHOWN = """{
  "lr": 0.10,
  "lr": 1e-3,
  "steps": [
    1,
    [
      2,
      3
    ],
    []
  ],
  "opt": {},
  "note": "\\u00e9 \\" ,:{<b>",
  "ok": true,
  "none": null
}"""
# Spelled as orjson spells it, whitespace apart: the same layout, by orjson.
PLAIN_JSON = b' {"a":[1,{"b":[],"c":"\xc3\xa9"}],\n"d":{}}\n'
PLAIN_SHOWN = """{
  "a": [
    1,
    {
      "b": [],
      "c": "\u00e9"
    }
  ],
  "d": {}
}"""
# Nesting whose indentation would be far larger than the file: shown as it is.
DEEP_JSON = b"[" * 1000 + b"0," * 20000 + b"0" + b"]" * 1000


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Viewer, Store]]:
    root = tmp_path_factory.mktemp("pages") / "store"
    store = Store(root)
    session = rich_session(store)
    writer = session.trials.get(1)
    (writer.path / "big.log").write_bytes(b"".join(b"line %d\n" % i for i in range(60000)))
    (writer.path / "huge.log").write_bytes(HUGE_LOG)
    (writer.path / "huge.bin").write_bytes(b"\0" * (READ_LIMIT + 1))
    (writer.path / "out").mkdir()  # below the record: not a config file to diff
    (writer.path / "out/spelled.json").write_bytes(SPELLED_JSON)
    (writer.path / "out/deep.json").write_bytes(DEEP_JSON)
    (writer.path / "out/plain.json").write_bytes(PLAIN_JSON)
    for i in range(MANY):
        s = store.create(
            id=f"s{i:04d}",
            name=f"name-{MANY - i:04d}",
            labels={"team": "a" if i % 2 else "b"},
            pid=None,
        )
        trial(s, metrics(100.0 + i))
        if i % 3 == 0:
            s.finish({"status": "failed" if i % 6 == 0 else "done"})
        set_manifest(s, created_at=f"2026-01-01T00:{i // 60:02d}:{i % 60:02d}+00:00")
    big_session(store)
    store.create(id="child001", name="child", previous=["s0003", "s0006"], pid=None)
    torn = root / "torn0001"
    torn.mkdir()
    (torn / "session.json").write_bytes(b'{"id": "torn0')
    with viewer(root) as running:
        yield running, store


def _page(view: Viewer, path: str) -> BeautifulSoup:
    status, headers, body = view.get(path)
    assert status == 200, (path, body[:300])
    assert headers["Content-Type"] == "text/html; charset=utf-8"
    assert headers["X-Content-Type-Options"] == "nosniff"
    doc = soup(body)
    assert external_refs(doc) == []
    return doc


def _ids(doc: BeautifulSoup) -> list[str]:
    return [a.get_text() for a in doc.select("table.sessions tbody tr td:first-child a")]


def test_list_is_paged_filtered_and_sorted(site: tuple[Viewer, Store]) -> None:
    view, store = site
    first = _page(view, "/")
    assert len(_ids(first)) == 50
    pager = first.select_one("p.pager")
    assert pager is not None and "page 1 of 3 (124 sessions)" in pager.get_text()
    nxt = pager.find("a", string="next")
    assert isinstance(nxt, Tag)
    third = _page(view, "/?page=3")
    assert len(_ids(third)) == 24
    assert _ids(_page(view, "/?page=99")) == _ids(third)  # past the end: the last page
    # Not ASCII digits (`²` passes `str.isdigit` but not `int`): the first page, not a 500.
    for odd in ("%C2%B2", "%D9%A3", "-1", "1e3", "%20"):
        assert _ids(_page(view, f"/?page={odd}")) == _ids(first), odd
    done = _page(view, "/?status=done")
    assert set(_ids(done)) == {f"s{i:04d}" for i in range(MANY) if i % 3 == 0 and i % 6 != 0}
    team = _page(view, "/?label=team%3Da&sort=name&order=asc")
    names = [tr.find_all("td")[1].get_text() for tr in team.select("table.sessions tbody tr")]
    assert names == sorted(names) and len(names) == 50
    assert _page(view, "/?label=nosuch").select_one("table.sessions") is None
    row = next(
        tr
        for tr in first.select("table.sessions tbody tr")
        if one(tr, "td").get_text() == "rich0001"
    )
    cells = [td.get_text() for td in row.find_all("td")]
    assert cells[1] == escape(HOSTILE_NAME)  # text, never markup
    assert cells[2:5] == ["running", "verified (2/6)", "#1 950.5"]
    created = (store.open("rich0001").manifest or {})["created_at"]
    assert cells[5] == created[:19].replace("T", " ")
    assert "team=infra" in cells[6]


def test_session_page_and_its_api_agree_with_inspect_json(site: tuple[Viewer, Store]) -> None:
    view, store = site
    doc = _page(view, "/s/rich0001")
    assert [a["href"] for a in doc.select("table.trials tbody td:first-child a")] == [
        f"/s/rich0001/trials/{n}" for n in (1, 2, 3, 4)
    ]
    assert doc.find("svg") is not None
    # Running: the page reloads itself (script) or refreshes (no script).
    body = doc.body
    assert body is not None and body["data-live"] == "/api/sessions/rich0001"
    assert body["data-sig"] == "running|1:completed,2:completed,3:torn,4:in_flight|1:completed"
    assert doc.select_one('noscript meta[http-equiv="refresh"]') is not None
    status, headers, api = view.get("/api/sessions/rich0001")
    assert status == 200 and headers["Content-Type"] == "application/json"
    cli = run("inspect", "rich0001", "--store", store.root, "--json", text=False)
    assert api == cli.stdout
    status, _, listing = view.get("/api/sessions")
    cli = run("inspect", "--store", store.root, "--json", text=False)
    assert status == 200 and listing == cli.stdout
    finished = _page(view, "/s/s0003")
    assert finished.body is not None and finished.body.get("data-live") is None


def test_lineage_links_to_the_previous_sessions(site: tuple[Viewer, Store]) -> None:
    view, _ = site
    doc = _page(view, "/s/child001")
    items = one(doc, "ul.lineage").find_all("li")
    assert [one(li, "a")["href"] for li in items] == ["/s/s0003", "/s/s0006"]
    assert [li.get_text() for li in items] == [
        "s0003 (1 trials, 0 attempts copied)",
        "s0006 (1 trials, 0 attempts copied)",
    ]


def test_a_torn_manifest_is_listed_and_shown_with_its_problem(
    site: tuple[Viewer, Store],
) -> None:
    view, _ = site
    # No name: it sorts first by name.
    rows = _page(view, "/?sort=name&order=asc").select("table.sessions tbody tr")
    torn = [tr for tr in rows if one(tr, "td").get_text() == "torn0001"]
    assert len(torn) == 1 and one(torn[0], "td a")["href"] == "/s/torn0001"
    doc = _page(view, "/s/torn0001")
    facts = {dt.get_text(): sibling(dt, "dd").get_text() for dt in doc.select("dl dt")}
    assert facts["id"] == "(no manifest)"
    assert facts["manifest"].startswith("session.json: invalid JSON")


def _shown(doc: BeautifulSoup, name: str) -> Tag:
    heading = next(h for h in doc.find_all("h3") if h.get_text() == name)
    shown = heading.find_next_sibling("pre")
    assert isinstance(shown, Tag)
    return shown


def test_json_is_indented_as_the_file_spells_it(site: tuple[Viewer, Store]) -> None:
    view, _ = site
    doc = _page(view, "/s/rich0001/trials/1")
    spelled = _shown(doc, "out/spelled.json")
    assert spelled["class"] == ["json"]
    assert spelled.get_text() == SPELLED_SHOWN  # both keys, 0.10, 1e-3, the escapes
    assert spelled.find("b") is None  # the string's markup is text
    assert _shown(doc, "out/plain.json").get_text() == PLAIN_SHOWN
    deep = _shown(doc, "out/deep.json")
    assert deep.get("class") is None  # not indented: 2 MB of spaces for a 40 KB file
    assert deep.get_text() == DEEP_JSON.decode()


def test_record_page_shows_files_rendered(site: tuple[Viewer, Store]) -> None:
    view, _ = site
    doc = _page(view, "/s/rich0001/trials/1")
    files = {
        one(tr, "td").get_text(): [td.get_text() for td in tr.find_all("td")[1:]]
        for tr in doc.select("table.files tbody tr")
    }
    assert files["run.log"] == [str(len(b"start\nttft 150 ms\nPASS\n")), "text", "raw"]
    assert files["blob.bin"] == ["256", "binary", "download"]
    assert escape(SECRET_NAME) in files and escape(BAD_BYTES_NAME) in files
    assert files["patches/0001.diff"][1] == "text"
    # The hostile name is text in the page: no element came of it.
    assert doc.find("img") is None
    verdict = doc.select_one("pre.log .verdict-line.pass")
    assert verdict is not None and verdict.get_text() == "PASS"
    diff = doc.select_one("pre.diff")
    assert diff is not None
    assert [s.get_text() for s in diff.select(".d-add")] == ["+new"]
    assert [s.get_text() for s in diff.select(".d-del")] == ["-old"]
    assert doc.select_one("pre.json") is not None
    assert doc.select_one("pre.yaml .key") is not None
    # The big log is tailed: its last line shown, its first not.
    big = next(h for h in doc.find_all("h3") if h.get_text() == "big.log")
    note, shown = big.find_next_sibling("p"), big.find_next_sibling("pre")
    assert note is not None and note.get_text().startswith("showing the last")
    assert shown is not None and shown.get_text().endswith("line 59999\n")
    assert "line 0\n" not in shown.get_text() and len(shown.get_text()) <= SHOW_LIMIT
    # Binary: download only, never shown.
    blob = next(h for h in doc.find_all("h3") if h.get_text() == "blob.bin")
    assert "download only" in sibling(blob, "p").get_text()


def test_record_files_are_served_as_text_or_downloads(site: tuple[Viewer, Store]) -> None:
    view, _ = site
    status, headers, body = view.get("/s/rich0001/trials/1/files/run.log")
    assert (status, body) == (200, b"start\nttft 150 ms\nPASS\n")
    assert headers["Content-Type"] == "text/plain; charset=utf-8"
    assert headers["Content-Security-Policy"] == "default-src 'none'; sandbox"
    assert headers["X-Content-Type-Options"] == "nosniff"
    status, headers, body = view.get("/s/rich0001/trials/1/files/blob.bin")
    assert status == 200 and body == b"\x00\x01\x02\xff" * 64
    assert headers["Content-Type"] == "application/octet-stream"
    assert headers["Content-Disposition"].startswith("attachment;")
    secret = quote(SECRET_NAME, safe="")
    status, headers, body = view.get(f"/s/rich0001/trials/1/files/{secret}")
    assert (status, body) == (200, b"secret-shaped file\n")
    assert headers["Content-Type"].startswith("text/plain")
    odd = quote(b"ctl-\xff\xfe-\x07name.log", safe="")
    status, _, body = view.get(f"/s/rich0001/trials/1/files/{odd}")
    assert (status, body) == (200, b"bytes that are not UTF-8 in the name\n")
    status, _, _ = view.get("/s/rich0001/service/1")
    assert status == 200


def test_config_diff_between_two_trials(site: tuple[Viewer, Store]) -> None:
    view, _ = site
    doc = _page(view, "/s/rich0001/trials/2?against=1")
    picker = doc.select_one("form select[name=against]")
    assert picker is not None
    assert [o["value"] for o in picker.find_all("option")] == ["1", "3", "4"]
    diff = doc.select_one("h3 + pre.diff")
    assert diff is not None
    assert [s.get_text() for s in diff.select(".d-del")] == ["-batch: 32"]
    assert [s.get_text() for s in diff.select(".d-add")] == ["+batch: 64"]
    assert [s.get_text() for s in diff.select(".d-file")] == [
        "--- trials/1/task.yml",
        "+++ trials/2/task.yml",
    ]


def test_big_session_page_is_whole(site: tuple[Viewer, Store]) -> None:
    view, _ = site
    doc = _page(view, "/s/big00001")
    assert len(doc.select("table.trials tbody tr")) == 1000
    assert len(one(doc, "svg").find_all("circle")) == 1000


def test_server_log_escapes_request_lines(site: tuple[Viewer, Store]) -> None:
    view, store = site
    view.raw("GET /\x1b]0;owned\x07 HTTP/1.0")
    log = (store.root.parent / "view.log").read_text()
    assert "\x1b" not in log and "\\x1b]0;owned\\x07" in log
    assert json.loads(view.get("/api/sessions/big00001")[2])["trial_counts"]["completed"] == 1000


def test_a_log_past_the_read_limit_is_tailed_sized_and_served_whole(
    site: tuple[Viewer, Store],
) -> None:
    view, _ = site
    assert len(HUGE_LOG) > READ_LIMIT
    doc = _page(view, "/s/rich0001/trials/1")
    rows = {
        one(tr, "td").get_text(): [td.get_text() for td in tr.find_all("td")[1:]]
        for tr in doc.select("table.files tbody tr")
    }
    assert rows["huge.log"][0] == str(len(HUGE_LOG))
    assert rows["huge.bin"][0] == str(READ_LIMIT + 1)
    huge = next(h for h in doc.find_all("h3") if h.get_text() == "huge.log")
    note, shown = sibling(huge, "p"), sibling(huge, "pre")
    assert note.get_text().startswith("showing the last ")
    assert note.get_text().endswith(f" of {len(HUGE_LOG)} bytes")
    assert len(shown.get_text()) <= SHOW_LIMIT and shown.get_text().startswith("step ")
    verdict = shown.select_one(".verdict-line.pass")
    assert verdict is not None and verdict.get_text() == "PASS"
    status, headers, body = view.get("/s/rich0001/trials/1/files/huge.log")
    assert (status, headers["Content-Type"]) == (200, "text/plain; charset=utf-8")
    assert int(headers["Content-Length"]) == len(HUGE_LOG) and body == HUGE_LOG
    assert headers["Content-Security-Policy"] == "default-src 'none'; sandbox"
    status, headers, body = view.get("/s/rich0001/trials/1/files/huge.bin", method="HEAD")
    assert (status, body) == (200, b"")
    assert headers["Content-Type"] == "application/octet-stream"
    assert headers["Content-Disposition"] == "attachment; filename*=UTF-8''huge.bin"
    assert int(headers["Content-Length"]) == READ_LIMIT + 1
    status, _, body = view.get("/s/rich0001/trials/1/files/huge.bin")
    assert status == 200 and body == b"\0" * (READ_LIMIT + 1)


def test_a_config_diff_of_huge_files_is_refused_not_computed(tmp_path: Path) -> None:
    # difflib is quadratic on lines that half match: two 8,000-line configs take
    # minutes of one thread holding the GIL, so every other page would wait.
    store = Store(tmp_path / "store")
    session = store.create(id="diffbig1", pid=None)
    lines = [f"key{i}: {i}\n" for i in range(8000)]
    other = [line if i % 2 else "changed: 1\n" for i, line in enumerate(lines)]
    trial(session, metrics(1.0), {"task.yml": "".join(lines), "small.yml": "a: 1\n"})
    trial(session, metrics(2.0), {"task.yml": "".join(other), "small.yml": "a: 2\n"})
    with viewer(store.root) as view:
        doc = _page(view, "/s/diffbig1/trials/2?against=1")
    heads = [h.get_text() for h in doc.select("h3")]
    big = next(
        h for h in doc.select("h3") if h.get_text() == "task.yml" and h.find_next_sibling("p")
    )
    assert "too large to diff" in sibling(big, "p").get_text()
    small = doc.select_one("h3 + pre.diff")
    assert small is not None and [s.get_text() for s in small.select(".d-add")] == ["+a: 2"]
    assert heads.count("task.yml") == 2  # the refused diff, then the file itself


def test_label_filter_matches_keys_and_values_that_hold_markup_and_equals(
    tmp_path: Path,
) -> None:
    store = Store(tmp_path / "store")
    hostile = '<script>x</script>"onmouseover=alert(1) a=b'
    store.create(id="lab00001", labels={hostile: hostile, "team": hostile}, pid=None)
    store.create(id="lab00002", labels={"team": "infra"}, pid=None)
    with viewer(store.root) as view:
        for label, expected in (
            (hostile, ["lab00001"]),
            (f"{hostile}={hostile}", ["lab00001"]),
            (f"team={hostile}", ["lab00001"]),
            ("team", ["lab00002", "lab00001"]),
            ("team=infra", ["lab00002"]),
            ("team=", []),
            ("=", []),
        ):
            doc = _page(view, "/?" + urlencode({"label": label}))
            assert _ids(doc) == expected, label
            field = one(doc, "input[name=label]")
            assert field["value"] == label  # the filter shown back as it was typed


def test_a_label_filter_of_many_equals_signs_is_answered_at_once(tmp_path: Path) -> None:
    # `key=value` was tried at each '=' of the filter, a copy of it each time: 60,000 of
    # them cost a second per labelled session, minutes for a store of hundreds (the
    # client's 30 s is the hang guard).
    store = Store(tmp_path / "store")
    for i in range(200):
        store.create(id=f"eq{i:06d}", labels={"team": "infra"}, pid=None)
    with viewer(store.root) as view:
        assert _ids(_page(view, "/?label=" + "=" * 60_000)) == []
        assert len(_ids(_page(view, "/?label=team=infra"))) == 50  # one page of 200


# Logs and the line the page highlights (class, text), or None: the line `check` decides
# by, and only when it says PASS or FAIL.
VERDICT_LOGS = {
    "pass-extra.log": (b"start\nPASS: extra\n", None),
    "passed.log": (b"start\nPASSED\n", None),
    "indented.log": (b"start\n  PASS\n", None),
    "tab-fail.log": (b"start\n\tFAIL:x\n", None),
    "fail-detail.log": (b"PASS\nFAIL:detail\n", ("fail", "FAIL:detail")),
    "fail.log": (b"PASS\nFAIL\n", ("fail", "FAIL")),
    "trailing.log": (b"start\nPASS\n\n  \t\n \n", ("pass", "PASS")),
    "too-long.log": (b"PASS\nFAIL:" + b"x" * LINE_LIMIT + b"\n", None),
    # Its last 256 KiB hold no newline: shown from inside the line `check` reads whole.
    "mid-line.log": (b"start\nnot a verdict: PASS" + b" " * (SHOW_LIMIT - 4), None),
}
# Text for the first 8 KiB (all the old check sniffed), then what makes it binary.
LATE_FF = b"f" * 8192 + b"\xff then text\n"
LATE_NUL = b"n" * 8192 + b"\0 then text\n"
# Past the read limit, in lines of `\xc3\xa9`: the first 1 MiB chunk (what decides the raw
# file's type) ends inside a character, and the tail a page reads starts inside one.
CHUNK = 1 << 20
CUT_LOG = ("\u00e9" * 40 + "\n").encode() * (READ_LIMIT // 81 + 10) + b"PASS\n"


@pytest.fixture(scope="module")
def logs(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Viewer, Session]]:
    store = Store(tmp_path_factory.mktemp("logs") / "store")
    session = store.create(id="logs0001", pid=None)
    files: dict[str, str | bytes] = {name: data for name, (data, _) in VERDICT_LOGS.items()}
    trial(session, metrics(1.0), files | {"late-ff.log": LATE_FF, "late-nul.txt": LATE_NUL})
    trial(session, metrics(2.0), {"cut.log": CUT_LOG})
    with viewer(store.root) as running:
        yield running, session


def test_a_log_highlights_the_line_check_decides_by_and_no_other(
    logs: tuple[Viewer, Session],
) -> None:
    view, session = logs
    doc = _page(view, "/s/logs0001/trials/1")
    record = session.trials.get(1)
    for name, (data, expected) in VERDICT_LOGS.items():
        said = evaluate_output_contract(record, name).outcome  # what `check --log` says
        shown = _shown(doc, name)
        marked = shown.select(".verdict-line")
        if expected is None:
            assert (said, marked) == (Outcome.INDETERMINATE, []), name
            continue
        css, line = expected
        assert said == css, name
        assert [(m["class"], m.get_text()) for m in marked] == [(["verdict-line", css], line)]
        assert shown.get_text() == data.decode()
    # The last line with content, whatever blank lines follow it.
    trailing = one(_shown(doc, "trailing.log"), ".verdict-line")
    assert str(trailing.next_sibling) == "\n\n  \t\n \n"


def test_binary_is_told_by_the_whole_file_not_its_first_8_kib(
    logs: tuple[Viewer, Session],
) -> None:
    view, _ = logs
    doc = _page(view, "/s/logs0001/trials/1")
    rows = {
        one(tr, "td").get_text(): [td.get_text() for td in tr.find_all("td")[1:]]
        for tr in doc.select("table.files tbody tr")
    }
    for name, data in (("late-ff.log", LATE_FF), ("late-nul.txt", LATE_NUL)):
        assert rows[name] == [str(len(data)), "binary", "download"], name
        heading = next(h for h in doc.find_all("h3") if h.get_text() == name)
        assert "download only" in sibling(heading, "p").get_text()
        assert data[:8192].decode() not in doc.get_text()  # never shown
        status, headers, body = view.get(f"/s/logs0001/trials/1/files/{name}")
        assert (status, body) == (200, data)
        assert headers["Content-Type"] == "application/octet-stream"
        assert headers["Content-Disposition"] == f"attachment; filename*=UTF-8''{name}"


def test_a_large_text_file_cut_inside_a_character_is_still_text(
    logs: tuple[Viewer, Session],
) -> None:
    assert len(CUT_LOG) > READ_LIMIT
    assert CUT_LOG[CHUNK - 1] == 0xC3  # the first chunk ends with half an "\u00e9"
    assert CUT_LOG[len(CUT_LOG) - SHOW_LIMIT - 1] == 0xA9  # the tail read starts with half
    view, _ = logs
    doc = _page(view, "/s/logs0001/trials/2")
    heading = next(h for h in doc.find_all("h3") if h.get_text() == "cut.log")
    assert sibling(heading, "p").get_text().startswith("showing the last ")
    shown = sibling(heading, "pre")
    assert shown.get_text().startswith("\u00e9" * 40 + "\n")
    assert shown.get_text().endswith("\u00e9" * 40 + "\nPASS\n")
    assert [m.get_text() for m in shown.select(".verdict-line.pass")] == ["PASS"]
    status, headers, body = view.get("/s/logs0001/trials/2/files/cut.log")
    assert (status, headers["Content-Type"]) == (200, "text/plain; charset=utf-8")
    assert "Content-Disposition" not in headers and body == CUT_LOG


def test_a_huge_value_is_cut_on_the_page_and_whole_in_the_json(tmp_path: Path) -> None:
    # A trial's 40 MB `learned` note made a session page of 160 MB (escaped `<` is four
    # characters), the server's peak 680 MB; a name or label is as long as its manifest.
    store = Store(tmp_path / "store")
    long = "<" * 1_000_000
    session = store.create(id="long0001", name=long, labels={"k": long}, pid=None)
    trial(session, metrics(1.0) | {"learned": long}, {"a.txt": "a\n"})
    more = f"… ({len(long) - VALUE_LIMIT} more characters)"
    with viewer(store.root) as view:
        status, _, page = view.get("/s/long0001")
        listed = view.get("/")[2]
        _, _, api = view.get("/api/sessions/long0001")
    assert status == 200 and len(page) < 200_000, len(page)
    doc = soup(page)
    assert one(doc, "span.note").get_text() == "<" * VALUE_LIMIT + more
    assert one(doc, "span.label").get_text() == "k=" + "<" * VALUE_LIMIT + more
    assert len(listed) < 200_000 and more.encode() in listed
    assert json.loads(api)["trials"][0]["record"]["learned"] == long  # the JSON is exact

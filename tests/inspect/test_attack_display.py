"""Hostile text in fields an agent wrote reaches the terminal as visible escapes only.

`constraints.json` and `report.json` live in the session directory the agent
writes to; a constraint value that is an array or object is shown as JSON in
the tables, and JSON leaves C1 controls (U+009B is CSI to some terminals),
NEL (U+0085, a line break to some) and bidi overrides (U+202E) unescaped.
"""

from __future__ import annotations

from pathlib import Path

import orjson
from inspect_helpers import run_cli

from sessionstore._fs.atomic import write_atomic
from sessionstore.format.names import CONSTRAINTS, REPORT
from sessionstore.store.session import Store

HOSTILE = "\u202eevil\u009b31m\u0085x\u2028\x1b]0;t\x07"
RAW = ("\u202e", "\u009b", "\u0085", "\u2028", "\x1b", "\x07")


def test_nested_constraint_and_report_values_are_escaped_in_every_table(tmp_path: Path) -> None:
    store = tmp_path / "store"
    session = Store(store).create(id="hostile", pid=None)
    write_atomic(
        session.path / CONSTRAINTS,
        orjson.dumps({"max_x": [HOSTILE], "obj": {"k": HOSTILE}}),
    )
    write_atomic(
        session.path / REPORT,
        orjson.dumps({"status": "done", "constraints": {"max_x": [HOSTILE]}, "verified": {}}),
    )
    for args in (("inspect",), ("inspect", "hostile")):
        result = run_cli(*args, "--store", str(store), timeout=60)
        assert result.returncode == 0, result.stderr
        for char in RAW:
            assert char not in result.stdout, (args, repr(char))
        assert "\\u202eevil\\x9b31m\\x85x\\u2028" in result.stdout.replace("\n", "")
    # JSON keeps the exact value.
    result = run_cli("inspect", "hostile", "--store", str(store), "--json", timeout=60)
    assert orjson.loads(result.stdout)["constraints"]["max_x"] == [HOSTILE]


def test_a_name_spelling_an_escape_prints_apart_from_the_character(tmp_path: Path) -> None:
    """`a\\x1b` (four characters) and `a` ESC printed alike; a backslash is now doubled,
    so every backslash shown starts an escape, in the tables, errors and messages."""
    store = tmp_path / "store"
    Store(store).create(id="esc", name="a\x1b", pid=None)
    Store(store).create(id="lit", name="a\\x1b", pid=None)
    listed = run_cli("inspect", "--store", str(store)).stdout.splitlines()
    assert next(line for line in listed if line.startswith("esc ")).split()[1] == "a\\x1b"
    assert next(line for line in listed if line.startswith("lit ")).split()[1] == "a\\\\x1b"
    for session_id, shown in (("esc", "a\\x1b"), ("lit", "a\\\\x1b")):
        detail = run_cli("inspect", session_id, "--store", str(store)).stdout
        assert detail.splitlines()[0] == f"{session_id}  {shown}"
    for target, shown in (("no\x1b", "no\\x1b"), ("no\\x1b", "no\\\\x1b")):
        missing = run_cli("rm", "--store", str(store), target)
        assert missing.stderr.startswith(f"Error: no session '{shown}' in store")


def test_json_outputs_carry_hostile_text_as_json_escapes_only(tmp_path: Path) -> None:
    # orjson escapes the C0 controls only: a C1 control, NEL or a bidi override in a
    # name reached a terminal running `inspect --json` as it was.
    store = tmp_path / "store"
    session = Store(store).create(id="hostile", name=HOSTILE, constraints={HOSTILE: 1}, pid=None)
    for args in (("inspect", "--json"), ("inspect", "--nl"), ("inspect", "hostile", "--json")):
        result = run_cli(*args, "--store", str(store), timeout=60)
        assert result.returncode == 0, result.stderr
        for char in RAW:
            assert char not in result.stdout, (args, repr(char))
        assert "\\u202eevil\\u009b31m\\u0085x\\u2028\\u001b]0;t\\u0007" in result.stdout
        # The same value, exactly.
        row = orjson.loads(result.stdout.splitlines()[0] if args[1] == "--nl" else result.stdout)
        row = row[0] if isinstance(row, list) else row
        assert (row["name"], row["constraints"]) == (HOSTILE, {HOSTILE: 1})
    assert session.manifest is not None and session.manifest["name"] == HOSTILE


def test_a_report_whose_best_trial_is_a_boolean_names_no_trial(tmp_path: Path) -> None:
    # `true` is an int to isinstance: the detail said "best trial True", the viewer too.
    from sessionstore.inspect.summary import SessionView
    from sessionstore.view.report import render_report

    store = tmp_path / "store"
    session = Store(store).create(id="boolean", pid=None)
    write_atomic(session.path / REPORT, orjson.dumps({"status": "done", "best_trial": True}))
    result = run_cli("inspect", "boolean", "--store", str(store), timeout=60)
    assert result.returncode == 0, result.stderr
    assert "report: done\n" in result.stdout and "best trial" not in result.stdout
    page = render_report(SessionView.load(session))
    assert "best trial" not in page and "True" not in page


def test_an_attempts_reason_that_is_no_string_shows_as_json(tmp_path: Path) -> None:
    # str() gave Python's repr: {'oom': True}, a syntax no file holds.
    from sessionstore.inspect.summary import SessionView
    from sessionstore.view.report import render_report

    store = tmp_path / "store"
    session = Store(store).create(id="reasons", pid=None)
    writer = session.service.begin()
    reason = {"oom": True, "at": [1, None]}
    write_atomic(writer.path / writer.marker, orjson.dumps({"status": "failed", "reason": reason}))
    result = run_cli("inspect", "reasons", "--store", str(store), timeout=60)
    assert result.returncode == 0, result.stderr
    assert '{"oom":true,"at":[1,null]}' in result.stdout and "True" not in result.stdout
    page = render_report(SessionView.load(session))
    assert "{&quot;oom&quot;:true,&quot;at&quot;:[1,null]}</td>" in page


def test_a_manifest_naming_another_sessions_id_lists_under_its_own_directory(
    tmp_path: Path,
) -> None:
    # The ID column showed the manifest's id: an impostor listed as a second "victim0",
    # and `rm victim0`, the id on the screen, removed the real one.
    from sessionstore.format.names import MANIFEST
    from sessionstore.inspect.best import Objective
    from sessionstore.view.list_page import ListQuery, list_body

    store = Store(tmp_path / "store")
    store.create(id="victim0", pid=None)
    impostor = store.create(id="impostor", pid=None)
    manifest = orjson.loads((impostor.path / MANIFEST).read_bytes())
    write_atomic(impostor.path / MANIFEST, orjson.dumps({**manifest, "id": "victim0"}))
    result = run_cli("inspect", "--store", str(store.root), timeout=60)
    assert result.returncode == 0, result.stderr
    ids = sorted(line.split()[0] for line in result.stdout.splitlines()[1:3])
    assert ids == ["impostor", "victim0"]
    page = list_body(store, ListQuery(), Objective())
    assert '<a class="mono" href="/s/impostor">impostor</a>' in page

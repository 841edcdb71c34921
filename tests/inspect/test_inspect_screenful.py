"""`inspect ID` of a long session: a screenful (the best, in-flight and torn trials, the most
recent), one line saying how many more and how to see them; `--all` shows every one."""

from __future__ import annotations

import re
from pathlib import Path

import orjson
import pytest
from cli_runner import invoke
from inspect_helpers import metrics, torn_trial, trial

from sessionstore.cli.records import SCREENFUL, screenful
from sessionstore.inspect.summary import SessionView
from sessionstore.store.session import Store


def shown_trials(stdout: str) -> list[int]:
    """The numbers of the rows of the trials table, in order."""
    table = stdout[stdout.index("\ntrials\n") :]
    table = table[: table.index("\n\n")] if "\n\n" in table else table
    return [int(m.group(1)) for m in re.finditer(r"^ +(\d+)  ", table, re.M)]


@pytest.fixture
def long_session(tmp_path: Path) -> Path:
    """50 trials: #7 best, #20 and #45 in flight, #30 torn, the rest completed."""
    session = Store(tmp_path).create(id="long", pid=None)
    for n in range(1, 51):
        if n in (20, 45):
            trial(session, None)
        elif n == 30:
            torn_trial(session)
        else:
            trial(session, metrics(5000.0 if n == 7 else float(n)))
    return tmp_path


def test_the_default_view_is_best_unfinished_then_most_recent(long_session: Path) -> None:
    result = invoke("inspect", "long", "--store", long_session, env={"COLUMNS": "100"})
    assert result.exit_code == 0, result.output
    shown = shown_trials(result.stdout)
    assert len(shown) == SCREENFUL
    assert {7, 20, 30, 45} <= set(shown)
    recent = [n for n in range(50, 0, -1) if n not in (7, 20, 30, 45)][: SCREENFUL - 4]
    assert shown == sorted({7, 20, 30, 45, *recent})
    assert result.stdout.endswith(f"{50 - SCREENFUL} more trials; --all to show them\n")


def test_all_shows_every_trial_and_no_note(long_session: Path) -> None:
    result = invoke("inspect", "long", "--store", long_session, "--all", env={"COLUMNS": "100"})
    assert result.exit_code == 0, result.output
    assert shown_trials(result.stdout) == list(range(1, 51))
    assert "more trial" not in result.stdout


def test_a_short_session_shows_everything_without_a_note(tmp_path: Path) -> None:
    session = Store(tmp_path).create(id="short", pid=None)
    for n in range(SCREENFUL):
        trial(session, metrics(float(n)))
    result = invoke("inspect", "short", "--store", tmp_path)
    assert shown_trials(result.stdout) == list(range(1, SCREENFUL + 1))
    assert "more trial" not in result.stdout
    trial(session, metrics(0.5))
    result = invoke("inspect", "short", "--store", tmp_path)
    assert result.stdout.endswith("1 more trial; --all to show them\n")


def test_more_unfinished_trials_than_a_screen_keeps_the_best_and_the_latest(
    tmp_path: Path,
) -> None:
    session = Store(tmp_path).create(id="busy", pid=None)
    trial(session, metrics(10.0))
    for _ in range(30):
        trial(session, None)
    view = SessionView.load(session)
    chosen = [view.trials[i].n for i in screenful(view)]
    assert chosen == [1, *range(31 - SCREENFUL + 2, 32)]


def test_the_json_detail_keeps_every_trial(long_session: Path) -> None:
    result = invoke("inspect", "long", "--store", long_session, "--json")
    detail = orjson.loads(result.stdout)
    assert [t["n"] for t in detail["trials"]] == list(range(1, 51))


def test_all_is_for_one_session(long_session: Path) -> None:
    result = invoke("inspect", "--store", long_session, "--all")
    assert result.exit_code == 2
    assert "--all shows every trial of one session: give its TARGET" in result.stderr

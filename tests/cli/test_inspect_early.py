"""`inspect` of an empty store answered before click (`cli.early`): the same answer as click's.

Each case runs `sessionstore ARGS` twice as real processes: through `main`
(the console script's path, which may answer early) and through the click
group itself (which never does), and compares exit code, stdout and stderr.
The early answer must be taken where it is meant to (the start-up goal) and
must never change what is printed, on hostile stores included.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
from cli_runner import TWO_PATHS
from hypothesis import given
from hypothesis import strategies as st
from inspect_helpers import torn_trial, trial

from sessionstore.cli.early import _plain_root, empty_listing
from sessionstore.store.session import Store
from sessionstore.store.target import store_root


def _run(
    args: list[str | bytes], env: dict[str, str], cwd: Path, marker: Path
) -> tuple[int, bytes, bytes, str]:
    argv = [os.fsencode(a) for a in (sys.executable, "-c", TWO_PATHS, marker, *args)]
    done = subprocess.run(argv, capture_output=True, env=env, cwd=cwd, timeout=60, check=False)
    return done.returncode, done.stdout, done.stderr, marker.read_text()


def both(
    tmp_path: Path, args: list[str | bytes], env: dict[str, str] | None = None
) -> tuple[tuple[int, bytes, bytes], str]:
    """(exit code, stdout, stderr) of `sessionstore ARGS`, which both paths agree on, and
    which path `main` took (`early` or `click`)."""
    environ = {k: v for k, v in os.environ.items() if k != "SESSIONSTORE_HOME"}
    environ.update({"COLUMNS": "120", "NO_COLOR": "1", **(env or {})})
    *fast, path = _run(args, environ, tmp_path, tmp_path / "marker-main")
    *slow, click_path = _run(args, environ, tmp_path, tmp_path / "marker--click")
    assert click_path == "click"
    assert fast == slow
    code, out, err = fast
    assert isinstance(code, int) and isinstance(out, bytes) and isinstance(err, bytes)
    return (code, out, err), path


def _empty(root: Path) -> Path:
    root.mkdir()
    return root


def _with_session(root: Path) -> Path:
    session = Store(root).create(id="s1", name="one", trials=2, pid=None)
    trial(session, {"benchmark": {"metrics": {"output_tok_per_s": 1.0}}})
    return root


def _torn_and_in_flight(root: Path) -> Path:
    session = Store(root).create(id="s1", pid=None)
    torn_trial(session)
    (session.trials.path / "2").mkdir()  # claimed, no marker yet: in flight
    (root / "s2").mkdir()  # a session directory with no manifest
    return root


def _only_a_temp(root: Path) -> Path:
    root.mkdir()
    (root / ".sstmp-1-00").write_bytes(b"half")  # a writer's temp: no session
    return root


def _foreign(root: Path) -> Path:
    root.mkdir()
    (root / "notes.txt").write_text("not a session")
    os.mkdir(os.fsencode(root) + b"/bad-\xff")
    return root


def _symlink_to_empty(root: Path) -> Path:
    _empty(root.parent / "real-empty")
    root.symlink_to(root.parent / "real-empty")
    return root


def _symlink_to_sessions(root: Path) -> Path:
    _with_session(root.parent / "real-full")
    root.symlink_to(root.parent / "real-full")
    return root


def _dangling(root: Path) -> Path:
    root.symlink_to(root.parent / "nowhere")
    return root


def _a_file(root: Path) -> Path:
    root.write_text("{}")
    return root


def _a_fifo(root: Path) -> Path:
    os.mkfifo(root)
    return root


def _missing(root: Path) -> Path:
    return root


STORES: dict[str, tuple[Callable[[Path], Path], str]] = {
    # name: (builder, the path `main` takes)
    "empty": (_empty, "early"),
    "symlink to an empty directory": (_symlink_to_empty, "early"),
    "a session": (_with_session, "click"),
    "torn and in-flight": (_torn_and_in_flight, "click"),
    "only a writer's temp": (_only_a_temp, "click"),
    "foreign and non-UTF-8 entries": (_foreign, "click"),
    "symlink to a store with sessions": (_symlink_to_sessions, "click"),
    "dangling symlink": (_dangling, "click"),
    "a file": (_a_file, "click"),
    "a FIFO": (_a_fifo, "click"),
    "missing": (_missing, "click"),
}


@pytest.mark.parametrize("name", sorted(STORES))
def test_every_store_gets_clicks_answer(tmp_path: Path, name: str) -> None:
    build, expected = STORES[name]
    root = build(tmp_path / "store")
    outcome, path = both(tmp_path, ["inspect", "--store", str(root)])
    assert path == expected
    if expected == "early":
        assert outcome == (0, f"no sessions in {root}\n".encode(), b"")
    # The other spellings the early answer knows, the same way.
    assert both(tmp_path, ["--store", str(root), "inspect"]) == (outcome, path)
    assert both(tmp_path, ["inspect", f"--store={root}"]) == (outcome, path)
    assert both(tmp_path, ["inspect"], {"SESSIONSTORE_HOME": str(root)}) == (outcome, path)


def test_the_default_store_missing_or_empty_is_answered_early(tmp_path: Path) -> None:
    home = _empty(tmp_path / "home")
    outcome, path = both(tmp_path, ["inspect"], {"HOME": str(home)})
    assert (outcome, path) == ((0, f"no sessions in {home}/.sessionstore\n".encode(), b""), "early")
    _empty(home / ".sessionstore")
    assert both(tmp_path, ["inspect"], {"HOME": str(home)}) == (outcome, path)
    (home / ".sessionstore").rmdir()
    (home / ".sessionstore").symlink_to(home / "nowhere")  # dangling: no store yet
    assert both(tmp_path, ["inspect"], {"HOME": str(home)}) == (outcome, path)


def test_the_commands_store_wins_over_the_groups(tmp_path: Path) -> None:
    empty, full = _empty(tmp_path / "empty"), _with_session(tmp_path / "full")
    outcome, path = both(tmp_path, ["--store", str(full), "inspect", "--store", str(empty)])
    assert (outcome[1], path) == (f"no sessions in {empty}\n".encode(), "early")
    outcome, path = both(tmp_path, ["--store", str(empty), "inspect", "--store", str(full)])
    assert path == "click" and b"s1" in outcome[1]


@pytest.mark.parametrize(
    "spelling",
    [
        "store//",  # pathlib folds the slashes: `store`
        "./store",
        "store/.",
        "./store/../store",
        "~/store",
    ],
)
def test_names_pathlib_rewrites_are_shown_as_pathlib_shows_them(
    tmp_path: Path, spelling: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HOME", str(tmp_path))
    _empty(tmp_path / "store")
    outcome, _ = both(tmp_path, ["inspect", "--store", spelling], {"HOME": str(tmp_path)})
    assert outcome[0] == 0
    assert outcome[1] == f"no sessions in {store_root(spelling)}\n".encode()


def test_hostile_store_names_are_escaped_the_same_way(tmp_path: Path) -> None:
    for raw in (b"ctl-\x1b]0;x\x07", b"line\nbreak", b"bad-\xff", "été".encode()):
        root = tmp_path / os.fsdecode(raw)
        _empty(root)
        outcome, path = both(tmp_path, ["inspect", "--store", os.fsencode(root)])
        assert outcome[0] == 0 and outcome[1].count(b"\n") == 1
        assert b"\x1b" not in outcome[1] and b"\xff" not in outcome[1]
        # Undecodable bytes are shown `\\xff` (ASCII); a printable non-ASCII name is
        # left to click.echo's encoding rules.
        assert path == ("click" if raw == "été".encode() else "early")


@pytest.mark.parametrize(
    "args",
    [
        ["inspect", "--store"],  # a usage error
        ["inspect", "--store", "s3://bucket"],  # an object store: never early
        ["inspect", "--json"],
        ["inspect", "--status", "done"],
        ["inspect", "--color", "bogus"],
        ["inspect", "--store", "-x"],
        ["inspect", "extra"],
        ["--color", "never", "inspect"],
        ["inspect", "--help"],
    ],
)
def test_anything_else_is_clicks_to_answer(tmp_path: Path, args: list[str]) -> None:
    home = _empty(tmp_path / "home")
    assert empty_listing(args) is None
    if "s3://bucket" in args:
        return  # click would reach for a server: that the early path declines is enough
    _, path = both(tmp_path, list(args), {"HOME": str(home)})
    assert path == "click"


_PIECES = st.sampled_from(["a", "b", ".", "..", "", "~", "~nobody", "s3:", "-", " ", "é"])


@given(st.lists(_PIECES, max_size=6), st.booleans())
def test_a_plain_root_is_what_store_root_makes_of_it(pieces: list[str], absolute: bool) -> None:
    value = ("/" if absolute else "") + "/".join(pieces)
    plain = _plain_root(value)
    if plain is not None:  # else click's path decides, as it always did
        assert plain == str(store_root(value))

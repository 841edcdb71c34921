"""A path the caller names that holds a NUL: every public entry point that takes one says
so (`InvalidInput`, naming which path), instead of a bare ValueError from deep in `os`.
An empty one, which pathlib reads as `.`, is refused as the command line refuses it."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

import pytest

from sessionstore import InvalidInput, Mirror, Redactor, Scanner, Session, Store, scan_path

BAD = "a\0b"


def _calls(tmp_path: Path, bad: str = BAD) -> dict[str, Callable[[], object]]:
    store = Store(tmp_path / "store")
    session = store.create()
    scanner = Scanner.from_sources(patterns=True)
    return {
        "store": lambda: Store(bad),
        "session": lambda: Session.open(bad),
        "mirror source": lambda: Mirror(bad, session.path),
        "mirror destination": lambda: Mirror(tmp_path, bad),
        "scan": lambda: scan_path(bad, scanner),
        "file": lambda: Redactor().add_file(bad),
        "workspace": lambda: session.contract(workspace=bad),
    }


@pytest.mark.parametrize(
    "what",
    ["store", "session", "mirror source", "mirror destination", "scan", "file", "workspace"],
)
def test_a_nul_in_a_named_path_is_invalid_input(tmp_path: Path, what: str) -> None:
    call = _calls(tmp_path)[what]
    before = sorted(os.listdir(tmp_path))
    with pytest.raises(InvalidInput, match=rf"^{what}: 'a\\x00b' contains a NUL byte"):
        call()
    assert sorted(os.listdir(tmp_path)) == before


@pytest.mark.parametrize(
    "what", ["store", "session", "mirror source", "mirror destination", "scan", "workspace"]
)
def test_an_empty_directory_path_is_not_the_working_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, what: str
) -> None:
    # Mirror("", dest) mirrored the working directory: an unset variable, read as ".".
    call = _calls(tmp_path, "")[what]
    (tmp_path / "cwd").mkdir()
    monkeypatch.chdir(tmp_path / "cwd")
    before = sorted(os.listdir(tmp_path))
    with pytest.raises(InvalidInput, match=f"^{what}: is empty; write . for the current directory"):
        call()
    assert sorted(os.listdir(tmp_path)) == before and os.listdir(tmp_path / "cwd") == []

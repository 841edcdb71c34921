"""A path the caller names that holds a NUL: every public entry point that takes one says
so (`InvalidInput`, naming which path), instead of a bare ValueError from deep in `os`."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

import pytest

from sessionstore import InvalidInput, Mirror, Redactor, Scanner, Session, Store, scan_path

BAD = "a\0b"


def _calls(tmp_path: Path) -> dict[str, Callable[[], object]]:
    store = Store(tmp_path / "store")
    session = store.create()
    scanner = Scanner.from_sources(patterns=True)
    return {
        "store": lambda: Store(BAD),
        "session": lambda: Session.open(BAD),
        "mirror source": lambda: Mirror(BAD, session.path),
        "mirror destination": lambda: Mirror(tmp_path, BAD),
        "scan": lambda: scan_path(BAD, scanner),
        "file": lambda: Redactor().add_file(BAD),
        "workspace": lambda: session.contract(workspace=BAD),
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

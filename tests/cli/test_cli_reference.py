"""docs/cli.md is the `--help` of every command, current, with an example in each."""

from __future__ import annotations

import re
import runpy
from pathlib import Path

import pytest

from sessionstore.cli import COMMANDS

ROOT = Path(__file__).resolve().parents[2]
DOC = (ROOT / "docs" / "cli.md").read_text(encoding="utf-8")


def test_cli_reference_is_current() -> None:
    script = runpy.run_path(str(ROOT / "scripts" / "cli_reference.py"))
    assert script["render"]() == DOC, "docs/cli.md is stale: run python scripts/cli_reference.py"


@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_every_command_has_a_section_with_an_example(command: str) -> None:
    match = re.search(rf"^## sessionstore {command}\n\n```\n(.*?)```", DOC, re.S | re.M)
    assert match is not None, f"docs/cli.md has no section for {command}"
    assert f"Usage: sessionstore {command}" in match.group(1)
    assert re.search(rf"Examples?:\n\s+sessionstore {command}\b", match.group(1))

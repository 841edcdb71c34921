"""docs/cli.md is the `--help` of every command, current, with an example in each.

The commands are found by walking the click group (`scripts/cli_reference.py`'s
`walk`), so a new command or subgroup fails here until its help has an
example block and docs/cli.md has its section.
"""

from __future__ import annotations

import re
import runpy
from collections.abc import Callable
from pathlib import Path
from typing import Any

import click
import pytest
from cli_runner import invoke

from sessionstore.cli import COMMANDS, cli

ROOT = Path(__file__).resolve().parents[2]
DOC = (ROOT / "docs" / "cli.md").read_text(encoding="utf-8")
SCRIPT = runpy.run_path(str(ROOT / "scripts" / "cli_reference.py"))
WALK: Callable[..., list[tuple[tuple[str, ...], click.Command, Any]]] = SCRIPT["walk"]
PATHS = [path for path, _, _ in WALK(cli, ("sessionstore",), None)]


def test_cli_reference_is_current() -> None:
    assert SCRIPT["render"]() == DOC, "docs/cli.md is stale: run python scripts/cli_reference.py"


def test_the_walk_finds_every_registered_command() -> None:
    assert PATHS[0] == ("sessionstore",)
    assert {path[1] for path in PATHS[1:]} == set(COMMANDS)


def _section(path: tuple[str, ...]) -> str:
    match = re.search(rf"^## {' '.join(path)}\n\n```\n(.*?)```", DOC, re.S | re.M)
    assert match is not None, f"docs/cli.md has no section for {' '.join(path)}"
    return match.group(1)


@pytest.mark.parametrize("path", PATHS, ids=" ".join)
def test_every_command_has_help_with_an_example_and_a_section(path: tuple[str, ...]) -> None:
    args = list(path[1:])
    result = invoke(*args, "--help", terminal_width=SCRIPT["WIDTH"])
    assert result.exit_code == 0, result.output
    assert invoke(*args, "-h").exit_code == 0
    examples = re.search(r"^  Examples?:\n((?:    .*\n)+)", result.stdout, re.M)
    assert examples is not None, f"{' '.join(path)} --help has no Examples block"
    lines = examples.group(1).splitlines()
    # The first command of a line is this one (a line may continue a pipeline after it).
    assert all(re.match(rf"    (\S+=\$\()?{' '.join(path)}\b", line) for line in lines), lines
    section = _section(path)
    assert section.startswith(f"Usage: {' '.join(path)}")
    assert examples.group(1) in section

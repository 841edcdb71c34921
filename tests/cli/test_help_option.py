"""`-h` works on every command, however it was first run in this process."""

from __future__ import annotations

import click
import pytest
from cli_runner import invoke

from sessionstore.cli import COMMANDS, cli


@pytest.mark.parametrize("name", sorted(COMMANDS))
def test_h_survives_the_command_being_run_on_its_own_first(name: str) -> None:
    # click caches a command's help option when first built: run alone, with no group
    # context, it must still get `-h` (tests run subcommands on their own).
    command = cli.get_command(click.Context(cli), name)
    assert command is not None
    assert invoke("-h", command=command).exit_code == 0
    assert invoke(name, "-h").exit_code == 0

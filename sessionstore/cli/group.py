"""The `sessionstore` click group: global options, and subcommands imported on use.

Subcommands live in their own modules and are imported only when invoked, so
`sessionstore mirror --once` does not pay for rich or pydantic it never uses
(interpreter start-up is part of every no-op pass a harness runs).
"""

from __future__ import annotations

import importlib
from typing import Any

import click

from sessionstore import __version__
from sessionstore.cli.common import (
    COLORS,
    CONTEXT_SETTINGS,
    GROUP_COLOR,
    GROUP_STORE,
    StoreParam,
)
from sessionstore.cli.plain import EXIT_INTERRUPTED

# name -> "module:attribute" of the click command; imported on first use.
COMMANDS: dict[str, str] = {
    "new": "sessionstore.cli.new:new",
    "inspect": "sessionstore.cli.inspect:inspect",
    "mirror": "sessionstore.cli.mirror:mirror",
    "contract": "sessionstore.cli.contract:contract",
    "wait": "sessionstore.cli.wait:wait",
    "check": "sessionstore.cli.check:check",
    "schema": "sessionstore.cli.schema:schema",
    "demo": "sessionstore.cli.demo:demo",
    "export": "sessionstore.cli.export:export",
    "finish": "sessionstore.cli.finish:finish",
    "begin": "sessionstore.cli.begin:begin",
    "complete": "sessionstore.cli.complete:complete",
    "rm": "sessionstore.cli.rm:rm",
    "prune": "sessionstore.cli.prune:prune",
    "resume": "sessionstore.cli.resume:resume",
    "scan": "sessionstore.cli.scan:scan",
    "doctor": "sessionstore.cli.doctor:doctor",
    "report": "sessionstore.cli.report:report",
    "view": "sessionstore.cli.view:view",
}


class LazyGroup(click.Group):
    """A click group whose subcommands are imported on demand."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(COMMANDS)

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        target = COMMANDS.get(cmd_name)
        if target is None:
            return None
        module, _, attr = target.partition(":")
        command: click.Command = getattr(importlib.import_module(module), attr)
        return command

    def make_context(self, *args: Any, **kwargs: Any) -> click.Context:
        # The group's own options are parsed (`--store` converted) before `invoke`: a
        # Ctrl-C there exits 130 too, not click's "Aborted!" with 1.
        try:
            return super().make_context(*args, **kwargs)
        except KeyboardInterrupt:
            raise click.exceptions.Exit(EXIT_INTERRUPTED) from None

    def invoke(self, ctx: click.Context) -> Any:
        # Ctrl-C is how people stop a daemon or a wait: exit 130 as shells expect, with
        # no traceback and no click "Aborted!" (which would also exit 1). Commands clean
        # up in their own `finally` blocks before this is reached.
        try:
            return super().invoke(ctx)
        except KeyboardInterrupt:
            raise click.exceptions.Exit(EXIT_INTERRUPTED) from None


def _remember(key: str) -> Any:
    """A callback keeping a group option's value for the subcommand (see cli.common)."""

    def callback(ctx: click.Context, param: click.Parameter, value: Any) -> None:
        if value is not None:
            ctx.meta[key] = value

    return callback


@click.group(cls=LazyGroup, context_settings=CONTEXT_SETTINGS)
@click.version_option(__version__, "--version", prog_name="sessionstore")
@click.option(
    "--store",
    type=StoreParam(),
    expose_value=False,
    callback=_remember(GROUP_STORE),
    help="Store directory or s3://BUCKET/PREFIX for every command (a command's own --store wins).",
)
@click.option(
    "--color",
    type=click.Choice(COLORS),
    expose_value=False,
    callback=_remember(GROUP_COLOR),
    help="Styling of tables: auto (a terminal without NO_COLOR), always, never.",
)
def cli() -> None:
    """Durable records for agent sessions: store, mirror, inspect.

    Options given before the command apply to it as if given after it; the
    command's own --store or --color wins when both are given.

    \b
    Examples:
      sessionstore new --name tune-llama --trials 3
      sessionstore mirror ./workspace ~/.sessionstore/1a2b3c4d --once
      sessionstore inspect 1a2b3c4d --json
      sessionstore --store /data/sessions inspect --status running
    """

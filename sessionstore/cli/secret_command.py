"""A command taking secrets (`mirror`, `scan`) whose usage errors never quote one.

click reports a usage error before the command runs, quoting what was typed:
a value it could not convert (`Invalid value for '--store': s3://Bad_VALUE`)
and extra arguments, which an unquoted `--secret my pass` makes of the
secret's end (`Got unexpected extra argument (pass)`). `HidesSecrets` redacts
that message with the secrets the command line gives (`hide_secrets`).
"""

from __future__ import annotations

import click

from sessionstore.cli.mirror_secrets import hide_secrets, secret_options


class HidesSecrets(click.Command):
    """`click.Command` whose usage errors are redacted with the command line's secrets."""

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        given = list(args)  # click's parser consumes the list it is given
        if secret_options(given):
            ctx.allow_extra_args = True  # else click's error would list them: said below
        try:
            rest = super().parse_args(ctx, args)
        except click.UsageError as exc:
            said = exc.format_message()
            hidden = hide_secrets(said, given)
            if hidden == said:
                raise
            raise click.UsageError(hidden, exc.ctx) from None
        if rest and not ctx.resilient_parsing:
            ctx.allow_extra_args = False
            extra = f"{len(rest)} unexpected extra argument{'s' if len(rest) > 1 else ''}"
            ctx.fail(f"Got {extra} (not shown: quote a --secret VALUE holding a space)")
        return rest

"""The secrets of a `mirror` command line that click could not parse, to keep out of its
usage error.

click reports a usage error before the command runs, so before `cli.mirror_run`
has a redactor; its message quotes what was typed (a value it could not
convert, an argument too many). `hide_secrets` redacts that message with the
secrets the command line gives, read as leniently as they can be: a secret
that would be refused (short, an unset variable, an unreadable file) is still
hidden where it can be, and standard input is never read here.
"""

from __future__ import annotations

from sessionstore.errors import SessionStoreError

__all__ = ["hide_secrets", "secret_options"]

_OPTIONS = ("--secret", "--secret-env", "--secrets-file")


def secret_options(args: list[str]) -> list[tuple[str, str]]:
    """The `(option, value)` of each `--secret`, `--secret-env` and `--secrets-file` of
    `args` (a value after the option or after `=`), in order; none after `--`."""
    found: list[tuple[str, str]] = []
    tokens = iter(args)
    for token in tokens:
        if token == "--":
            break
        name, equals, value = token.partition("=")
        if name not in _OPTIONS:
            continue
        if not equals:
            following = next(tokens, None)
            if following is None:
                break
            value = following
        found.append((name, value))
    return found


def hide_secrets(message: str, args: list[str]) -> str:
    """`message` without the secrets `args` gives (`secret_options`); `message` itself
    when it gives none."""
    given = secret_options(args)
    if not given:
        return message
    from sessionstore.mirror.layout import redact_message
    from sessionstore.redact.redactor import Redactor

    redactor = Redactor()
    for option, value in given:
        try:
            if option == "--secret":
                redactor.add(value, allow_short=True)
            elif option == "--secret-env":
                redactor.add_env(value, allow_short=True)
            elif value != "-":  # standard input: the command's, read once, never here
                redactor.add_file(value, allow_short=True)
        except SessionStoreError:
            continue  # refused (a marker inside it...): the run says why, if it gets there
    return redact_message(redactor, message)

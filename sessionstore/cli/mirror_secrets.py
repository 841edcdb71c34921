"""The secrets of a `mirror` or `scan` command line that click could not parse, to keep
out of its usage error (`cli.secret_command`); and `redact_error`, which keeps the
registered ones out of any error a command (`mirror`, `scan`) prints.

click reports a usage error before the command runs, so before `cli.mirror_run`
has a redactor; its message quotes what was typed (a value it could not
convert, an argument too many). `hide_secrets` redacts that message with the
secrets the command line gives, read as leniently as they can be: a secret
that would be refused (short, an unset variable, an unreadable file) is still
hidden where it can be, and standard input is never read here.
"""

from __future__ import annotations

import os

from sessionstore.errors import SessionStoreError

TYPE_CHECKING = False  # typing's, without importing typing (mypy reads it as such)
if TYPE_CHECKING:
    from sessionstore.redact.redactor import Redactor

__all__ = ["hide_secrets", "redact_error", "secret_options"]

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


def redact_error(exc: Exception, redactor: Redactor) -> None:
    """Redact, in place, the text the CLI prints of `exc` (it escapes it afterwards).

    Errors name the paths, targets and URLs as they were typed (`source
    ./ws-<secret>: does not exist`, a lock held there, a bucket named in an
    `s3://` URL), and the user may have put a secret in any of them.
    """
    from sessionstore.cli.plain import Usage
    from sessionstore.errors import StorageError
    from sessionstore.mirror.layout import redact_message

    def clean(text: str) -> str:
        return redact_message(redactor, text)

    if isinstance(exc, Usage):
        exc.message = clean(exc.message)
    elif isinstance(exc, SessionStoreError):
        exc.args = (clean(str(exc)),)  # what `failure_message` prints ...
        if isinstance(exc, StorageError):
            exc.problem = clean(exc.problem)  # ... or this, for the root itself
    elif isinstance(exc, OSError) and exc.filename is not None:
        exc.filename = clean(os.fsdecode(exc.filename))

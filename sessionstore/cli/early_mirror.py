"""`sessionstore mirror ... --once`, run before click is imported.

A harness runs `mirror --once` after every step, and start-up weighs most in
a small pass: importing click and building the command cost ~23 ms and ~1.6
MiB of peak memory before a file is looked at (issue 16). `mirror_params`
reads only the plainest spellings of a one-pass mirror into the parameters
click would give the command, and answers None for anything else, which
click then parses as ever: the group's options but `--store`, `--help`, the
daemon and its timings, `--single-writer`, `--`, bundled short flags, an
option's value that starts with `-` (unless written `--opt=VALUE`), standard
input (`-`) as a file, a bucket (`s3:`) as the store or destination, a path
click's checks would refuse (an empty one or a URL included), a completion request.
A test compares it with click's parser on generated command lines: wherever
it answers, click parses the same parameters.

`run_early` then runs `cli.mirror_run.run` with them and ends as click
would: a library error is `Error: MESSAGE` (said by click) and exit 1, Ctrl-C
exit 130, a closed stdout exit 1 in silence; a usage problem (raised before
anything is written) hands the command line back to click, which reports it.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

from sessionstore.cli.early import STORE_ENV, leading_store
from sessionstore.cli.plain import EXIT_INTERRUPTED, Usage, failure_message, pacify

TYPE_CHECKING = False  # typing's, without importing typing (mypy reads it as such)
if TYPE_CHECKING:
    from typing import Any

# Option -> parameter, as cli.mirror declares them.
_FLAGS = {
    "--once": "once",
    "--allow-short-secrets": "allow_short_secrets",
    "--no-fsync": "no_fsync",
    "--delete": "delete",
    "-n": "dry_run",
    "--dry-run": "dry_run",
    "-q": "quiet",
    "--quiet": "quiet",
    "-v": "verbose",
    "--verbose": "verbose",
    "--json": "as_json",
}
_MULTIPLE = {  # each may be given again; a value each time
    "--secret": "secret_values",
    "--secret-env": "secret_env",
    "--secrets-file": "secrets_file",
    "--exclude": "exclude",
    "--exclude-from": "exclude_from",
}
_STDIN_OK = ("--secret", "--secret-env", "--exclude")  # where `-` is a value, not stdin
# click's completion request for the `sessionstore` program (click.shell_completion).
_COMPLETE_ENV = "_SESSIONSTORE_COMPLETE"


def mirror_params(args: list[str]) -> dict[str, Any] | None:
    """The `mirror` command's parameters for `sessionstore ARGS`, as click would pass them;
    None unless ARGS is one of the plain one-pass spellings (see the module docstring)."""
    if _COMPLETE_ENV in os.environ:
        return None
    group_store, rest = leading_store(args)
    if rest[:1] != ["mirror"]:
        return None
    params = _defaults()
    positional: list[str] = []
    store: str | None = None
    tokens = iter(rest[1:])
    for token in tokens:
        if not token.startswith("-"):
            positional.append(token)
            continue
        name, equals, value = token.partition("=")
        if name in _FLAGS and not equals:
            params[_FLAGS[name]] = True
            continue
        if name not in _MULTIPLE and name != "--store":
            return None
        if not equals:
            given = next(tokens, None)
            if given is None or (given.startswith("-") and given != "-"):
                return None  # no value (click's error), or one click may read otherwise
            value = given
        if value == "-" and name not in _STDIN_OK:
            return None
        if name == "--store":
            store = value
        else:
            params[_MULTIPLE[name]] += (value,)
    if len(positional) != 2 or not _one_local_pass(params, positional[1], store, group_store):
        return None
    if "" in (positional[1], store, group_store):
        return None  # an empty DST or store: click's usage error (cli.common.EMPTY_PATH)
    store = store if store is not None else group_store
    src, params["dst"] = _click_path(positional[0], dir_okay=True), positional[1]
    files = [_click_path(f, dir_okay=False) for f in params["secrets_file"]]
    if src is None or None in files:
        return None
    params["src"], params["secrets_file"] = src, tuple(files)
    params["store_dir"] = None if store is None else Path(store)
    return params


def run_early(args: list[str]) -> int | None:
    """Run `sessionstore ARGS` here when `mirror_params` reads it: the exit code; None
    when click is to run it instead."""
    try:
        params = mirror_params(args)
        if params is None:
            return None
        # Here, inside the try (`_defaults` imported it first): a Ctrl-C during the import
        # exits 130, as it does in click's group.
        from sessionstore.cli.mirror_run import run

        run(**params)
    except Usage:
        return None  # nothing was written: click reports it, as every usage error
    except KeyboardInterrupt:
        return EXIT_INTERRUPTED
    except BrokenPipeError:
        pacify()
        return 1
    except Exception as exc:
        message = failure_message(exc)
        if message is None:
            raise  # a bug: its traceback, as click shows it
        # Click itself says it (a failed run only pays for the import): its stream and
        # encoding rules, an ASCII or a closed stderr included, are then the same.
        from click import ClickException

        ClickException(message).show()
        return 1
    return 0


def _defaults() -> dict[str, Any]:
    from sessionstore.cli.mirror_run import DEBOUNCE, FULL_EVERY, MAX_WAIT

    params: dict[str, Any] = dict.fromkeys(_FLAGS.values(), False)
    params.update(dict.fromkeys(_MULTIPLE.values(), ()))
    params.update(full_every=FULL_EVERY, debounce=DEBOUNCE, max_wait=MAX_WAIT)
    return params


def _one_local_pass(params: dict[str, Any], dst: str, *stores: str | None) -> bool:
    """Whether the command is one pass into a local destination, -q and -v not both.

    `stores`: the command's and the group's `--store` (None: not given); click
    checks each one given, and with neither the store is $SESSIONSTORE_HOME.
    """
    if not (params["once"] or params["dry_run"]) or (params["quiet"] and params["verbose"]):
        return False
    named = [store for store in stores if store is not None]
    homes = named or [os.environ.get(STORE_ENV, "")]
    return all(_local(text) for text in (dst, *homes))


def _local(text: str) -> bool:
    """Whether `text` names no bucket, as a destination or a store (`mirror_run._destination`
    reads every `s3:` as one)."""
    return text[:3].lower() != "s3:"


def _click_path(value: str, *, dir_okay: bool) -> Path | None:
    """`click.Path(path_type=Path, dir_okay=dir_okay)`'s value for `value`; None where
    click would refuse it (a directory where a file is asked for, unreadable, empty)."""
    if value == "" or value[:5].lower() == "s3://":
        return None  # `cli.common.PathParam` refuses both
    try:
        mode = os.stat(value).st_mode
    except OSError:
        return Path(value)
    except ValueError:  # an embedded NUL: click's own error
        return None
    if (not dir_okay and stat.S_ISDIR(mode)) or not os.access(value, os.R_OK):
        return None
    return Path(value)

"""The one way tests run the `sessionstore` command, in-process or as a real process.

- `invoke(ARGS)`: in-process through click's `CliRunner` (fast; monkeypatches
  apply). The exit code, stdout and stderr come back separately, plus `output`
  (both streams interleaved as written) and any uncaught exception.
- `run(ARGS)`: `python -m sessionstore ARGS` as a real process, to completion,
  bounded by `timeout` (a hang guard, never a timed assert: on expiry the child
  is killed and `subprocess.TimeoutExpired` fails the test). Text by default;
  `text=False` returns the raw bytes (text mode turns every `\\r` into `\\n`).
- `popen(ARGS)`: the same process left running, for tests that signal or race
  it; `finish(proc)` collects it, bounded the same way, `reap(proc)` ends it in
  a `finally`, and `wait_for` polls for what it does meanwhile, bounded too.

`environ(NAME=VALUE, ...)` is this process's environment with overrides, for
`env=`: a child given `env` gets exactly that environment.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Final, Literal, overload

import click
from click.testing import CliRunner

from sessionstore.cli import cli

# `python -m sessionstore` with this interpreter: the package under test, venv or not.
SESSIONSTORE: Final[tuple[str, ...]] = (sys.executable, "-m", "sessionstore")
TIMEOUT: Final = 60.0

# `python -c TWO_PATHS MARKER ARGS` runs `sessionstore ARGS` through `main`, which may
# answer before click is imported (`cli.early`, `cli.early_mirror`), or through the click
# group itself when MARKER ends in `click`; at exit MARKER holds which path ran: `click`
# (the group), `early` (click never imported) or `early+said` (click imported only to say
# an error, as it says them). For tests that compare the two paths.
TWO_PATHS: Final = """
import atexit, sys
marker = sys.argv[1]
def _note():
    with open(marker, "w") as out:
        if "sessionstore.cli.group" in sys.modules:
            out.write("click")
        else:
            out.write("early+said" if "click" in sys.modules else "early")
atexit.register(_note)
args = sys.argv[2:]
if marker.endswith("click"):
    from sessionstore.cli.group import cli
    cli.main(args=args, prog_name="sessionstore")
else:
    from sessionstore.cli import main
    sys.exit(main(args))
"""

Arg = str | os.PathLike[str]
Stream = int | IO[bytes] | IO[str] | None


def environ(**overrides: str) -> dict[str, str]:
    """This process's environment with `overrides` on top."""
    return {**os.environ, **overrides}


@dataclass(frozen=True)
class Invoked:
    """What an in-process invocation did."""

    exit_code: int
    stdout: str
    stderr: str
    output: str  # stdout and stderr interleaved, as a terminal would show them
    exception: BaseException | None  # uncaught, or the SystemExit that ended the command

    @property
    def outcome(self) -> tuple[int, str, str]:
        """(exit code, stdout, stderr), to compare at once."""
        return self.exit_code, self.stdout, self.stderr


def invoke(
    *args: Arg,
    command: click.Command = cli,
    env: Mapping[str, str | None] | None = None,
    input: str | bytes | None = None,
    terminal_width: int | None = None,
) -> Invoked:
    """`sessionstore ARGS` in this process (or ARGS of `command`, a subcommand on its own).

    `env` sets (None: unsets) variables for the invocation only.
    """
    argv = [os.fspath(a) for a in args]
    runner = CliRunner()
    if terminal_width is None:
        result = runner.invoke(command, argv, input, env)
    else:
        result = runner.invoke(command, argv, input, env, terminal_width=terminal_width)
    return Invoked(result.exit_code, result.stdout, result.stderr, result.output, result.exception)


@overload
def run(
    *args: Arg,
    env: Mapping[str, str] | None = ...,
    cwd: Path | None = ...,
    timeout: float = ...,
    input: str | None = ...,
    preexec_fn: Callable[[], object] | None = ...,
    text: Literal[True] = ...,
) -> subprocess.CompletedProcess[str]: ...


@overload
def run(
    *args: Arg,
    env: Mapping[str, str] | None = ...,
    cwd: Path | None = ...,
    timeout: float = ...,
    input: bytes | None = ...,
    preexec_fn: Callable[[], object] | None = ...,
    text: Literal[False],
) -> subprocess.CompletedProcess[bytes]: ...


def run(
    *args: Arg,
    env: Mapping[str, str] | None = None,
    cwd: Path | None = None,
    timeout: float = TIMEOUT,
    input: str | bytes | None = None,
    preexec_fn: Callable[[], object] | None = None,
    text: bool = True,
) -> subprocess.CompletedProcess[str] | subprocess.CompletedProcess[bytes]:
    """`python -m sessionstore ARGS` to completion; never raises on a non-zero exit."""
    return subprocess.run(
        [*SESSIONSTORE, *(os.fspath(a) for a in args)],
        input=input,
        capture_output=True,
        text=text,
        timeout=timeout,
        check=False,
        env=env,
        cwd=cwd,
        preexec_fn=preexec_fn,
    )


@overload
def popen(
    *args: Arg,
    env: Mapping[str, str] | None = ...,
    cwd: Path | None = ...,
    stdout: Stream = ...,
    stderr: Stream = ...,
    text: Literal[False] = ...,
) -> subprocess.Popen[bytes]: ...


@overload
def popen(
    *args: Arg,
    env: Mapping[str, str] | None = ...,
    cwd: Path | None = ...,
    stdout: Stream = ...,
    stderr: Stream = ...,
    text: Literal[True],
) -> subprocess.Popen[str]: ...


def popen(
    *args: Arg,
    env: Mapping[str, str] | None = None,
    cwd: Path | None = None,
    stdout: Stream = subprocess.PIPE,
    stderr: Stream = subprocess.PIPE,
    text: bool = False,
) -> subprocess.Popen[bytes] | subprocess.Popen[str]:
    """`python -m sessionstore ARGS`, started and left running (both pipes by default).

    The caller ends it: `finish(proc)`, or its own signal then a bounded wait, and
    a `finally` that `reap`s it, so a failing test never leaves a child behind.
    """
    return subprocess.Popen(
        [*SESSIONSTORE, *(os.fspath(a) for a in args)],
        stdout=stdout,
        stderr=stderr,
        text=text,
        env=env,
        cwd=cwd,
    )


def finish(proc: subprocess.Popen[bytes], timeout: float = TIMEOUT) -> tuple[int, str, str]:
    """Wait for `proc` (started by `popen`); (exit status, stdout, stderr) decoded.

    Past `timeout` the process is killed and reaped, and TimeoutExpired fails the test.
    """
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.communicate()
        raise
    return proc.returncode, out.decode(), err.decode()


def reap(proc: subprocess.Popen[bytes] | subprocess.Popen[str]) -> None:
    """For a `finally`: kill `proc` if it still runs, reap it and close its pipes.

    A pipe left open when a test fails early is a ResourceWarning at the end of
    the run, which fails it a second time, far from the cause.
    """
    if proc.poll() is None:
        proc.kill()
    proc.communicate(timeout=TIMEOUT)


def wait_for(condition: Callable[[], bool], what: str, timeout: float = 60.0) -> None:
    """Poll `condition` until true (bounded: a hang guard, not a timed assert)."""
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.02)

"""Shell completion through click's real protocol (`_SESSIONSTORE_COMPLETE=...`), as the
scripts bash, zsh and fish load run it on every TAB; and bash itself running its script."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from cli_runner import SESSIONSTORE, environ

from sessionstore.store.session import Store


@pytest.fixture
def store(tmp_path: Path) -> Path:
    root = tmp_path / "store"
    for id in ("abc1", "abd2", "xyz9"):
        Store(root).create(id=id, pid=None)
    (root / "not-a-session.txt").write_text("")
    return root


def complete(shell: str, words: str, cword: str, **env: str) -> list[str]:
    """What `sessionstore` answers a `shell` asking to complete `words`."""
    done = subprocess.run(
        SESSIONSTORE,
        env=environ(
            _SESSIONSTORE_COMPLETE=f"{shell}_complete", COMP_WORDS=words, COMP_CWORD=cword, **env
        ),
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert (done.returncode, done.stderr) == (0, "")
    return done.stdout.splitlines()


def test_bash_completes_commands_options_and_choices(store: Path) -> None:
    assert complete("bash", "sessionstore ins", "1") == ["plain,inspect"]
    assert complete("bash", "sessionstore inspect --so", "2") == ["plain,--sort"]
    assert complete("bash", "sessionstore inspect --sort ", "3") == [
        "plain,created",
        "plain,name",
        "plain,best",
    ]
    assert complete("bash", "sessionstore --col", "1") == ["plain,--color"]


def test_bash_completes_session_ids_of_the_named_store(store: Path) -> None:
    words = f"sessionstore inspect --store {store} ab"
    assert complete("bash", words, "4") == ["plain,abc1", "plain,abd2"]
    # Before the command, and from the environment; every id when nothing is typed yet.
    assert complete("bash", f"sessionstore --store {store} rm x", "4") == ["plain,xyz9"]
    everything = complete("bash", "sessionstore wait ", "2", SESSIONSTORE_HOME=str(store))
    assert everything == ["plain,abc1", "plain,abd2", "plain,xyz9"]
    # The command's own --store wins over the group's.
    other = store.parent / "other"
    Store(other).create(id="abz3", pid=None)
    assert complete("bash", f"sessionstore --store {store} finish --store {other} ab", "6") == [
        "plain,abz3"
    ]


def test_a_target_that_starts_no_id_completes_as_a_path(store: Path) -> None:
    assert complete("bash", f"sessionstore inspect --store {store} ./wo", "4") == ["dir,./wo"]
    assert complete("bash", f"sessionstore scan --store {store} ./lo", "4") == ["file,./lo"]
    assert complete("bash", "sessionstore inspect --store /nonexistent ab", "4") == ["dir,ab"]


def test_zsh_and_fish_complete_ids_too(store: Path) -> None:
    assert complete("zsh", f"sessionstore doctor --store {store} ab", "4") == [
        "plain",
        "abc1",
        "_",
        "plain",
        "abd2",
        "_",
    ]
    assert complete("fish", f"sessionstore resume --store {store} ab", "ab") == [
        "plain,abc1",
        "plain,abd2",
    ]


@pytest.mark.parametrize("shell", ["bash", "zsh", "fish"])
def test_each_shell_gets_its_script(shell: str) -> None:
    done = subprocess.run(
        SESSIONSTORE,
        env=environ(_SESSIONSTORE_COMPLETE=f"{shell}_source"),
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0
    assert f"_SESSIONSTORE_COMPLETE={shell}_complete" in done.stdout


def test_bash_runs_its_script_and_fills_compreply(store: Path, tmp_path: Path) -> None:
    bash = shutil.which("bash")
    assert bash is not None
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    wrapper = bin_dir / "sessionstore"
    wrapper.write_text(f'#!/bin/sh\nexec {sys.executable} -m sessionstore "$@"\n')
    wrapper.chmod(0o755)
    script = subprocess.run(
        [str(wrapper)],
        env=environ(_SESSIONSTORE_COMPLETE="bash_source"),
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    ).stdout
    program = (
        f"{script}\n"
        f"COMP_WORDS=(sessionstore inspect --store {store} ab); COMP_CWORD=4\n"
        "_sessionstore_completion sessionstore\n"
        'printf "%s\\n" "${COMPREPLY[@]}"\n'
    )
    env = environ(PATH=f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    done = subprocess.run(
        [bash, "--norc", "--noprofile", "-c", program],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert (done.returncode, done.stdout.split()) == (0, ["abc1", "abd2"]), done.stderr


def test_store_completes_as_a_directory(store: Path) -> None:
    typed = str(store)[:-2]
    assert complete("bash", f"sessionstore inspect --store {typed}", "3") == [f"dir,{typed}"]
    assert complete("bash", f"sessionstore --store {typed}", "2") == [f"dir,{typed}"]
    assert complete("zsh", f"sessionstore prune --store {typed}", "3") == ["dir", typed, "_"]

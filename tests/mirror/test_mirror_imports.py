"""What a no-op `mirror --once` pass imports: none of the heavy modules.

A harness runs the pass after every step of its agent, and the pass's start-up
was most of its cost (issue 16): orjson and what its init imports (dataclasses,
inspect, uuid, datetime), typing, click, rich, pydantic. The change cache's
groups unpack with the standard library, the pass's own classes are plain,
the protocols are for mypy only, and the rest is imported on use (a marker to
check, JSON to print, a pool to fsync on). `--exclude` imports pathspec, and a
secret the redactor; those pay for what they use. Real processes: at exit each
one lists what it imported.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from mirror_helpers import settle, write

HEAVY = {"orjson", "dataclasses", "inspect", "uuid", "datetime", "typing", "click", "rich"}
HEAVY |= {"pydantic", "sessionstore._json", "sessionstore._orjson", "sessionstore.cli.group"}

# `python -c LAUNCH LIST ARGS...` runs `sessionstore ARGS` as the console script does and,
# at exit, writes the names of the modules it imported to LIST. What the interpreter had
# loaded before the pass began is left out: a site's `.pth` file may import typing (a CA
# injector importing certifi does, on the CI machine), and that is the site's cost, not
# the pass's.
LAUNCH = """
import atexit, sys
listing, args = sys.argv[1], sys.argv[2:]
before = set(sys.modules)
def note():
    with open(listing, "w") as out:
        out.write("\\n".join(sorted(set(sys.modules) - before)))
atexit.register(note)
sys.argv = ["sessionstore", *args]
from sessionstore.cli import main
sys.exit(main())
"""


def imported(tmp_path: Path, *args: str) -> set[str]:
    listing = tmp_path / "imported.txt"
    done = subprocess.run(
        [sys.executable, "-c", LAUNCH, str(listing), *args],
        capture_output=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return set(listing.read_text().split())


@pytest.mark.parametrize(
    "options",
    [[], ["-q"], ["--delete"], ["--no-fsync"], ["-v"]],
    ids=lambda options: " ".join(options) or "plain",
)
def test_a_no_op_pass_imports_none_of_the_heavy_modules(tmp_path: Path, options: list[str]) -> None:
    src, dst = tmp_path / "src", tmp_path / "dst"
    write(src / "notes.md", b"# notes\n")
    write(src / "trials" / "1" / "config.yaml", b"lr: 0.1\n")
    write(src / "trials" / "1" / "trial.json", b'{"failed": false}\n')  # a marker
    for i in range(40):
        write(src / "logs" / f"d{i % 4}" / f"step{i}.log", b"step\n" * i)
    settle()
    first = imported(tmp_path, "mirror", str(src), str(dst), "--once")
    assert "sessionstore.mirror.cache" in first  # the launcher lists what it should
    assert (dst / "trials" / "1" / "trial.json").exists()
    again = imported(tmp_path, "mirror", str(src), str(dst), "--once", *options)
    assert "sessionstore.mirror.cache_group" in again
    assert sorted(HEAVY & again) == []

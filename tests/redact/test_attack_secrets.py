"""Secrets files shaped to hurt the reader: refused at once, never a hang, never a value shown.

python-dotenv strips an inline comment with `re.sub(r"\\s+#.*", ...)`, which
takes time quadratic in a run of blanks that no `#` follows: one line of a
megabyte of spaces would stall `mirror --secrets-file` for most of an hour
(and every program loading the file with python-dotenv with it). Such a run
is refused, naming the file and line, before any parsing.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from cli_runner import run

from sessionstore.errors import InvalidInput
from sessionstore.redact.redactor import Redactor

VALUE = b"fake-secret-value-42"


@pytest.mark.parametrize(
    "blanks",
    [
        pytest.param(b" ", id="spaces"),
        pytest.param(b"\t", id="tabs"),
        pytest.param(b"\xe3\x80\x80", id="ideographic-spaces"),
    ],
)
def test_a_megabyte_run_of_blanks_is_refused_at_once_naming_the_line(
    tmp_path: Path, blanks: bytes
) -> None:
    secrets = tmp_path / "secrets.env"
    secrets.write_bytes(b"GOOD=" + VALUE + b"\nPAD=x" + blanks * (1 << 20) + b"y\n")
    src, dst = tmp_path / "ws", tmp_path / "dst"
    src.mkdir()
    (src / "a.txt").write_bytes(b"hello\n")
    args = (src, dst, "--once", "--secrets-file", secrets)
    result = run("mirror", *args, timeout=30, text=False)
    assert result.returncode == 1, result.stderr
    assert f"{secrets}:2:".encode() in result.stderr
    assert len(result.stderr.splitlines()) == 1
    assert VALUE not in result.stdout + result.stderr
    assert not (dst / "a.txt").exists()  # nothing copied unredacted


def test_runs_up_to_the_limit_still_register(tmp_path: Path) -> None:
    from sessionstore.redact.secrets_file import MAX_BLANK_RUN

    secrets = tmp_path / "secrets.env"
    secrets.write_bytes(b"A=" + VALUE + b" " * MAX_BLANK_RUN + b"# comment\n")
    r = Redactor()
    r.add_file(secrets)
    assert r.redact(b"x " + VALUE + b" y") == b"x REDACTED y"
    secrets.write_bytes(b"A=" + VALUE + b" " * (MAX_BLANK_RUN + 1) + b"# comment\n")
    with pytest.raises(InvalidInput, match=r"secrets\.env:1: "):
        Redactor().add_file(secrets)

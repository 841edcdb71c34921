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
    run_of = (1 << 20) // len(blanks) - 64  # the file just under SECRETS_FILE_MAX (1 MiB)
    secrets.write_bytes(b"GOOD=" + VALUE + b"\nPAD=x" + blanks * run_of + b"y\n")
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


def test_secrets_past_the_bounds_are_refused_at_once_naming_the_first_past(tmp_path: Path) -> None:
    # The matcher is built from ~12 forms of each secret: 50,000 secrets took 29 s and
    # 0.9 GiB, one secret of a megabyte 433 MiB. Past the bounds nothing is registered.
    from sessionstore.errors import SecretRefused
    from sessionstore.redact.redactor import MAX_SECRETS, MAX_SECRETS_BYTES

    many = tmp_path / "many.env"
    many.write_bytes(b"".join(b"K%d=fake-secret-%08d\n" % (i, i) for i in range(MAX_SECRETS + 9)))
    src, dst = tmp_path / "ws", tmp_path / "dst"
    src.mkdir()
    (src / "a.txt").write_bytes(b"fake-secret-00000001\n")
    result = run("mirror", src, dst, "--once", "--secrets-file", many, timeout=60)
    assert result.returncode == 1
    assert result.stderr == (
        f"Error: {many}:{MAX_SECRETS + 1}: would make more than {MAX_SECRETS} secrets "
        "(the most one redactor holds)\n"
    )
    assert not (dst / "a.txt").exists()
    with pytest.raises(SecretRefused, match=rf"many\.env:{MAX_SECRETS + 1}: "):
        Redactor().add_file(many)

    r = Redactor()
    half = "h" * (MAX_SECRETS_BYTES // 2)
    r.add(half)
    r.add(half)  # the same secret again takes nothing more
    before = r.needles()
    with pytest.raises(
        SecretRefused, match=f"literal #3: would make more than {MAX_SECRETS_BYTES}"
    ):
        r.add("i" * (MAX_SECRETS_BYTES // 2 + 1))
    assert r.needles() == before
    assert r.redact(("i" * 9).encode()) == b"iiiiiiiii"


def test_scan_refuses_past_the_bounds_before_the_forms_of_the_rest(tmp_path: Path) -> None:
    # As the redactor does: at the first value past them, before parsing or expanding the
    # rest (a megabyte of values took scan 13 s and 230 MiB, then the same refusal). A
    # short value after it would be refused first by what went through every line.
    from sessionstore.redact.redactor import MAX_SECRETS

    many = tmp_path / "many.env"
    lines = [b"K%d=fake-secret-%08d\n" % (i, i) for i in range(MAX_SECRETS + 1)]
    many.write_bytes(b"".join(lines) + b"PIN=4711\n")
    (tmp_path / "ws").mkdir()
    result = run("scan", tmp_path / "ws", "--secrets-file", many, timeout=60)
    assert result.returncode == 1
    assert result.stderr == (
        f"Error: {many}:{MAX_SECRETS + 1}: would make more than {MAX_SECRETS} secrets "
        "(the most one redactor holds)\n"
    )

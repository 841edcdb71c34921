"""Secrets files are read as python-dotenv reads them, plus every other plausible reading."""

from __future__ import annotations

import codecs
import os
import shutil
import subprocess
from pathlib import Path

import pytest
from cli_runner import run
from dotenv import dotenv_values
from hypothesis import given
from hypothesis import strategies as st
from mirror_helpers import settle, write

from sessionstore.errors import InvalidInput, SecretRefused
from sessionstore.redact.redactor import Redactor

pytestmark = pytest.mark.timeout(120)

BOM = b"\xef\xbb\xbf"
# Every value is obviously fake, and lives only in files under tmp_path.
FILE = (
    BOM + b"FIRST_TOKEN=fake-bom-first-value\n"
    b"TAB_TOKEN=fake-tab-value-1\t# rotated monthly\r\n"
    b"fake@pw=not-real=x99\n"
    b"export EXPORTED='fake-single-quoted'\n"
    b'ESCAPED="fake-it\\\'s-\\"escaped\\""\n'
    b"fake-raw-line-secret\n"
    b"  # an indented comment\n"
    b"\n"
    b"fake-raw after#hash-1\n"
)


def registered(data: bytes, tmp_path: Path, name: str = "s.env") -> Redactor:
    path = write(tmp_path / name, data)
    r = Redactor()
    r.add_file(path)
    return r


def hidden(r: Redactor, value: bytes) -> bool:
    """`value` is redacted as a whole wherever it stands alone."""
    return r.redact(b"<" + value + b">") == b"<REDACTED>"


@pytest.mark.parametrize(
    "value",
    [
        pytest.param(b"fake-bom-first-value", id="first line after a BOM"),
        pytest.param(b"fake-tab-value-1", id="value before a tab comment"),
        pytest.param(b"fake-tab-value-1\t# rotated monthly", id="value with its comment"),
        pytest.param(b"fake@pw=not-real=x99", id="raw password with ="),
        pytest.param(b"not-real=x99", id="dotenv value of the raw password"),
        pytest.param(b"fake-single-quoted", id="export, single quotes"),
        pytest.param(b'fake-it\'s-"escaped"', id="double-quote escapes decoded"),
        pytest.param(b'fake-it\\\'s-\\"escaped\\"', id="escapes as written"),
        pytest.param(b"fake-raw-line-secret", id="raw line"),
        pytest.param(b"fake-raw after#hash-1", id="raw line with spaces and #"),
    ],
)
def test_every_reading_of_a_line_is_registered(value: bytes, tmp_path: Path) -> None:
    assert hidden(registered(FILE, tmp_path), value)


def test_comments_blank_lines_and_names_are_not_secrets(tmp_path: Path) -> None:
    r = registered(FILE, tmp_path)
    text = b"an indented comment; rotated monthly; FIRST_TOKEN; TAB_TOKEN; EXPORTED\n"
    assert r.redact(text) == text


def test_every_value_dotenv_loads_is_registered_on_this_file(tmp_path: Path) -> None:
    path = write(tmp_path / "s.env", FILE)
    r = Redactor()
    r.add_file(path)
    loaded = dotenv_values(path, interpolate=False)
    assert loaded["FIRST_TOKEN"] == "fake-bom-first-value"
    assert loaded["TAB_TOKEN"] == "fake-tab-value-1"
    for value in loaded.values():
        assert value is None or hidden(r, value.encode())


def test_a_line_that_is_not_utf8_registers_its_exact_bytes(tmp_path: Path) -> None:
    r = registered(b"LATIN1_PASS=fake-caf\xe9-latin1\nfake-raw-\xff\xfe-bytes\n", tmp_path)
    assert hidden(r, b"fake-caf\xe9-latin1")
    assert hidden(r, b"fake-raw-\xff\xfe-bytes")


@pytest.mark.parametrize("encoding", ["utf-16-le", "utf-16-be", "utf-32-le", "utf-32-be"])
def test_a_utf16_or_utf32_file_with_its_byte_order_mark_registers_its_text(
    encoding: str, tmp_path: Path
) -> None:
    # What Windows PowerShell's `>` writes. Read as UTF-8 every value was its characters
    # with NULs between them, and a log holding the secret was mirrored as it was.
    text = "WIDE_TOKEN=fake-wide-value-1\r\nfake-wide-raw-line\r\n"
    r = registered(("\ufeff" + text).encode(encoding), tmp_path)  # the mark first
    assert hidden(r, b"fake-wide-value-1") and hidden(r, b"fake-wide-raw-line")


def test_a_byte_order_mark_the_rest_does_not_follow_is_refused(tmp_path: Path) -> None:
    path = write(tmp_path / "s.env", codecs.BOM_UTF16_LE + b"W\x00I\x00D")  # odd length
    r = Redactor()
    with pytest.raises(InvalidInput, match="utf-16-le byte order mark but is not utf-16-le"):
        r.add_file(path)
    assert not r


def test_a_stray_quote_hides_no_later_assignment(tmp_path: Path) -> None:
    # dotenv reads `"fake-unclosed` up to the next `"`, three lines down.
    r = registered(
        b'OPEN="fake-unclosed\nAFTER=fake-after-stray-quote\nLATER="fake-later-quoted"\n',
        tmp_path,
    )
    for value in (b'"fake-unclosed', b"fake-after-stray-quote", b"fake-later-quoted"):
        assert hidden(r, value), value


@pytest.mark.skipif(shutil.which("sh") is None, reason="no POSIX shell to source the file")
def test_a_value_as_a_shell_reads_it_is_registered(tmp_path: Path) -> None:
    # Escapes dotenv keeps and quotes it does not join: a program started by a shell
    # that sourced the file holds (and may log) what the shell made of each value.
    lines = {
        "ESCAPED": r"fake\@pw\ with-space",
        "DOLLARS": r'"fake-pa\$\$word"',
        "JOINED": """'fake-'"joined"-word;""",
    }
    data = "".join(f"{name}={value}\n" for name, value in lines.items()).encode()
    r = registered(data, tmp_path)
    for name in lines:
        shell = subprocess.run(
            ["sh", "-c", f'. ./s.env && printf %s "${name}"'],
            cwd=tmp_path,
            capture_output=True,
            check=True,
        ).stdout
        assert shell in (b"fake@pw with-space", b"fake-pa$$word", b"fake-joined-word")
        assert hidden(r, shell), shell


def test_a_multi_line_value_registers_and_its_short_lines_are_not_refused(
    tmp_path: Path,
) -> None:
    r = registered(b'KEY="fake-pem-first-line\nfake-pem-body-0123\nAb==\n-----END"\n', tmp_path)
    whole = b"fake-pem-first-line\nfake-pem-body-0123\nAb==\n-----END"
    assert r.redact(whole) == b"REDACTED\n\n\n"
    assert hidden(r, b"fake-pem-body-0123")
    assert r.redact(b"Ab==") == b"Ab=="


def test_an_empty_value_registers_the_line_as_base64_padding(tmp_path: Path) -> None:
    assert hidden(registered(b"ZmFrZS1iYXNlNjQtdmFsdWU=\n", tmp_path), b"ZmFrZS1iYXNlNjQtdmFsdWU=")


@pytest.mark.parametrize("newline", [b"\n", b"\r\n", b"\r"])
def test_a_short_value_names_its_line_registers_nothing_and_hides_the_value(
    newline: bytes, tmp_path: Path
) -> None:
    lines = [BOM + b"LONG=fake-long-enough-1", b"bad line 'unclosed", b"# note", b"PIN=4711"]
    path = write(tmp_path / "s.env", newline.join(lines) + newline)
    r = Redactor()
    with pytest.raises(SecretRefused) as info:
        r.add_file(path)
    assert str(info.value).startswith(f"{path}:4: value is shorter than 8 bytes")
    assert "4711" not in str(info.value) and len(str(info.value).splitlines()) == 1
    assert not r


# Lines as people write them: names odd and plain, export, quotes, escapes,
# inline comments, `=` and `#` inside values, raw secrets, blank lines.
_chars = st.sampled_from("abcxyz0189-_.@=#'\"\\ \t")
_names = st.sampled_from(["API_KEY", "db.password", "p@ss", "x", "'quoted key'", "export"])
_values = st.text(_chars, max_size=24)


@st.composite
def _line(draw: st.DrawFn) -> str:
    kind = draw(st.sampled_from(["assign", "single", "double", "raw", "comment", "blank"]))
    value = draw(_values)
    if kind == "raw":
        return value
    if kind == "comment":
        return "#" + value
    if kind == "blank":
        return draw(st.sampled_from(["", " ", "\t"]))
    if kind in ("single", "double"):
        quote = "'" if kind == "single" else '"'
        value = quote + value + draw(st.sampled_from(["", "\n", "\\n"])) + draw(_values) + quote
    export = draw(st.sampled_from(["", "export "]))
    spaces = draw(st.sampled_from(["", " "]))
    comment = draw(st.sampled_from(["", " # note", "\t# note", "#x"]))
    return f"{export}{draw(_names)}{spaces}={spaces}{value}{comment}"


@given(
    lines=st.lists(_line(), max_size=8),
    newline=st.sampled_from(["\n", "\r\n"]),
    bom=st.booleans(),
)
def test_law_every_value_dotenv_loads_is_redacted(
    lines: list[str], newline: str, bom: bool, tmp_path_factory: pytest.TempPathFactory
) -> None:
    path = tmp_path_factory.mktemp("law") / "s.env"
    path.write_bytes((BOM if bom else b"") + newline.join(lines).encode())
    r = Redactor()
    r.add_file(path, allow_short=True)  # short values are a separate rule
    for value in dotenv_values(path, interpolate=False).values():
        raw = (value or "").encode()
        if len(raw.strip()) >= 8:
            assert raw.strip() not in r.redact(b"<" + raw + b">"), value


def test_mirror_with_the_secrets_file_leaks_no_reading(tmp_path: Path) -> None:
    secrets = write(tmp_path / "secrets.env", FILE)
    src, dst = tmp_path / "ws", tmp_path / "dst"
    write(
        src / "trials" / "1" / "run.log",
        b"first fake-bom-first-value\n"
        b"tab fake-tab-value-1\n"
        b"tab+comment fake-tab-value-1\t# rotated monthly\n"
        b"raw fake@pw=not-real=x99\n"
        b"tail not-real=x99\n",
    )
    write(src / "notes-fake-bom-first-value.txt", b"named after a secret\n")
    settle()
    result = run("mirror", src, dst, "--once", "--secrets-file", secrets, text=False)
    assert result.returncode == 0, result.stderr
    assert (dst / "trials" / "1" / "run.log").read_bytes() == (
        b"first REDACTED\ntab REDACTED\ntab+comment REDACTED\nraw REDACTED\ntail REDACTED\n"
    )
    assert (dst / "notes-REDACTED.txt").is_file()
    everything = result.stdout + result.stderr
    for dirpath, dirnames, filenames in os.walk(dst):
        everything += os.fsencode(dirpath) + b"".join(map(os.fsencode, dirnames + filenames))
        for name in filenames:
            everything += Path(dirpath, name).read_bytes()
    for value in (b"fake-bom-first-value", b"fake-tab-value-1", b"not-real=x99", b"fake@pw"):
        assert value not in everything, value


def test_mirror_with_a_utf16_secrets_file_redacts(tmp_path: Path) -> None:
    secrets = write(
        tmp_path / "secrets.env",
        codecs.BOM_UTF16_LE + "TOKEN=fake-wide-mirrored\r\n".encode("utf-16-le"),
    )
    src, dst = tmp_path / "ws", tmp_path / "dst"
    write(src / "run.log", b"token fake-wide-mirrored\n")
    settle()
    result = run("mirror", src, dst, "--once", "--secrets-file", secrets, text=False)
    assert result.returncode == 0, result.stderr
    assert (dst / "run.log").read_bytes() == b"token REDACTED\n"

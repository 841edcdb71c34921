"""`sessionstore mirror`: exit codes, --json, the stderr summary, secrets never printed."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import orjson
import pytest
from cli_runner import SESSIONSTORE, invoke, run
from mirror_helpers import settle, tree, write

pytestmark = pytest.mark.timeout(60)

SECRET = "ghp_SuperSecretToken0123456789"


@pytest.fixture
def src(tmp_path: Path) -> Path:
    write(tmp_path / "src" / "trials" / "1" / "log.txt", f"token {SECRET}\n".encode())
    write(tmp_path / "src" / "trials" / "1" / "trial.json", b"{}")
    write(tmp_path / "src" / "trials" / "2" / "trial.json", b"{torn")
    (tmp_path / "src" / "link").symlink_to("/etc/hostname")
    settle()
    return tmp_path / "src"


def secrets_file(tmp: Path) -> Path:
    return write(tmp / "s.env", f"T={SECRET}\n".encode())


def test_json_report_and_summary(src: Path, tmp_path: Path) -> None:
    args: list[str | Path] = ["mirror", src, tmp_path / "dst", "--once", "--json", "--no-fsync"]
    code, out, err = invoke(*args).outcome
    assert code == 0
    doc = orjson.loads(out)
    assert {"copied", "unchanged", "unstable", "held_back", "skipped", "errors"} <= doc.keys()
    assert doc["copied"] == ["trials/1/log.txt", "trials/1/trial.json"]
    assert err.splitlines() == [
        "mirror: 2 copied, 0 unchanged, 0 unstable, 1 held back, 1 skipped, 0 errors",
        "  held back: trials/2/trial.json: not a JSON object: "
        "unexpected character, expected a string key at line 1 column 2",
        "  skipped: link: symlink",
    ]


def test_missing_source_exits_1_and_creates_nothing(tmp_path: Path) -> None:
    code, _, err = invoke("mirror", tmp_path / "nope", tmp_path / "dst", "--once").outcome
    assert (code, err) == (1, f"Error: source {tmp_path}/nope: does not exist\n")
    assert not (tmp_path / "dst").exists()


@pytest.mark.parametrize(
    "how",
    [
        pytest.param(lambda tmp: (["--secret", SECRET], None), id="value"),
        pytest.param(lambda tmp: (["--secret-env", "TOKEN"], {"TOKEN": SECRET}), id="env"),
        pytest.param(
            lambda tmp: (
                ["--secrets-file", str(write(tmp / "s.env", f"T={SECRET}\n".encode()))],
                None,
            ),
            id="file",
        ),
    ],
)
def test_secrets_are_redacted_and_never_printed(src: Path, tmp_path: Path, how: object) -> None:
    args, env = how(tmp_path)  # type: ignore[operator]
    dst = tmp_path / "dst"
    code, out, err = invoke("mirror", src, dst, "--once", "--json", *args, env=env).outcome
    assert code == 0
    assert SECRET not in out + err
    assert tree(dst)["trials/1/log.txt"] == b"token REDACTED\n"


def test_secrets_file_dash_is_standard_input_read_once(src: Path, tmp_path: Path) -> None:
    dst = tmp_path / "dst"
    stdin = f"T={SECRET}\n"
    code, out, err = invoke(
        "mirror", src, dst, "--once", "--secrets-file", "-", input=stdin
    ).outcome
    assert (code, SECRET in out + err) == (0, False)
    assert tree(dst)["trials/1/log.txt"] == b"token REDACTED\n"
    twice: list[str | Path] = [
        "mirror",
        src,
        dst,
        "--once",
        "--secrets-file",
        "-",
        "--secrets-file",
        "-",
    ]
    code, _, err = invoke(*twice, input=stdin).outcome
    assert code == 2 and "standard input can be read only once" in err


def test_a_fifo_as_secrets_file_is_refused_not_waited_on(src: Path, tmp_path: Path) -> None:
    fifo = tmp_path / "secrets.fifo"
    os.mkfifo(fifo)
    proc = run("mirror", src, tmp_path / "dst", "--once", "--secrets-file", fifo, timeout=60)
    assert proc.returncode == 1
    assert proc.stderr == f"Error: {fifo}: is not a regular file; not read\n"
    assert not (tmp_path / "dst").exists()


def test_a_short_secret_is_refused_with_one_line_and_no_value(src: Path, tmp_path: Path) -> None:
    args: list[str | Path] = ["mirror", src, tmp_path / "dst", "--once", "--secret", "pw123"]
    code, out, err = invoke(*args).outcome
    assert code == 1
    assert "pw123" not in out + err
    assert len(err.strip().splitlines()) == 1
    assert not (tmp_path / "dst").exists()


def test_short_secrets_can_be_allowed(src: Path, tmp_path: Path) -> None:
    code, _, _ = invoke(
        "mirror", src, tmp_path / "dst", "--once", "--secret", "pw123", "--allow-short-secrets"
    ).outcome
    assert code == 0


def test_an_unset_secret_env_is_exit_1(src: Path, tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if k != "NOPE_UNSET"}
    code, _, err = invoke(
        "mirror", src, tmp_path / "dst", "--once", "--secret-env", "NOPE_UNSET", env=env
    ).outcome
    assert code == 1 and "NOPE_UNSET" in err


@pytest.mark.parametrize("value", ["", " \t"])
def test_an_empty_secret_is_a_usage_error_not_a_mirror_without_it(
    src: Path, tmp_path: Path, value: str
) -> None:
    # `--secret "$TOKEN"` with TOKEN unset must not mirror what it was to protect.
    code, _, err = invoke("mirror", src, tmp_path / "dst", "--once", "--secret", value).outcome
    assert code == 2
    assert err.splitlines()[-1] == (
        "Error: Invalid value for '--secret': empty or only whitespace: it protects nothing "
        "(is its variable unset?)"
    )
    assert not (tmp_path / "dst").exists()


def test_delete_flag_reaches_the_library(src: Path, tmp_path: Path) -> None:
    dst = tmp_path / "dst"
    write(src / "notes.txt", b"scratch")
    settle()
    invoke("mirror", src, dst, "--once", "--no-fsync")
    (src / "notes.txt").unlink()
    (src / "trials" / "1" / "log.txt").unlink()  # in a sealed record: kept
    code, out, _ = invoke("mirror", src, dst, "--once", "--delete", "--json").outcome
    report = orjson.loads(out)
    assert code == 0 and report["deleted"] == ["notes.txt"]
    assert [d["path"] for d in report["diverged"]] == ["trials/1"]
    assert (dst / "trials" / "1" / "log.txt").exists()


def test_real_process_round_trip_and_no_heavy_imports(src: Path, tmp_path: Path) -> None:
    dst = tmp_path / "dst"
    code = (
        "import sys, runpy; sys.argv = ['sessionstore', 'mirror', *sys.argv[1:]];"
        "\ntry: runpy.run_module('sessionstore', run_name='__main__')"
        "\nexcept SystemExit as e: code = e.code"
        "\nelse: code = 0"
        "\nheavy = ('rich', 'pydantic', 'sessionstore.redact.redactor')"
        "\nheavy = [m for m in heavy if m in sys.modules]"
        "\nprint('HEAVY', heavy, file=sys.stderr); sys.exit(code)"
    )
    proc = subprocess.run(
        [SESSIONSTORE[0], "-c", code, str(src), str(dst), "--once", "--json"],
        capture_output=True,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    assert b"HEAVY []" in proc.stderr
    assert orjson.loads(proc.stdout)["ok"] is True
    assert (dst / "trials" / "1" / "trial.json").exists()


def test_a_mistyped_session_id_as_dst_is_refused_not_created(tmp_path: Path) -> None:
    store, src = tmp_path / "store", tmp_path / "ws"
    src.mkdir()
    result = run("mirror", src, "183c1adf", "--once", "--store", store, cwd=tmp_path, text=False)
    assert result.returncode == 2, result.stderr
    assert b"no session '183c1adf' in store" in result.stderr
    assert b"write ./183c1adf" in result.stderr
    assert not (tmp_path / "183c1adf").exists()
    # Spelled as a path, the same name is a new directory.
    ok = run("mirror", src, "./183c1adf", "--once", "--store", store, cwd=tmp_path, text=False)
    assert ok.returncode == 0, ok.stderr
    assert (tmp_path / "183c1adf").is_dir()


@pytest.mark.parametrize(
    ("where", "extra", "code", "said"),
    [
        ("fifo-src", [], 1, "Error: source fifo-REDACTED: is a FIFO, not a directory\n"),
        ("missing-src", [], 1, "Error: source missing-REDACTED: does not exist\n"),
        ("file-dst", ["--json"], 1, "destination: {tmp}/file-REDACTED: a non-directory is where"),
        ("id-dst", ["--secret", "183c1adf"], 2, "no session 'REDACTED' in store"),
        ("daemon-dst", ["--json"], 1, "file-REDACTED: "),
        ("exclude-from", ["--exclude-from", f"nope-{SECRET}"], 1, "Error: nope-REDACTED: "),
    ],
)
def test_a_secret_in_src_or_dst_as_typed_is_never_printed(
    tmp_path: Path, where: str, extra: list[str], code: int, said: str
) -> None:
    """SRC and DST are the user's text, echoed by errors: redacted like everything else."""
    (tmp_path / "ws").mkdir()
    os.mkfifo(tmp_path / f"fifo-{SECRET}")
    write(tmp_path / f"file-{SECRET}", b"not a directory")
    src, dst = {
        "fifo-src": (f"fifo-{SECRET}", "./dst"),
        "missing-src": (f"missing-{SECRET}", "./dst"),
        "file-dst": ("ws", f"./file-{SECRET}/sub"),
        "id-dst": ("ws", "183c1adf"),  # a session id, and a secret
        "daemon-dst": ("ws", f"./file-{SECRET}"),  # no --once: click's path, the daemon's pass
        "exclude-from": ("ws", "./dst"),
    }[where]
    once = [] if where == "daemon-dst" else ["--once"]
    result = run(
        "mirror", src, dst, *once, "--secret", SECRET, *extra,
        "--store", tmp_path / "store", cwd=tmp_path, text=True, timeout=60,
    )  # fmt: skip
    assert result.returncode == code, result.stderr
    assert SECRET not in result.stdout + result.stderr
    assert said.format(tmp=tmp_path) in result.stdout + result.stderr


@pytest.mark.parametrize(
    ("args", "said"),
    [
        # An unquoted secret with a space: click listed its end as extra arguments.
        (["--secret", "ghp_Super", "SecretToken0123456789"], "Got 1 unexpected extra argument"),
        (["--secret", SECRET, SECRET], "Got 1 unexpected extra argument"),
        # A value click quotes back, which is a secret given by value, variable or file.
        (["--secret", SECRET, "--debounce", SECRET], "'--debounce': 'REDACTED' is not"),
        (["--secret-env", "MIRROR_TOKEN", "--max-wait", SECRET], "'--max-wait': 'REDACTED'"),
        (["--secrets-file", "secrets.env", "--full-every", SECRET], "'--full-every': 'REDACTED'"),
        (["--secret=ab", "--allow-short-secrets", "--debounce", "ab"], "'REDACTED' is not"),
    ],
)
@pytest.mark.parametrize("once", [True, False])
def test_a_usage_error_never_quotes_a_secret_of_the_command_line(
    tmp_path: Path, args: list[str], said: str, once: bool
) -> None:
    (tmp_path / "ws").mkdir()
    write(tmp_path / "secrets.env", f"TOKEN={SECRET}\n".encode())
    env = {**os.environ, "MIRROR_TOKEN": SECRET}
    command = ["mirror", "ws", "out", *(["--once"] if once else []), *args]
    result = run(*command, cwd=tmp_path, env=env, timeout=60)
    assert result.returncode == 2, result.stderr
    assert "SecretToken" not in result.stdout + result.stderr
    assert "'ab'" not in result.stderr
    assert said in result.stderr
    assert not (tmp_path / "out").exists()


def test_an_extra_argument_is_still_shown_when_no_secret_is_given(tmp_path: Path) -> None:
    result = run("mirror", "ws", "out", "--once", "extra", cwd=tmp_path)
    assert result.returncode == 2
    assert "Got unexpected extra argument (extra)" in result.stderr


def test_a_short_secret_that_is_a_name_in_an_error_is_redacted(tmp_path: Path) -> None:
    # The message was redacted as one name, which a short secret never is: `source ab`.
    result = run("mirror", "./ab", "./out", "--once", "--secret", "ab", "--allow-short-secrets",
                 cwd=tmp_path)  # fmt: skip
    assert (result.returncode, result.stderr) == (1, "Error: source REDACTED: does not exist\n")


@pytest.mark.parametrize("under", ["", "/sub"])
def test_a_destination_through_a_symlink_loop_is_one_error_not_a_traceback(
    src: Path, tmp_path: Path, under: str
) -> None:
    loop = tmp_path / "loop"
    loop.symlink_to(loop)
    proc = run("mirror", src, f"{loop}{under}", "--once")
    assert proc.returncode == 1
    assert "Traceback" not in proc.stderr
    assert f"destination: {loop}: a symlink is where a directory belongs" in proc.stderr
    assert loop.is_symlink() and os.readlink(loop) == str(loop)  # nothing written through it

"""`sessionstore scan` end to end, as real processes: findings, JSON, exit codes, bad input.

Secrets here are obviously fake and live in the child's environment or in
files under tmp_path only; no output may ever hold one.
"""

from __future__ import annotations

import base64
import json
import os
import subprocess
from pathlib import Path

from cli_runner import environ, run
from inspect_helpers import metrics, set_manifest, trial

from sessionstore import Store

FAKE = "fake-hf-token-for-scan-tests"
ENV = environ(FAKE_SCAN_TOKEN=FAKE)


def assert_no_secret(*outputs: str) -> None:
    for out in outputs:
        assert FAKE not in out
        assert base64.b64encode(FAKE.encode()).decode()[:20] not in out


def test_findings_one_line_each_and_exit_1(tmp_path: Path) -> None:
    tree = tmp_path / "ws"
    (tree / "trials" / "1").mkdir(parents=True)
    (tree / "trials" / "1" / "run.log").write_text(f"login {FAKE}\n")
    (tree / "config.b64").write_bytes(base64.b64encode(f"token: {FAKE}".encode()))
    (tree / f"dump-{FAKE}.txt").write_text("x")
    (tree / "clean.txt").write_text("nothing")
    done = run("scan", tree, "--secret-env", "FAKE_SCAN_TOKEN", env=ENV)
    assert done.returncode == 1, done.stderr
    assert done.stdout.splitlines() == [
        f"{tree}/config.b64:10 base64 FAKE_SCAN_TOKEN",
        f"{tree}/dump-REDACTED.txt:name raw FAKE_SCAN_TOKEN",
        f"{tree}/trials/1/run.log:6 raw FAKE_SCAN_TOKEN",
    ]
    assert done.stderr == "scan: 3 findings in 4 files (0 skipped)\n"
    assert_no_secret(done.stdout, done.stderr)


def test_clean_exits_0(tmp_path: Path) -> None:
    (tmp_path / "f").write_text("nothing to see")
    done = run("scan", tmp_path, "--secret-env", "FAKE_SCAN_TOKEN", "--patterns", env=ENV)
    assert (done.returncode, done.stdout) == (0, "")
    assert done.stderr == "scan: 0 findings in 1 file (0 skipped)\n"


def test_json_lists_findings_and_skipped_entries(tmp_path: Path) -> None:
    (tmp_path / "a.txt").write_text(FAKE)
    (tmp_path / "gh.txt").write_text("ghp_" + "Q" * 36)
    (tmp_path / "link").symlink_to(tmp_path / "a.txt")
    os.mkfifo(tmp_path / "fifo")
    done = run("scan", tmp_path, "--secret-env", "FAKE_SCAN_TOKEN", "--patterns", "--json", env=ENV)
    assert done.returncode == 1
    assert json.loads(done.stdout) == [
        {
            "type": "finding",
            "path": f"{tmp_path}/a.txt",
            "offset": 0,
            "in": "content",
            "kind": "raw",
            "source": "FAKE_SCAN_TOKEN",
        },
        {"type": "skipped", "path": f"{tmp_path}/fifo", "reason": "fifo"},
        {
            "type": "finding",
            "path": f"{tmp_path}/gh.txt",
            "offset": 0,
            "in": "content",
            "kind": "github-token",
            "source": "patterns",
        },
        {"type": "skipped", "path": f"{tmp_path}/link", "reason": "symlink"},
    ]
    assert_no_secret(done.stdout, done.stderr)


def test_json_of_a_clean_tree_is_an_empty_list(tmp_path: Path) -> None:
    done = run("scan", tmp_path, "--patterns", "--json")
    assert (done.returncode, json.loads(done.stdout)) == (0, [])


def test_a_secret_across_the_read_chunk_boundary(tmp_path: Path) -> None:
    chunk = 1 << 20
    (tmp_path / "big.log").write_bytes(b"." * (chunk - 5) + FAKE.encode() + b"." * 100)
    done = run("scan", tmp_path, "--secret-env", "FAKE_SCAN_TOKEN", env=ENV)
    assert done.stdout == f"{tmp_path}/big.log:{chunk - 5} raw FAKE_SCAN_TOKEN\n"


def test_secrets_file_sources_are_file_and_line(tmp_path: Path) -> None:
    secrets = tmp_path / "secrets.env"
    secrets.write_text(f"# fake\nHF_TOKEN={FAKE}\n")
    tree = tmp_path / "ws"
    tree.mkdir()
    (tree / "f").write_text(f"..{FAKE}")
    done = run("scan", tree, "--secrets-file", secrets)
    assert done.stdout == f"{tree}/f:2 raw {secrets}:2\n"


def test_secrets_file_dash_reads_standard_input(tmp_path: Path) -> None:
    tree = tmp_path / "ws"
    tree.mkdir()
    (tree / "f").write_text(f"..{FAKE}")
    done = run("scan", tree, "--secrets-file", "-", input=f"# fake\nHF_TOKEN={FAKE}\n")
    assert (done.returncode, done.stdout) == (1, f"{tree}/f:2 raw stdin:2\n")
    assert_no_secret(done.stdout, done.stderr)
    empty = run("scan", tree, "--secrets-file", "-", input="")
    assert empty.returncode == 1
    assert empty.stderr == "Error: stdin: the secrets file holds no secret to look for\n"


def test_a_fifo_as_secrets_file_is_refused_not_waited_on(tmp_path: Path) -> None:
    fifo = tmp_path / "secrets.fifo"
    os.mkfifo(fifo)
    done = run("scan", tmp_path, "--secrets-file", fifo, timeout=60)
    assert done.returncode == 1
    assert done.stderr == f"Error: {fifo}: is not a regular file; not read\n"


def test_a_session_named_by_id(tmp_path: Path) -> None:
    store = Store(tmp_path / "store")
    session = store.create(name="scan-me", pid=None)
    trial = session.trials.begin()
    trial.write_text("run.log", f"oops {FAKE}\n")
    done = run(
        "scan", session.id or "", "--store", store.root, "--secret-env", "FAKE_SCAN_TOKEN", env=ENV
    )
    assert done.stdout == f"{session.path}/trials/1/run.log:5 raw FAKE_SCAN_TOKEN\n"
    assert done.returncode == 1


def test_a_root_symlink_the_user_names_is_followed(tmp_path: Path) -> None:
    (tmp_path / "real").mkdir()
    (tmp_path / "real" / "f").write_text(FAKE)
    (tmp_path / "link").symlink_to("real")
    done = run("scan", "./link/", "--secret-env", "FAKE_SCAN_TOKEN", env=ENV, cwd=tmp_path)
    assert (done.returncode, done.stdout) == (1, "./link/f:0 raw FAKE_SCAN_TOKEN\n")


def test_a_name_that_is_not_utf8_in_json(tmp_path: Path) -> None:
    (tmp_path / os.fsdecode(b"bad-\xff")).write_text(FAKE)
    done = run("scan", tmp_path, "--secret-env", "FAKE_SCAN_TOKEN", "--json", env=ENV)
    assert [item["path"] for item in json.loads(done.stdout)] == [f"{tmp_path}/bad-\\xff"]


def test_control_characters_in_names_are_escaped(tmp_path: Path) -> None:
    (tmp_path / "evil\x1b]0;x\x07\nname").write_text(FAKE)
    done = run("scan", tmp_path, "--secret-env", "FAKE_SCAN_TOKEN", env=ENV)
    assert done.stdout == f"{tmp_path}/evil\\x1b]0;x\\x07\\nname:0 raw FAKE_SCAN_TOKEN\n"


def test_bad_input_is_one_line(tmp_path: Path) -> None:
    env = {k: v for k, v in ENV.items() if k != "FAKE_UNSET_TOKEN"}
    env["FAKE_SHORT_TOKEN"] = "fake7ch"
    os.mkfifo(tmp_path / "fifo")
    cases: list[tuple[list[str | Path], int, str]] = [
        (["scan", tmp_path / "missing", "--patterns"], 1, "no such file or directory"),
        (["scan", tmp_path, "--secret-env", "FAKE_UNSET_TOKEN"], 1, "FAKE_UNSET_TOKEN: is not set"),
        (["scan", tmp_path, "--secret-env", "FAKE_SHORT_TOKEN"], 1, "shorter than 8 bytes"),
        (["scan", tmp_path, "--secrets-file", tmp_path / "no.env"], 1, "cannot read"),
        # Never waited on, never read without end: not a regular file.
        (["scan", tmp_path, "--secrets-file", tmp_path / "fifo"], 1, "not a regular file"),
        (["scan", tmp_path, "--secrets-file", "/dev/zero"], 1, "not a regular file"),
        (["scan", "abcd1234", "--store", tmp_path, "--patterns"], 1, "nor a session of the store"),
        (["scan", tmp_path], 1, "nothing to look for"),
    ]
    for args, code, message in cases:
        done = run(*args, env=env)
        assert done.returncode == code, (args, done.stderr)
        assert message in done.stderr
        assert "Traceback" not in done.stderr
        assert "fake7ch" not in done.stderr
        if code == 1:
            assert done.stderr.count("\n") == 1, done.stderr


def test_a_root_given_with_a_secret_is_shown_redacted(tmp_path: Path) -> None:
    # What the user typed is printed back, in findings and errors, through the redactor.
    given = tmp_path / f"ws-{FAKE}"
    (given / "a").mkdir(parents=True)
    (given / "a" / "log").write_text(FAKE)
    for target in (given, given / "a" / "log", given / "missing", f"{FAKE}-bare"):
        done = run("scan", target, "--secret-env", "FAKE_SCAN_TOKEN", "--store", tmp_path, env=ENV)
        assert done.returncode == 1 and "REDACTED" in done.stdout + done.stderr, done.stderr
        assert_no_secret(done.stdout, done.stderr)


def test_an_s3_target_with_a_secret_is_shown_redacted(tmp_path: Path) -> None:
    # A bucket name no bucket can have: refused before any request, quoting the URL.
    for chosen in ((), ("--status", "done")):
        done = run(
            "scan", f"s3://Bad_{FAKE}/x", "--secret-env", "FAKE_SCAN_TOKEN", *chosen, env=ENV
        )
        assert done.returncode in (1, 2) and "Bad_REDACTED" in done.stderr, done.stderr
        assert_no_secret(done.stdout, done.stderr)


def test_a_usage_error_quoting_a_secret_shows_it_redacted(tmp_path: Path) -> None:
    # click refuses `--store` while it parses, before the command has a scanner: its
    # message quoted the value as typed (as mirror's did, `cli.secret_command`).
    done = run(
        "scan",
        tmp_path,
        "--store",
        f"s3://Bad_{FAKE}/x",
        "--secret-env",
        "FAKE_SCAN_TOKEN",
        env=ENV,
    )
    assert done.returncode == 2 and "Invalid value for '--store': s3://Bad_REDACTED" in done.stderr
    assert_no_secret(done.stdout, done.stderr)


def test_a_store_path_with_a_secret_is_shown_redacted_when_sessions_are_chosen(
    tmp_path: Path,
) -> None:
    # The sessions named by -v, a target that is no store, and the store a missing
    # target is not in: each path goes through the redactor, as the findings' do.
    store = _labelled_store(tmp_path / f"ws-{FAKE}" / "store")
    root = store.root
    runs = [
        ("scan", root, "--secret-env", "FAKE_SCAN_TOKEN", "-v", "--status", "done"),
        ("scan", root / "s1", "--secret-env", "FAKE_SCAN_TOKEN", "--status", "done"),
        ("scan", "missing", "--store", root, "--secret-env", "FAKE_SCAN_TOKEN"),
    ]
    for args in runs:
        done = run(*args, env=ENV)
        assert done.returncode in (1, 2) and "REDACTED" in done.stderr, done.stderr
        assert_no_secret(done.stdout, done.stderr)


def test_help_has_examples() -> None:
    done = run("scan", "--help")
    assert "Examples:" in done.stdout and done.returncode == 0


def _labelled_store(root: Path) -> Store:
    """s1 done (team=ml, best 5), s2 running (team=infra, best 9), s3 done (unnamed, no
    label, no trial), each holding the secret once; and a stray file at the store's top."""
    store = Store(root)
    for n, (sid, name, labels, value) in enumerate(
        (("s1", "b", {"team": "ml"}, 5.0), ("s2", "a", {"team": "infra"}, 9.0))
    ):
        session = store.create(id=sid, name=name, labels=labels, pid=None)
        set_manifest(session, created_at=f"2026-11-0{n + 1}T00:00:00+00:00")
        trial(session, metrics(value), {"run.log": f"token {FAKE}\n"})
    store.open("s1").finish({})
    s3 = set_manifest(store.create(id="s3", pid=None), created_at="2026-10-01T00:00:00+00:00")
    (s3.path / "notes.txt").write_text(FAKE)
    s3.finish({})
    (root / "stray.txt").write_text(FAKE)
    return store


def _found(done: subprocess.CompletedProcess[str]) -> list[str]:
    return [line.split(":")[0] for line in done.stdout.splitlines()]


def test_status_label_and_sort_choose_the_sessions_of_a_store(tmp_path: Path) -> None:
    store = _labelled_store(tmp_path / "store")
    root = store.root
    log = "trials/1/run.log"
    whole = run("scan", root, "--secret-env", "FAKE_SCAN_TOKEN", env=ENV)
    assert sorted(_found(whole)) == sorted(
        [f"{root}/s1/{log}", f"{root}/s2/{log}", f"{root}/s3/notes.txt", f"{root}/stray.txt"]
    )

    def scanned(*args: str | Path) -> list[str]:
        done = run("scan", root, "--secret-env", "FAKE_SCAN_TOKEN", *args, env=ENV)
        assert done.returncode == (1 if done.stdout else 0), done.stderr
        return _found(done)

    # Only the sessions chosen, whole, and nothing outside them (stray.txt).
    assert scanned("--status", "done") == [f"{root}/s1/{log}", f"{root}/s3/notes.txt"]
    assert scanned("--label", "team=infra") == [f"{root}/s2/{log}"]
    assert scanned("--status", "failed") == []
    assert scanned("--sort", "created") == [
        f"{root}/s2/{log}",
        f"{root}/s1/{log}",
        f"{root}/s3/notes.txt",
    ]
    assert scanned("--sort", "name")[:2] == [f"{root}/s2/{log}", f"{root}/s1/{log}"]
    assert scanned("--sort", "best", "--lower") == [
        f"{root}/s1/{log}",
        f"{root}/s2/{log}",
        f"{root}/s3/notes.txt",
    ]
    assert scanned("--sort", "best", "--limit", "1") == [f"{root}/s2/{log}"]
    # The store named by --store, and a session id resolved in it, work alike.
    done = run("scan", root, "--store", root, "--patterns", "--status", "running", env=ENV)
    assert (done.returncode, done.stdout) == (0, "")
    verbose = run(
        "scan", root, "--secret-env", "FAKE_SCAN_TOKEN", "-v", "--status", "done", env=ENV
    )
    assert verbose.stderr.splitlines()[:3] == [
        "scan: looking for FAKE_SCAN_TOKEN",
        f"scan: session s1 (done): {root}/s1",
        f"scan: session s3 (done): {root}/s3",
    ]
    assert_no_secret(verbose.stdout, verbose.stderr)


def test_choosing_sessions_of_what_is_no_store_is_a_usage_error(tmp_path: Path) -> None:
    store = _labelled_store(tmp_path / "store")
    plain = tmp_path / "plain"
    (plain / "trials").mkdir(parents=True)
    (plain / "trials" / "leak.txt").write_text(FAKE)
    cases = [
        (store.root / "s1", "a session"),
        (plain, "it holds no session"),
        (store.root / "stray.txt", "not a directory"),
        (tmp_path / "missing", "no such directory"),
    ]
    for target, why in cases:
        for option in (("--status", "done"), ("--label", "team=ml"), ("--sort", "name")):
            done = run("scan", target, "--secret-env", "FAKE_SCAN_TOKEN", *option, env=ENV)
            assert done.returncode == 2, (target, option, done.stderr)
            assert "choose which sessions of a store are scanned" in done.stderr
            assert f"{target} is no store ({why})" in done.stderr
    # An empty directory named as the store is a store, with nothing in it.
    empty = tmp_path / "empty"
    empty.mkdir()
    done = run("scan", empty, "--store", empty, "--patterns", "--status", "done")
    assert (done.returncode, done.stdout) == (0, "")

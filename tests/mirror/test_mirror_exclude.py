"""`--exclude` / `--exclude-from`: gitignore semantics (checked against git itself), never
read, never copied, never deleted; markers; the daemon's subset passes; bad pattern files."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import orjson
import pytest
from cli_runner import run as cli_run
from mirror_helpers import make_deep, mirror_cli, paths, run, settle, tree, write

from sessionstore.errors import InvalidInput
from sessionstore.mirror.exclude import (
    MAX_PATTERN_LEN,
    MAX_PATTERNS,
    MAX_PATTERNS_LEN,
    Exclude,
    read_exclude_file,
)
from sessionstore.mirror.mirror import Mirror
from sessionstore.redact.redactor import Redactor

pytestmark = pytest.mark.timeout(120)

# Names a gitignore matcher gets wrong most easily: nested look-alikes, a name ending
# in a newline (Python's `$` matches before it), spaces, '#' and '!' at the start.
HOSTILE_FILES = [
    "a.log",
    "keep.log",
    "x.log\n",
    "new\nline.log",
    "top.txt",
    "sub/top.txt",
    "sub/a.log",
    "sub/keep.log",
    "build/out.o",
    "build/keep",
    "src/build/nested.o",
    "dir/a",
    "dir/keep",
    "dir/sub/deep",
    "foo/bar/hello.c",
    "foo/test.json",
    "trials/1/log.txt",
    "trials/1/trial.json",
    "trials/3/log.txt",
    "trials/3/trial.json",
    "a/b",
    "a/x/y/b",
    "#hash",
    "!bang",
    "sp ace ",
    "d/t.json",
    "t.json",
    "\udcff.log",  # names that are not UTF-8 (bytes 0xff, 0xfe)
    "raw\udcfe/x.o",
    "é",  # two bytes in UTF-8: git's `?` is one byte
    "ü/x",
]

PATTERN_SETS = [
    pytest.param(["**"], id="double-star-everything"),
    pytest.param(["*", "!*.json"], id="star-then-negation"),
    pytest.param(["*.log", "!keep.log"], id="negation"),
    pytest.param(["build/"], id="dir-pattern"),
    pytest.param(["build/", "!build/keep"], id="no-reinclude-under-excluded-dir"),
    pytest.param(["dir/**", "!dir/keep"], id="trailing-double-star-keeps-dir"),
    pytest.param(["dir/**/"], id="trailing-double-star-slash-keeps-dir-and-its-files"),
    pytest.param(["/top.txt"], id="anchored"),
    pytest.param(["foo/*"], id="single-star-one-level"),
    pytest.param(["a/**/b"], id="middle-double-star"),
    pytest.param(["trials/3/"], id="whole-record"),
    pytest.param(["\\#hash", "\\!bang"], id="escaped-hash-and-bang"),
    pytest.param(["sp ace\\ ", "# a comment", ""], id="escaped-trailing-space"),
    pytest.param(["x.log"], id="literal-not-before-newline"),
    pytest.param(["*.log"], id="star-vs-newline-names"),
    pytest.param(["?.log", "raw?/"], id="question-mark-on-a-byte-not-utf8"),
    pytest.param(["[!a].log", "!\\!bang"], id="negated-class-on-a-byte-not-utf8"),
    pytest.param(["?"], id="question-mark-is-one-byte-not-one-utf8-character"),
    pytest.param(["??/", "[é]"], id="classes-and-wildcards-count-utf8-bytes"),
    # A negation matching a directory does not re-include what a pattern excludes in it.
    pytest.param(["dir/sub", "!/*"], id="negated-parent-keeps-child-excluded"),
    pytest.param(["build/", "!src/"], id="negated-parent-keeps-dir-only-child-excluded"),
]


def hostile_tree(root: Path) -> Path:
    for name in HOSTILE_FILES:
        write(root / name, b"{}" if name.endswith("trial.json") else os.fsencode(name))
    settle()
    return root


def git_kept(src: Path, patterns: list[str], tmp: Path) -> set[str]:
    """The files git itself leaves untracked-and-not-ignored under these patterns."""
    rules = tmp / "rules"
    rules.write_bytes("".join(f"{p}\n" for p in patterns).encode())
    env = {"PATH": os.environ["PATH"], "HOME": str(tmp), "GIT_CONFIG_NOSYSTEM": "1"}
    subprocess.run(["git", "init", "-q", str(src)], check=True, env=env, timeout=60)
    try:
        out = subprocess.run(
            [
                "git",
                "-c",
                "core.excludesFile=/dev/null",
                "ls-files",
                "-z",
                "--others",
                f"--exclude-from={rules}",
            ],
            cwd=src,
            check=True,
            capture_output=True,
            env=env,
            timeout=60,
        ).stdout
    finally:
        subprocess.run(["rm", "-rf", str(src / ".git")], check=True, timeout=60)
    return {os.fsdecode(p) for p in out.split(b"\0") if p}


@pytest.mark.parametrize("patterns", PATTERN_SETS)
def test_exclusion_is_what_git_ignores(tmp_path: Path, patterns: list[str]) -> None:
    src = hostile_tree(tmp_path / "src")
    expected = git_kept(src, patterns, tmp_path)
    assert expected != set(HOSTILE_FILES) or patterns == ["x.log"]  # the patterns bite
    report = run(src, tmp_path / "dst", exclude=patterns)
    assert report.ok, report.errors
    assert set(tree(tmp_path / "dst")) == expected
    assert not report.unstable and not report.skipped


def test_excluded_files_are_never_read(tmp_path: Path) -> None:
    src = hostile_tree(tmp_path / "src")
    read: list[str] = []
    report = Mirror(
        src, tmp_path / "dst", exclude=["*.log"], durable=False, _on_chunk=read.append
    ).run_once()
    assert report.ok
    assert read and not [p for p in read if p.endswith(".log")]
    assert "x.log\n" in read  # not a .log: git would not ignore it either


def test_excluded_directory_is_never_listed(tmp_path: Path) -> None:
    # Walked, a tree this deep is an error ("deeper than 256 levels"); excluded, it is
    # never opened at all.
    src = tmp_path / "src"
    write(src / "kept.txt", b"kept")
    make_deep(src / "node_modules", 300)
    settle()
    assert not run(src, tmp_path / "walked").ok
    report = run(src, tmp_path / "dst", exclude=["node_modules/"])
    assert report.ok and report.copied == ["kept.txt"]
    assert not (tmp_path / "dst" / "node_modules").exists()


def test_symlinks_and_fifos_excluded_are_not_even_reported(tmp_path: Path) -> None:
    src = tmp_path / "src"
    write(src / "f.txt", b"f")
    (src / "link.tmp").symlink_to("/etc/hostname")
    os.mkfifo(src / "pipe.tmp")
    settle()
    assert paths(run(src, tmp_path / "a").skipped) == ["link.tmp", "pipe.tmp"]
    report = run(src, tmp_path / "b", exclude=["*.tmp"])
    assert report.skipped == [] and report.copied == ["f.txt"]


def test_delete_keeps_excluded_destination_files(tmp_path: Path) -> None:
    src, dst = tmp_path / "src", tmp_path / "dst"
    write(src / "a.log", b"log")
    write(src / "cache" / "blob", b"blob")
    write(src / "gone.txt", b"gone")
    settle()
    assert sorted(run(src, dst).copied) == ["a.log", "cache/blob", "gone.txt"]
    # Excluded now, and removed from the source as well: --delete still keeps them (rsync
    # without --delete-excluded) and removes only what is gone and not excluded.
    for name in ("a.log", "cache/blob", "gone.txt"):
        (src / name).unlink()
    report = run(src, dst, delete=True, exclude=["*.log", "cache/"])
    assert report.deleted == ["gone.txt"]
    assert set(tree(dst)) == {"a.log", "cache/blob"}
    # The mirror still owns them: without the patterns, the next --delete removes them.
    assert sorted(run(src, dst, delete=True).deleted) == ["a.log", "cache/blob"]


def trial_1(src: Path, files: dict[str, bytes]) -> None:
    """`src/trials/1/` holding `files`, settled."""
    for name, data in files.items():
        write(src / "trials" / "1" / name, data)
    settle()


def test_excluded_marker_leaves_the_record_in_flight_never_half_sealed(tmp_path: Path) -> None:
    src, dst = tmp_path / "src", tmp_path / "dst"
    trial_1(src, {"log.txt": b"log", "trial.json": b'{"failed": false}'})
    report = run(src, dst, exclude=["trial.json"])
    assert report.copied == ["trials/1/log.txt"] and not report.held_back
    assert set(tree(dst)) == {"trials/1/log.txt"}  # in flight, never sealed
    # The pattern dropped: the marker comes last, as always, and seals the record.
    assert run(src, dst).copied == ["trials/1/trial.json"]


def test_a_record_with_an_excluded_file_seals_without_it(tmp_path: Path) -> None:
    src, dst = tmp_path / "src", tmp_path / "dst"
    trial_1(src, {"big.bin": b"big", "log.txt": b"log", "trial.json": b"{}"})
    report = run(src, dst, exclude=["*.bin"])
    assert report.copied == ["trials/1/log.txt", "trials/1/trial.json"]
    # Sealed without it: the file shows up only as a divergence once it is not excluded.
    report = run(src, dst)
    assert report.copied == [] and report.diverged[0]["files"] == ["trials/1/big.bin"]


def test_excluded_files_do_not_hold_back_a_marker(tmp_path: Path) -> None:
    src, dst = tmp_path / "src", tmp_path / "dst"
    trial_1(src, {"log.txt": b"log", "scratch.tmp": b"being written", "trial.json": b"{}"})

    def keep_writing(path: str) -> None:  # scratch.tmp changes while every pass reads it
        if path.endswith("scratch.tmp"):
            with open(src / path, "ab") as f:
                f.write(b"more")

    held = Mirror(src, dst, durable=False, _on_chunk=keep_writing).run_once()
    assert paths(held.unstable) == ["trials/1/scratch.tmp"]
    assert held.held_back == [{"path": "trials/1/trial.json", "reason": "waiting for 1 file"}]
    report = Mirror(src, dst, durable=False, _on_chunk=keep_writing, exclude=["*.tmp"]).run_once()
    assert report.copied == ["trials/1/trial.json"] and not report.unstable


def test_subset_pass_below_an_excluded_directory_copies_nothing(tmp_path: Path) -> None:
    src, dst = tmp_path / "src", tmp_path / "dst"
    write(src / "build" / "sub" / "o.o", b"o")
    write(src / "kept.txt", b"k")
    settle()
    the_mirror = Mirror(src, dst, durable=False, exclude=["build/"])
    assert the_mirror.run_dirs(["build/sub", "build"]).copied == []
    assert the_mirror.run_dirs([""]).copied == ["kept.txt"]
    assert not (dst / "build").exists()


def test_daemon_ignores_events_in_excluded_directories(tmp_path: Path) -> None:
    from mirror_helpers import DaemonProcess

    src, dst = tmp_path / "src", tmp_path / "dst"
    (src / "build").mkdir(parents=True)
    daemon = DaemonProcess(src, dst, "--json", "--no-fsync", "--exclude", "build/")
    try:
        assert daemon.next()["pass"] == "initial"
        write(src / "build" / "o.o", b"object")
        write(src / "result.txt", b"done")
        for _ in range(100):
            if "result.txt" in daemon.next()["copied"]:
                break
    finally:
        code, err = daemon.stop()
    assert code == 0, err
    assert set(tree(dst)) == {"result.txt"}


# -- patterns and pattern files ----------------------------------------------------------


def test_exclude_from_and_exclude_combine_later_wins(tmp_path: Path) -> None:
    src = hostile_tree(tmp_path / "src")
    rules = write(tmp_path / "rules", b"# logs\r\n*.log\r\n\r\nbuild/\n")
    proc = mirror_cli(
        src, tmp_path / "dst", "--once", "--json", "--no-fsync",
        "--exclude-from", rules, "--exclude", "!keep.log",
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    copied = orjson.loads(proc.stdout)["copied"]
    assert "keep.log" in copied and "sub/keep.log" in copied  # CRLF lines are patterns too
    assert not [p for p in copied if p.startswith("build/") or p == "a.log"]


def test_exclude_from_stdin(tmp_path: Path) -> None:
    src = hostile_tree(tmp_path / "src")
    proc = cli_run(
        "mirror", src, tmp_path / "dst", "--once", "--json", "--no-fsync",
        "--exclude-from", "-", input="*\n!*.json\n",
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert sorted(orjson.loads(proc.stdout)["copied"]) == ["t.json"]


def test_a_bom_is_not_part_of_the_first_pattern(tmp_path: Path) -> None:
    rules = write(tmp_path / "rules", "\ufeff*.log\n".encode())
    assert read_exclude_file(rules)[0] == "*.log"


@pytest.mark.parametrize(
    ("make", "problem"),
    [
        pytest.param(lambda p: None, "cannot read: No such file or directory", id="missing"),
        pytest.param(lambda p: os.mkfifo(p), "is not a regular file; not read", id="fifo"),
        pytest.param(lambda p: p.mkdir(), "is a directory; not read", id="directory"),
        pytest.param(
            lambda p: p.write_bytes(b"*.log\nok\n\xff\xfe\n"),
            "is not UTF-8 text (line 3)",
            id="not-utf8",
        ),
        pytest.param(
            lambda p: p.write_bytes(b"x" * (1 << 20) + b"y"),
            "is larger than 1048576 bytes; not a pattern file",
            id="huge",
        ),
    ],
)
def test_bad_pattern_file_is_one_line_exit_1(tmp_path: Path, make: object, problem: str) -> None:
    rules = tmp_path / "rules"
    make(rules)  # type: ignore[operator]
    write(tmp_path / "src" / "f", b"f")
    # A real process: a FIFO must be refused at once, never waited on.
    proc = mirror_cli(tmp_path / "src", tmp_path / "dst", "--once", "--exclude-from", rules)
    assert proc.returncode == 1
    assert proc.stderr == f"Error: {rules}: {problem}\n"
    assert not (tmp_path / "dst").exists()


def test_invalid_pattern_in_a_file_names_its_line(tmp_path: Path) -> None:
    rules = write(tmp_path / "rules", b"*.log\n\n!\n")
    proc = mirror_cli(tmp_path, tmp_path / "dst", "--once", "--exclude-from", rules)
    assert proc.returncode == 1
    assert proc.stderr == f"Error: {rules}:3: '!' is not a valid gitignore pattern\n"


def test_invalid_exclude_option_is_usage_error(tmp_path: Path) -> None:
    proc = mirror_cli(tmp_path, tmp_path / "dst", "--once", "--exclude", "bad\\")
    assert proc.returncode == 2
    assert proc.stderr.splitlines()[-1] == (
        "Error: Invalid value for '--exclude': 'bad\\\\' is not a valid gitignore pattern"
    )


def test_a_pattern_longer_than_the_bound_is_one_line_without_it(tmp_path: Path) -> None:
    long = "a" * (MAX_PATTERN_LEN + 1)
    write(tmp_path / "src" / "f", b"f")
    rules = write(tmp_path / "rules", b"ok\n" + long.encode() + b"\n")
    problem = (
        f"a pattern of {MAX_PATTERN_LEN + 1} characters; at most {MAX_PATTERN_LEN} are allowed"
    )
    option = mirror_cli(tmp_path / "src", tmp_path / "dst", "--once", "--exclude", long)
    assert option.returncode == 2
    assert option.stderr.splitlines()[-1] == f"Error: Invalid value for '--exclude': {problem}"
    listed = mirror_cli(tmp_path / "src", tmp_path / "dst", "--once", "--exclude-from", rules)
    assert (listed.returncode, listed.stderr) == (1, f"Error: {rules}:2: {problem}\n")
    with pytest.raises(
        InvalidInput, match=f"exclude pattern 2: a pattern of {MAX_PATTERN_LEN + 1}"
    ):
        Exclude(["ok", long])
    Exclude(["#" + long, " " * (MAX_PATTERN_LEN + 1)])  # a comment, a blank line: no patterns
    assert not (tmp_path / "dst").exists()


def test_a_pattern_hyperscan_refuses_is_named_by_its_file_and_line(tmp_path: Path) -> None:
    pytest.importorskip("hyperscan")  # pathspec's backend where installed; `re` takes it
    big = "[!\U0001f600]" * 64  # 256 characters, each class of 4 bytes
    write(tmp_path / "src" / "f", b"f")
    rules = write(tmp_path / "rules", f"ok\n# a comment\n{big}\n".encode())
    problem = "a pattern of 256 characters cannot be compiled: Pattern is too large."
    option = mirror_cli(tmp_path / "src", tmp_path / "dst", "--once", "--exclude", big)
    assert option.returncode == 2
    assert option.stderr.splitlines()[-1] == f"Error: Invalid value for '--exclude': {problem}"
    listed = mirror_cli(tmp_path / "src", tmp_path / "dst", "--once", "--exclude-from", rules)
    assert (listed.returncode, listed.stderr) == (1, f"Error: {rules}:3: {problem}\n")
    with pytest.raises(InvalidInput, match="exclude pattern 2: a pattern of 256"):
        Exclude(["ok", big])
    assert not (tmp_path / "dst").exists()


def test_a_pattern_set_past_the_bounds_is_refused_not_compiled(tmp_path: Path) -> None:
    # Hyperscan compiles 1,000 ordinary patterns in ~1.4 s and 8,000 in ~54 s: a large
    # file is refused at once, naming the first line past the bound (blank lines and
    # comments are not patterns and do not count).
    write(tmp_path / "src" / "f", b"f")
    many = write(tmp_path / "many", b"# c\n\n" + b"".join(b"d%d/\n" % i for i in range(1005)))
    long = write(tmp_path / "long", b"#\n" + (b"x" * 1000 + b"\n") * 40)
    half = write(tmp_path / "half", b"".join(b"h%d\n" % i for i in range(600)))
    half2 = write(tmp_path / "half2", b"".join(b"g%d\n" % i for i in range(600)))
    cases: list[tuple[list[str | Path], int, str]] = [
        (["--exclude-from", many], 1, f"{many}:1003: more than {MAX_PATTERNS} patterns"),
        (["--exclude-from", long], 1, f"{long}:34: patterns of more than {MAX_PATTERNS_LEN} "
         "characters in all"),
        (["--exclude-from", half, "--exclude-from", half2], 1,
         f"{half2}:401: more than {MAX_PATTERNS} patterns"),
        (["--exclude-from", half2, *["--exclude=x"] * 401], 2,
         f"Invalid value for '--exclude': more than {MAX_PATTERNS} patterns"),
    ]  # fmt: skip
    for args, code, problem in cases:
        proc = mirror_cli(tmp_path / "src", tmp_path / "dst", "--once", *args)
        assert proc.returncode == code
        assert proc.stderr.splitlines()[-1] == f"Error: {problem}; not compiled"
    with pytest.raises(InvalidInput, match=f"exclude pattern 1001: more than {MAX_PATTERNS}"):
        Mirror(tmp_path / "src", tmp_path / "dst", exclude=[f"p{i}" for i in range(1001)])
    assert not (tmp_path / "dst").exists()
    comments = write(tmp_path / "comments", b"# c\n\n   \n" * 20_000 + b"*.log\n")
    assert read_exclude_file(comments)[-2:] == ["*.log", ""]


def test_pattern_with_nul_is_refused(tmp_path: Path) -> None:
    with pytest.raises(InvalidInput, match="NUL"):
        Exclude(["a\0b"])
    with pytest.raises(InvalidInput, match="exclude pattern 2"):
        Mirror(tmp_path / "src", tmp_path / "dst", exclude=["ok", "!"])
    assert not (tmp_path / "dst").exists()


def test_a_reversed_range_is_one_line_and_a_nested_looking_class_no_warning(
    tmp_path: Path,
) -> None:
    # pathspec copies a class into its regex as it is: `re` refused `[z-a]` with a
    # traceback, and warned of a "possible nested set" in `[[f]`, naming pathspec's file.
    write(tmp_path / "src" / "f", b"f")
    write(tmp_path / "src" / "g", b"g")
    problem = "'[z-a]' is not a valid gitignore pattern (bad character range z-a)"
    option = mirror_cli(tmp_path / "src", tmp_path / "dst", "--once", "--exclude", "[z-a]")
    assert option.returncode == 2
    assert option.stderr.splitlines()[-1] == f"Error: Invalid value for '--exclude': {problem}"
    rules = write(tmp_path / "rules", b"ok\n[z-a]\n")
    listed = mirror_cli(tmp_path / "src", tmp_path / "dst", "--once", "--exclude-from", rules)
    assert (listed.returncode, listed.stderr) == (1, f"Error: {rules}:2: {problem}\n")
    assert not (tmp_path / "dst").exists()
    quiet = mirror_cli(tmp_path / "src", tmp_path / "dst", "--once", "-q", "--exclude", "[[f]")
    assert (quiet.returncode, quiet.stderr) == (0, "")
    assert tree(tmp_path / "dst") == {"g": b"g"}  # `[[f]`: `[` or `f`, as git reads it


def test_a_pattern_that_is_not_utf8_is_refused(tmp_path: Path) -> None:
    # A name that is not UTF-8 is matched by wildcards (the tree above); a pattern must be
    # UTF-8, as a pattern file must be: Hyperscan's backend encodes it strictly.
    write(tmp_path / "src" / "f", b"f")
    option = mirror_cli(tmp_path / "src", tmp_path / "dst", "--once", "--exclude", "\udcff*")
    assert option.returncode == 2
    assert option.stderr.splitlines()[-1] == (
        "Error: Invalid value for '--exclude': invalid pattern: it is not UTF-8 text"
    )
    with pytest.raises(InvalidInput, match="exclude pattern 1: invalid pattern: it is not UTF-8"):
        Exclude(["\ud800"])
    assert not (tmp_path / "dst").exists()


def test_a_pattern_may_hold_a_newline_and_match_only_that_name(tmp_path: Path) -> None:
    src = hostile_tree(tmp_path / "src")
    report = run(src, tmp_path / "dst", exclude=["new\nline.log", "x.log\n"])
    assert set(HOSTILE_FILES) - set(tree(tmp_path / "dst")) == {"new\nline.log", "x.log\n"}
    assert report.ok


def test_double_star_with_delete_deletes_nothing(tmp_path: Path) -> None:
    src, dst = tmp_path / "src", tmp_path / "dst"
    hostile_tree(src)
    assert run(src, dst).ok
    for name in HOSTILE_FILES[:5]:
        (src / name).unlink()
    report = run(src, dst, delete=True, exclude=["**"])
    assert (report.copied, report.deleted, report.diverged) == ([], [], [])
    assert set(tree(dst)) == set(HOSTILE_FILES)


def test_one_string_is_not_taken_for_a_list_of_patterns(tmp_path: Path) -> None:
    # Iterated, "*.log" would be the patterns "*", ".", "l", "o", "g": nothing mirrored.
    src = tmp_path / "src"
    write(src / "a.txt", b"a")
    with pytest.raises(InvalidInput, match="not one string"):
        Mirror(
            src, tmp_path / "dst", exclude="*.log"
        )  # a str is an Iterable[str]: mypy cannot tell
    assert not (tmp_path / "dst").exists()


def test_delete_keeps_an_excluded_path_whose_name_had_a_secret_redacted(
    src: Path, dst: Path
) -> None:
    # `hf_*` matches the source names, not the destination's `REDACTED...`: --delete,
    # which asks about destination paths, took the excluded files for gone.
    secret = "hf_TopSecretValue123"
    write(src / "logs" / f"{secret}.txt", b"1")
    write(src / f"{secret}_d" / "x", b"2")
    write(src / "keep.txt", b"3")
    settle()
    redactor = Redactor()
    redactor.add(secret)
    Mirror(src, dst, redactor, durable=False).run_once()
    mirrored = tree(dst)
    assert set(mirrored) == {"logs/REDACTED.txt", "REDACTED_d/x", "keep.txt"}
    exclude = ["hf_*", "logs/hf_*"]
    report = Mirror(src, dst, redactor, durable=False, delete=True, exclude=exclude).run_once()
    assert report.ok and report.deleted == []
    assert tree(dst) == mirrored

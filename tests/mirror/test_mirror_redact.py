"""Secrets never reach the destination: not in content, names, cache, or report."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

import orjson
import pytest
from mirror_helpers import paths, run, settle, tree, write

from sessionstore.errors import InvalidInput
from sessionstore.mirror.mirror import CACHE_NAME, Mirror
from sessionstore.redact import redactor as redact
from sessionstore.redact.redactor import Redactor

pytestmark = pytest.mark.timeout(60)

SECRET = "hf_TopSecretValue123"
OTHER = "sk-AnotherSecret456"


def redactor(*values: str) -> Redactor:
    r = redact.Redactor()
    for v in values:
        r.add(v)
    return r


def everything_under(root: Path) -> bytes:
    """All names and bytes under root, for 'the secret appears nowhere' checks."""
    blob = bytearray()
    for dirpath, dirs, files in os.walk(root):
        for name in dirs + files:
            blob += os.fsencode(name) + b"\n"
            p = Path(dirpath, name)
            if p.is_file():
                blob += p.read_bytes()
    return bytes(blob)


def test_content_and_names_are_redacted_everywhere(tmp_path: Path) -> None:
    src, dst = tmp_path / "src", tmp_path / "dst"
    write(src / f"dir-{SECRET}" / f"file-{SECRET}.txt", f"token={SECRET}\r\n".encode())
    write(src / "trials" / "1" / "trial.json", orjson.dumps({"token": SECRET}))
    settle()
    report = Mirror(src, dst, redactor(SECRET), durable=False, chunk_size=3).run_once()
    assert tree(dst) == {
        "dir-REDACTED/file-REDACTED.txt": b"token=REDACTED\r\n",
        "trials/1/trial.json": b'{"token":"REDACTED"}',
    }
    assert SECRET.encode() not in everything_under(dst)
    assert SECRET not in orjson.dumps(report.to_dict()).decode()
    cache = (dst / CACHE_NAME).read_bytes()
    assert hashlib.sha256(SECRET.encode()).hexdigest().encode() not in cache
    assert orjson.loads(cache)["redactor"].keys() == {"salt", "scrypt"}


def test_a_redacted_no_op_pass_reads_nothing(tmp_path: Path) -> None:
    src, dst = tmp_path / "src", tmp_path / "dst"
    write(src / "a.txt", f"x {SECRET} y".encode())
    settle()
    r = redactor(SECRET)
    Mirror(src, dst, r, durable=False).run_once()
    report = Mirror(src, dst, r, durable=False).run_once()
    assert report.unchanged == 1 and report.copied == []


def test_two_names_that_redact_alike_are_a_collision_error(tmp_path: Path) -> None:
    src, dst = tmp_path / "src", tmp_path / "dst"
    write(src / f"k-{SECRET}", b"one")
    write(src / f"k-{OTHER}", b"two")
    write(src / "fine", b"ok")
    settle()
    report = Mirror(src, dst, redactor(SECRET, OTHER), durable=False).run_once()
    assert paths(report.errors) == ["k-REDACTED"]
    assert "collision" in report.errors[0]["error"]
    assert tree(dst) == {"fine": b"ok"}


def test_a_secret_registered_later_re_redacts_mirrored_files(tmp_path: Path) -> None:
    src, dst = tmp_path / "src", tmp_path / "dst"
    write(src / "log.txt", f"leaked {SECRET}\n".encode())
    write(src / "clean.txt", b"nothing to hide\n")
    settle()
    run(src, dst)
    assert (dst / "log.txt").read_bytes() == f"leaked {SECRET}\n".encode()
    clean_ino = (dst / "clean.txt").stat().st_ino
    report = Mirror(src, dst, redactor(SECRET), durable=False).run_once()
    assert report.copied == ["log.txt"]
    assert (dst / "log.txt").read_bytes() == b"leaked REDACTED\n"
    assert (dst / "clean.txt").stat().st_ino == clean_ino  # compared, not rewritten
    # Adding one more secret invalidates again.
    report = Mirror(src, dst, redactor(SECRET, OTHER), durable=False).run_once()
    assert report.copied == [] and report.unchanged == 2


def test_a_marker_whose_redaction_stays_valid_json_is_committed(tmp_path: Path) -> None:
    src, dst = tmp_path / "src", tmp_path / "dst"
    write(src / "service" / "1" / "verification.json", orjson.dumps({"reason": f"bad {SECRET}"}))
    settle()
    report = Mirror(src, dst, redactor(SECRET), durable=False).run_once()
    assert report.copied == ["service/1/verification.json"]
    assert orjson.loads((dst / "service" / "1" / "verification.json").read_bytes()) == {
        "reason": "bad REDACTED"
    }


def test_a_secret_added_to_the_same_redactor_between_passes_re_redacts(tmp_path: Path) -> None:
    """A long-lived Mirror (the daemon) memoizes the fingerprint; it must not go stale."""
    src, dst = tmp_path / "src", tmp_path / "dst"
    write(src / "log.txt", f"{SECRET} and {OTHER}\n".encode())
    settle()
    r = redact.Redactor()
    r.add(SECRET)
    m = Mirror(src, dst, r, durable=False)
    m.run_once()
    assert (dst / "log.txt").read_bytes() == f"REDACTED and {OTHER}\n".encode()
    r.add(OTHER)
    assert m.run_once().copied == ["log.txt"]
    assert (dst / "log.txt").read_bytes() == b"REDACTED and REDACTED\n"


def test_an_empty_redactor_that_gets_a_secret_later_is_honoured(tmp_path: Path) -> None:
    src, dst = tmp_path / "src", tmp_path / "dst"
    write(src / "log.txt", f"{SECRET}\n".encode())
    settle()
    r = redact.Redactor()
    m = Mirror(src, dst, r, durable=False)
    m.run_once()
    r.add(SECRET)
    m.run_once()
    assert (dst / "log.txt").read_bytes() == b"REDACTED\n"


class _RegistersOnFirstCopy(redact.Redactor):
    """Registers SECRET once the first file's stream is made: another thread's `add`
    landing in the middle of a pass."""

    late = False

    def stream(self) -> redact.StreamRedactor:
        made = super().stream()
        if not self.late:
            self.late = True
            self.add(SECRET)
        return made


def test_a_secret_registered_during_a_pass_is_applied_to_every_file_by_the_next(
    tmp_path: Path,
) -> None:
    # The file copied first holds the secret: the cache that pass writes must not vouch
    # for it under the new secrets, or no later pass (nor a new Mirror) copies it again.
    src, dst = tmp_path / "src", tmp_path / "dst"
    for i in range(4):
        write(src / f"log-{i}.txt", f"{i} {SECRET}\n".encode())
    settle()
    r = _RegistersOnFirstCopy()
    r.add(OTHER)
    Mirror(src, dst, r, durable=False).run_once()
    assert SECRET.encode() in everything_under(dst)  # what that pass could do
    Mirror(src, dst, r, durable=False).run_once()
    assert SECRET.encode() not in everything_under(dst)
    assert tree(dst) == {f"log-{i}.txt": f"{i} REDACTED\n".encode() for i in range(4)}


def test_delete_removes_the_old_names_a_new_secret_leaves(tmp_path: Path) -> None:
    # Mirrored before SECRET was registered: its names hold it. Registering it renames
    # them; the second pass with --delete (the first cannot: the cache was made with
    # other secrets) removes the old ones, which the mirror wrote all the same.
    src, dst = tmp_path / "src", tmp_path / "dst"
    write(src / f"a-{SECRET}", f"token={SECRET}".encode())
    write(src / f"d-{SECRET}" / "x", b"x")
    write(src / "plain", b"p")
    write(dst / "by-hand", b"h")  # never the mirror's: kept
    settle()
    run(src, dst)
    first = run(src, dst, redactor=redactor(SECRET), delete=True)
    assert first.deleted == [] and first.delete_skipped
    second = run(src, dst, redactor=redactor(SECRET), delete=True)
    assert sorted(second.deleted) == ["a-REDACTED", "d-REDACTED/x"]  # shown redacted too
    assert SECRET not in orjson.dumps(second.to_dict()).decode()
    assert tree(dst) == {
        "a-REDACTED": b"token=REDACTED",
        "by-hand": b"h",
        "d-REDACTED/x": b"x",
        "plain": b"p",
    }
    assert SECRET.encode() not in everything_under(dst)


def test_content_the_redactor_refuses_is_an_error_for_that_file_only(tmp_path: Path) -> None:
    # A long run that, with the marker, completes a secret at every step: the redactor
    # refuses to write it rather than emit the secret (see redact.py). The pass goes on.
    redactor = Redactor()
    redactor.add("aaaaaaaR")
    redactor.add("zzzzzzzzzz")
    src, dst = tmp_path / "src", tmp_path / "dst"
    write(src / "refused.txt", b"a" * 100 + b"zzzzzzzzzz")
    write(src / ("a" * 100 + "zzzzzzzzzz"), b"a refused name")
    write(src / "fine.txt", b"zzzzzzzzzz here")
    settle()
    report = run(src, dst, redactor=redactor)
    assert sorted(e["path"] for e in report.errors) == ["", "refused.txt"]
    assert all("aaaaaaaR" not in e["error"] for e in report.errors)
    assert tree(dst) == {"fine.txt": b"REDACTED here"}


@pytest.mark.parametrize(
    ("subset", "errors"),
    [
        (None, ["abc", "key/part-two"]),
        (["abc"], ["abc"]),  # found listing abc
        (["abc/defgh12"], ["abc"]),  # found on the way down to it
        (["key/part-two"], ["key/part-two"]),
    ],
)
def test_a_secret_spelled_across_names_is_written_nowhere(
    tmp_path: Path, subset: list[str] | None, errors: list[str]
) -> None:
    # Each name is redacted alone, so no single one holds these; the paths would.
    src, dst = tmp_path / "src", tmp_path / "dst"
    write(src / "abc" / "defgh12" / "f", b"one")
    write(src / "abc" / "kept", b"two")
    write(src / "key" / "part-two" / "end.txt", b"three")
    settle()
    r = redactor("abc/defgh12", "key/part-two/end")
    m = Mirror(src, dst, r, durable=False)
    report = m.run_once() if subset is None else m.run_dirs(subset)
    assert ("abc/kept" in report.copied) is (subset is None or subset == ["abc"])
    assert not {"abc/defgh12/f", "key/part-two/end.txt"} & set(tree(dst))
    written = everything_under(dst) + orjson.dumps(report.to_dict())
    for secret in (b"abc/defgh12", b"key/part-two/end"):
        assert secret not in written
        assert secret not in b"/".join(os.fsencode(p) for p, _, _ in os.walk(dst))
    assert sorted(paths(report.errors)) == errors


@pytest.mark.parametrize("secret", ["/leading-slash1", "trailing-slash1/"])
def test_a_secret_beginning_or_ending_with_a_slash_is_spelled_by_no_path(
    tmp_path: Path, secret: str
) -> None:
    src, dst = tmp_path / "src", tmp_path / "dst"
    write(src / "a" / "leading-slash1", b"one")
    write(src / "trailing-slash1" / "f", b"two")
    write(src / "a" / "fine", b"three")
    settle()
    report = run(src, dst, redactor=redactor(secret))
    assert secret.encode() not in everything_under(dst) + orjson.dumps(report.to_dict())
    kept = {"a/fine": b"three"}
    kept.update({"trailing-slash1/f": b"two"} if secret[0] == "/" else {"a/leading-slash1": b"one"})
    assert tree(dst) == kept
    assert paths(report.errors) == ["a" if secret[0] == "/" else "trailing-slash1"]


@pytest.mark.parametrize(("secret", "dst_name"), [("dst/defgh12", "dst"), ("/defgh12xyz", "out")])
@pytest.mark.parametrize("subset", [None, ["defgh12xyz"]])
def test_a_top_name_never_completes_a_secret_with_the_destination_path(
    tmp_path: Path, secret: str, dst_name: str, subset: list[str] | None
) -> None:
    # The destination exists (so it was not refused as created with a secret); its path
    # is above every top name, and `dst/defgh12xyz` on disk spells both secrets.
    src, dst = tmp_path / "src", tmp_path / dst_name
    write(src / "defgh12xyz" / "f", b"one")
    write(src / "fine", b"two")
    dst.mkdir()
    settle()
    m = Mirror(src, dst, redactor(secret), durable=False)
    report = m.run_once() if subset is None else m.run_dirs(subset)
    assert not any(secret.encode() in os.fsencode(p) for p, _, _ in os.walk(dst))
    assert paths(report.errors) == ["."]
    assert tree(dst) == ({"fine": b"two"} if subset is None else {})


@pytest.mark.parametrize(
    "name", [f"out-{SECRET}", f"out-{SECRET}/below", "sk-Another/Secret456", "fine/sk-Another"]
)
def test_a_destination_is_not_created_with_a_secret_in_its_path(tmp_path: Path, name: str) -> None:
    src, dst = tmp_path / "src", tmp_path / name
    write(src / "a.txt", b"a")
    settle()
    r = redactor(SECRET, "sk-Another/Secret456")
    if name.startswith("fine"):  # a name holding a head of a secret is no secret
        assert Mirror(src, dst, r, durable=False).run_once().copied == ["a.txt"]
        return
    with pytest.raises(InvalidInput, match="created with a secret") as caught:
        Mirror(src, dst, r, durable=False)
    assert SECRET not in str(caught.value) and "Secret456" not in str(caught.value)
    assert sorted(os.listdir(tmp_path)) == ["src"]
    # One that exists already is used: mirroring into it writes no name anew.
    dst.mkdir(parents=True)
    assert Mirror(src, dst, r, durable=False).run_once().copied == ["a.txt"]

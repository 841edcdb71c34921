"""The change cache on disk: one JSON text per directory, parsed only where a pass looks.

Format 2 (`sessionstore.mirror.cache`): `{"version": 2, "redactor": ..., "dirs":
{dir: "<JSON object: name -> 8 integers>"}}`. A no-op pass writes nothing; a
pass that changes one directory re-encodes that directory's group only; a
version 1 file (one flat object of paths) is read once and rewritten; a
malformed group costs its own directory reads, never rewrites.
"""

from __future__ import annotations

import os
from pathlib import Path

import orjson
import pytest
from mirror_helpers import SourceReads, dest_state, run, settle, write

from sessionstore.mirror.cache import CACHE_NAME

pytestmark = pytest.mark.timeout(60)


@pytest.fixture
def src(tmp_path: Path) -> Path:
    for i in range(12):
        write(tmp_path / "src" / f"d{i % 3}" / f"f{i}.txt", f"file {i}\n".encode())
    write(tmp_path / "src" / "top.txt", b"at the root\n")
    settle()
    return tmp_path / "src"


def load(dst: Path) -> dict[str, object]:
    doc = orjson.loads((dst / CACHE_NAME).read_bytes())
    assert isinstance(doc, dict)
    return doc


def groups(dst: Path) -> dict[str, dict[str, list[int]]]:
    dirs = load(dst)["dirs"]
    assert isinstance(dirs, dict)
    return {rel: orjson.loads(text) for rel, text in dirs.items()}


def test_the_cache_keeps_one_json_text_per_directory(src: Path, dst: Path) -> None:
    run(src, dst)
    doc = load(dst)
    assert doc["version"] == 2 and doc["redactor"] is None
    assert {k: type(v) for k, v in doc["dirs"].items()} == dict.fromkeys(  # type: ignore[attr-defined]
        ["", "d0", "d1", "d2"], str
    )
    found = groups(dst)
    assert sorted(found["d1"]) == ["f1.txt", "f10.txt", "f4.txt", "f7.txt"]
    assert list(found[""]) == ["top.txt"]
    st, dst_st = (src / "d1" / "f4.txt").stat(), (dst / "d1" / "f4.txt").stat()
    assert found["d1"]["f4.txt"] == [
        st.st_size,
        st.st_mtime_ns,
        st.st_ctime_ns,
        st.st_ino,
        st.st_dev,
        dst_st.st_size,
        dst_st.st_mtime_ns,
        dst_st.st_ino,
    ]


def test_a_no_op_pass_leaves_the_cache_file_as_it_was(src: Path, dst: Path) -> None:
    run(src, dst)
    before = (dst / CACHE_NAME).stat()
    data = (dst / CACHE_NAME).read_bytes()
    report = run(src, dst)
    assert report.unchanged == 13 and report.copied == []
    after = (dst / CACHE_NAME).stat()
    assert (after.st_ino, after.st_mtime_ns) == (before.st_ino, before.st_mtime_ns)
    assert (dst / CACHE_NAME).read_bytes() == data


def test_a_change_re_encodes_only_its_directory(src: Path, dst: Path) -> None:
    run(src, dst)
    before = load(dst)["dirs"]
    write(src / "d2" / "f5.txt", b"changed\n")
    write(src / "d3" / "new.txt", b"a new directory\n")
    settle()
    report = run(src, dst)
    assert sorted(report.copied) == ["d2/f5.txt", "d3/new.txt"]
    after = load(dst)["dirs"]
    assert isinstance(before, dict) and isinstance(after, dict)
    assert sorted(after) == ["", "d0", "d1", "d2", "d3"]
    assert {k: after[k] for k in ("", "d0", "d1")} == {k: before[k] for k in ("", "d0", "d1")}
    assert after["d2"] != before["d2"]
    assert orjson.loads(after["d2"]).keys() == orjson.loads(before["d2"]).keys()


def test_a_removed_directory_leaves_the_cache_with_delete(src: Path, dst: Path) -> None:
    run(src, dst, delete=True)
    for p in (src / "d0").iterdir():
        p.unlink()
    (src / "d0").rmdir()
    report = run(src, dst, delete=True)
    assert sorted(report.deleted) == ["d0/f0.txt", "d0/f3.txt", "d0/f6.txt", "d0/f9.txt"]
    assert not (dst / "d0").exists()
    assert sorted(groups(dst)) == ["", "d1", "d2"]


def test_without_delete_a_removed_directory_stays_the_mirrors(src: Path, dst: Path) -> None:
    run(src, dst)
    for p in (src / "d0").iterdir():
        p.unlink()
    (src / "d0").rmdir()
    assert run(src, dst).deleted == []
    assert "d0" in groups(dst)  # ownership is kept: a later --delete may still remove it
    report = run(src, dst, delete=True)
    assert len(report.deleted) == 4 and "d0" not in groups(dst)


def flatten(dst: Path) -> None:
    """Rewrite the cache as the version 1 file of the previous release would hold it."""
    doc = load(dst)
    files = {
        (f"{rel}/{name}" if rel else name): entry
        for rel, group in groups(dst).items()
        for name, entry in group.items()
    }
    flat = {"version": 1, "redactor": doc["redactor"], "files": files}
    (dst / CACHE_NAME).write_bytes(orjson.dumps(flat))


def test_a_version_1_cache_is_trusted_once_and_rewritten(
    src: Path, dst: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    run(src, dst)
    state, before = dest_state(dst), groups(dst)
    flatten(dst)
    spy = SourceReads(monkeypatch, src)
    report = run(src, dst)
    assert report.unchanged == 13 and report.copied == [] and spy.opens == []
    assert load(dst)["version"] == 2 and groups(dst) == before and dest_state(dst) == state


def test_delete_works_on_the_first_pass_after_the_upgrade(src: Path, dst: Path) -> None:
    run(src, dst)
    flatten(dst)
    (src / "d1" / "f4.txt").unlink()
    report = run(src, dst, delete=True)
    assert report.delete_skipped is None and report.deleted == ["d1/f4.txt"]
    assert "f4.txt" not in groups(dst)["d1"]


@pytest.mark.parametrize(
    "text",
    [
        pytest.param("not json", id="not-json"),
        pytest.param("[1, 2]", id="not-an-object"),
        pytest.param('{"f2.txt": [1, 2]}', id="short-entry"),
        pytest.param('{"f2.txt": "12345678"}', id="a-string"),
        pytest.param('{"f2.txt": {"a": 1}}', id="an-object"),
        pytest.param('{"f2.txt": 5}', id="a-number"),
    ],
)
def test_a_malformed_group_costs_its_directory_reads_never_rewrites(
    src: Path, dst: Path, monkeypatch: pytest.MonkeyPatch, text: str
) -> None:
    run(src, dst, delete=True)
    state = dest_state(dst)
    doc = load(dst)
    doc["dirs"]["d2"] = text  # type: ignore[index]
    (dst / CACHE_NAME).write_bytes(orjson.dumps(doc))
    (src / "d0" / "f3.txt").unlink()
    spy = SourceReads(monkeypatch, src)
    report = run(src, dst, delete=True)
    # d2's four files are read and found identical; the other directories stay read-free,
    # and --delete still trusts them.
    assert sorted(os.path.basename(p) for p in spy.opens) == [
        "f11.txt",
        "f2.txt",
        "f5.txt",
        "f8.txt",
    ]
    assert report.copied == [] and report.deleted == ["d0/f3.txt"]
    del state["d0/f3.txt"]
    assert dest_state(dst) == state
    assert sorted(groups(dst)["d2"]) == ["f11.txt", "f2.txt", "f5.txt", "f8.txt"]
    monkeypatch.undo()
    spy = SourceReads(monkeypatch, src)
    assert run(src, dst).unchanged == 12 and spy.opens == []


def test_non_utf8_names_round_trip_through_the_groups(tmp_path: Path, dst: Path) -> None:
    src = tmp_path / "odd"
    src.mkdir()
    raw = os.fsencode(src)
    os.mkdir(raw + b"/d\xff")
    for name in (b"/d\xff/f\xfe.txt", b"/d\xff/plain.txt", b"/top\xfa"):
        fd = os.open(raw + name, os.O_WRONLY | os.O_CREAT, 0o644)
        os.write(fd, b"bytes of " + name)
        os.close(fd)
    settle()
    assert sorted(run(src, dst).copied) == sorted(
        os.fsdecode(n) for n in (b"d\xff/f\xfe.txt", b"d\xff/plain.txt", b"top\xfa")
    )
    assert b"\\\\u0000" in (dst / CACHE_NAME).read_bytes()  # an encoded name in a group
    report = run(src, dst)
    assert report.unchanged == 3 and report.copied == []
    with open(raw + b"/d\xff/f\xfe.txt", "ab") as f:
        f.write(b" more")
    settle()
    assert run(src, dst).copied == [os.fsdecode(b"d\xff/f\xfe.txt")]
    assert os.path.exists(os.fsencode(dst) + b"/d\xff/f\xfe.txt")


def test_a_value_that_is_no_entry_is_dropped_and_the_cache_converges(src: Path, dst: Path) -> None:
    run(src, dst, delete=True)
    doc = load(dst)
    dirs = doc["dirs"]
    assert isinstance(dirs, dict)
    group = orjson.loads(dirs["d2"])
    group["ghost.txt"] = "not an entry"  # no such file in the source
    dirs["d2"] = orjson.dumps(group).decode()
    (dst / CACHE_NAME).write_bytes(orjson.dumps(doc))
    (dst / "d2" / "ghost.txt").write_bytes(b"not the mirror's\n")
    report = run(src, dst, delete=True)
    assert report.copied == [] and report.deleted == [] and report.unchanged == 13
    assert "ghost.txt" not in groups(dst)["d2"]  # not ours: dropped, never deleted
    assert (dst / "d2" / "ghost.txt").read_bytes() == b"not the mirror's\n"
    data = (dst / CACHE_NAME).read_bytes()
    assert run(src, dst, delete=True).unchanged == 13
    assert (dst / CACHE_NAME).read_bytes() == data

"""The change cache on disk: a head naming each directory, then its group, read where a pass looks.

Format 4 (`sessionstore.mirror.cache`), one JSON document: a first line
`{"version":4,"redactor":...,"dirs":[...],"sizes":[...],"groups":[`, then each
directory's group (name -> 8 integers, packed: `mirror_helpers.unpack_group`
decodes it on its own) on a line of its own, in the order of `dirs`, `sizes`
giving each one's length in bytes. A no-op pass writes nothing; a pass that
changes one directory re-encodes that directory's group only (the others are
copied as they were); files of version 1, 2 and 3 are read once and
rewritten; a malformed group costs its own directory reads, never rewrites; a
head that does not describe the file exactly makes the whole cache untrusted
(reads, never rewrites), and the next pass converges.
"""

from __future__ import annotations

import base64
import os
import struct
import subprocess
import sys
import tracemalloc
from collections.abc import Callable, Sequence
from pathlib import Path

import orjson
import pytest
from mirror_helpers import SourceReads, dest_state, pack_group, run, settle, unpack_group, write

from sessionstore.mirror.cache import _WINDOW, CACHE_NAME, Cache
from sessionstore.mirror.cache_file import read
from sessionstore.mirror.mirror import DIRTY_NAME, Mirror
from sessionstore.storage.local_tree_root import FdFile

pytestmark = pytest.mark.timeout(60)

Groups = dict[str, bytes]  # directory -> its group's bytes, as in the file


@pytest.fixture
def src(tmp_path: Path) -> Path:
    for i in range(12):
        write(tmp_path / "src" / f"d{i % 3}" / f"f{i}.txt", f"file {i}\n".encode())
    write(tmp_path / "src" / "top.txt", b"at the root\n")
    settle()
    return tmp_path / "src"


def load(dst: Path) -> dict[str, object]:
    doc = orjson.loads((dst / CACHE_NAME).read_bytes())  # the whole file is one JSON document
    assert isinstance(doc, dict)
    return doc


def raw(dst: Path) -> tuple[object, Groups]:
    """The redactor and each directory's group bytes, cut out of the file by the head alone
    (the reader's view), checked against the document's own `groups` array."""
    data = (dst / CACHE_NAME).read_bytes()
    line, _, rest = data.partition(b"\n")
    head = orjson.loads(line + b"]}")
    names, sizes = head["dirs"], head["sizes"]
    assert head["version"] == 4 and head["groups"] == [] and len(names) == len(sizes)
    found: Groups = {}
    offset = 0
    for name, size in zip(names, sizes, strict=True):
        found[name] = rest[offset : offset + size]
        offset += size
        separator = rest[offset : offset + 2]
        assert separator == (b",\n" if len(found) < len(names) else b"\n]")
        offset += 2
    assert rest[offset - 2 if names else 0 :] == b"\n]}\n"
    assert [orjson.loads(g) for g in found.values()] == load(dst)["groups"]
    return head["redactor"], found


def groups(dst: Path) -> dict[str, dict[str, list[int]]]:
    return {rel: unpack_group(text) for rel, text in raw(dst)[1].items()}


def write_cache(
    dst: Path,
    redactor: object,
    texts: Groups,
    *,
    sizes: Sequence[object] | None = None,
    version: int = 4,
) -> None:
    """A file as the format describes it (`sizes`: a head that says otherwise)."""
    head = {
        "version": version,
        "redactor": redactor,
        "dirs": list(texts),
        "sizes": [len(t) for t in texts.values()] if sizes is None else list(sizes),
        "groups": [],
    }
    line = orjson.dumps(head)[:-2] + b"\n"
    (dst / CACHE_NAME).write_bytes(line + b",\n".join(texts.values()) + b"\n]}\n")


def test_the_head_names_each_directory_and_the_length_of_its_group(src: Path, dst: Path) -> None:
    run(src, dst)
    doc = load(dst)
    assert doc["version"] == 4 and doc["redactor"] is None
    assert all(g.startswith(b'"') for g in raw(dst)[1].values())  # every group packed
    assert sorted(doc["dirs"]) == ["", "d0", "d1", "d2"]  # type: ignore[call-overload]
    # The head, a line a group, the closing line.
    assert (dst / CACHE_NAME).read_bytes().count(b"\n") == 1 + 4 + 1
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
    assert oct((dst / CACHE_NAME).stat().st_mode & 0o777) == "0o600"


def test_an_empty_source_writes_a_cache_with_no_group(tmp_path: Path, dst: Path) -> None:
    (tmp_path / "empty").mkdir()
    run(tmp_path / "empty", dst)
    assert load(dst)["dirs"] == [] and raw(dst)[1] == {}
    assert run(tmp_path / "empty", dst).errors == []


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
    before = raw(dst)[1]
    write(src / "d2" / "f5.txt", b"changed\n")
    write(src / "d3" / "new.txt", b"a new directory\n")
    settle()
    report = run(src, dst)
    assert sorted(report.copied) == ["d2/f5.txt", "d3/new.txt"]
    after = raw(dst)[1]
    assert sorted(after) == ["", "d0", "d1", "d2", "d3"]
    assert {k: after[k] for k in ("", "d0", "d1")} == {k: before[k] for k in ("", "d0", "d1")}
    assert after["d2"] != before["d2"]
    assert unpack_group(after["d2"]).keys() == unpack_group(before["d2"]).keys()


def test_groups_are_written_in_the_order_the_pass_entered_them(tmp_path: Path, dst: Path) -> None:
    """So the next pass reads them front to back: each directory after its parent."""
    src = tmp_path / "src"
    for path in ("a/b/c/1.txt", "a/b/2.txt", "a/3.txt", "z/y/4.txt", "5.txt"):
        write(src / path, b"x\n")
    settle()
    run(src, dst)
    order = list(raw(dst)[1])
    assert sorted(order) == ["", "a", "a/b", "a/b/c", "z/y"]  # z holds no file: no group
    for rel in order[1:]:
        parent = rel.rpartition("/")[0]
        assert order.index(parent if parent != "z" else "") < order.index(rel)


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
    """Rewrite the cache as the version 1 file of an earlier release would hold it."""
    files = {
        (f"{rel}/{name}" if rel else name): entry
        for rel, group in groups(dst).items()
        for name, entry in group.items()
    }
    flat = {"version": 1, "redactor": raw(dst)[0], "files": files}
    (dst / CACHE_NAME).write_bytes(orjson.dumps(flat))


def as_text(dst: Path) -> None:
    """Rewrite the cache as the version 2 file of the previous release would hold it."""
    redactor = raw(dst)[0]
    dirs = {k: orjson.dumps(v).decode() for k, v in groups(dst).items()}
    (dst / CACHE_NAME).write_bytes(orjson.dumps({"version": 2, "redactor": redactor, "dirs": dirs}))


def as_wide(dst: Path) -> None:
    """Rewrite the cache as the version 3 file of the previous release would hold it."""
    redactor = raw(dst)[0]
    write_cache(dst, redactor, {k: orjson.dumps(v) for k, v in groups(dst).items()}, version=3)


OLDER = pytest.mark.parametrize(
    "older", [flatten, as_text, as_wide], ids=["version-1", "version-2", "version-3"]
)


@OLDER
def test_an_older_cache_is_trusted_once_and_rewritten(
    src: Path, dst: Path, monkeypatch: pytest.MonkeyPatch, older: Callable[[Path], None]
) -> None:
    run(src, dst)
    state, before = dest_state(dst), groups(dst)
    older(dst)
    spy = SourceReads(monkeypatch, src)
    report = run(src, dst)
    assert report.unchanged == 13 and report.copied == [] and spy.opens == []
    assert load(dst)["version"] == 4 and groups(dst) == before and dest_state(dst) == state
    assert all(g.startswith(b'"') for g in raw(dst)[1].values())


@OLDER
def test_delete_works_on_the_first_pass_after_the_upgrade(
    src: Path, dst: Path, older: Callable[[Path], None]
) -> None:
    run(src, dst)
    older(dst)
    (src / "d1" / "f4.txt").unlink()
    report = run(src, dst, delete=True)
    assert report.delete_skipped is None and report.deleted == ["d1/f4.txt"]
    assert "f4.txt" not in groups(dst)["d1"]


def _packed(data: bytes) -> bytes:
    return b'"' + data.hex().encode() + b'"'


@pytest.mark.parametrize(
    "text",
    [
        pytest.param(b"not json", id="not-json"),
        pytest.param(b"[1, 2]", id="not-an-object"),
        pytest.param(b'{"f2.txt": [1, 2]}', id="short-entry"),
        pytest.param(b'{"f2.txt": "12345678"}', id="a-string"),
        pytest.param(b'{"f2.txt": {"a": 1}}', id="an-object"),
        pytest.param(b'{"f2.txt": 5}', id="a-number"),
        pytest.param(b'{"f2.txt": [1, 2, 3, 4, 5, 6, 7, 8], "f5', id="cut"),
        pytest.param(b'"not hex!"', id="packed-not-hex"),
        pytest.param(b'"0100000"', id="packed-odd-length"),
        pytest.param(_packed(struct.pack("<I", 1)), id="packed-count-without-entries"),
        pytest.param(pack_group({"f2.txt": [1] * 8})[:-6] + b'"', id="packed-cut"),
        pytest.param(
            _packed(struct.pack("<I8q", 1, *[1] * 8) + b"f2.txt\0f5.txt"), id="packed-one-name-more"
        ),
        pytest.param(_packed(struct.pack("<I8q", 2, *[1] * 8) + b"f2.txt"), id="packed-count-more"),
        pytest.param(_packed(b"\xff" * 4 + b"f2.txt"), id="packed-huge-count"),
    ],
)
def test_a_malformed_group_costs_its_directory_reads_never_rewrites(
    src: Path, dst: Path, monkeypatch: pytest.MonkeyPatch, text: bytes
) -> None:
    run(src, dst, delete=True)
    state = dest_state(dst)
    redactor, texts = raw(dst)
    texts["d2"] = text
    write_cache(dst, redactor, texts)
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


def _shifted(sizes: list[int]) -> list[int]:
    """The same total, the boundaries moved: every group cut in the wrong place."""
    return [sizes[0] + 1, *sizes[1:-1], sizes[-1] - 1]


def _resized(sizes: Callable[[list[int]], Sequence[object]]) -> Callable[[Path], None]:
    """Damage: the head's sizes replaced by `sizes(the true ones)`, the groups as they were."""

    def damage(path: Path) -> None:
        redactor, texts = raw(path.parent)
        write_cache(path.parent, redactor, texts, sizes=sizes([len(v) for v in texts.values()]))

    return damage


DEEP = b"[" * 100_000 + b"]" * 100_000  # past the parser's recursion limit


def _rewritten(change: Callable[[bytes], bytes]) -> Callable[[Path], None]:
    """Damage: the file's bytes replaced by `change(them)`."""

    def damage(path: Path) -> None:
        path.write_bytes(change(path.read_bytes()))

    return damage


@pytest.mark.parametrize(
    "damage",
    [
        pytest.param(_rewritten(lambda b: b[:-3]), id="cut-short"),
        pytest.param(_rewritten(lambda b: b + b"{}"), id="longer"),
        pytest.param(_rewritten(lambda b: b.partition(b"\n")[0] + b"\n"), id="head-only"),
        pytest.param(_rewritten(lambda b: b.replace(b"\n", b" ")), id="no-line-break"),
        pytest.param(_rewritten(lambda b: b.replace(b":4,", b":5,", 1)), id="other-version"),
        pytest.param(_rewritten(lambda b: b.replace(b"null", b'"\xff"', 1)), id="not-utf-8"),
        pytest.param(_rewritten(lambda b: b.replace(b"null", DEEP, 1)), id="nested-deep"),
        pytest.param(_resized(lambda n: n[:-1]), id="a-size-short"),
        pytest.param(_resized(lambda n: [-k for k in n]), id="negative"),
        pytest.param(_resized(lambda n: [True] * len(n)), id="booleans"),
        pytest.param(_resized(lambda n: [1 << 40] * len(n)), id="huge"),
        # The right total, one size negative: offsets that would run backwards.
        pytest.param(_resized(lambda n: [n[0] + 999, n[1] - 999, *n[2:]]), id="negative-in-sum"),
        pytest.param(_resized(lambda n: [str(k) for k in n]), id="strings"),
    ],
)
def test_a_head_that_does_not_describe_the_file_costs_reads_never_rewrites(
    src: Path, dst: Path, monkeypatch: pytest.MonkeyPatch, damage: Callable[[Path], None]
) -> None:
    run(src, dst, delete=True)
    state = dest_state(dst)
    damage(dst / CACHE_NAME)
    (src / "d0" / "f3.txt").unlink()
    spy = SourceReads(monkeypatch, src)
    report = run(src, dst, delete=True)
    assert len(spy.opens) == 12 and report.copied == [] and dest_state(dst) == state
    # Untrusted: no file is known to be the mirror's, so d0/f3.txt stays.
    assert report.deleted == [] and report.delete_skipped is not None
    monkeypatch.undo()
    spy = SourceReads(monkeypatch, src)
    assert run(src, dst).unchanged == 12 and spy.opens == []  # rebuilt: read-free again


def test_sizes_that_cut_every_group_wrong_cost_every_directory_reads_never_rewrites(
    src: Path, dst: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The head's total is right but each boundary is one byte off: no group parses, so
    every file is compared and none is known to be the mirror's (nothing deleted)."""
    run(src, dst, delete=True)
    state = dest_state(dst)
    redactor, texts = raw(dst)
    write_cache(dst, redactor, texts, sizes=_shifted([len(v) for v in texts.values()]))
    (src / "d0" / "f3.txt").unlink()
    spy = SourceReads(monkeypatch, src)
    report = run(src, dst, delete=True)
    assert len(spy.opens) == 12 and report.copied == [] and report.deleted == []
    assert dest_state(dst) == state
    monkeypatch.undo()
    spy = SourceReads(monkeypatch, src)
    assert run(src, dst).unchanged == 12 and spy.opens == []


def test_two_directories_of_one_name_make_the_cache_untrusted(src: Path, dst: Path) -> None:
    run(src, dst, delete=True)
    redactor, texts = raw(dst)
    line = orjson.dumps(
        {
            "version": 4,
            "redactor": redactor,
            "dirs": ["d1", "d1"],
            "sizes": [len(texts["d1"]), len(texts["d2"])],
            "groups": [],
        }
    )
    (dst / CACHE_NAME).write_bytes(
        line[:-2] + b"\n" + texts["d1"] + b",\n" + texts["d2"] + b"\n]}\n"
    )
    (src / "d0" / "f3.txt").unlink()
    report = run(src, dst, delete=True)
    assert report.copied == [] and report.deleted == [] and report.delete_skipped is not None


def _victim_entry(victim: Path) -> list[int]:
    """A cache entry claiming `victim` (its destination part: size, mtime, inode)."""
    st = victim.lstat()
    return [1, 1, 1, 1, 1, st.st_size, st.st_mtime_ns, st.st_ino]


@pytest.mark.parametrize(
    "directory", ["..", "../outside", "d0/../..", "d0/../../outside", "/", "d0//x", "d0/./x"]
)
def test_a_cache_naming_a_directory_outside_the_destination_is_untrusted(
    src: Path, dst: Path, tmp_path: Path, directory: str
) -> None:
    run(src, dst, delete=True)
    victim = write(tmp_path / "outside" / "victim", b"precious")
    _, texts = raw(dst)
    claim = orjson.dumps({"victim": _victim_entry(victim)})
    write_cache(dst, None, {**texts, directory: claim})
    (src / "d0" / "f3.txt").unlink()  # something to delete, so --delete walks
    report = run(src, dst, delete=True)
    assert report.deleted == [] and report.delete_skipped is not None
    assert victim.read_bytes() == b"precious"
    assert (dst / "d0" / "f3.txt").exists()  # untrusted: nothing deleted at all
    report = run(src, dst, delete=True)  # the cache is rewritten from this pass's own
    assert report.deleted == [] and report.delete_skipped is None
    assert victim.read_bytes() == b"precious" and groups(dst).keys() == {"", "d0", "d1", "d2"}


@pytest.mark.parametrize("form", [pack_group, orjson.dumps], ids=["packed", "wide"])
@pytest.mark.parametrize(
    "name", ["../../outside/victim", "..", ".", "", "x/../../../outside/victim"]
)
def test_a_group_naming_a_file_outside_its_directory_never_steers_a_removal(
    src: Path, dst: Path, tmp_path: Path, name: str, form: Callable[[object], bytes]
) -> None:
    run(src, dst, delete=True)
    victim = write(tmp_path / "outside" / "victim", b"precious")
    _, texts = raw(dst)
    group = {**unpack_group(texts["d0"]), name: _victim_entry(victim)}
    write_cache(dst, None, {**texts, "d0": form(group)})
    (src / "d0" / "f3.txt").unlink()  # the group is then not found as it was: leftovers
    report = run(src, dst, delete=True)
    assert report.deleted == ["d0/f3.txt"] and report.errors == []
    assert victim.read_bytes() == b"precious" and (tmp_path / "outside").is_dir()
    assert name not in groups(dst)["d0"]


def test_the_cache_shrinking_under_the_pass_costs_reads_and_converges(
    tmp_path: Path, dst: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Another process cuts the cache file down to its head in place while a pass copies.

    The groups beyond the window read so far are gone: their directories are compared
    (read, found the same, none rewritten). A group kept as stored that must be copied
    into the new cache cannot be read back whole: the cache is then not written, and an
    error says so. Either way nothing else changes, and the next pass converges.
    """
    src = tmp_path / "src"
    for i in range(2000):  # ~200 KB of groups: more than one window
        write(src / f"d{i:04}" / "f.txt", f"file {i}\n".encode())
    write(src / "d0000" / "big.bin", b"x" * (1 << 20))
    settle()
    run(src, dst)
    state = dest_state(dst)
    write(src / "d0000" / "big.bin", b"y" * (1 << 20))  # a copy in chunks: the hook runs
    settle()
    cut = len((dst / CACHE_NAME).read_bytes().partition(b"\n")[0]) + 1
    done: list[int] = []

    def truncate(_rel: str) -> None:
        if not done:
            code = f"import os; os.truncate({str(dst / CACHE_NAME)!r}, {cut})"
            done.append(subprocess.run([sys.executable, "-c", code], check=True).returncode)

    spy = SourceReads(monkeypatch, src)
    mirror = Mirror(src, dst, durable=False, chunk_size=1 << 16, _on_chunk=truncate)
    report = mirror.run_once()
    monkeypatch.undo()
    assert done == [0] and report.copied == ["d0000/big.bin"] and report.unchanged == 2000
    compared = [p for p in spy.opens if not p.endswith("big.bin")]
    errors = [e["path"] for e in report.errors]
    assert errors in ([], [CACHE_NAME]) and (compared or errors)  # the fault had an effect
    assert all("the change cache shrank while" in e["error"] for e in report.errors)
    del state["d0000/big.bin"]
    left = {k: v for k, v in dest_state(dst).items() if k != "d0000/big.bin"}
    # The cache not written, the in-progress flag stays: it holds the claim on big.bin.
    assert (left.pop(DIRTY_NAME, None) is not None) == bool(errors)
    assert left == state
    assert (dst / "d0000" / "big.bin").read_bytes() == b"y" * (1 << 20)
    again = run(src, dst)
    assert again.copied == [] and again.errors == [] and again.unchanged == 2001
    assert not (dst / DIRTY_NAME).exists()
    spy = SourceReads(monkeypatch, src)
    assert run(src, dst).unchanged == 2001 and spy.opens == []


def test_non_utf8_names_round_trip_through_the_groups(tmp_path: Path, dst: Path) -> None:
    src = tmp_path / "odd"
    src.mkdir()
    raw_src = os.fsencode(src)
    os.mkdir(raw_src + b"/d\xff")
    for name in (b"/d\xff/f\xfe.txt", b"/d\xff/plain.txt", b"/top\xfa"):
        fd = os.open(raw_src + name, os.O_WRONLY | os.O_CREAT, 0o644)
        os.write(fd, b"bytes of " + name)
        os.close(fd)
    settle()
    assert sorted(run(src, dst).copied) == sorted(
        os.fsdecode(n) for n in (b"d\xff/f\xfe.txt", b"d\xff/plain.txt", b"top\xfa")
    )
    data = (dst / CACHE_NAME).read_bytes()
    assert b"\\u0000" in data.partition(b"\n")[0]  # an encoded directory name in the head
    odd = "\0" + base64.b64encode(b"d\xff").decode()  # the head's spelling of the directory
    # A packed group holds a name as the file system spells it: its own bytes.
    assert sorted(groups(dst)[odd]) == sorted(os.fsdecode(n) for n in (b"f\xfe.txt", b"plain.txt"))
    report = run(src, dst)
    assert report.unchanged == 3 and report.copied == []
    with open(raw_src + b"/d\xff/f\xfe.txt", "ab") as f:
        f.write(b" more")
    settle()
    assert run(src, dst).copied == [os.fsdecode(b"d\xff/f\xfe.txt")]
    assert os.path.exists(os.fsencode(dst) + b"/d\xff/f\xfe.txt")


def test_a_value_that_is_no_entry_is_dropped_and_the_cache_converges(src: Path, dst: Path) -> None:
    run(src, dst, delete=True)
    redactor, texts = raw(dst)
    group: dict[str, object] = {**unpack_group(texts["d2"])}
    group["ghost.txt"] = "not an entry"  # no such file in the source
    texts["d2"] = orjson.dumps(group)
    write_cache(dst, redactor, texts)
    (dst / "d2" / "ghost.txt").write_bytes(b"not the mirror's\n")
    report = run(src, dst, delete=True)
    assert report.copied == [] and report.deleted == [] and report.unchanged == 13
    assert "ghost.txt" not in groups(dst)["d2"]  # not ours: dropped, never deleted
    assert (dst / "d2" / "ghost.txt").read_bytes() == b"not the mirror's\n"
    data = (dst / CACHE_NAME).read_bytes()
    assert run(src, dst, delete=True).unchanged == 13
    assert (dst / CACHE_NAME).read_bytes() == data


def test_writing_the_cache_holds_about_its_own_bytes(
    tmp_path: Path, dst: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A new cache of 8,000 one-file groups is written holding a few times its own size
    (each group's bytes sized to fit), not 4 KiB a group as orjson's results hold."""
    src = tmp_path / "src"
    for i in range(8000):
        write(src / f"d{i:04}" / "f", b"x")
    settle()
    peaks: list[int] = []
    real = Cache.save

    def measured(self: Cache, *args: object) -> None:
        tracemalloc.reset_peak()
        start = tracemalloc.get_traced_memory()[0]
        real(self, *args)  # type: ignore[arg-type]
        peaks.append(tracemalloc.get_traced_memory()[1] - start)

    monkeypatch.setattr(Cache, "save", measured)
    tracemalloc.start()
    try:
        assert len(run(src, dst).copied) == 8000
    finally:
        tracemalloc.stop()
    size = (dst / CACHE_NAME).stat().st_size
    assert len(peaks) == 1 and peaks[0] < 4 * size + (2 << 20)  # + two write batches


class CountedFile(FdFile):
    """The pass's own file class on a real fd, counting its reads."""

    def __init__(self, path: Path) -> None:
        super().__init__(os.open(path, os.O_RDONLY), path.stat().st_size)
        self.reads = 0

    def read_at(self, offset: int, n: int) -> bytes:
        self.reads += 1
        return super().read_at(offset, n)


@pytest.mark.parametrize("backwards", [False, True], ids=["as-written", "last-first"])
def test_groups_read_in_either_direction_take_a_window_at_a_time(
    tmp_path: Path, dst: Path, backwards: bool
) -> None:
    """The pass reads groups front to back, its forked verifier back to front: each way,
    every group's bytes exactly, in about one read per window of them."""
    src = tmp_path / "src"
    for i in range(600):
        write(src / f"dir-{i:04}" / f"{'long-file-name-' * 8}{i}.txt", b"x\n")
    settle()
    run(src, dst)
    texts = raw(dst)[1]
    assert sum(map(len, texts.values())) > 2 * _WINDOW
    file = CountedFile(dst / CACHE_NAME)
    found = read(file)
    assert found is not None
    cache = Cache(found[1], b"salt", trusted=True, file=found[2])
    start = file.reads
    order = list(reversed(texts)) if backwards else list(texts)
    try:
        assert {rel: cache.text(cache.groups[rel]) for rel in order} == texts
    finally:
        cache.close()
    windows = sum(map(len, texts.values())) // _WINDOW + 1
    assert file.reads - start <= windows + 1


def _mirrored_then_b_removed(tmp_path: Path) -> tuple[Path, Path]:
    """A source of `a` and `b` mirrored, then `b` removed from the source."""
    src, dst = tmp_path / "src", tmp_path / "dst"
    write(src / "a", b"a")
    write(src / "b", b"b")
    settle()
    run(src, dst)
    (src / "b").unlink()
    return src, dst


def test_a_hard_linked_cache_is_trusted_and_replaced_not_written_through(tmp_path: Path) -> None:
    """A `cp -al` snapshot of the destination links the cache: it is still the mirror's
    own, and the rewrite is a rename, which leaves the snapshot's copy as it was."""
    src, dst = _mirrored_then_b_removed(tmp_path)
    os.link(dst / CACHE_NAME, tmp_path / "snapshot")
    before = (tmp_path / "snapshot").read_bytes()
    report = run(src, dst, delete=True)
    assert report.deleted == ["b"] and report.delete_skipped is None
    assert (tmp_path / "snapshot").read_bytes() == before
    assert (dst / CACHE_NAME).stat().st_nlink == 1


def test_a_cache_another_user_made_is_untrusted(tmp_path: Path) -> None:
    """A destination in a shared directory: another user's cache, planted where the
    destination owner's would be, proves nothing; the pass writes one of its own."""
    if os.geteuid() != 0:
        pytest.skip("only root can give a file to another user")
    src, dst = _mirrored_then_b_removed(tmp_path)
    os.chown(dst / CACHE_NAME, 65534, 65534)
    report = run(src, dst, delete=True)
    assert report.deleted == [] and report.delete_skipped is not None
    assert (dst / "b").exists() and (dst / CACHE_NAME).stat().st_uid == 0
    # Its own cache now, trusted: b, which no cache of its own recorded, stays for good.
    report = run(src, dst, delete=True)
    assert report.delete_skipped is None and report.deleted == [] and (dst / "b").exists()


def test_a_cache_file_too_long_to_be_one_is_never_read_whole(
    src: Path, dst: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """1 GiB with no line break (sparse: no disk) is no cache a mirror wrote: untrusted
    after its first 64 MiB, every file compared, and the pass holds no more than that."""
    run(src, dst)
    state = dest_state(dst)
    with open(dst / CACHE_NAME, "r+b") as f:
        f.truncate(0)
        f.truncate(1 << 30)
    spy = SourceReads(monkeypatch, src)
    tracemalloc.start()
    try:
        report = run(src, dst)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert report.copied == [] and report.unchanged == 13 and len(spy.opens) == 13
    assert peak < 160 << 20 and dest_state(dst) == state
    monkeypatch.undo()
    spy = SourceReads(monkeypatch, src)
    assert run(src, dst).unchanged == 13 and spy.opens == []  # rebuilt: read-free again

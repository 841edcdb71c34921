"""What --delete proves gone when the names of vouched directories are not kept.

A pass keeps a directory's listing (the names its source accounts for) only
where it may be asked about them: a directory every entry of which is an
unchanged file of its group or a subdirectory the pass entered keeps none,
and `finish._Vouched` answers for it from the new groups. These tests drive
--delete through such directories: what is still in the source is never
deleted, what is gone is, with and without redacted names.
"""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest
from mirror_helpers import pack_group, paths, run, settle, unpack_group, write

from sessionstore.mirror.cache import CACHE_NAME
from sessionstore.redact.redactor import Redactor

pytestmark = pytest.mark.timeout(60)

SECRET = "sk-listing-0123456789"


def redactor() -> Redactor:
    r = Redactor()
    r.add(SECRET)
    return r


def make_source(src: Path, top: str = "top") -> None:
    """`top` with three subdirectories of one file each, and a file at the root."""
    for i in range(3):
        write(src / top / f"d{i}" / f"f{i}.txt", f"file {i}\n".encode())
    write(src / "root.txt", b"at the root\n")
    settle()


def busy(path: Path) -> object:
    """A `_on_chunk` hook that appends to `path` on every chunk read: never settles."""

    def grow(_rel: str) -> None:
        with path.open("ab") as f:
            f.write(b".")

    return grow


@pytest.mark.parametrize("secret", [False, True], ids=["plain", "redacted-names"])
def test_a_file_still_in_the_source_is_never_deleted_below_vouched_directories(
    tmp_path: Path, dst: Path, secret: bool
) -> None:
    """The busy file is not re-established (unstable), so its entry is a leftover; every
    directory above it is vouched (its other entries unchanged, its subdirectories
    entered), and --delete must still find the file in the source."""
    src = tmp_path / "src"
    top = f"tok-{SECRET}" if secret else "top"
    make_source(src, top)
    log = write(src / top / "d1" / "busy.log", b"x" * 8192)
    settle()
    kwargs: dict[str, object] = {"delete": True, "chunk_size": 512}
    if secret:
        kwargs["redactor"] = redactor()
    first = run(src, dst, **kwargs)
    dtop = "tok-REDACTED" if secret else "top"
    assert f"{dtop}/d1/busy.log" in first.copied
    log.write_bytes(b"y" * 8192)
    settle()
    report = run(src, dst, _on_chunk=busy(log), **kwargs)
    assert paths(report.unstable) == [f"{dtop}/d1/busy.log"]
    assert report.deleted == [] and report.delete_skipped is None
    assert (dst / dtop / "d1" / "busy.log").read_bytes() == b"x" * 8192
    cache = orjson.loads((dst / CACHE_NAME).read_bytes())
    group = unpack_group(orjson.dumps(cache["groups"][cache["dirs"].index(f"{dtop}/d1")]))
    assert "busy.log" in group  # still the mirror's: a later pass may delete it


@pytest.mark.parametrize("secret", [False, True], ids=["plain", "redacted-names"])
def test_what_is_gone_below_vouched_directories_is_deleted(
    tmp_path: Path, dst: Path, secret: bool
) -> None:
    src = tmp_path / "src"
    top = f"tok-{SECRET}" if secret else "top"
    make_source(src, top)
    kwargs: dict[str, object] = {"delete": True}
    if secret:
        kwargs["redactor"] = redactor()
    run(src, dst, **kwargs)
    dtop = "tok-REDACTED" if secret else "top"
    (src / top / "d2" / "f2.txt").unlink()
    (src / top / "d2").rmdir()
    report = run(src, dst, **kwargs)
    assert report.deleted == [f"{dtop}/d2/f2.txt"] and not (dst / dtop / "d2").exists()
    assert (dst / dtop / "d0" / "f0.txt").exists() and (dst / dtop / "d1" / "f1.txt").exists()


def test_a_cached_directory_whose_name_is_now_an_unchanged_file_deletes_nothing(
    tmp_path: Path, dst: Path
) -> None:
    """A cache that holds both `top/d1/x` (a file, unchanged) and a group for a directory
    `top/d1/x` (edited, or stale): the source holds the name as a file, so nothing under
    it is in the source; the destination has no such directory either, so nothing is
    deleted and the group is dropped."""
    src = tmp_path / "src"
    make_source(src)
    write(src / "top" / "d1" / "x", b"a file\n")
    settle()
    run(src, dst, delete=True)
    data = (dst / CACHE_NAME).read_bytes()
    line, _, _ = data.partition(b"\n")
    doc = orjson.loads(data)
    groups = [orjson.dumps(g) for g in doc["groups"]]
    first = unpack_group(groups[0])
    stale = pack_group({"y": first[next(iter(first))]})
    head = orjson.loads(line + b"]}")
    head["dirs"].append("top/d1/x")
    head["sizes"].append(len(stale))
    groups.append(stale)
    body = b",\n".join(groups) + b"\n]}\n"
    (dst / CACHE_NAME).write_bytes(orjson.dumps(head)[:-2] + b"\n" + body)
    report = run(src, dst, delete=True)
    assert report.deleted == [] and report.errors == [] and report.unchanged == 5
    after = orjson.loads((dst / CACHE_NAME).read_bytes())
    assert "top/d1/x" not in after["dirs"] and "top/d1" in after["dirs"]

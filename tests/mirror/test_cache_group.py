"""One directory's group in the change cache: packed, or wide past int64; never a crash.

Laws over generated groups (names of any bytes a file system allows, values of
any size): a group reads back as written; a packed one is what the format says
(`mirror_helpers.unpack_group`, written apart from the code under test); any
bytes at all parse to a group or to nothing, never to an exception. The passes
at the end run the real mirror over files whose times int64 cannot hold.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from mirror_helpers import SourceReads, pack_group, run, settle, unpack_group, write

from sessionstore.mirror.cache import CACHE_NAME
from sessionstore.mirror.cache_group import ENTRY_LEN, dump_group, parse_group

INT64 = st.integers(-(1 << 63), (1 << 63) - 1)
ANY_INT = st.integers(-(1 << 80), 1 << 80)
# A file name: any bytes but NUL and '/', not '.' or '..' (as os.fsdecode gives it).
NAMES = (
    st.binary(min_size=1, max_size=12)
    .filter(lambda b: b"\0" not in b and b"/" not in b and b not in (b".", b".."))
    .map(os.fsdecode)
)


def groups(values: st.SearchStrategy[int]) -> st.SearchStrategy[dict[str, list[int]]]:
    entries = st.lists(values, min_size=ENTRY_LEN, max_size=ENTRY_LEN)
    return st.dictionaries(NAMES, entries, min_size=1, max_size=20)


@settings(max_examples=300, deadline=None)
@given(groups(INT64))
def test_a_group_of_int64_values_is_packed_as_the_format_says(group: dict[str, list[int]]) -> None:
    text = dump_group(group)
    assert text.startswith(b'"') and text.endswith(b'"')
    assert json.loads(text)  # one JSON string: the file stays one JSON document
    assert unpack_group(text) == group == parse_group(text)
    assert parse_group(pack_group(group)) == group


@settings(max_examples=300, deadline=None)
@given(groups(ANY_INT))
def test_a_group_reads_back_as_written_whatever_its_values(group: dict[str, list[int]]) -> None:
    text = dump_group(group)
    fits = all(-(1 << 63) <= v < 1 << 63 for entry in group.values() for v in entry)
    assert text.startswith(b'"' if fits else b"{")
    assert parse_group(text) == group


@settings(max_examples=500, deadline=None)
@given(st.binary(max_size=200) | st.binary(max_size=200).map(lambda b: b'"' + b + b'"'))
def test_any_bytes_parse_to_a_group_or_to_nothing(text: bytes) -> None:
    assert isinstance(parse_group(text), dict)


@pytest.mark.parametrize(
    "value",
    ["8 chars!", [1] * 7, [1] * 9, [1.5] * 8, [True] * 8, ["1"] * 8, None, {"a": 1}],
    ids=repr,
)
def test_only_entries_of_integers_under_names_are_written(value: object) -> None:
    group = {"kept": [1] * 8, "other": value, "..": [2] * 8, "a/b": [3] * 8}
    assert parse_group(dump_group(group)) == {"kept": [1] * 8}  # type: ignore[arg-type]


def test_a_group_with_nothing_to_write_is_an_empty_object() -> None:
    assert dump_group({"..": [1] * 8}) == b"{}" and parse_group(b"{}") == {}


def test_a_deeply_nested_wide_group_is_nothing() -> None:
    assert parse_group(b"[" * 100_000 + b"]" * 100_000) == {}
    assert parse_group(b'{"a":' + b"[" * 100_000 + b"]" * 100_000 + b"}") == {}


def test_a_wide_name_with_a_lone_surrogate_is_no_group() -> None:
    assert parse_group(b'{"\\ud800": [1, 2, 3, 4, 5, 6, 7, 8]}') == {}


@pytest.mark.parametrize("ns", [-(10**18), 10**19], ids=["before-1970", "after-2262"])
def test_a_file_whose_time_is_far_from_now_is_still_read_free_when_unchanged(
    tmp_path: Path, dst: Path, monkeypatch: pytest.MonkeyPatch, ns: int
) -> None:
    """Before 1970 the times are negative (packed as they are); after 2262 they do not
    fit int64, and the group is written wide. Either way a no-op pass reads nothing."""
    src = tmp_path / "src"
    old = write(src / "d" / "old.bin", b"an odd time\n")
    write(src / "d" / "plain.txt", b"a plain file\n")
    os.utime(old, ns=(ns, ns))
    if old.stat().st_mtime_ns != ns:
        pytest.skip("this file system cannot hold that time")
    settle()
    assert sorted(run(src, dst).copied) == ["d/old.bin", "d/plain.txt"]
    data = (dst / CACHE_NAME).read_bytes()
    group = data.split(b"\n")[-3]  # the root holds no file: d's is the only group
    assert group.startswith(b'"' if ns < 0 else b"{")
    assert unpack_group(group)["old.bin"][1] == ns
    spy = SourceReads(monkeypatch, src)
    report = run(src, dst)
    assert report.unchanged == 2 and report.copied == [] and spy.opens == []
    assert (dst / CACHE_NAME).read_bytes() == data

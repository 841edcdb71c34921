"""`journal.outside`: the check that keeps a claim, or a change cache's directory, from
naming a path that is not below the destination (it steers `--delete`)."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from sessionstore.storage.journal import outside

# Names as hostile as a file system allows, with the parts that are no name mixed in.
_PART = st.one_of(
    st.sampled_from(["", ".", "..", "...", ". ", "a\n", "\n.", "a\n..", "\0", "x\0y"]),
    st.text(alphabet="./\n\0ab", max_size=4).filter(lambda s: "/" not in s),
)
_PATH = st.lists(_PART, min_size=1, max_size=4).map("/".join)


def _bad(path: str) -> bool:
    return "\0" in path or any(part in ("", ".", "..") for part in path.split("/"))


@given(st.lists(_PATH, max_size=6))
def test_outside_is_any_path_with_a_part_that_is_no_name(paths: list[str]) -> None:
    assert outside(paths) == any(map(_bad, paths))


def test_each_way_out_is_caught_wherever_it_is() -> None:
    for bad in ("..", ".", "", "/a", "a/", "a//b", "a/../b", "a/.", "../a", "a/b\0"):
        for paths in ([bad], ["ok", bad], [bad, "ok/x"], ["a", bad, "b"]):
            assert outside(paths), paths


def test_names_with_line_breaks_and_dots_are_names() -> None:
    # A line break is part of a name: "a\n.." is one name, not "a" and "..".
    assert not outside(["a\n..", "\n.", "...", "a/...b/.c", ". /x"])
    assert not outside([])

"""What a TARGET names (`sessionstore.store.target`): a session id in the store, else a path,
else a unique prefix of an id."""

from __future__ import annotations

from pathlib import Path

import pytest

from sessionstore.errors import AmbiguousTarget, SessionNotFound
from sessionstore.store.session import Store
from sessionstore.store.target import (
    STORE_ENV,
    default_store_root,
    prefix_matches,
    resolve_destination,
    resolve_target,
    store_root,
)


def test_the_default_store_is_the_environment_then_the_home(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv(STORE_ENV, str(tmp_path / "elsewhere"))
    assert default_store_root() == tmp_path / "elsewhere" == store_root(None)
    monkeypatch.delenv(STORE_ENV)
    monkeypatch.setenv("HOME", str(tmp_path))
    assert default_store_root() == tmp_path / ".sessionstore"
    assert store_root("~/s") == tmp_path / "s"


def test_an_id_in_the_store_comes_before_a_path_of_that_name(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = Store(tmp_path / "store")
    session = store.create(id="abc", pid=None)
    monkeypatch.chdir(tmp_path)
    (tmp_path / "abc").mkdir()  # a directory named like the id, in the working directory
    assert resolve_target("abc", store.root).path == session.path
    assert resolve_target("./abc", store.root).path.resolve() == tmp_path / "abc"
    assert resolve_target(str(session.path)).path == session.path


def test_a_target_naming_nothing_is_session_not_found(tmp_path: Path) -> None:
    with pytest.raises(SessionNotFound) as raised:
        resolve_target("nope", tmp_path / "store")
    assert raised.value.target == "nope" and raised.value.store == tmp_path / "store"
    assert str(raised.value).endswith("list sessions with `sessionstore inspect`")
    with pytest.raises(SessionNotFound):
        resolve_target("Not/An/Id", tmp_path / "store")


def test_a_destination_is_a_session_a_path_or_a_likely_typo(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = Store(tmp_path / "store")
    store.create(id="abc", pid=None)
    monkeypatch.chdir(tmp_path)
    assert resolve_destination("abc", store.root) == store.root / "abc"
    assert resolve_destination("./new", store.root) == Path("./new")  # a path: made by the mirror
    assert resolve_destination("Out/Dir", store.root) == Path("Out/Dir")
    with pytest.raises(SessionNotFound, match=r"write \./typo1$") as raised:
        resolve_destination("typo1", store.root)
    assert raised.value.hint is not None and not (tmp_path / "typo1").exists()
    (tmp_path / "typo1").mkdir()  # an existing directory of that name is meant
    assert resolve_destination("typo1", store.root) == Path("typo1")


def test_a_unique_prefix_names_its_session(tmp_path: Path) -> None:
    store = Store(tmp_path / "store")
    one = store.create(id="1a2b3c4d", pid=None)
    store.create(id="1a9f0000", pid=None)
    assert resolve_target("1a2", store.root).path == one.path
    assert resolve_target("1a2b3c4d", store.root).path == one.path
    assert prefix_matches("1a", store.root) == ["1a2b3c4d", "1a9f0000"]
    assert prefix_matches("Not/An/Id", store.root) == []
    assert resolve_destination("1a2", store.root) == one.path


def test_an_ambiguous_prefix_lists_the_candidates(tmp_path: Path) -> None:
    store = Store(tmp_path / "store")
    for n in range(12):
        store.create(id=f"ab{n:02d}", pid=None)
    with pytest.raises(AmbiguousTarget) as raised:
        resolve_target("ab", store.root)
    assert raised.value.candidates == [f"ab{n:02d}" for n in range(12)]
    assert raised.value.store == store.root and raised.value.target == "ab"
    assert str(raised.value) == (
        f"session prefix 'ab' is ambiguous in store {store.root}: it matches "
        "ab00, ab01, ab02, ab03, ab04, ab05, ab06, ab07, ab08, ab09 and 2 more; "
        "give more characters of the id"
    )
    with pytest.raises(AmbiguousTarget):
        resolve_destination("ab", store.root)
    with pytest.raises(AmbiguousTarget):
        resolve_target("ab1", store.root)  # ab10 and ab11
    assert resolve_target("ab11", store.root).id == "ab11"


def test_a_prefix_matching_nothing_is_not_found(tmp_path: Path) -> None:
    store = Store(tmp_path / "store")
    store.create(id="abc", pid=None)
    with pytest.raises(SessionNotFound):
        resolve_target("abd", store.root)
    with pytest.raises(SessionNotFound):
        resolve_target("ab", tmp_path / "no-store")


def test_only_sessions_match_a_prefix(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    store = Store(tmp_path / "store")
    session = store.create(id="abc", pid=None)
    (store.root / "abd").symlink_to(session.path)  # a symlink in the store is no session
    (store.root / "abe").write_text("a file")
    (store.root / ".sstmp-1-abf").mkdir()
    assert prefix_matches("ab", store.root) == ["abc"]
    assert resolve_target("ab", store.root).path == session.path
    monkeypatch.chdir(tmp_path)
    (tmp_path / "ab").mkdir()  # an existing directory comes before a prefix of an id
    assert resolve_target("ab", store.root).path.resolve() == tmp_path / "ab"

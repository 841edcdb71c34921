"""What a TARGET names (`sessionstore.store.target`): a session id in the store, else a path."""

from __future__ import annotations

from pathlib import Path

import pytest

from sessionstore.errors import SessionNotFound
from sessionstore.store.session import Store
from sessionstore.store.target import (
    STORE_ENV,
    default_store_root,
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

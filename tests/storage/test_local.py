"""LocalStorage on a real filesystem: the seam's laws, and what an agent may plant in the tree."""

from __future__ import annotations

import errno
import os
import stat
import subprocess
import sys
from pathlib import Path
from unittest import mock

import pytest

from sessionstore._fs.atomic import TEMP_PREFIX
from sessionstore.errors import InvalidInput, StorageError, TooLarge
from sessionstore.storage.base import Listed, Storage
from sessionstore.storage.local import LocalStorage


@pytest.fixture
def storage(tmp_path: Path) -> LocalStorage:
    return LocalStorage(tmp_path / "root")


def names(storage: LocalStorage, prefix: str) -> dict[str, bool]:
    return {item.name: item.is_prefix for item in storage.list(prefix)}


def no_temps(root: Path) -> bool:
    return not any(p.name.startswith(TEMP_PREFIX) for p in root.rglob("*"))


def test_is_a_storage(storage: LocalStorage) -> None:
    backend: Storage = storage
    assert backend.get("absent", 1) is None


def test_put_get_round_trip_makes_parents_with_the_formats_modes(storage: LocalStorage) -> None:
    storage.put("s/trials/1/task.yml", b"model: x\n")
    assert storage.get("s/trials/1/task.yml", 100) == b"model: x\n"
    storage.put("s/trials/1/task.yml", b"model: y\n")
    assert storage.get("s/trials/1/task.yml", 100) == b"model: y\n"
    root = storage.root
    assert stat.S_IMODE((root / "s" / "trials").stat().st_mode) == 0o700
    assert stat.S_IMODE((root / "s/trials/1/task.yml").stat().st_mode) == 0o644
    storage.put("s/run.sh", b"#!/bin/sh\n", mode=0o755)
    assert stat.S_IMODE((root / "s/run.sh").stat().st_mode) == 0o755
    assert no_temps(root)


def test_create_writes_once(storage: LocalStorage) -> None:
    assert storage.create("s/report.json", b"{}") is True
    assert storage.create("s/report.json", b'{"x": 1}') is False
    assert storage.get("s/report.json", 10) == b"{}"
    assert no_temps(storage.root)


def test_create_removes_its_temp_when_a_write_fails(storage: LocalStorage) -> None:
    storage.put("s/a", b"")
    error = OSError(5, "EIO")
    with mock.patch("os.fsync", side_effect=error), pytest.raises(OSError) as info:
        storage.create("s/marker", b"x")
    assert info.value is error  # an I/O error is the caller's to see, as it is
    assert storage.get("s/marker", 10) is None
    assert no_temps(storage.root)


def test_absent_is_an_answer(storage: LocalStorage) -> None:
    assert storage.get("a/b/c", 10) is None
    assert list(storage.list("")) == []
    assert list(storage.list("a/b")) == []
    storage.remove_tree("a/b")
    storage.put("a/x", b"1")
    assert storage.get("a/b/c", 10) is None


def test_list_names_objects_and_prefixes_never_temps(storage: LocalStorage) -> None:
    storage.put("s/trials/1/trial.json", b"{}")
    storage.put("s/session.json", b"{}")
    (storage.root / "s" / f"{TEMP_PREFIX}1-ab").mkdir()
    assert names(storage, "") == {"s": True}
    assert names(storage, "s") == {"trials": True, "session.json": False}
    assert list(storage.list("s/trials")) == [Listed("1", True)]


def test_get_is_bounded(storage: LocalStorage) -> None:
    storage.put("big", b"x" * 1000)
    assert storage.get("big", 1000) == b"x" * 1000
    with mock.patch("os.read", wraps=os.read) as read, pytest.raises(TooLarge) as info:
        storage.get("big", 999)
    assert read.call_count == 0  # refused by fstat, nothing read
    assert info.value.key == "big" and info.value.limit == 999


def test_get_never_reads_more_than_limit_plus_one(storage: LocalStorage) -> None:
    storage.put("grows", b"")
    real_fstat = os.fstat

    def small(fd: int) -> os.stat_result:  # a file that grew after its fstat
        st = real_fstat(fd)
        return os.stat_result((*st[:6], 0, *st[7:]))

    with open(storage.root / "grows", "wb") as f:
        f.write(b"y" * 300_000)
    asked: list[int] = []
    real_read = os.read

    def read(fd: int, n: int) -> bytes:
        asked.append(n)
        return real_read(fd, n)

    with (
        mock.patch("os.fstat", small),
        mock.patch("os.read", read),
        pytest.raises(TooLarge),
    ):
        storage.get("grows", 100_000)
    assert sum(asked) <= 100_001


def test_a_symlinked_component_is_refused_never_followed(
    storage: LocalStorage, tmp_path: Path
) -> None:
    outside = tmp_path / "outside"
    (outside / "1").mkdir(parents=True)
    (outside / "1" / "trial.json").write_bytes(b"SECRET")
    storage.put("s/session.json", b"{}")
    (storage.root / "s" / "trials").symlink_to(outside, target_is_directory=True)
    for call in (
        lambda: storage.get("s/trials/1/trial.json", 100),
        lambda: list(storage.list("s/trials")),
        lambda: storage.put("s/trials/1/x", b"1"),
        lambda: storage.create("s/trials/1/trial.json", b"1"),
        lambda: storage.claim("s/trials/2"),
        lambda: storage.remove_tree("s/trials/1"),
    ):
        with pytest.raises(StorageError) as info:
            call()
        assert info.value.key == "s/trials"
        assert "symlink" in info.value.problem
    assert sorted(p.name for p in outside.rglob("*")) == ["1", "trial.json"]
    assert (outside / "1" / "trial.json").read_bytes() == b"SECRET"


def test_a_symlink_at_the_key_is_refused_and_removed_as_a_link(
    storage: LocalStorage, tmp_path: Path
) -> None:
    secret = tmp_path / "secret"
    secret.write_bytes(b"SECRET")
    storage.put("s/x", b"")
    (storage.root / "s" / "marker").symlink_to(secret)
    with pytest.raises(StorageError) as info:
        storage.get("s/marker", 100)
    assert info.value.key == "s/marker"
    assert storage.create("s/marker", b"mine") is False
    assert names(storage, "s")["marker"] is False
    storage.remove_tree("s")
    assert secret.read_bytes() == b"SECRET"
    assert not (storage.root / "s").exists()


@pytest.mark.timeout(10)
def test_a_fifo_at_a_key_or_component_never_hangs(storage: LocalStorage) -> None:
    storage.put("s/x", b"")
    os.mkfifo(storage.root / "s" / "trial.json")
    os.mkfifo(storage.root / "s" / "trials")
    with pytest.raises(StorageError, match="FIFO, not a regular file") as info:
        storage.get("s/trial.json", 100)
    assert info.value.key == "s/trial.json"
    with pytest.raises(StorageError, match="FIFO, not a directory") as info:
        storage.get("s/trials/1/trial.json", 100)
    assert info.value.key == "s/trials"
    with pytest.raises(StorageError):
        list(storage.list("s/trials"))
    assert names(storage, "s")["trials"] is False


def test_a_file_where_a_prefix_belongs(storage: LocalStorage) -> None:
    storage.put("s/trials", b"not a directory")
    with pytest.raises(StorageError, match="not a directory") as info:
        storage.put("s/trials/1/x", b"")
    assert info.value.key == "s/trials"


@pytest.mark.parametrize(
    "key",
    [
        pytest.param("", id="empty"),
        pytest.param("/abs", id="absolute"),
        pytest.param("a/", id="trailing-slash"),
        pytest.param("a//b", id="empty-component"),
        pytest.param("a/./b", id="dot"),
        pytest.param("../b", id="dotdot"),
        pytest.param("a/..", id="trailing-dotdot"),
        pytest.param("a\0b", id="nul"),
    ],
)
def test_invalid_keys_are_refused_before_any_io(storage: LocalStorage, key: str) -> None:
    for call in (
        lambda: storage.get(key, 1),
        lambda: storage.put(key, b""),
        lambda: storage.create(key, b""),
        lambda: storage.remove_tree(key),
        lambda: storage.claim(key),
    ):
        with pytest.raises(InvalidInput):
            call()
    if key:
        with pytest.raises(InvalidInput):
            list(storage.list(key))
    assert not storage.root.exists()


def test_claim_is_a_prefix_taken_once(storage: LocalStorage) -> None:
    assert storage.claim("s/trials/1") is True
    assert storage.claim("s/trials/1") is False
    assert list(storage.list("s/trials")) == [Listed("1", True)]


def test_remove_tree_is_iterative(storage: LocalStorage) -> None:
    depth = 10_000
    fd = os.open(storage.root.parent, os.O_RDONLY | os.O_DIRECTORY)
    try:  # built by fd: a 20,000-character path is past PATH_MAX
        os.mkdir("root", dir_fd=fd)
        current = os.open("root", os.O_RDONLY | os.O_DIRECTORY, dir_fd=fd)
        os.mkdir("t", dir_fd=current)
        for i in range(depth):
            nxt = os.open("t", os.O_RDONLY | os.O_DIRECTORY, dir_fd=current)
            os.close(current)
            current = nxt
            os.mkdir("t", dir_fd=current)
            if i % 1000 == 0:
                os.close(os.open("f", os.O_WRONLY | os.O_CREAT, 0o600, dir_fd=current))
        os.close(current)
    finally:
        os.close(fd)
    storage.remove_tree("t")
    assert list(storage.list("")) == []


CREATOR = """
import sys
from sessionstore.storage.local import LocalStorage
root, key, me, go = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4]
import os, time
deadline = time.monotonic() + 20
while not os.path.exists(go) and time.monotonic() < deadline:
    time.sleep(0.001)
print("won" if LocalStorage(root).create(key, me.encode()) else "lost")
"""


@pytest.mark.timeout(60)
def test_two_processes_racing_create_exactly_one_wins(tmp_path: Path) -> None:
    root = tmp_path / "root"
    LocalStorage(root).put("s/trials/1/task.yml", b"")
    for round_ in range(5):
        key = f"s/trials/1/marker{round_}"
        go = tmp_path / f"go{round_}"
        procs = [
            subprocess.Popen(
                [sys.executable, "-c", CREATOR, str(root), key, f"writer{i}", str(go)],
                stdout=subprocess.PIPE,
                text=True,
            )
            for i in range(2)
        ]
        go.touch()
        results = [p.communicate(timeout=30)[0].strip() for p in procs]
        assert sorted(results) == ["lost", "won"]
        winner = results.index("won")
        assert LocalStorage(root).get(key, 100) == f"writer{winner}".encode()
    assert no_temps(root)


def test_create_without_hard_links_still_publishes_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # vfat and some FUSE mounts refuse link(2) with EPERM: create falls back to rename.
    storage = LocalStorage(tmp_path)

    def no_links(*args: object, **kwargs: object) -> None:
        raise OSError(errno.EPERM, "Operation not permitted")

    monkeypatch.setattr(os, "link", no_links)
    assert storage.create("a/marker.json", b"{}")
    assert not storage.create("a/marker.json", b'{"second": true}')
    monkeypatch.undo()
    assert storage.get("a/marker.json", 10) == b"{}"
    assert sorted(item.name for item in storage.list("a")) == ["marker.json"]


def test_a_cached_directory_swapped_for_a_symlink_is_never_read_through(tmp_path: Path) -> None:
    # Reads keep ancestor fds open; one swapped for a symlink after it was cached must
    # be noticed (the path no longer names it) and refused, not read through.
    outside = tmp_path / "outside"
    (outside / "3").mkdir(parents=True)
    (outside / "3" / "trial.json").write_text('{"secret": 1}')
    storage = LocalStorage(tmp_path / "root")
    storage.put("s/trials/3/trial.json", b"{}")
    assert storage.get("s/trials/3/trial.json", 100) == b"{}"  # caches s/ and s/trials/
    trials = tmp_path / "root" / "s" / "trials"
    trials.rename(tmp_path / "moved")
    trials.symlink_to(outside)
    with pytest.raises(StorageError) as info:
        storage.get("s/trials/3/trial.json", 100)
    assert info.value.key == "s/trials"
    assert [item.name for item in storage.list("s")] == ["trials"]
    with pytest.raises(StorageError):
        list(storage.list("s/trials"))


def _get_or_error(storage: LocalStorage, key: str, limit: int) -> bytes | StorageError | None:
    try:
        return storage.get(key, limit)
    except StorageError as exc:
        return exc


def _same(a: bytes | StorageError | None, b: bytes | StorageError | None) -> bool:
    if isinstance(a, StorageError) or isinstance(b, StorageError):
        return type(a) is type(b) and (a.key, a.problem) == (b.key, b.problem)  # type: ignore[union-attr]
    return a == b


@pytest.mark.timeout(10)
def test_get_each_answers_each_name_as_get_does(storage: LocalStorage, tmp_path: Path) -> None:
    # One unusable object never stops the others, and each answer is get's (or its error).
    outside = tmp_path / "outside"
    (outside / "9").mkdir(parents=True)
    (outside / "9" / "trial.json").write_bytes(b"SECRET")
    storage.put("s/trials/1/trial.json", b"one")
    storage.put("s/trials/2/trial.json", b"x" * 50)  # too large for the limit
    storage.claim("s/trials/3")  # in flight: no marker
    storage.claim("s/trials/4")
    os.mkfifo(storage.root / "s/trials/4/trial.json")
    (storage.root / "s/trials/5").symlink_to(outside / "9", target_is_directory=True)
    os.mkfifo(storage.root / "s/trials/7")
    (storage.root / "u").mkdir()
    (storage.root / "u/trials").symlink_to(outside, target_is_directory=True)
    names = ["1", "2", "3", "4", "5", "6", "7", "1"]
    storage.get_each("s/trials", names, "trial.json", 10)  # the read cache keeps its fds
    before = len(os.listdir("/proc/self/fd"))
    answers = storage.get_each("s/trials", names, "trial.json", 10)
    assert len(os.listdir("/proc/self/fd")) == before  # nothing else left open
    expected = [_get_or_error(storage, f"s/trials/{n}/trial.json", 10) for n in names]
    assert all(_same(a, b) for a, b in zip(answers, expected, strict=True)), (answers, expected)
    assert answers[0] == answers[7] == b"one" and answers[2] is None and answers[5] is None
    assert isinstance(answers[1], TooLarge)
    assert isinstance(answers[3], StorageError) and "FIFO" in answers[3].problem
    assert isinstance(answers[4], StorageError) and answers[4].key == "s/trials/5"
    assert isinstance(answers[6], StorageError) and answers[6].key == "s/trials/7"
    linked = storage.get_each("u/trials", ["9"], "trial.json", 10)  # the prefix is a symlink
    assert isinstance(linked[0], StorageError) and linked[0].key == "u/trials"
    assert storage.get_each("absent/trials", ["1", "2"], "trial.json", 10) == [None, None]
    assert storage.get_each("s/trials", [], "trial.json", 10) == []


@pytest.mark.parametrize(
    ("prefix", "names", "leaf"),
    [
        pytest.param("s/../x", ["1"], "trial.json", id="prefix-dotdot"),
        pytest.param("", ["1"], "trial.json", id="prefix-root"),
        pytest.param("s/trials", ["1", "a/b"], "trial.json", id="name-slash"),
        pytest.param("s/trials", ["..", "1"], "trial.json", id="name-dotdot"),
        pytest.param("s/trials", [""], "trial.json", id="name-empty"),
        pytest.param("s/trials", ["1\0"], "trial.json", id="name-nul"),
        pytest.param("s/trials", ["1"], "../trial.json", id="leaf-path"),
    ],
)
def test_get_each_refuses_invalid_keys_before_any_io(
    storage: LocalStorage, prefix: str, names: list[str], leaf: str
) -> None:
    with pytest.raises(InvalidInput):
        storage.get_each(prefix, names, leaf, 10)
    assert not storage.root.exists()


def test_a_threads_cached_fds_are_closed_when_it_ends(tmp_path: Path) -> None:
    import threading

    storage = LocalStorage(tmp_path / "root")
    for s in range(20):  # more directories than the cache holds
        storage.put(f"s{s}/trials/1/trial.json", b"{}")
    before = len(os.listdir("/proc/self/fd"))

    def read() -> None:
        for s in range(20):
            assert storage.get(f"s{s}/trials/1/trial.json", 10) == b"{}"
        assert len(os.listdir("/proc/self/fd")) <= before + 16  # bounded while it lives

    thread = threading.Thread(target=read)
    thread.start()
    thread.join()
    assert len(os.listdir("/proc/self/fd")) == before


def test_a_held_prefix_reads_the_directory_the_block_began_with(tmp_path: Path) -> None:
    # `holding`: every read below the prefix starts from the fd opened when the block
    # began, so a swap for a symlink to an outside tree during the block is never read
    # through; after the block the path is checked again, and refused.
    outside = tmp_path / "outside"
    (outside / "trials").mkdir(parents=True)
    (outside / "session.json").write_bytes(b'{"outside": 1}')
    storage = LocalStorage(tmp_path / "root")
    storage.put("s/session.json", b'{"inside": 1}')
    storage.put("s/trials/1/trial.json", b"{}")
    session = tmp_path / "root" / "s"
    before = len(os.listdir("/proc/self/fd"))
    with storage.holding("s"):
        session.rename(tmp_path / "moved")
        session.symlink_to(outside)
        assert storage.get("s/session.json", 100) == b'{"inside": 1}'
        assert names(storage, "s/trials") == {"1": True}
        assert storage.stat_each("s/trials", ["1"], "trial.json")[0] is not None
        with storage.holding("s"):  # an inner block of the same prefix holds nothing more
            assert storage.get("s/session.json", 100) == b'{"inside": 1}'
        assert storage.get("s/session.json", 100) == b'{"inside": 1}'  # still held
    with pytest.raises(StorageError) as info:
        storage.get("s/session.json", 100)
    assert info.value.key == "s"
    assert len(os.listdir("/proc/self/fd")) <= before  # the held fd is closed


def test_a_prefix_that_cannot_be_held_answers_as_without_a_hold(tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "session.json").write_bytes(b"{}")
    storage = LocalStorage(tmp_path / "root")
    storage.put("real/session.json", b"{}")
    (tmp_path / "root" / "link").symlink_to(outside)
    with storage.holding("absent"):
        assert storage.get("absent/session.json", 100) is None
        storage.put("absent/session.json", b"{}")  # made meanwhile: reached by its path
        assert storage.get("absent/session.json", 100) == b"{}"
    with storage.holding("link"), pytest.raises(StorageError) as info:
        storage.get("link/session.json", 100)
    assert info.value.key == "link"
    with pytest.raises(InvalidInput):
        storage.holding("../real")


def test_writes_during_a_hold_reach_their_directory_by_its_path(tmp_path: Path) -> None:
    # A hold serves reads only: a cache written during the block into a session renamed
    # away meanwhile (as `rm` renames a session before deleting it) is not written there.
    storage = LocalStorage(tmp_path / "root")
    storage.put("s/session.json", b"{}")
    session = tmp_path / "root" / "s"
    away = tmp_path / "root" / "away"
    with storage.holding("s"):
        session.rename(away)
        assert storage.get("s/session.json", 100) == b"{}"  # read from the held directory
        storage.put_cache("s/.cache.json", b"{}")  # the path names nothing: skipped
        storage.put("s/new.json", b"{}")  # a put makes its directory again, by the path
    assert sorted(os.listdir(away)) == ["session.json"]
    assert sorted(os.listdir(session)) == ["new.json"]


def test_a_hold_left_open_by_a_thread_that_ended_closes_nothing_later(tmp_path: Path) -> None:
    # A generator suspended inside a hold outlives the thread that opened it: the
    # thread's cache closes the held fd when it ends; closing the generator afterwards
    # must not close that fd number again (by then it is another file's).
    import threading
    from collections.abc import Generator

    storage = LocalStorage(tmp_path / "root")
    storage.put("s/session.json", b"{}")

    def reader() -> Generator[bytes | None, None, None]:
        with storage.holding("s"):
            yield storage.get("s/session.json", 100)

    gen = reader()
    thread = threading.Thread(target=lambda: next(gen))
    thread.start()
    thread.join()
    others = [os.open(tmp_path, os.O_RDONLY) for _ in range(8)]  # reuse the freed numbers
    try:
        gen.close()
        for fd in others:
            os.fstat(fd)  # each still open
    finally:
        for fd in others:
            os.close(fd)


def test_holding_the_root_holds_the_store_directory(tmp_path: Path) -> None:
    storage = LocalStorage(tmp_path / "root")
    storage.put("s/session.json", b"{}")
    with storage.holding(""):
        (tmp_path / "root").rename(tmp_path / "moved")
        assert names(storage, "") == {"s": True}
        assert storage.get("s/session.json", 100) == b"{}"
    assert storage.get("s/session.json", 100) is None  # by the path again: nothing there

"""The store engine against the real filesystem: layout, states, ordering, ids, immutability."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import orjson
import pytest
from hypothesis import given
from hypothesis import strategies as st
from inspect_helpers import metrics, run_cli, trial

from sessionstore._fs.atomic import TEMP_PREFIX
from sessionstore.errors import (
    InvalidId,
    InvalidInput,
    RecordCompleted,
    RecordNotFound,
    SessionExists,
    SessionNotFound,
    StorageError,
)
from sessionstore.format.models import Manifest
from sessionstore.format.names import MANIFEST
from sessionstore.format.schema import json_schema
from sessionstore.store.session import RecordState, Session, Store

json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**53), 2**53) | st.text(max_size=20),
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4)
    ),
    max_leaves=12,
)


@pytest.fixture
def store(tmp_path: Path) -> Store:
    return Store(tmp_path / "store")


def test_create_writes_manifest_constraints_and_collections(store: Store) -> None:
    session = store.create(name="tune", trials=3, constraints={"max_ttft_ms": 200})
    assert session.id is not None and len(session.id) == 8
    assert int(session.id, 16) >= 0 and session.id == session.id.lower()
    assert stat.S_IMODE(session.path.stat().st_mode) == 0o700
    assert sorted(os.listdir(session.path)) == [
        "constraints.json",
        "service",
        "session.json",
        "trials",
    ]
    manifest = orjson.loads((session.path / "session.json").read_bytes())
    assert manifest["format"] == 1
    assert manifest["id"] == session.id
    assert manifest["name"] == "tune"
    assert manifest["trials"] == 3
    assert manifest["status"] == "running"
    assert manifest["pid"] == os.getpid()
    assert isinstance(manifest["pid_started_at"], float)
    assert manifest["previous"] == [] and manifest["labels"] == {}
    assert session.constraints() == {"max_ttft_ms": 200}


def test_constraints_file_is_written_even_when_empty(store: Store) -> None:
    session = store.create()
    assert (session.path / "constraints.json").read_bytes().strip() == b"{}"


def test_constraints_every_reader_would_read_as_torn_are_refused(
    store: Store, tmp_path: Path
) -> None:
    # Written once and never changed: constraints.json nested over 246 levels (orjson
    # writes up to 254) read as torn in inspect, doctor and the contract, for good.
    deep: dict[str, object] = {"a": 1}
    for _ in range(249):
        deep = {"a": deep}
    with pytest.raises(InvalidInput, match=r"^constraints: would read as torn \(cannot be"):
        store.create(id="deep", constraints=deep)
    given = tmp_path / "deep.json"
    given.write_bytes(orjson.dumps(deep))
    made = run_cli("new", "--store", str(store.root), "--id", "deep", "--constraints", f"@{given}")
    assert (made.returncode, made.stdout) == (1, "")
    assert made.stderr.startswith("Error: constraints: would read as torn (cannot be written")
    assert not store.root.exists() or os.listdir(store.root) == []


def test_planned_trials_past_the_largest_record_number_are_refused(
    store: Store, tmp_path: Path
) -> None:
    # No record can be numbered past MAX_RECORD; 2**70 was an orjson traceback.
    made = run_cli("new", "--store", str(store.root), "--trials", str(2**70))
    assert made.returncode == 2 and "Traceback" not in made.stderr
    assert "Invalid value for '--trials'" in made.stderr
    with pytest.raises(InvalidInput, match="trials: Input should be less than or equal to"):
        store.create(trials=2**70)
    assert not store.root.exists() or os.listdir(store.root) == []
    assert (store.create(trials=10**18 - 1).manifest or {})["trials"] == 10**18 - 1


def test_create_without_writer_records_no_pid(store: Store) -> None:
    manifest = store.create(pid=None).manifest
    assert manifest is not None
    assert manifest["pid"] is None and manifest["pid_started_at"] is None


@pytest.mark.parametrize(
    "bad",
    ["..", "../x", "a/b", "A", "Abc", "", "-a", "a_b", "a.b", "x" * 42, "a\0b", " a", "é"],
)
def test_invalid_ids_are_refused(store: Store, bad: str) -> None:
    with pytest.raises(InvalidId, match="invalid session id"):
        store.create(id=bad)
    assert not store.root.exists() or os.listdir(store.root) == []


@pytest.mark.parametrize("good", ["a", "0", "my-session-1", "x" * 41, "9-"])
def test_valid_user_ids_are_accepted(store: Store, good: str) -> None:
    assert store.create(id=good).id == good
    assert store.open(good).path == store.root / good


def test_duplicate_id_is_refused_without_touching_the_original(store: Store) -> None:
    first = store.create(id="dup", name="first")
    with pytest.raises(SessionExists):
        store.create(id="dup", name="second")
    assert Session.open(first.path).manifest["name"] == "first"  # type: ignore[index]
    assert [p for p in os.listdir(store.root) if p.startswith(TEMP_PREFIX)] == []


def test_open_unknown_session_raises_lookup_error(store: Store) -> None:
    with pytest.raises(SessionNotFound) as info:
        store.open("nope")
    assert isinstance(info.value, LookupError)
    assert "sessionstore inspect" in str(info.value)


def test_previous_must_exist(store: Store) -> None:
    with pytest.raises(SessionNotFound):
        store.create(previous=["missing"])


def test_previous_is_a_list_not_one_string(store: Store) -> None:
    # Iterated, "ab" named the sessions "a" and "b": an error about a session never named.
    store.create(id="ab")
    with pytest.raises(InvalidInput, match="previous: a list of session ids, not one string 'ab'"):
        store.create(previous="ab")
    assert [s.id for s in store.sessions()] == ["ab"]


def test_sessions_are_listed_newest_first_and_skip_foreign_entries(store: Store) -> None:
    ids = [store.create(id=f"s{i}").id for i in range(3)]
    (store.root / "NOT-AN-ID").mkdir()
    (store.root / "stray.txt").write_text("x")
    (store.root / f"{TEMP_PREFIX}1-abc").mkdir()
    assert [s.id for s in store.sessions()] == list(reversed(ids))


def test_sessions_without_a_creation_time_keep_their_place_when_written_beside(
    tmp_path: Path,
) -> None:
    """No usable `created_at`: ordered by the manifest's mtime, which `inspect` writing a
    summary index beside it (a rename into the session directory) does not move; a raw
    workspace, with no manifest, by its directory's. Through the CLI, so the index is
    really written between the listings."""
    store = Store(tmp_path / "store")
    for i, when in enumerate((1_000_000, 2_000_000)):
        session = store.create(id=f"s{i}", trials=2, pid=None)
        trial(session, metrics(1.0))
        manifest = session.path / MANIFEST
        manifest.write_bytes(manifest.read_bytes().replace(b'"created_at"', b'"created"'))
        os.utime(manifest, (when, when))
    raw = store.root / "s2"
    (raw / "trials").mkdir(parents=True)
    os.utime(raw, (1_500_000, 1_500_000))
    os.utime(store.root / "s0", (3_000_000, 3_000_000))  # what an index write would do
    first = run_cli("inspect", "--json", "--store", str(store.root))
    second = run_cli("inspect", "--json", "--store", str(store.root))
    assert first.returncode == second.returncode == 0, first.stderr + second.stderr
    assert [r["id"] or Path(r["path"]).name for r in orjson.loads(first.stdout)] == [
        "s1",
        "s2",
        "s0",
    ]
    assert second.stdout == first.stdout


def test_sessions_of_a_missing_store_is_empty(tmp_path: Path) -> None:
    assert Store(tmp_path / "absent").sessions() == []


@given(numbers=st.sets(st.integers(min_value=1, max_value=10**6), max_size=25))
def test_records_sort_numerically_and_ignore_foreign_names(
    tmp_path_factory: pytest.TempPathFactory, numbers: set[int]
) -> None:
    session = Store(tmp_path_factory.mktemp("s")).create()
    for n in numbers:
        (session.trials.path / str(n)).mkdir()
    foreign = ["010", "0", "abc", "1.5", "-3", f"{TEMP_PREFIX}9-ff"]
    for name in foreign:
        (session.trials.path / name).mkdir()
    (session.trials.path / "7x").write_text("file")
    assert [r.n for r in session.trials.records()] == sorted(numbers)
    assert session.trials.numbers() == sorted(numbers)
    assert session.trials.foreign() == sorted(["010", "0", "abc", "1.5", "-3", "7x"])


def test_ten_sorts_after_nine(store: Store) -> None:
    session = store.create()
    for _ in range(11):
        session.trials.begin()
    assert [r.n for r in session.trials.records()] == list(range(1, 12))
    latest = session.trials.latest()
    assert latest is not None and latest.n == 11


# The fields a trial marker's schema describes are checked when it is written
# (`store.sealed`; tests/store/test_sealed.py): a harness's own fields round-trip as given.
_DESCRIBED = frozenset(json_schema("trial")["properties"])
harness_objects = st.dictionaries(
    st.text(max_size=10).filter(lambda key: key not in _DESCRIBED), json_values, max_size=6
)


@given(record=harness_objects)
def test_completed_record_round_trips_through_disk(
    tmp_path_factory: pytest.TempPathFactory, record: dict[str, object]
) -> None:
    session = Store(tmp_path_factory.mktemp("s")).create()
    writer = session.trials.begin()
    writer.complete(record)
    read = Session.open(session.path).trials.get(writer.n)
    assert read.state is RecordState.COMPLETED
    assert read.data == record
    assert read.error is None


@given(
    name=st.none() | st.text(max_size=30),
    trials=st.none() | st.integers(min_value=1, max_value=10**6),
    labels=st.dictionaries(st.text(max_size=8), st.text(max_size=8), max_size=4),
)
def test_manifest_round_trips_through_disk(
    tmp_path_factory: pytest.TempPathFactory,
    name: str | None,
    trials: int | None,
    labels: dict[str, str],
) -> None:
    store = Store(tmp_path_factory.mktemp("s"))
    created = store.create(name=name, trials=trials, labels=labels)
    manifest = Manifest.model_validate(store.open(created.id or "").manifest)
    assert (manifest.name, manifest.trials, manifest.labels) == (name, trials, labels)
    assert manifest.id == created.id


MARKER_CASES = {
    "object": (b'{"failed": false}', RecordState.COMPLETED),
    "empty object": (b"{}", RecordState.COMPLETED),
    "list": (b"[1, 2]", RecordState.TORN),
    "number": (b"42", RecordState.TORN),
    "string": (b'"done"', RecordState.TORN),
    "null": (b"null", RecordState.TORN),
    "truncated": (b'{"failed": fal', RecordState.TORN),
    "empty file": (b"", RecordState.TORN),
    "binary": (b"\x00\xff\xfe{", RecordState.TORN),
}


@pytest.mark.parametrize("case", sorted(MARKER_CASES))
def test_marker_content_decides_the_state(store: Store, case: str) -> None:
    content, expected = MARKER_CASES[case]
    session = store.create()
    writer = session.trials.begin()
    (writer.path / "trial.json").write_bytes(content)
    record = session.trials.get(writer.n)
    assert record.state is expected
    assert (record.error is None) == (expected is RecordState.COMPLETED)
    if expected is RecordState.TORN:
        assert record.error is not None and record.error.startswith("trial.json: ")


@given(content=st.binary(max_size=64))
def test_any_marker_bytes_give_completed_only_for_a_json_object(
    tmp_path_factory: pytest.TempPathFactory, content: bytes
) -> None:
    session = Store(tmp_path_factory.mktemp("s")).create()
    writer = session.service.begin()
    (writer.path / "verification.json").write_bytes(content)
    try:
        is_object = isinstance(orjson.loads(content), dict)
    except orjson.JSONDecodeError:
        is_object = False
    state = session.service.get(writer.n).state
    assert state is (RecordState.COMPLETED if is_object else RecordState.TORN)


def test_marker_that_is_a_directory_is_torn_not_fatal(store: Store) -> None:
    session = store.create()
    writer = session.trials.begin()
    (writer.path / "trial.json").mkdir()
    record = session.trials.get(writer.n)
    assert record.state is RecordState.TORN and "directory" in (record.error or "")


def test_one_torn_record_hides_nothing(store: Store) -> None:
    session = store.create()
    for i in range(1, 5):
        writer = session.trials.begin()
        if i == 2:
            (writer.path / "trial.json").write_bytes(b"{torn")
        elif i != 4:
            writer.complete({"i": i})
    states = [(r.n, r.state) for r in session.trials.records()]
    assert states == [
        (1, RecordState.COMPLETED),
        (2, RecordState.TORN),
        (3, RecordState.COMPLETED),
        (4, RecordState.IN_FLIGHT),
    ]


def test_writer_files_are_byte_exact_and_temps_are_never_listed(store: Store) -> None:
    session = store.create()
    writer = session.trials.begin()
    writer.write_text("task.yml", "a: 1\r\nb: 2\r\n")
    writer.write_bytes("patches/0001.diff", b"\xff\xfe\x00 binary")
    writer.write_json("config.json", {"k": [1, 2]})
    (writer.path / f"{TEMP_PREFIX}1-dead").write_bytes(b"partial")
    record = writer.complete({"failed": False})
    assert (writer.path / "task.yml").read_bytes() == b"a: 1\r\nb: 2\r\n"
    assert (writer.path / "patches" / "0001.diff").read_bytes() == b"\xff\xfe\x00 binary"
    assert orjson.loads((writer.path / "config.json").read_bytes()) == {"k": [1, 2]}
    assert record.files() == ["config.json", "patches/0001.diff", "task.yml", "trial.json"]
    assert session.trials.foreign() == []


def test_completed_record_is_immutable(store: Store) -> None:
    session = store.create()
    writer = session.trials.begin()
    writer.write_text("a.txt", "1")
    writer.complete({})
    with pytest.raises(RecordCompleted) as info:
        writer.write_text("a.txt", "2")
    assert isinstance(info.value, PermissionError)
    with pytest.raises(RecordCompleted):
        writer.complete({"again": True})
    assert (writer.path / "a.txt").read_text() == "1"
    assert orjson.loads((writer.path / "trial.json").read_bytes()) == {}


@pytest.mark.parametrize(
    "relpath", ["", "/etc/passwd", "../escape", "a/../../b", "./a", "trial.json", f"{TEMP_PREFIX}x"]
)
def test_writer_refuses_unsafe_paths(store: Store, relpath: str) -> None:
    writer = store.create().trials.begin()
    with pytest.raises(InvalidInput):
        writer.write_bytes(relpath, b"x")
    assert os.listdir(writer.path) == []


def test_writer_never_writes_through_a_planted_symlink(store: Store, tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    writer = store.create().trials.begin()
    (writer.path / "patches").symlink_to(outside)
    with pytest.raises(InvalidInput, match="not a directory"):
        writer.write_bytes("patches/x.diff", b"x")
    assert os.listdir(outside) == []


def test_writer_names_a_directory_it_cannot_make_as_it_is(store: Store) -> None:
    # A directory that could not be made (here a name too long; a full disk alike) is
    # that error, not one "that exists and is not a directory".
    writer = store.create().trials.begin()
    with pytest.raises(StorageError, match="File name too long") as caught:
        writer.write_bytes("a" * 300 + "/x", b"x")
    assert "not a directory" not in str(caught.value)
    assert os.listdir(writer.path) == []


@pytest.mark.parametrize(
    ("value", "problem"),
    [
        ({"ttft_ms": float("nan")}, "ttft_ms is nan"),
        ([1, float("-inf")], r"\[1\] is -inf"),
        ({"a": object()}, "not serializable as JSON"),
    ],
)
def test_write_json_refuses_what_json_cannot_hold(
    store: Store, value: object, problem: str
) -> None:
    # orjson writes NaN and infinities as null: the file would say something else.
    writer = store.create().trials.begin()
    with pytest.raises(InvalidInput, match=problem):
        writer.write_json("metrics.json", value)
    assert os.listdir(writer.path) == []


def test_a_misspelt_record_attribute_fails_type_checking_too(store: Store) -> None:
    # CI's mypy runs on this file: without the ignore being needed it fails as unused, so
    # a Record that accepts any attribute for type checkers (`__getattr__ -> Any`) fails.
    session = store.create()
    session.trials.begin().complete({})
    (record,) = session.trials.records()  # made lazily (`Record.below`): its path too
    assert record.path == session.path / "trials" / "1"
    with pytest.raises(AttributeError, match="no attribute 'marker'"):
        _ = record.marker  # type: ignore[attr-defined]


@pytest.mark.parametrize(
    ("text", "encoding", "problem"),
    [
        ("ok \udcff", "utf-8", "surrogates not allowed at character 3"),
        ("caf\u00e9", "ascii", "ordinal not in range"),
        ("x", "no-such-codec", "unknown encoding"),
    ],
)
def test_write_text_that_cannot_be_encoded_is_invalid_input(
    store: Store, text: str, encoding: str, problem: str
) -> None:
    writer = store.create().trials.begin()
    with pytest.raises(
        InvalidInput, match=f"task.yml: text not written as {encoding}: .*{problem}"
    ):
        writer.write_text("task.yml", text, encoding)
    assert os.listdir(writer.path) == []


@pytest.mark.parametrize("record", [[1, 2], "text", 3, None])
def test_complete_refuses_non_objects(store: Store, record: object) -> None:
    writer = store.create().trials.begin()
    with pytest.raises(InvalidInput, match="expected a JSON object"):
        writer.complete(record)
    assert not (writer.path / "trial.json").exists()


def test_complete_accepts_pydantic_models(store: Store) -> None:
    from sessionstore.format.models import TrialRecord

    writer = store.create().trials.begin()
    record = writer.complete(TrialRecord(failed=True, learned="x", extra_field=1))
    assert record.data == {"failed": True, "learned": "x", "extra_field": 1}


def test_get_missing_record_raises(store: Store) -> None:
    with pytest.raises(RecordNotFound):
        store.create().trials.get(3)


def test_raw_workspace_without_manifest_is_readable(tmp_path: Path) -> None:
    (tmp_path / "trials" / "1").mkdir(parents=True)
    (tmp_path / "trials" / "1" / "trial.json").write_text('{"failed": true}')
    (tmp_path / "trials" / "2").mkdir()
    session = Session.open(tmp_path)
    assert session.id is None and session.manifest is None and session.manifest_error is None
    assert [r.state for r in session.trials.records()] == [
        RecordState.COMPLETED,
        RecordState.IN_FLIGHT,
    ]
    assert session.service.records() == []
    assert session.constraints() == {}


def test_torn_manifest_is_reported_not_raised(tmp_path: Path) -> None:
    (tmp_path / "session.json").write_text('{"id": ')
    session = Session.open(tmp_path)
    assert session.manifest is None
    assert session.manifest_error is not None and session.manifest_error.startswith("session.json")


def test_finish_writes_report_and_status(store: Store) -> None:
    session = store.create()
    session.trials.begin().complete({})
    session.finish({"best_trial": 1}, status="failed")
    reread = store.open(session.id or "")
    assert reread.manifest is not None and reread.manifest["status"] == "failed"
    report = reread.report()
    assert report.state is RecordState.COMPLETED
    assert report.data == {"best_trial": 1, "status": "failed"}
    with pytest.raises(RecordCompleted):
        reread.finish({})


def test_session_open_of_missing_path_raises(tmp_path: Path) -> None:
    with pytest.raises(SessionNotFound):
        Session.open(tmp_path / "nope")


def test_markers_spanning_many_read_chunks_and_oversized_markers(store: Store) -> None:
    from sessionstore._json import MAX_MARKER_BYTES

    session = store.create()
    big = {"log": "x" * 300_000, "n": list(range(1000))}
    session.trials.begin().complete(big)
    oversized = session.trials.begin()
    with open(oversized.path / "trial.json", "wb") as f:
        f.truncate(MAX_MARKER_BYTES + 1)  # sparse: no disk used
    first, second = session.trials.records()
    assert first.state is RecordState.COMPLETED and first.data == big
    assert second.state is RecordState.TORN
    assert second.error == f"trial.json: larger than {MAX_MARKER_BYTES} bytes"


def test_scan_returns_records_and_foreign_names_from_one_listing(store: Store) -> None:
    session = store.create()
    session.trials.begin().complete({})
    session.trials.begin()
    (session.trials.path / "README").write_text("x")
    records, foreign = session.trials.scan()
    assert [(r.n, r.state) for r in records] == [
        (1, RecordState.COMPLETED),
        (2, RecordState.IN_FLIGHT),
    ]
    assert foreign == ["README"]


def test_every_public_name_resolves_and_all_is_sorted() -> None:
    import sessionstore

    assert sessionstore.__all__ == sorted(sessionstore.__all__)
    for name in sessionstore.__all__:
        assert getattr(sessionstore, name) is not None
    with pytest.raises(AttributeError):
        _ = sessionstore.no_such_name

"""What is written once (a marker, the report) is refused, not written, when the schema
`sessionstore schema` publishes for it rejects it or readers would read it as torn."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import jsonschema
import orjson
import pytest
from cli_runner import run

from sessionstore.errors import InvalidInput
from sessionstore.format.schema import json_schema
from sessionstore.store.records import RecordState
from sessionstore.store.session import Session, Store


def _session(tmp_path: Path) -> Session:
    """A session with trial 1 completed and trial 2 in flight."""
    session = Store(tmp_path / "store").create(id="s1", pid=None)
    session.trials.begin().complete({"failed": False})
    session.trials.begin()
    return session


def _nested(levels: int) -> Any:
    value: Any = 1
    for _ in range(levels):
        value = {"a": value}
    return value


# Each refused report with the start of its problem; every one breaks the published schema.
BAD_REPORTS = [
    pytest.param(
        {"best_trial": 0}, "best_trial: Input should be greater than or equal to 1", id="0"
    ),
    pytest.param({"best_trial": "1"}, "best_trial: Input should be a valid integer", id="str"),
    pytest.param({"best_trial": True}, "best_trial: Input should be a valid integer", id="bool"),
    pytest.param({"best_trial": 1.5}, "best_trial: Input should be a valid integer", id="float"),
    pytest.param({"best_trial": 10**18}, "best_trial: Input should be less than", id="huge"),
    pytest.param({"constraints": 5}, "constraints: Input should be a valid dictionary", id="c"),
    pytest.param({"verified": [1]}, "verified: Input should be a valid dictionary", id="v"),
]


@pytest.mark.parametrize(("report", "problem"), BAD_REPORTS)
def test_a_report_the_schema_rejects_is_refused_and_not_written(
    tmp_path: Path, report: dict[str, Any], problem: str
) -> None:
    session = _session(tmp_path)
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate({**report, "status": "done"}, json_schema("report"))
    with pytest.raises(InvalidInput) as caught:
        session.finish(report)
    assert str(caught.value).startswith(f"{session.path / 'report.json'}: {problem}")
    assert str(caught.value).endswith("(`sessionstore schema report`); not written")
    assert session.report().state is RecordState.IN_FLIGHT
    assert orjson.loads((session.path / "session.json").read_bytes())["status"] == "running"


@pytest.mark.parametrize(
    ("n", "problem"),
    [
        (2, "best_trial: trial 2 is in_flight, not completed"),
        (3, "best_trial: 3 names no trial in "),
    ],
)
def test_a_best_trial_that_is_no_completed_trial_is_refused(
    tmp_path: Path, n: int, problem: str
) -> None:
    session = _session(tmp_path)
    with pytest.raises(InvalidInput, match=f"report.json: {problem}"):
        session.finish({"best_trial": n})
    assert not (session.path / "report.json").exists()


def test_a_status_field_that_is_not_done_or_failed_is_refused(tmp_path: Path) -> None:
    session = _session(tmp_path)
    with pytest.raises(InvalidInput, match=r"status must be done or failed, not ''"):
        session.finish({"status": ""})
    session.finish({"status": None, "best_trial": 1})  # null is no status: done
    assert session.report().data == {"status": "done", "best_trial": 1}


@pytest.mark.parametrize(
    ("marker", "problem"),
    [
        ({"failed": "no"}, "failed: Input should be a valid boolean"),
        ({"benchmark": {"metrics": [1]}}, "benchmark.metrics: Input should be a valid dict"),
        ({"output_contract": {}}, "output_contract.log: Field required"),
        ({"context_length": "8k"}, "context_length: Input should be a valid integer"),
    ],
)
def test_a_trial_marker_the_schema_rejects_is_refused(
    tmp_path: Path, marker: dict[str, Any], problem: str
) -> None:
    session = _session(tmp_path)
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(marker, json_schema("trial"))
    writer = session.trials.begin()
    with pytest.raises(InvalidInput, match=f"trial.json: {problem}"):
        writer.complete(marker)
    assert session.trials.get(writer.n).state is RecordState.IN_FLIGHT


def test_an_attempt_marker_the_schema_rejects_is_refused(tmp_path: Path) -> None:
    session = _session(tmp_path)
    writer = session.service.begin()
    with pytest.raises(InvalidInput, match="status: Input should be 'verified' or 'failed'"):
        writer.complete({"trial": 1, "status": "pending"})
    with pytest.raises(InvalidInput, match="trial: Input should be greater than or equal to 1"):
        writer.complete({"trial": 0})
    assert session.service.get(writer.n).state is RecordState.IN_FLIGHT


@pytest.mark.parametrize(
    ("declared", "problem"),
    [
        (None, "output_contract: null declares no log"),
        ({"log": "../run.log"}, "output_contract.log '../run.log': must not contain '..'"),
        ({"log": "/tmp/run.log"}, "must be a path relative to the record directory"),
        ({"log": "."}, "names the record directory itself"),
    ],
)
def test_an_output_contract_no_verdict_could_use_is_refused(
    tmp_path: Path, declared: object, problem: str
) -> None:
    """Declared, the record is judged by its log alone: sealed with one the verdict can
    never read, it would stay indeterminate for good."""
    session = _session(tmp_path)
    writer = session.trials.begin()
    with pytest.raises(InvalidInput) as caught:
        writer.complete({"output_contract": declared})
    assert str(caught.value).startswith(f"{writer.path / 'trial.json'}: ")
    assert problem in str(caught.value) and str(caught.value).endswith("; not written")
    attempt = session.service.begin()
    with pytest.raises(InvalidInput, match=r"verification\.json: output_contract"):
        attempt.complete({"trial": 1, "output_contract": declared})
    assert session.trials.get(writer.n).state is RecordState.IN_FLIGHT
    writer.complete({"output_contract": {"log": "logs/./run.log"}})  # inside: judged


def test_the_python_api_refuses_a_marker_or_report_readers_would_read_as_torn(
    tmp_path: Path,
) -> None:
    """Only the CLI refused them: `RecordWriter.complete` and `Session.finish` wrote a
    sealed file nested past 246 levels, torn for every reader, never to be mended."""
    session = _session(tmp_path)
    writer = session.trials.begin()
    with pytest.raises(InvalidInput, match=r"trial\.json: would read as torn"):
        writer.complete({"x": _nested(250)})
    with pytest.raises(InvalidInput, match=r"report\.json: would read as torn"):
        session.finish({"x": _nested(250)})
    assert session.trials.get(writer.n).state is RecordState.IN_FLIGHT
    assert session.report().state is RecordState.IN_FLIGHT


def test_what_the_api_writes_validates_against_the_published_schemas(tmp_path: Path) -> None:
    """Harness-defined fields are never descended into: a deep one within readers' limit
    (pydantic's JSON parser would stop at 200 levels) is written."""
    session = _session(tmp_path)
    session.trials.begin().complete({"benchmark": {"metrics": {"x": 1}}, "h": _nested(240)})
    session.service.begin().complete({"trial": 1, "status": "verified", "h": [None]})
    session.finish({"best_trial": 3, "constraints": {}, "verified": None, "h": _nested(240)})
    for name, rel in [
        ("session", "session.json"),
        ("constraints", "constraints.json"),
        ("trial", "trials/1/trial.json"),
        ("trial", "trials/3/trial.json"),
        ("verification", "service/1/verification.json"),
        ("report", "report.json"),
    ]:
        jsonschema.validate(orjson.loads((session.path / rel).read_bytes()), json_schema(name))


def test_the_cli_refusals_are_one_line_and_write_nothing(tmp_path: Path) -> None:
    session = _session(tmp_path)
    store = str(tmp_path / "store")
    result = run("finish", "s1", "--store", store, "--report", '{"best_trial": 0}')
    assert (result.returncode, result.stdout) == (1, "")
    assert result.stderr == (
        f"Error: {session.path / 'report.json'}: best_trial: Input should be greater than or "
        "equal to 1 (`sessionstore schema report`); not written\n"
    )
    result = run("complete", "s1", "--store", store, "--trial", "2", "--marker", '{"failed": 1}')
    assert (result.returncode, result.stdout) == (1, "")
    assert result.stderr == (
        f"Error: {session.trials.path / '2' / 'trial.json'}: failed: Input should be a valid "
        "boolean (`sessionstore schema trial`); not written\n"
    )
    assert not (session.path / "report.json").exists()
    assert not (session.trials.path / "2" / "trial.json").exists()

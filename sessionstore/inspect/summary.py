"""What `inspect` shows about a session, computed once from its files: the view model.

Status and progress follow the rules in `sessionstore.store.status`; the best
trial, `sessionstore.inspect.best`. Reading is plain dicts and one directory
scan per collection: `inspect` over thousands of records must stay close to
the cost of reading the files.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from sessionstore._fs import read as fsread
from sessionstore._orjson import orjson
from sessionstore.errors import NoBestTrial
from sessionstore.harness.verdict import Verdict, declares_output_contract, output_verdict
from sessionstore.inspect.best import (
    Best,
    Objective,
    Score,
    as_number,
    best_trial,
    lookup,
    score_trials,
)
from sessionstore.storage.s3_path import S3Path
from sessionstore.store.index import MAX_CACHED_BYTES, SummaryIndex
from sessionstore.store.lineage import lineage_info
from sessionstore.store.remote import each
from sessionstore.store.session import Record, RecordState, Session, Store
from sessionstore.store.status import (
    Progress,
    manifest_problem,
    planned_trials,
    read_constraints,
    session_progress,
    session_status,
)


@dataclass
class SessionView:
    """Everything `inspect` shows about one session, computed once from its files."""

    session: Session
    status: str
    progress: Progress
    trials: list[Record]
    service: list[Record]
    report: Record
    constraints: dict[str, Any]
    objective: Objective
    scores: list[Score]
    best: Best | None
    constraints_error: str | None = None
    foreign: dict[str, list[str]] = field(default_factory=dict)
    # A torn manifest's error, else what is wrong with its fields (status `unknown`).
    manifest_error: str | None = None
    # Output-contract verdicts of the trials that declare one: they rank trials too.
    trial_verdicts: dict[int, Verdict] = field(default_factory=dict)
    # Collections that could not be listed (a symlink, unreadable): name -> why.
    collection_errors: dict[str, str] = field(default_factory=dict)

    @classmethod
    def load(
        cls, session: Session, objective: Objective | None = None, *, write_index: bool = False
    ) -> SessionView:
        """Read a session's records once and derive status, progress and the best trial.

        Unchanged markers come from the session's summary index (`store.index`, never
        trusted over the markers); `write_index` replaces an index out of date.
        """
        index = SummaryIndex(session, write=write_index)
        view = cls._read(session, objective or Objective(), index, read_constraints(session))
        index.save()
        return view

    @classmethod
    def _read(
        cls,
        session: Session,
        objective: Objective,
        index: SummaryIndex,
        constraints_read: tuple[dict[str, Any], str | None],
    ) -> SessionView:
        trials, trials_foreign = index.scan(session.trials)
        service, service_foreign = index.scan(session.service)
        report = session.report()
        constraints, constraints_error = constraints_read
        trial_verdicts = _verdicts(trials)
        scores = score_trials(trials, constraints, objective, trial_verdicts)
        foreign = {
            name: found
            for name, found in (
                (session.trials.name, trials_foreign),
                (session.service.name, service_foreign),
            )
            if found
        }
        return cls(
            session=session,
            status=session_status(session, report),
            progress=session_progress(session, trials, service),
            trials=trials,
            service=service,
            report=report,
            constraints=constraints,
            objective=objective,
            scores=scores,
            best=best_trial(trials, constraints, objective, scores, trial_verdicts),
            constraints_error=constraints_error,
            foreign=foreign,
            manifest_error=_manifest_error(session),
            trial_verdicts=trial_verdicts,
            collection_errors=collection_errors(session),
        )

    @property
    def name(self) -> str | None:
        return _manifest_name(self.session.manifest)

    @property
    def created_at(self) -> str | None:
        return _manifest_created_at(self.session.manifest)

    @property
    def previous(self) -> list[str]:
        """The pinned previous session ids (strings only)."""
        return _manifest_previous(self.session.manifest)

    def summary(self) -> dict[str, Any]:
        """The list view's JSON: one object per session."""
        return _summary(
            self.session,
            self.status,
            self._derived(),
            self.constraints,
            self.constraints_error,
            self.manifest_error,
            self.collection_errors,
        )

    def _derived(self) -> dict[str, Any]:
        """The summary's fields derived from the records (what the summary index keeps)."""
        return {
            "progress": str(self.progress),
            "phase": self.progress.phase,
            "progress_counts": self.progress.to_dict(),
            "trial_counts": {
                state.value: sum(1 for r in self.trials if r.state is state)
                for state in RecordState
            },
            "service": len(self.service),
            "best": self.best.to_dict() if self.best else None,
        }

    def metric_paths(self, limit: int) -> list[str]:
        """Up to `limit` numeric metrics of the trials besides the objective, first seen first.

        Paths under `benchmark.metrics`; a metric that is an object with a
        numeric `mean` is named by its mean (`benchmark.metrics.ttft_ms.mean`).
        """
        paths: list[str] = []
        for record in self.trials:
            metrics = lookup(record.data or {}, "benchmark.metrics")
            if not isinstance(metrics, dict):
                continue
            for key, value in metrics.items():
                path = f"benchmark.metrics.{key}"
                if isinstance(value, dict) and as_number(value.get("mean")) is not None:
                    path += ".mean"
                elif as_number(value) is None:
                    continue
                if path != self.objective.path and path not in paths:
                    paths.append(path)
                if len(paths) == limit:
                    return paths
        return paths

    def verdicts(self, records: list[Record]) -> dict[int, Verdict]:
        """Output-contract verdicts of the records that declare one (reads their logs' tails).

        The trials' were read once by `load` (they decide the best trial too).
        """
        return self.trial_verdicts if records is self.trials else _verdicts(records)

    def detail(self) -> dict[str, Any]:
        """The detail view's JSON: the summary plus every record in numeric order."""
        return {
            **self.summary(),
            "manifest": self.session.manifest,
            "objective": self.objective.to_dict(),
            "trials": [r.to_dict() for r in self.trials],
            # Per trial, what the tables and the spark show: the objective value and verdict.
            "scores": [
                {"n": s.n, "value": s.value, "meets_constraints": s.meets_constraints}
                for s in self.scores
            ],
            "service": [r.to_dict() for r in self.service],
            # Records that declare an output contract, judged by their logs.
            "verdicts": {
                name: [{"n": n, **v.to_dict()} for n, v in self.verdicts(records).items()]
                for name, records in (("trials", self.trials), ("service", self.service))
            },
            "report": self.report.to_dict() | {"n": None},
            "foreign": self.foreign,
            "lineage": lineage_info(self.session),
        }


def load_views(store: Store, objective: Objective | None = None) -> list[SessionView]:
    """`SessionView.load` of every session of `store`, newest first; an object store's
    sessions are read concurrently (`store.remote.each`: each is round trips, not CPU)."""
    return list(each(store.storage, lambda s: SessionView.load(s, objective), store.sessions()))


def session_summary(
    session: Session, objective: Objective | None = None, *, write_index: bool = False
) -> dict[str, Any]:
    """`SessionView.load(session, objective).summary()`, its record-derived fields taken
    from the summary index while every record and every other input is the same.

    The key of those fields is what they depend on besides the records: the
    objective, the planned trial count and the constraints, as JSON (so that `1`,
    `1.0` and `true` differ). A session with a trial that declares an output contract
    keeps none: its verdicts come from logs, which no marker identity covers.
    """
    objective = objective or Objective()
    index = SummaryIndex(session, write=write_index)
    constraints_read = read_constraints(session)
    constraints, constraints_error = constraints_read
    text = orjson.dumps(constraints).decode()
    key = [objective.path, objective.direction, planned_trials(session), text]
    # Constraints as large as a marker is cached at most would make a large index.
    small = len(text) <= MAX_CACHED_BYTES
    fields = index.summary(key, session.trials, session.service) if small else None
    if fields is None or not _well_formed(fields):
        view = SessionView._read(session, objective, index, constraints_read)
        fields = view._derived()
        if not any(declares_output_contract(r) for r in view.trials):
            index.keep(fields)
        index.save()
        status = view.status
    else:
        status = session_status(session, session.report())
    return _summary(
        session,
        status,
        fields,
        constraints,
        constraints_error,
        _manifest_error(session),
        collection_errors(session),
    )


def collection_errors(session: Session) -> dict[str, str]:
    """Why a collection of `session` read no records though something is there, by its
    name (`Collection.problem`, as its last listing found it)."""
    return {c.name: c.problem for c in (session.trials, session.service) if c.problem}


def not_read(collections: Iterable[str]) -> str:
    """The list's note on collections that could not be listed (`collection_errors`'s
    names), `(not read: trials/)`, or "" for none: the progress beside it counts none of
    their records. As every view words it; each view escapes it its own way."""
    names = ", ".join(f"{name}/" for name in collections)
    return f"(not read: {names})" if names else ""


# The keys of `SessionView._derived`: kept fields with other keys are no summary of ours.
_DERIVED = {"progress", "phase", "progress_counts", "trial_counts", "service", "best"}
_BEST = {"n", "value", "objective", "direction", "meets_constraints", "failed", "checks", "verdict"}


def _well_formed(fields: dict[str, Any]) -> bool:
    """Whether kept fields have the keys and types `SessionView._derived` gives them: an
    index edited by hand (its key intact) must reach neither the table as a crash nor
    `--json` as another shape. Their values are the key's to vouch for."""
    if fields.keys() != _DERIVED:
        return False
    best = fields["best"]
    return (
        type(fields["progress"]) is str
        and type(fields["phase"]) is str
        and type(fields["progress_counts"]) is dict
        and type(fields["trial_counts"]) is dict
        and type(fields["service"]) is int
        and (
            best is None
            or (
                type(best) is dict
                and best.keys() == _BEST
                and type(best["n"]) is int
                and type(best["value"]) is float  # `as_number`'s: `fmt_number` needs one
                and type(best["meets_constraints"]) is bool
            )
        )
    )


def _summary(
    session: Session,
    status: str,
    derived: dict[str, Any],
    constraints: dict[str, Any],
    constraints_error: str | None,
    manifest_error: str | None,
    collection_errors: dict[str, str],
) -> dict[str, Any]:
    """`SessionView.summary`, from its parts: one object, its keys in one order."""
    manifest = session.manifest
    return {
        "id": session.id,
        "path": str(session.path),
        "name": _manifest_name(manifest),
        "status": status,
        "progress": derived["progress"],
        "phase": derived["phase"],
        "progress_counts": derived["progress_counts"],
        "created_at": _manifest_created_at(manifest),
        "trial_counts": derived["trial_counts"],
        "service": derived["service"],
        "best": derived["best"],
        "constraints": constraints,
        "constraints_error": constraints_error,
        "previous": _manifest_previous(manifest),
        "manifest_error": manifest_error,
        "collection_errors": collection_errors,
    }


def _manifest_error(session: Session) -> str | None:
    """A torn manifest's error, else what is wrong with its fields (status `unknown`)."""
    return session.manifest_error or manifest_problem(session.manifest or {})


def _manifest_name(manifest: dict[str, Any] | None) -> str | None:
    value = (manifest or {}).get("name")
    return value if isinstance(value, str) else None


def _manifest_created_at(manifest: dict[str, Any] | None) -> str | None:
    value = (manifest or {}).get("created_at")
    return value if isinstance(value, str) else None


def _manifest_previous(manifest: dict[str, Any] | None) -> list[str]:
    value = (manifest or {}).get("previous")
    return [v for v in value if isinstance(v, str)] if isinstance(value, list) else []


def best_trial_number(session: Session, objective: Objective | None = None) -> int:
    """The number of the trial `inspect` shows as best (what `export --best` exports).

    Ranked as `SessionView.load` ranks (`sessionstore.inspect.best`): when no
    trial meets the constraints it is still the best that fell short. Raises
    `NoBestTrial` when no completed trial has a value for the objective.
    """
    objective = objective or Objective()
    best = SessionView.load(session, objective).best
    if best is None:
        raise NoBestTrial(session.path, objective.path)
    return best.n


def _verdicts(records: list[Record]) -> dict[int, Verdict]:
    """The output-contract verdict of each record that declares one (a log-tail read each),
    below their collection's directory opened once (a record's own open then is one call)."""
    # Most records declare none: their paths (pathlib, per record) are never looked at.
    declaring = [r for r in records if declares_output_contract(r)]
    if not declaring:
        return {}
    fd = _collection_fd(declaring)
    parent = declaring[0].path.parent
    try:
        found = {r.n: output_verdict(r, fd if r.path.parent == parent else None) for r in declaring}
    finally:
        if fd is not None:
            os.close(fd)
    return {n: v for n, v in found.items() if v is not None}


def _collection_fd(records: list[Record]) -> int | None:
    """The records' collection directory, opened; None where each record opens its own
    (an object store, the report, or a collection that will not open: each then says why)."""
    if not records or records[0].n == 0 or isinstance(records[0].path, S3Path):
        return None
    try:
        return fsread.open_collection_dir(records[0].path.parent)
    except OSError:
        return None

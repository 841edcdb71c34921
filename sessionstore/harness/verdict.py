"""Output contracts: judge a completed record by the evidence it recorded, not by its status.

The rule (docs/harness.md): the last non-empty line of the record's log file
decides. `PASS` passes; `FAIL` or `FAIL:<detail>` fails (the detail is the
text after the colon, stripped); anything else is indeterminate, and so is
an empty or missing log, a log that is not a regular file inside the record
(a FIFO, a device, a symlink: never followed), and a record that is in
flight or torn. Indeterminate is not success.

Only the log is read, never the marker's `status` or `failed` fields: a
marker that claims success while its log ends in `FAIL:` fails.

The log is named by the caller, or declared by the record's marker as
`"output_contract": {"log": "<path relative to the record>"}`. The path must
stay inside the record directory: it is opened component by component
relative to the record's directory fd, no symlink followed on the way
(`fsread`), so no check-then-open race can reach outside. The log is read
from its end, at most `TAIL_LIMIT` bytes, so judging a multi-GB log costs a
few `pread`s; `output_verdict` is cheap enough to call once per listed record.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Callable
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path, PurePosixPath
from typing import Any

from sessionstore._fs import read as fsread
from sessionstore.errors import InvalidInput
from sessionstore.format.names import record_number
from sessionstore.storage.s3_path import S3Path
from sessionstore.store.session import (
    Collection,
    Record,
    RecordState,
    Session,
    read_record,
    record_dir_fd,
    record_relpath,
)

__all__ = [
    "CONTRACT_FIELD",
    "Judgement",
    "Outcome",
    "Verdict",
    "declares_output_contract",
    "evaluate_output_contract",
    "judge",
    "judge_session",
    "last_line_outcome",
    "line_outcome",
    "output_verdict",
]

CONTRACT_FIELD = "output_contract"
# How far back from the end of the log a non-empty line is looked for, and the
# longest last line considered; beyond either the log is indeterminate.
TAIL_LIMIT = 1024 * 1024
LINE_LIMIT = 64 * 1024
_CHUNK = 64 * 1024
_SHOWN = 200  # characters of an unrecognised last line quoted in the detail


class Outcome(StrEnum):
    """What a log's evidence says; only PASS is success."""

    PASS = "pass"
    FAIL = "fail"
    INDETERMINATE = "indeterminate"


@dataclass(frozen=True)
class Verdict:
    """The outcome, why (the FAIL detail, or what made it indeterminate), and the log read."""

    outcome: Outcome
    detail: str
    log: Path | None = None

    @property
    def passed(self) -> bool:
        return self.outcome is Outcome.PASS

    def __str__(self) -> str:
        return f"{self.outcome}: {self.detail}" if self.detail else str(self.outcome)

    def to_dict(self) -> dict[str, Any]:
        """The JSON shape `check --json` uses: outcome, detail, log (absolute path or null)."""
        log = str(self.log) if self.log is not None else None
        return {"outcome": str(self.outcome), "detail": self.detail, "log": log}


def _indeterminate(detail: str, log: Path | None = None) -> Verdict:
    return Verdict(Outcome.INDETERMINATE, detail, log)


def declares_output_contract(record: Record) -> bool:
    """Whether the record's marker has an `output_contract` field (well formed or not)."""
    return record.data is not None and CONTRACT_FIELD in record.data


def output_verdict(record: Record, collection_fd: int | None = None) -> Verdict | None:
    """The verdict of a record that declares an output contract, else None (for listings:
    `collection_fd` is its collection's directory, opened once for all of them)."""
    if not declares_output_contract(record):
        return None
    return evaluate_output_contract(record, collection_fd=collection_fd)


def evaluate_output_contract(
    record: Record, log: str | os.PathLike[str] | None = None, *, collection_fd: int | None = None
) -> Verdict:
    """Judge `record` by the last non-empty line of its log file.

    `log` is a path relative to the record directory; None uses the log the
    marker declares. Raises `InvalidInput` only for a malformed `log`
    argument (absolute, `..`, a temp name); every problem found on disk or
    in the record is an indeterminate verdict, so this never fails a listing.
    """
    rel = record_relpath(log, f"--log {os.fspath(log)!r}") if log is not None else None
    if record.state is not RecordState.COMPLETED:
        why = f": {record.error}" if record.error else ""
        return _indeterminate(f"record is {record.state}{why}")
    if rel is None:
        declared = (record.data or {}).get(CONTRACT_FIELD)
        name = declared.get("log") if isinstance(declared, dict) else None
        if not declares_output_contract(record):  # `"output_contract": null` is declared
            return _indeterminate(f"no log given and the record declares no {CONTRACT_FIELD}")
        if not isinstance(name, str):
            return _indeterminate(f'{CONTRACT_FIELD} must be {{"log": "<path>"}}')
        try:
            rel = record_relpath(name, f"{CONTRACT_FIELD}.log '{name}'")
        except InvalidInput as exc:
            return _indeterminate(str(exc))
    return _judge_file(record, rel, collection_fd)


def judge(collection: Collection, n: int, log: str | os.PathLike[str] | None = None) -> Verdict:
    """Read record `n` of `collection` now and judge it; a missing record is indeterminate."""
    path = collection.path / str(n)
    if isinstance(path, S3Path):
        missing = n not in collection.numbers()
    elif record_number(str(n)) != n:
        missing = True  # past MAX_RECORD (or below 1): its name is foreign, as `get` says
    else:
        try:
            missing = not stat.S_ISDIR(os.lstat(path).st_mode)  # a symlink is no record
        except (FileNotFoundError, NotADirectoryError):
            missing = True
        except OSError:
            # Not `Path.is_dir()`, which raises this (a collection it may not search):
            # the record's read names it, as the verdict's reason.
            missing = False
    if missing:
        if log is not None:
            record_relpath(log, f"--log {os.fspath(log)!r}")
        return _indeterminate(f"no record {n} in {collection.path}")
    return evaluate_output_contract(read_record(n, path, collection.marker), log)


@dataclass(frozen=True)
class Judgement:
    """A record judged now: its collection's name (`trials` or `service`), number and verdict."""

    collection: str
    n: int
    verdict: Verdict

    def to_dict(self) -> dict[str, Any]:
        """The JSON shape `check --json` prints: collection, n, then the verdict's fields."""
        return {"collection": self.collection, "n": self.n, **self.verdict.to_dict()}


def judge_session(
    session: Session,
    *,
    trial: int | None = None,
    attempt: int | None = None,
    log: str | os.PathLike[str] | None = None,
) -> Judgement:
    """Judge trial `trial` or verification attempt `attempt` of `session` by its log (`judge`).

    Give exactly one of `trial` and `attempt`, else `InvalidInput`. Raises
    `InvalidInput` for a malformed `log` too (absolute, `..`, a temp name),
    and nothing else: whatever is found on disk (no such record, a record in
    flight or torn, a missing or unreadable log) is an indeterminate verdict.
    """
    if (trial is None) == (attempt is None):
        raise InvalidInput("trial/attempt", "give exactly one of a trial and an attempt number")
    collection, n = (session.trials, trial) if trial is not None else (session.service, attempt)
    assert n is not None
    return Judgement(collection.name, n, judge(collection, n, log))


def _judge_file(record: Record, rel: PurePosixPath, collection_fd: int | None) -> Verdict:
    """Open the log by the readers' recipe (`fsread`) relative to the record's directory fd.

    No path is resolved and then opened: each component is opened with
    `O_NOFOLLOW` relative to the one before, so a log swapped for a symlink
    to an outside file at any moment is refused, never read.
    """
    name = rel.as_posix()
    if isinstance(record.path, S3Path):
        return _judge_remote(record, rel)
    log = Path(os.path.abspath(os.path.join(record.path, *rel.parts)))  # one Path, not three
    try:
        dir_fd = record_dir_fd(record.n, record.path, collection_fd)
    except OSError as exc:
        return _indeterminate(f"record directory {record.path}: {fsread.problem(exc)}", log)
    try:
        fd, st = fsread.open_under(dir_fd, rel.parts)
    except FileNotFoundError:
        return _indeterminate("log file is missing", log)
    except fsread.WrongKind as exc:
        where = "" if exc.filename == name else f": '{exc.filename}'"
        return _indeterminate(f"log '{name}'{where} {exc.strerror}", log)
    except OSError as exc:
        return _indeterminate(f"log '{name}': {fsread.problem(exc)}", log)
    finally:
        os.close(dir_fd)
    try:
        if st.st_size == 0:
            return _indeterminate("log is empty", log)
        line, problem = _last_line(lambda step, pos: os.pread(fd, step, pos), st.st_size)
    except OSError as exc:
        return _indeterminate(f"log '{name}': {fsread.problem(exc)}", log)
    finally:
        os.close(fd)
    if line is None:
        return _indeterminate(problem, log)
    return _judge_line(line.decode("utf-8", errors="replace"), log)


def _judge_remote(record: Record, rel: PurePosixPath) -> Verdict:
    """`_judge_file` for a record of an `s3://` store: the log's tail by one ranged GET."""
    from sessionstore.storage.s3_open import storage_at  # imports obstore: on use

    assert isinstance(record.path, S3Path)
    log = record.path.joinpath(*rel.parts)
    storage, key = storage_at(record.path, 3)
    try:
        found = storage.tail(f"{key}/{rel.as_posix()}", TAIL_LIMIT + LINE_LIMIT + _CHUNK)
    except OSError as exc:
        return _indeterminate(f"log '{rel.as_posix()}': {fsread.problem(exc)}", log)
    if found is None:
        return _indeterminate("log file is missing", log)
    size, data = found
    if size == 0:
        return _indeterminate("log is empty", log)
    start = size - len(data)
    line, problem = _last_line(
        lambda step, pos: data[max(pos - start, 0) : pos - start + step], size
    )
    if line is None:
        return _indeterminate(problem, log)
    return _judge_line(line.decode("utf-8", errors="replace"), log)


def _last_line(read: Callable[[int, int], bytes], size: int) -> tuple[bytes | None, str]:
    """The last line with non-whitespace content, trailing whitespace stripped, read backwards
    by `read(length, offset)`."""
    pos, tail = size, b""
    while pos > 0:
        step = min(_CHUNK, pos)
        pos -= step
        chunk = read(step, pos)
        if len(chunk) != step:
            # Cut below `size` since: joined to what was read before the cut, this would
            # make a line the log never held (`\nPA` + `SS\n` of a log that said `PAYSS`).
            return None, "the log shrank while it was read"
        tail = chunk + tail
        content = tail.rstrip()
        if not content:
            if size - pos >= TAIL_LIMIT:
                return None, f"no non-empty line in the last {TAIL_LIMIT} bytes of the log"
            continue
        newline = content.rfind(b"\n")
        line = content[newline + 1 :]
        if len(line) > LINE_LIMIT:
            break
        if newline >= 0:
            return line, ""
    else:
        content = tail.rstrip()
        if not content:
            return None, "log has no non-empty line"
        if len(content) <= LINE_LIMIT:
            return content, ""
    return None, f"the log's last line is longer than {LINE_LIMIT} bytes"


def last_line_outcome(data: bytes) -> tuple[int, Outcome] | None:
    """The rule applied to a log's bytes in memory (the viewer's tail of one): the index
    of the line that decides, in `data.split(b"\\n")`, and its outcome; None when no line
    decides (none has content, or the last is too long)."""
    line, _ = _last_line(lambda length, offset: data[offset : offset + length], len(data))
    if line is None:
        return None
    return data.rstrip().count(b"\n"), line_outcome(line.decode("utf-8", errors="replace"))


def line_outcome(line: str) -> Outcome:
    """What the last non-empty line of a log says (trailing whitespace already stripped)."""
    if line == "PASS":
        return Outcome.PASS
    if line == "FAIL" or line.startswith("FAIL:"):
        return Outcome.FAIL
    return Outcome.INDETERMINATE


def _judge_line(line: str, log: Path) -> Verdict:
    outcome = line_outcome(line)
    if outcome is Outcome.PASS:
        return Verdict(Outcome.PASS, "", log)
    if outcome is Outcome.FAIL:
        return Verdict(Outcome.FAIL, line[5:].strip(), log)
    shown = line if len(line) <= _SHOWN else line[:_SHOWN] + "..."
    return _indeterminate(f"last line is not PASS or FAIL:<detail>: '{shown}'", log)

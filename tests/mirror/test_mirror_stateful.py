"""Stateful property test: random source edits interleaved with passes (and edits during reads).

Laws checked after every pass:
- never torn: every destination file is the redaction of some complete version
  its source file had (the model keeps every version ever written);
- markers last: a marker committed by a pass means every file its record had
  when the pass started is in the destination;
- sealed: once a record's marker is in the destination, its files there never
  change again, whatever the source does;
- no temp file remains.
And once the source is quiet, passes converge to destination == redact(source),
sealed records excepted.
"""

from __future__ import annotations

import itertools
import os
import shutil
import time
from pathlib import Path

import hypothesis.strategies as st
import orjson
import pytest
from hypothesis import settings
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule, run_state_machine_as_test
from mirror_helpers import temps, tree

from sessionstore.mirror.copy import coarse_tick_ns
from sessionstore.mirror.mirror import Mirror

try:
    from sessionstore.redact.redactor import Redactor
except ImportError:  # the redactor lands separately; the laws hold without it too
    Redactor = None  # type: ignore[assignment,misc]

SECRET = b"sk_live_SecretValue42"
TICK_NS = coarse_tick_ns()
SETTLE_S = 2 * TICK_NS / 1e9 + 0.001

PLAIN = ["a.txt", "d/b.bin", "d/e/c.log", f"d/{SECRET.decode()}.txt", "trials/9/notes"]
RECORD_FILES = {1: ["task.yml", "patches/p.diff"], 2: ["log.txt"]}
MARKER = "trial.json"
ALL = PLAIN + [f"trials/{n}/{f}" for n, fs in RECORD_FILES.items() for f in fs]

contents = st.lists(
    st.sampled_from([b"a", b"\r\n", b"\0", b"\xff\xfe", SECRET, b"xyz" * 7, b"{"]), max_size=10
).map(b"".join)


def marker_of(n: int) -> str:
    return f"trials/{n}/{MARKER}"


class MirrorMachine(RuleBasedStateMachine):
    def __init__(self, root: Path) -> None:
        super().__init__()
        self.root = root
        self.src, self.dst = self.root / "src", self.root / "dst"
        self.src.mkdir(parents=True)
        self.sealed: dict[int, dict[str, bytes]] = {}  # record -> its destination files
        self.redactor = None
        if Redactor is not None:
            self.redactor = Redactor()
            self.redactor.add(SECRET)
        self.history: dict[str, set[bytes]] = {}
        self.hook_plan: list[tuple[str, int, bytes]] = []
        # One Mirror per mode, reused across passes as the daemon will (scrypt once).
        self.mirrors = {
            delete: Mirror(
                self.src,
                self.dst,
                self.redactor,
                durable=False,
                delete=delete,
                racy_window_ns=TICK_NS,
                chunk_size=7,
                _on_chunk=self.on_chunk,
            )
            for delete in (False, True)
        }

    def teardown(self) -> None:
        shutil.rmtree(self.root, ignore_errors=True)

    # -- model helpers ---------------------------------------------------------

    def redact(self, data: bytes) -> bytes:
        return self.redactor.redact(data) if self.redactor else data

    def dest_path(self, rel: str) -> str:
        if not self.redactor:
            return rel
        return "/".join(self.redactor.redact_name(p) for p in rel.split("/"))

    def source_files(self) -> dict[str, bytes]:
        return tree(self.src)

    def saw(self, rel: str) -> None:
        self.history.setdefault(rel, set()).add((self.src / rel).read_bytes())

    def put(self, rel: str, data: bytes) -> None:
        p = self.src / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_bytes(data)
        self.saw(rel)

    # -- source edits ----------------------------------------------------------

    @rule(rel=st.sampled_from(ALL), data=contents)
    def create_or_rewrite(self, rel: str, data: bytes) -> None:
        self.put(rel, data)

    @rule(rel=st.sampled_from(ALL), data=contents)
    def append(self, rel: str, data: bytes) -> None:
        if (self.src / rel).is_file():
            with open(self.src / rel, "ab") as f:
                f.write(data)
            self.saw(rel)

    @rule(rel=st.sampled_from(ALL), size=st.integers(0, 40))
    def truncate(self, rel: str, size: int) -> None:
        if (self.src / rel).is_file():
            os.truncate(self.src / rel, size)
            self.saw(rel)

    @rule(rel=st.sampled_from(ALL), offset=st.integers(0, 30), data=contents)
    def write_in_place(self, rel: str, offset: int, data: bytes) -> None:
        if (self.src / rel).is_file():
            with open(self.src / rel, "r+b") as f:
                f.seek(offset)
                f.write(data)
            self.saw(rel)

    @rule(rel=st.sampled_from(ALL))
    def delete(self, rel: str) -> None:
        if (self.src / rel).is_file():
            (self.src / rel).unlink()

    @rule(a=st.sampled_from(ALL), b=st.sampled_from(ALL))
    def rename(self, a: str, b: str) -> None:
        if a != b and (self.src / a).is_file():
            (self.src / b).parent.mkdir(parents=True, exist_ok=True)
            os.replace(self.src / a, self.src / b)
            self.saw(b)

    @rule(n=st.sampled_from(sorted(RECORD_FILES)), data=contents)
    def begin_record(self, n: int, data: bytes) -> None:
        for f in RECORD_FILES[n]:
            self.put(f"trials/{n}/{f}", data)

    @rule(n=st.sampled_from(sorted(RECORD_FILES)), value=st.integers(-(2**63), 2**63 - 1))
    def complete_record(self, n: int, value: int) -> None:
        self.put(marker_of(n), orjson.dumps({"learned": value}))

    @rule(n=st.sampled_from(sorted(RECORD_FILES)), data=contents)
    def write_invalid_marker(self, n: int, data: bytes) -> None:
        self.put(marker_of(n), b"[" + data)

    @rule(
        plan=st.lists(
            st.tuples(
                st.sampled_from(["write", "truncate", "append"]), st.integers(0, 20), contents
            ),
            max_size=4,
        )
    )
    def mutate_during_next_pass(self, plan: list[tuple[str, int, bytes]]) -> None:
        """Edits the hook applies, between two chunks, to the file being read."""
        self.hook_plan = list(plan)

    # -- passes ----------------------------------------------------------------

    def on_chunk(self, dest: str) -> None:
        rel = self.by_dest().get(dest)
        if not self.hook_plan or rel is None or not (self.src / rel).is_file():
            return
        kind, offset, data = self.hook_plan.pop()
        with open(self.src / rel, "r+b") as f:
            if kind == "truncate":
                f.truncate(offset)
            else:
                f.seek(offset if kind == "write" else 0, os.SEEK_SET if kind == "write" else 2)
                f.write(data)
        self.saw(rel)

    def by_dest(self) -> dict[str, str]:
        names = [*ALL, *(marker_of(n) for n in RECORD_FILES)]
        return {self.dest_path(rel): rel for rel in names}

    def one_pass(self, delete: bool = False) -> None:
        before = self.source_files()
        report = self.mirrors[delete].run_once()
        self.hook_plan = []
        assert report.ok, report.errors
        assert temps(self.dst) == []
        dest = tree(self.dst)
        for n in RECORD_FILES:
            if n not in self.sealed and self.dest_path(marker_of(n)) in dest:
                self.sealed[n] = self.record_files(dest, n)
            if self.dest_path(marker_of(n)) in report.copied:
                prefix = f"trials/{n}/"
                for rel in before:
                    if rel.startswith(prefix):
                        assert self.dest_path(rel) in dest, f"{marker_of(n)} ahead of {rel}"

    @rule()
    def pass_now(self) -> None:
        self.one_pass()

    @rule()
    def pass_after_settling(self) -> None:
        time.sleep(SETTLE_S)
        self.one_pass()

    @rule()
    def quiet_source_converges(self) -> None:
        self.hook_plan = []
        for _ in range(3):
            time.sleep(SETTLE_S)
            self.one_pass(delete=True)
        source = self.source_files()
        held = {
            marker_of(n)
            for n in RECORD_FILES
            if marker_of(n) in source
            and not _is_object(source[marker_of(n)])
            and n not in self.sealed
        }
        expected = {self.dest_path(k): self.redact(v) for k, v in source.items() if k not in held}
        dest = tree(self.dst)
        for rel in held:
            dest.pop(self.dest_path(rel), None)
        for n, files in self.sealed.items():
            prefix = self.dest_path(f"trials/{n}") + "/"
            expected = {k: v for k, v in expected.items() if not k.startswith(prefix)}
            expected.update(files)
        assert dest == expected

    def record_files(self, dest: dict[str, bytes], n: int) -> dict[str, bytes]:
        prefix = self.dest_path(f"trials/{n}") + "/"
        return {k: v for k, v in dest.items() if k.startswith(prefix)}

    @invariant()
    def sealed_records_never_change(self) -> None:
        dest = tree(self.dst)
        for n, files in self.sealed.items():
            assert self.record_files(dest, n) == files, f"sealed trials/{n} changed"

    # -- the never-torn law ----------------------------------------------------

    @invariant()
    def every_destination_file_is_a_whole_version(self) -> None:
        if not self.dst.exists():
            return
        allowed: dict[str, set[bytes]] = {}
        for rel, versions in self.history.items():
            allowed.setdefault(self.dest_path(rel), set()).update(map(self.redact, versions))
        for rel, data in tree(self.dst).items():
            assert data in allowed.get(rel, set()), f"torn or foreign content in {rel}"


def _is_object(data: bytes) -> bool:
    try:
        return isinstance(orjson.loads(data), dict)
    except orjson.JSONDecodeError:
        return False


@pytest.mark.timeout(240)
def test_mirror_state_machine(tmp_path: Path) -> None:
    runs = itertools.count()
    run_state_machine_as_test(
        # A factory, which hypothesis accepts (it only calls it); its annotation says a class.
        lambda: MirrorMachine(tmp_path / f"run{next(runs)}"),  # type: ignore[arg-type]
        settings=settings(settings.default, stateful_step_count=25, deadline=None),
    )

"""`export` of a record an agent shaped to hurt the exporter.

A runaway `mkdir -p` inside a record (deeper than the recursion limit, more
levels than a default fd limit of 1024) must not crash the export with a
traceback; the deep part is skipped and named, the rest exported.
"""

from __future__ import annotations

from pathlib import Path

import orjson
from cli_runner import run
from inspect_helpers import metrics, run_cli
from mirror_helpers import make_deep, remove_deep

from sessionstore.errors import InvalidInput
from sessionstore.store.session import Store

DEPTH = 1100


def test_a_record_deeper_than_the_recursion_limit_exports_with_the_deep_part_skipped(
    tmp_path: Path,
) -> None:
    store = tmp_path / "store"
    session = Store(store).create(id="deep", pid=None)
    writer = session.trials.begin()
    writer.write_text("config.yml", "x: 1\n")
    make_deep(writer.path / "d", DEPTH - 1)  # DEPTH levels of d below the record
    writer.complete(metrics(10.0))
    for args in (("--trial", "1"), ("--best",)):
        dest = tmp_path / f"out{args[0]}"
        result = run_cli("export", "deep", str(dest), *args, "--store", str(store), "--json")
        assert result.returncode == 0, result.stderr[-2000:]
        assert "Traceback" not in result.stderr
        skipped = orjson.loads(result.stdout)["skipped"]
        assert len(skipped) == 1 and "deeper than" in skipped[0]["reason"], skipped
        assert len(result.stderr.splitlines()) == 1  # one problem, one line
        assert (dest / "config.yml").read_text() == "x: 1\n"
        assert (dest / "trial.json").is_file()
        if (dest / "d").exists():  # the levels exported above the skipped part
            remove_deep(dest / "d")
    remove_deep(writer.path / "d")


SPARSE = 768 << 20  # more than the child may map; it takes no disk space in the record
ADDRESS_SPACE = 700 << 20


def _limit_memory() -> None:
    import resource

    resource.setrlimit(resource.RLIMIT_AS, (ADDRESS_SPACE, ADDRESS_SPACE))


def test_a_huge_file_in_a_record_is_streamed_not_held_in_memory(tmp_path: Path) -> None:
    from sessionstore.store.export import MAX_REWRITE_BYTES

    store = tmp_path / "store"
    session = Store(store).create(id="sparse", pid=None)
    writer = session.trials.begin()
    # A config one byte over the rewrite limit is copied as it is.
    sizes = {"weights.bin": SPARSE, "huge.json": MAX_REWRITE_BYTES + 1}
    for name, size in sizes.items():
        with open(writer.path / name, "wb") as f:
            f.truncate(size)
    writer.write_text("task.yml", f"log: {writer.path}/weights.bin\n")
    writer.complete(metrics(1.0))
    dest = tmp_path / "out"
    args = ["export", "sparse", str(dest), "--best", "--store", str(store), "--json"]
    result = run(*args, timeout=300, preexec_fn=_limit_memory)
    assert result.returncode == 0, result.stderr[-2000:]
    for name, size in sizes.items():
        assert (dest / name).stat().st_size == size
        (dest / name).unlink()
    assert (dest / "task.yml").read_text() == f"log: {dest}/weights.bin\n"


# Toggles `target` between its regular file and a FIFO until `stop` exists (bounded).
FIFO_TOGGLER = """
import os, sys
target, stop = sys.argv[1], sys.argv[2]
regular, fifo = target + ".regular", target + ".fifo"
os.mkfifo(fifo)
for i in range(200_000):
    if i % 16 == 0 and os.path.exists(stop):
        break
    os.rename(target, regular)
    os.rename(fifo, target)
    os.rename(target, fifo)
    os.rename(regular, target)
"""


def test_an_export_always_holds_the_marker_of_the_record_it_exported(tmp_path: Path) -> None:
    import subprocess
    import sys

    store = tmp_path / "store"
    session = Store(store).create(id="toggle", pid=None)
    writer = session.trials.begin()
    writer.write_text("task.yml", "x: 1\n")
    writer.complete(metrics(1.0))
    stop = tmp_path / "stop"
    proc = subprocess.Popen(
        [sys.executable, "-c", FIFO_TOGGLER, str(writer.path / "trial.json"), str(stop)]
    )
    try:
        for i in range(30):
            dest = tmp_path / f"out{i}"
            result = run_cli("export", "toggle", str(dest), "--trial", "1", "--store", str(store))
            assert "Traceback" not in result.stderr, result.stderr[-2000:]
            if result.returncode == 0:
                assert (dest / "trial.json").is_file(), result.stderr
            else:
                assert result.returncode == 1 and len(result.stderr.splitlines()) == 1
                assert not dest.exists()
    finally:
        stop.touch()
        proc.wait(timeout=60)
    assert proc.returncode == 0


# Swaps the export's staging directory in `parent` for a symlink to `victim` (at once:
# renameat2's RENAME_EXCHANGE), once, as soon as the export has begun filling it, and
# moves the file being written along, so that its rename by path still finds it; stops at
# `stop` (bounded). Prints 1 if it swapped.
STAGING_SWAPPER = """
import ctypes, os, sys
parent, victim, stop = sys.argv[1:4]
libc = ctypes.CDLL(None, use_errno=True)
AT_FDCWD, RENAME_EXCHANGE = -100, 2
link = os.path.join(parent, "link")
os.symlink(victim, link)
swapped = 0
for i in range(2_000_000):
    if i % 64 == 0 and os.path.exists(stop):
        break
    temps = [n for n in os.listdir(parent) if n.startswith(".sstmp-")]
    if temps and os.path.exists(os.path.join(parent, temps[0], "d0")):
        staging = os.path.join(parent, temps[0]).encode()
        if libc.renameat2(AT_FDCWD, staging, AT_FDCWD, link.encode(), RENAME_EXCHANGE) == 0:
            swapped = 1
            for sub in os.listdir(link):
                for name in os.listdir(os.path.join(link, sub)):
                    if name.startswith(".sstmp-"):
                        try:
                            moved = os.path.join(victim, sub, name)
                            os.rename(os.path.join(link, sub, name), moved)
                        except OSError:
                            pass
            break
print(swapped)
"""


def test_a_staging_directory_swapped_for_a_symlink_redirects_no_write(tmp_path: Path) -> None:
    # The export wrote `DEST/../<staging>/<file>` by path: whoever may write DEST's parent
    # could point the rest of the files (written as the exporting user) anywhere.
    import subprocess
    import sys

    store = tmp_path / "store"
    session = Store(store).create(id="many", pid=None)
    writer = session.trials.begin()
    for i in range(400):
        writer.write_text(f"d{i % 10}/f{i}.txt", "x\n")
    writer.complete(metrics(1.0))
    victim = tmp_path / "victim"
    for i in range(10):  # the record's layout, made ready by whoever swaps
        (victim / f"d{i}").mkdir(parents=True)
    swaps = 0
    for attempt in range(30):
        parent = tmp_path / f"parent{attempt}"
        parent.mkdir()
        stop = tmp_path / f"stop{attempt}"
        swapper = subprocess.Popen(
            [sys.executable, "-c", STAGING_SWAPPER, str(parent), str(victim), str(stop)],
            stdout=subprocess.PIPE,
            text=True,
        )
        try:
            session.export(1, parent / "out")
        except (OSError, InvalidInput):
            pass  # the swap may fail the export; it must not redirect it
        finally:
            stop.touch()
            out, _ = swapper.communicate(timeout=60)
        swaps += int(out.strip() or 0)
        # The temp the swapper moved there is its own doing; a file named as the record's
        # would be the export's write, redirected.
        written = [p.name for p in victim.rglob("*") if p.is_file()]
        assert [name for name in written if not name.startswith(".sstmp-")] == []
        if swaps == 10:
            break
    assert swaps, "the swapper never saw the export filling its staging directory"

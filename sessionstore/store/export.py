"""Export one trial record as a self-contained directory (`Session.export`).

The export holds every regular file of the record (the marker, configs,
`patches/`...), plus `sessionstore-export.json` saying where it came from,
the session's requested constraints, each reference that was rewritten, and
each file that was skipped with the reason: a symlink (never followed), a
FIFO, socket or device (never read), a directory deeper than
`MAX_RECORD_DEPTH` levels (never entered). Temp entries are left out. Files are
read by the readers' recipe (`fsread`) relative to the record's directory
fd, so nothing outside the record is ever copied into an export.

Which references are rewritten: in the record's text files named `*.json`,
`*.yml`, `*.yaml` or `*.toml` (the marker included), a path token (a run of
characters without whitespace, quotes, or any of `,;:=[](){}<>`, so a
`local:remote` mapping is two tokens) that points at a file of this record
by either
  - the record's directory in the session (`<store>/<id>/trials/<n>/<file>`), or
  - the same record in any workspace (`.../trials/<n>/<file>` or `trials/<n>/<file>`),
becomes the absolute path of the exported copy. A path relative to the
record (`patches/fix.diff`) already resolves inside the export and is left
alone, as is anything that names a file outside this record. A text file
over `MAX_REWRITE_BYTES` is copied as it is. A DEST the rewritten paths could
not be written with is refused: one with quotes, backslashes, control
characters or bytes that are not UTF-8 always, and one with a comma,
bracket, brace, `: ` or ` #` when a YAML file's references would name it
(unquoted, the path would end there).
Every file is streamed, up to the size it had when it was opened (never held
whole in memory).
"""

from __future__ import annotations

import contextlib
import os
import re
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from sessionstore import _json as jsonio
from sessionstore._fs import read as fsread
from sessionstore._fs.atomic import (
    FILE_MODE,
    AtomicFile,
    build_dir,
    is_temp_name,
    sweep_temps_at,
)
from sessionstore._fs.staging import StagingTree
from sessionstore._fs.tree import rename_new_at
from sessionstore.errors import InvalidInput, SessionStoreError
from sessionstore.format.names import MARKERS
from sessionstore.storage.local_files import lexists
from sessionstore.storage.s3_path import S3Path
from sessionstore.store.export_dest import refuse_inside
from sessionstore.store.files import constraints_of
from sessionstore.store.records import Record, RecordState, record_dir_fd

if TYPE_CHECKING:
    from sessionstore.store.session import Session

EXPORT_MANIFEST = "sessionstore-export.json"
TEXT_SUFFIXES = (".json", ".yml", ".yaml", ".toml")
# Largest config rewritten in memory (the marker limit); a bigger file is copied as it is.
MAX_REWRITE_BYTES = jsonio.MAX_MARKER_BYTES
_CHUNK = 1 << 20
_TOKEN = re.compile(r"[^\s\"'`,;:=\[\](){}<>]+")
# Characters that could not be written into a JSON or YAML string unescaped.
_UNSAFE_DEST = re.compile(r"[\"\\\x00-\x1f]")
# A byte of a name that is not UTF-8, as `os.fsdecode` gives it (surrogateescape).
_SURROGATE = re.compile("[\udc80-\udcff]")
_YAML_SUFFIXES = (".yml", ".yaml")
# What ends an unquoted YAML scalar (a flow collection's separators included) in a path.
_UNSAFE_YAML = re.compile(r"[,\[\]{}]|:\s|\s#")


def rewrite_references(text: str, collection: str, n: int, files: set[str], dest: Path) -> str:
    """`text` with path tokens naming this record's files pointing into `dest` (module docstring).

    The record's own session path ends in `<collection>/<n>/` like any
    workspace path to it, so one suffix rule covers both.
    """
    anchor = f"{collection}/{n}/"

    def rewrite(match: re.Match[str]) -> str:
        token = match.group(0)
        if token.startswith(anchor):
            rest = token[len(anchor) :]
        else:
            _, sep, rest = token.rpartition("/" + anchor)
            if not sep:
                return token
        return str(dest / rest) if rest in files else token

    return _TOKEN.sub(rewrite, text)


def export_record(session: Session, n: int, dest: Path, collection: str = "trials") -> Path:
    """Copy completed record `n` of `collection` into the new directory `dest`; returns it.

    Built in a temp directory beside `dest` and renamed into place, so `dest`
    appears whole or not at all. Raises `RecordNotFound`, `InvalidInput`.
    """
    source = (session.trials if collection == "trials" else session.service).get(n)
    if source.state is not RecordState.COMPLETED:
        # Why it is torn, too: in a bucket it may be a server that failed to send the marker.
        why = f" ({source.error})" if source.error else ""
        raise InvalidInput(
            f"{source.path}", f"record is {source.state}{why}; export a completed one"
        )
    dest = Path(os.path.abspath(dest))
    if os.path.lexists(dest):
        raise InvalidInput(str(dest), "already exists; export into a new directory")
    if _UNSAFE_DEST.search(str(dest)):
        raise InvalidInput(str(dest), "contains quotes, backslashes or control characters")
    if _SURROGATE.search(str(dest)):
        # Its bytes, written into a rewritten marker or config, would make it invalid
        # UTF-8: torn for every reader (docs/format.md, "Reading").
        raise InvalidInput(str(dest), "is not valid UTF-8; export into a UTF-8 path")
    # The one constraints reader; torn ones are recorded as null (inspect shows why).
    constraints, error = constraints_of(session.storage, session.key)
    if isinstance(source.path, S3Path):
        _copy(session, source, dest, collection, None if error else constraints, None)
        return dest
    record_fd = record_dir_fd(n, source.path)
    try:
        _copy(session, source, dest, collection, None if error else constraints, record_fd)
    finally:
        os.close(record_fd)
    return dest


def _remote_chunks(record: Record, rel: str) -> Iterator[bytes]:
    """The chunks of the file `rel` of a record in an `s3://` store (`InvalidInput` if gone)."""
    from sessionstore.storage.s3_open import storage_at  # imports obstore: on use

    assert isinstance(record.path, S3Path)
    storage, key = storage_at(record.path, 3)
    found = storage.chunks(f"{key}/{rel}")
    if found is None:
        raise InvalidInput(f"{record.path / rel}", "changed during export: is gone")
    return found[1]


def _regular_files(record: Record, record_fd: int | None) -> tuple[list[str], list[dict[str, str]]]:
    """The record's regular files, and the other entries with why each is skipped.

    `record_fd` None: a record of an `s3://` store, whose objects are all files."""
    listed, not_entered = record.walk(record_fd)
    skipped = [{"file": rel, "reason": reason} for rel, reason in not_entered]
    if record_fd is None:
        # A key of a bucket may be `../x` or `a//b`: refused before the staging tree
        # makes (or chmods) a directory for it, which `..` would find outside the tree.
        from sessionstore.storage.s3_keys import check_addressable  # imports obstore
        from sessionstore.storage.s3_open import storage_at

        assert isinstance(record.path, S3Path)
        storage, key = storage_at(record.path, 3)
        for rel in listed:
            check_addressable(storage, f"{key}/{rel}")
        return [rel for rel in listed if rel != EXPORT_MANIFEST], skipped
    files: list[str] = []
    for rel in listed:
        if rel == EXPORT_MANIFEST:
            continue
        try:
            fd, _ = fsread.open_under(record_fd, rel.split("/"))
        except OSError as exc:
            skipped.append({"file": rel, "reason": fsread.problem(exc)})
            continue
        os.close(fd)
        files.append(rel)
    return files, skipped


def _copy_file(
    record: Record,
    record_fd: int | None,
    rel: str,
    target: tuple[int, str],
    rewrite: Callable[[str, str], str],
) -> bool:
    """Copy one file of the record to `target` (a directory fd and a name in it), its
    references rewritten; True if any were.

    Streamed, up to the size `fstat` gave at the open: a file growing while
    it is copied cannot make the copy endless, and a huge (or sparse) file
    is never held in memory. Only a text file of at most `MAX_REWRITE_BYTES`
    is read whole to be rewritten; a bigger one is copied as it is.
    """
    if record_fd is None:
        return _copy_remote(record, rel, target, rewrite)
    try:
        fd, st = fsread.open_under(record_fd, rel.split("/"))
    except OSError as exc:
        problem = f"changed during export: {fsread.problem(exc)}"
        raise InvalidInput(f"{record.path / rel}", problem) from None
    with os.fdopen(fd, "rb") as f, _new_file(target) as out:
        if rel.endswith(TEXT_SUFFIXES) and st.st_size <= MAX_REWRITE_BYTES:
            data = f.read(st.st_size)
            text = data.decode("utf-8", "surrogateescape")
            new = rewrite(text, rel)
            out.write(new.encode("utf-8", "surrogateescape") if new != text else data)
            return new != text
        left = st.st_size
        while left > 0 and (chunk := f.read(min(_CHUNK, left))):
            out.write(chunk)
            left -= len(chunk)
    return False


def _copy_remote(
    record: Record, rel: str, target: tuple[int, str], rewrite: Callable[[str, str], str]
) -> bool:
    """`_copy_file` from an `s3://` store: streamed, a small text file rewritten whole."""
    with _new_file(target) as out:
        if not rel.endswith(TEXT_SUFFIXES):
            for chunk in _remote_chunks(record, rel):
                out.write(chunk)
            return False
        held: list[bytes] = []
        size = 0
        spilled = False  # too big to rewrite: copied as it is
        for chunk in _remote_chunks(record, rel):
            if spilled:
                out.write(chunk)
                continue
            held.append(chunk)
            size += len(chunk)
            if size > MAX_REWRITE_BYTES:
                for part in held:
                    out.write(part)
                held, spilled = [], True
        if spilled:
            return False
        data = b"".join(held)
        text = data.decode("utf-8", "surrogateescape")
        new = rewrite(text, rel)
        out.write(new.encode("utf-8", "surrogateescape") if new != text else data)
        return new != text


def _new_file(target: tuple[int, str]) -> AtomicFile:
    """The export's file `target` (a name in a directory fd of the staging tree), written
    as a temp and renamed (the tree is fsynced before it is published)."""
    dir_fd, name = target
    return AtomicFile(name, FILE_MODE, sync_dir=False, dir_fd=dir_fd)


def _copy(
    session: Session,
    source: Record,
    dest: Path,
    collection: str,
    constraints: dict[str, Any] | None,
    record_fd: int | None,
) -> None:
    """Build the export in a temp directory beside `dest` and rename it into place
    (`_fs.atomic.build_dir`: removed on any failure, fsynced before the rename)."""
    n = source.n
    files, skipped = _regular_files(source, record_fd)
    marker = MARKERS[collection]
    if marker not in files:
        # Read as completed a moment ago: the record changed since, and an export
        # without its marker would not be the completed record it claims to be.
        why = next((i["reason"] for i in skipped if i["file"] == marker), "is gone")
        raise InvalidInput(f"{source.path / marker}", f"changed during export: {why}")
    file_set = set(files)

    def rewrite(text: str, rel: str) -> str:
        new = rewrite_references(text, collection, n, file_set, dest)
        if new != text and rel.endswith(_YAML_SUFFIXES) and _UNSAFE_YAML.search(str(dest)):
            # An unquoted YAML path ends at `: ` or ` #`, and in `[...]` at a comma or
            # bracket: the copy's config would name other files, or not parse.
            raise InvalidInput(
                str(dest),
                f"would break the YAML of {rel} once its references name it (a comma, "
                "bracket or brace, ': ' or ' #'); export elsewhere",
            )
        return new

    def build(staging_fd: int, _: str) -> None:
        # By directory fd, as the record is read: a name in the staging tree (or DEST's
        # parent) swapped for a symlink meanwhile redirects nothing.
        tree = StagingTree(staging_fd)
        try:
            rewritten = _write_files(tree, source, record_fd, files, dest, rewrite)
            manifest = {
                "session": session.id,
                "collection": collection,
                "n": n,
                "source": str(source.path),
                "constraints": constraints,
                "files": files,
                "rewritten": rewritten,
                "skipped": skipped,
            }
            with _new_file((staging_fd, EXPORT_MANIFEST)) as out:
                out.write(jsonio.dumps(jsonio.utf8_safe(manifest)))
            # Every entry below the top (`build_dir` fsyncs the top itself).
            tree.finish()
        finally:
            tree.close()

    _publish(session, source, dest, build)


def _write_files(
    tree: StagingTree,
    source: Record,
    record_fd: int | None,
    files: list[str],
    dest: Path,
    rewrite: Callable[[str, str], str],
) -> list[dict[str, str]]:
    """Copy `files` of the record into the staging tree; the files rewritten, listed."""
    rewritten: list[dict[str, str]] = []
    for rel in files:
        parent, _, name = rel.rpartition("/")
        try:
            if _copy_file(source, record_fd, rel, (tree.dir_fd(parent), name), rewrite):
                rewritten.append({"file": rel})
        except OSError as exc:
            if isinstance(exc, SessionStoreError):  # the source's error names it
                raise
            # The file of DEST it failed on: the fd-relative name alone says too little.
            raise OSError(exc.errno, exc.strerror, str(dest / rel)) from None
    return rewritten


def _publish(
    session: Session, source: Record, dest: Path, build: Callable[[int, str], None]
) -> None:
    """`build` the export beside `dest` and rename it there, unless `dest` is inside the
    session (into a sealed record, or a new `trials/<n>` that reads as a completed trial),
    inside the store holding it, or inside any session (`refuse_inside`)."""
    parent_fd = fsread.open_dir(dest.parent, follow=True)
    try:
        if not isinstance(source.path, S3Path):
            refuse_inside(session, parent_fd, dest)
        # An export killed before its rename left its staging tree (a temp of a dead
        # writer, the size of the record) beside DEST: debris anyone may remove
        # (docs/format.md, "Temp entries"). Best effort: the export is what was asked.
        with contextlib.suppress(OSError):
            sweep_temps_at(parent_fd)
        build_dir(parent_fd, build, lambda temp: _rename_new(temp, dest, parent_fd))
    except OSError as exc:
        raise _named(exc, dest) from None
    finally:
        os.close(parent_fd)


def _rename_new(temp: str, dest: Path, parent_fd: int) -> None:
    """Rename the built export onto `dest` unless something is there now: rename(2) would
    replace an empty directory made there while the export was built (and fail on
    anything else), so the check at the start said nothing about now; nor would a check
    just before the rename (`rename_new_at` is one step)."""
    try:
        if rename_new_at(parent_fd, temp, dest.name):
            return
        # No renameat2 here: a check, then rename(2), with a window between the two.
        if lexists(dest.name, parent_fd):
            raise FileExistsError
        os.rename(temp, dest.name, src_dir_fd=parent_fd, dst_dir_fd=parent_fd)
    except FileExistsError:
        raise InvalidInput(
            str(dest), "already exists (made during the export); export elsewhere"
        ) from None


def _named(exc: OSError, dest: Path) -> OSError:
    """`exc` naming the file of `dest` it failed on: the user never made the staging temp
    (`.sstmp-...`, removed by now) that a failing write names, and a write failing on its
    fd (`No space left on device`) names no file at all."""
    name = exc.filename
    if name is None and exc.errno is not None:
        exc.filename = str(dest)
    elif isinstance(name, str):
        parts = name.split(os.sep)
        for i, part in enumerate(parts):
            if is_temp_name(part):
                return OSError(exc.errno, exc.strerror, os.path.join(dest, *parts[i + 1 :]))
    return exc

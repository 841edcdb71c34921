"""The atomic mirror: one stateless pass that never commits a torn read.

`Mirror(source, dest, redactor).run_once()` re-lists the source tree and
copies every changed regular file whole into the destination, redacted,
through a temp file and a rename. Nothing but the destination is needed for
correctness; a pass may be killed at any moment and the next one converges.

How a pass decides, per file (`walk` walks, `copy` holds the
torn-read guard, `cache` the change cache):

- *unchanged* when its lstat signature equals the cached one and the
  destination file still has the cached (size, mtime, inode): two stats, no
  read. Without a trustworthy cache entry an existing destination file is
  compared before anything is written, so a lost cache never rewrites.
- *copied* when a settled version was read whole without its signature
  moving; *unstable* (retried next pass, reported every pass) otherwise.
- *markers last*: a record's marker (`trials/<n>/trial.json`,
  `service/<n>/verification.json`, at any depth) is committed only after
  every other file under the record is in place, and only if it parses as a
  JSON object; `report.json` at the root waits for the whole pass. In durable
  mode the directories written so far are fsynced before a marker's rename,
  so a crash never leaves a marker ahead of its files.

- *sealed*: a record whose marker is already in the destination is never
  written again; a source that differs from it is reported as `diverged`.
  In a session, the store's own files at its top are skipped.

`exclude` patterns (gitignore, over source paths) keep paths out of the
pass entirely; `run_once(dry_run=True)` decides everything and writes nothing
(`dry`).

The destination is reached only through directory fds (`dest`), so a
planted or swapped symlink is an error, never followed. `--delete` removes
only files the cache says this mirror wrote (`finish`). Symlinks
and special files in the source are reported as skipped and never opened.
Names go through `redact_name`; source names never reach the report or the
cache (only destination names). See docs/mirror.md for the user-facing account.
"""

from __future__ import annotations

import contextlib
import os
import stat
import threading
import time
from collections.abc import Callable, Iterable
from pathlib import Path

from sessionstore._fs import read as fsread
from sessionstore.errors import InvalidInput
from sessionstore.format.names import MARKERS, record_number
from sessionstore.mirror import copy as rd
from sessionstore.mirror.cache import CACHE_NAME
from sessionstore.mirror.config import PassConfig
from sessionstore.mirror.layout import DIRTY_NAME, RESERVED_PREFIX, creates_secret
from sessionstore.mirror.report import PassReport
from sessionstore.mirror.walk import Pass

TYPE_CHECKING = False  # typing's, without importing typing (mypy reads it as such)
if TYPE_CHECKING:
    from sessionstore.mirror.daemon import Daemon, PassCallback, WatchConfig
    from sessionstore.mirror.exclude import Exclude
    from sessionstore.mirror.lock import DestLock
    from sessionstore.redact.redactor import Redactor
    from sessionstore.storage.s3_tree_io import S3Dest

__all__ = ["CACHE_NAME", "DIRTY_NAME", "RESERVED_PREFIX", "Mirror", "PassReport"]

DEFAULT_CHUNK = 1 << 20
# A write() in progress already stamped ctime when it started; a window wider than one
# clock tick also covers big single in-place writes (10 ms of memcpy is ~50 MB).
DEFAULT_MIN_WINDOW_NS = 10_000_000


class Mirror:
    """Mirror `source` into `dest`, redacted, one atomic file at a time.

    `durable=False` skips every fsync (fast, not crash-proof). `delete=True`
    removes destination files this mirror wrote whose source is gone (never a
    sealed record or the store's files; not at all when the listing had
    errors or the change cache is missing). `source` is made absolute and
    `dest` resolved here, once: a later chdir moves neither.
    `racy_window_ns`: how old a file's ctime must be before it is trusted
    (default: the larger of one coarse clock tick and 10 ms; raise it for
    NFS, whose server clock and attribute caching need a second or more).
    `exclude`: gitignore patterns over source paths from the source root
    (`sessionstore.mirror.exclude`; `read_exclude_file` reads a file of them),
    or an `Exclude` compiled from them: an excluded path is never read, copied
    or deleted. `InvalidInput` for an
    invalid pattern (or one string instead of a list of them), a `chunk_size`
    under 1, and for a destination whose missing directories would be
    created with a secret in a name.
    `_on_chunk` is a test hook called with the destination path after every
    chunk read, so tests can mutate a file while it is being read.

    Not thread-safe; one pass at a time per destination.
    """

    def __init__(
        self,
        source: str | os.PathLike[str],
        dest: str | os.PathLike[str] | S3Dest,
        redactor: Redactor | None = None,
        *,
        durable: bool = True,
        delete: bool = False,
        exclude: Iterable[str] | Exclude = (),
        racy_window_ns: int | None = None,
        chunk_size: int = DEFAULT_CHUNK,
        _on_chunk: Callable[[str], None] | None = None,
    ) -> None:
        if isinstance(chunk_size, bool) or not isinstance(chunk_size, int) or chunk_size < 1:
            # A read of 0 bytes ends every file at once: each would be "changed while
            # reading" on every pass, forever, and nothing ever copied.
            raise InvalidInput(
                "mirror", f"chunk_size must be a number of bytes >= 1, not {chunk_size!r}"
            )
        # Absolute, once, as `dest` is resolved: a later chdir must not move the source.
        self.source = Path(os.path.abspath(fsread.user_path(source, "mirror source")))
        self.remote = _remote(dest)
        if self.remote is not None:
            self.dest: Path | S3Dest = self.remote
            self.dest_real = Path(str(self.remote.url))  # a name for messages only
        else:
            self.dest = Path(fsread.user_path(dest, "mirror destination"))  # type: ignore[arg-type]  # not an S3Dest: _remote said
            # realpath: a symlink loop resolves to itself (Path.resolve raises RuntimeError),
            # and the pass's own open of it says what it is.
            src, dst = Path(os.path.realpath(self.source)), Path(os.path.realpath(self.dest))
            if src == dst or dst in src.parents:
                raise InvalidInput("mirror", "the source must not be the destination or inside it")
            if redactor and creates_secret(redactor, str(dst)):
                raise InvalidInput(
                    "mirror", "the destination would be created with a secret in its path"
                )
            # Resolved once, here: every pass opens this path component by component with
            # O_NOFOLLOW, so a symlink swapped into it later is refused, never followed.
            self.dest_real = dst
        self.redactor = redactor
        self.durable = durable
        self.delete = delete
        self.exclude = _exclude(exclude)
        self.window_ns = (
            racy_window_ns
            if racy_window_ns is not None
            else max(rd.coarse_tick_ns(), DEFAULT_MIN_WINDOW_NS)
        )
        self.chunk_size = chunk_size
        self._on_chunk = _on_chunk
        # scrypt per (salt, secrets), so a long-lived Mirror pays for the fingerprint once.
        self._fingerprints: dict[object, str] = {}
        # The destination's lock while a daemon holds it (set by `Daemon.run`): each pass
        # then checks it still holds, and raises `DestinationLost` when it does not.
        self.held_lock: DestLock | None = None

    def run_once(self, *, dry_run: bool = False) -> PassReport:
        """One full pass over the source. Never raises for a file's problem; see the report.

        `dry_run`: write nothing in the destination (not even its cache, flag or
        directories; a missing destination is not created) and report what the
        pass would copy, delete and hold back. The source is read as for a real
        pass (a torn read is reported as such). Into a bucket, only reads are
        sent (`storage.s3_dry`); its `S3Dest` was probed when it was opened,
        unless opened with `probe=False` (as `mirror -n` does).
        """
        return self._pass(None, dry_run=dry_run)

    def run_dirs(self, dirs: Iterable[str]) -> PassReport:
        """A pass over some source subtrees only (what the daemon runs on events).

        `dirs` are source paths relative to the root ("a/b", "" for the root);
        one inside a record is widened to the record, so the markers-last rule
        still sees every file of it. Cache entries outside them are kept.
        """
        return self._pass(list(dirs))

    def watch(self, stop: threading.Event, config: WatchConfig | None = None) -> PassReport:
        """Mirror continuously until `stop` is set; returns the final full pass's report.

        Blocks the calling thread. Raises `LockHeld` if another daemon mirrors
        into the same destination, and `DestinationLost` (at its next pass) if
        the destination is removed or replaced while it runs (`rm --force` of the
        session): the daemon stops without writing there. See
        `sessionstore.mirror.daemon`.
        """
        # Here, not at the top: `mirror --once` never watches, and the daemon pulls in
        # threading, logging and fcntl at start-up (daemon.py imports this module only
        # for type checking).
        from sessionstore.mirror.daemon import Daemon

        return Daemon(self, config).run(stop)

    def running(
        self, config: WatchConfig | None = None, on_pass: PassCallback | None = None
    ) -> contextlib.AbstractContextManager[Daemon]:
        """`with mirror.running(): ...` mirrors in a background thread during the block.

        Leaving the block, even by an exception, stops watching and runs one
        final full pass before returning.
        """
        from sessionstore.mirror.daemon import running  # start-up: see `watch`

        return running(self, config, on_pass)

    def _config(self, dry_run: bool) -> PassConfig:
        return PassConfig(
            source=self.source,
            dest_real=self.dest_real,
            remote=self.remote,
            redactor=self.redactor,
            durable=self.durable,
            delete=self.delete,
            dry_run=dry_run,
            exclude=self.exclude,
            window_ns=self.window_ns,
            chunk_size=self.chunk_size,
            fingerprints=self._fingerprints,
            on_chunk=self._on_chunk,
            lock=self.held_lock,
        )

    def _pass(self, dirs: Iterable[str] | None = None, *, dry_run: bool = False) -> PassReport:
        """A pass over the whole tree (`dirs=None`) or over some source subtrees."""
        started = time.monotonic()
        run = Pass(self._config(dry_run))
        run.report.dry_run = dry_run
        run.run(None if dirs is None else _subtrees(dirs))
        run.report.duration = time.monotonic() - started
        return run.report


def check_source(source: str | os.PathLike[str], *, missing_ok: bool = False) -> None:
    """Raise `InvalidInput` naming `source` unless it is a directory (a symlink to one is).

    `missing_ok`: a source that does not exist yet (or a symlink to nothing
    yet) is fine: the daemon waits for it.
    """
    where = f"source {os.fspath(source)}"
    try:
        mode = os.stat(source).st_mode
    except FileNotFoundError:
        if missing_ok:
            return
        problem = "is a dangling symlink" if os.path.islink(source) else "does not exist"
        raise InvalidInput(where, problem) from None
    except OSError as exc:
        raise InvalidInput(where, f"cannot be read: {exc.strerror or exc}") from None
    if not stat.S_ISDIR(mode):
        # The readers' one name for each kind of entry (_fs/read.py).
        raise InvalidInput(where, f"is {fsread._kind(mode)}, not a directory")


def _remote(dest: str | os.PathLike[str] | S3Dest) -> S3Dest | None:
    """The bucket destination `dest` names (an `s3://` URL, opened and probed), else None."""
    if isinstance(dest, os.PathLike) or (isinstance(dest, str) and dest[:3].lower() != "s3:"):
        return None  # a local path: imports nothing of S3 (a pass may start within 10 ms)
    from sessionstore.storage.s3_config import parse_s3_url
    from sessionstore.storage.s3_tree_io import S3Dest

    return dest if isinstance(dest, S3Dest) else S3Dest(parse_s3_url(str(dest)))


def _exclude(exclude: Iterable[str] | Exclude) -> Exclude | None:
    """`exclude` compiled; None for no patterns (imports nothing: start-up)."""
    if isinstance(exclude, (tuple, list)) and not exclude:
        return None
    from sessionstore.mirror.exclude import Exclude

    if isinstance(exclude, Exclude):
        return exclude
    if isinstance(exclude, str | bytes):
        # Iterated, "*.log" is the patterns "*", ".", "l", "o", "g": "*" excludes everything.
        raise InvalidInput("exclude", "a list of patterns, not one string: pass [pattern]")
    patterns = list(exclude)
    return Exclude(patterns) if patterns else None


def _subtrees(dirs: Iterable[str]) -> list[tuple[str, ...]]:
    """Normalized, record-widened, de-duplicated source subtrees (() is the root)."""
    roots: set[tuple[str, ...]] = set()
    for d in dirs:
        parts = tuple(p for p in str(d).split("/") if p not in ("", "."))
        if ".." in parts:
            raise InvalidInput("mirror", "a pass directory must stay inside the source")
        for i in range(1, len(parts)):
            if parts[i - 1] in MARKERS and record_number(parts[i]) is not None:
                parts = parts[: i + 1]
                break
        roots.add(parts)
    # Shortest first, each dropped if a prefix of it is kept: one set lookup per prefix,
    # not a scan of everything kept (a daemon's pass after a `touch` over 20,000
    # directories spent 30 s in that scan, quadratic, before reading anything).
    kept: list[tuple[str, ...]] = []
    seen: set[tuple[str, ...]] = set()
    for parts in sorted(roots, key=len):
        if not any(parts[:i] in seen for i in range(len(parts))):
            kept.append(parts)
            seen.add(parts)
    return kept

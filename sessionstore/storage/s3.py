"""`S3Storage`: the storage seam over an S3 bucket and prefix, through obstore.

The seven operations map onto S3 requests (docs/object-storage.md):

- `create`: `PutObject` with `If-None-Match: *`. 412: taken (False). 409
  (`ConditionalRequestConflict`, a concurrent create still in progress) and
  a dropped connection: the same key again, a bounded number of times. A 412
  after an attempt whose answer was lost may be our own write: the object is
  read back and is ours if its bytes are.
- `claim`: `create` of `<prefix>/.sessionstore-claim` holding a unique writer
  token, the host, pid and its start time; a 412 after a lost answer is
  resolved by reading the claim back and comparing tokens, so numbers are
  unique and gap-free across hosts without a lock.
- `get`: one `GetObject`; past `limit` the body is never read (`TooLarge`);
  `get_each`: the GETs at once on a small thread pool (obstore releases the
  GIL while it waits). `list`: a delimiter listing, claims never listed.
  Either may be answered by a read sent ahead (`s3_ahead`). `put`: an
  unconditional `PutObject`; `remove_tree`: a listing, then `DeleteObjects`.

Every key is checked by the base rules before a request is made, and the
store's prefix is put before it, so nothing outside the prefix is reached.
Failures are `StorageError`s of one line (`s3_config.client_error`).
"""

from __future__ import annotations

import builtins
import os
import secrets
import socket
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

import obstore
from obstore import exceptions as oe

from sessionstore import _json as jsonio
from sessionstore._proc import process_start_time
from sessionstore.errors import StorageError, TooLarge
from sessionstore.storage import s3_keys
from sessionstore.storage.base import Listed, check_key, check_names, check_prefix, join
from sessionstore.storage.s3_ahead import ReadAhead
from sessionstore.storage.s3_config import S3Settings, S3Url, client_error, open_bucket
from sessionstore.storage.s3_create import Conflict, Lost, put_if_absent, refuses_stale_match

__all__ = ["CLAIM", "PROBE_PREFIX", "S3Storage"]

# The claim object of a record (inside the record's prefix); the storage's own, never
# listed, so a record's files never include it.
CLAIM = ".sessionstore-claim"
# Where the probe of a store's server writes (`probe_conditional`), below the store's prefix.
PROBE_PREFIX = ".sessionstore-probe"
# Attempts of one conditional write (409s, lost answers) before giving up loudly.
_ATTEMPTS = 8
_GET_THREADS = 16

T = TypeVar("T")


class S3Storage:
    """The objects below `url` (`s3://BUCKET/PREFIX`), keyed by their path below it.
    Thread-safe (obstore's clients are). `settings` None: `S3Settings.from_env()`."""

    def __init__(self, url: S3Url, settings: S3Settings | None = None) -> None:
        self.url = url
        self.settings = settings or S3Settings.from_env()
        self._store = open_bucket(url, self.settings)
        self._once_client: Any = None  # made on the first conditional write (`_once`)
        self._pool: ThreadPoolExecutor | None = None
        self._lock = threading.Lock()
        # False once the probe found a server that ignores a condition (a store opened
        # single-writer): every create then looks for the key first.
        self.enforced = True
        # What must pass before the first write (`s3_open`: the probe); None: nothing.
        self._gate: Callable[[], None] | None = None
        self._gate_lock = threading.RLock()  # reentrant: the probe's own writes pass
        self._in_gate = False
        self.ahead = ReadAhead(self)  # a session's reads sent at once (`s3_ahead`)

    def __repr__(self) -> str:
        return f"S3Storage({str(self.url)!r}, endpoint={self.settings.where!r})"

    def _error(self, exc: Exception, key: str) -> StorageError:
        return client_error(exc, key, self.url, self.settings)

    # -- the seven operations of `Storage` -------------------------------------------

    def create(self, key: str, data: bytes) -> bool:
        check_key(key)
        self._writable()
        return self._create_once(key, data, lambda got: got == data)

    def put(self, key: str, data: bytes, *, mode: int | None = None) -> None:
        check_key(key)
        self._writable()
        try:
            obstore.put(self._store, self.url.key(key), data, use_multipart=False)
        except Exception as exc:
            raise self._error(exc, key) from None

    def get(self, key: str, limit: int) -> bytes | None:
        check_key(key)
        held, got = self.ahead.get(key, limit)
        return got if held else self._get(key, limit)

    def get_each(
        self, prefix: str, names: Sequence[str], leaf: str, limit: int
    ) -> list[bytes | StorageError | None]:
        check_key(prefix, "storage prefix")
        check_names([*names, leaf])

        def one(name: str) -> bytes | StorageError | None:
            try:
                return self._get(f"{prefix}/{name}/{leaf}", limit)
            except StorageError as exc:
                return exc

        if len(names) < 2:
            return [one(name) for name in names]
        return list(self._threads().map(one, names))

    def list(self, prefix: str) -> Iterator[Listed]:
        check_prefix(prefix)
        held = self.ahead.list(prefix)
        if held is not None:
            return iter(held)
        below = self.url.key(prefix) if prefix else self.url.prefix
        found, objects = s3_keys.list_below(self, below, delimiter=True)
        start = len(below) + 1 if below else 0
        prefixes = {p[start:].rstrip("/") for p in found}
        names = [Listed(name, True) for name in sorted(prefixes) if name]
        names += [
            Listed(name, False)
            for name in (key[start:] for key in objects)
            if name and name != CLAIM and name not in prefixes
        ]
        return iter(names)

    def remove_tree(self, prefix: str) -> None:
        check_key(prefix, "storage prefix")
        self._writable()
        s3_keys.remove_prefix(self, prefix)

    def claim(self, prefix: str) -> bool:
        """Take `prefix` by a conditional create of its claim object (module docstring).

        A prefix that holds objects already is taken, claim or not (as `mkdir`
        fails on a directory that exists): a record some other writer made
        without claiming it is never handed out again. Such a writer must
        create the claim first, as the mirror does.
        """
        check_key(prefix, "storage prefix")
        self._writable()
        if self.keys_below(prefix):
            return False
        token = secrets.token_hex(16)
        pid = os.getpid()
        body = jsonio.dumps(
            {
                "token": token,
                "host": socket.gethostname(),
                "pid": pid,
                "pid_started_at": process_start_time(pid),
            }
        )

        def ours(got: bytes) -> bool:
            parsed, _ = jsonio.parse_object(got)
            return parsed is not None and parsed.get("token") == token

        return self._create_once(join(prefix, CLAIM), body, ours)

    # -- beyond the protocol: what the engine needs of an object store --------------

    def keys_below(self, prefix: str) -> builtins.list[str]:
        """Every key below `prefix` ("" for the whole store, at any depth), sorted; claim
        objects included."""
        check_prefix(prefix)
        start = len(self.url.key("")) if self.url.prefix else 0
        below = self.url.key(prefix) if prefix else self.url.prefix
        _, found = s3_keys.list_below(self, below, delimiter=False)
        # Not `prefix` itself: obstore lists a folder marker `prefix/` (`s3_keys`) as that.
        return sorted(k for k in (key[start:].lstrip("/") for key in found) if k != prefix)

    def copy_each(self, pairs: Sequence[tuple[str, str]]) -> None:
        """Copy each `(source, target)` key on the server (`CopyObject`: no byte comes
        here), replacing a target, on the storage's threads; the first failure raises."""
        for source, target in pairs:
            check_key(source)
            check_key(target)
        self._writable()

        def one(pair: tuple[str, str]) -> None:
            try:
                obstore.copy(self._store, self.url.key(pair[0]), self.url.key(pair[1]))
            except Exception as exc:
                raise self._error(exc, pair[0]) from None

        for _ in self._threads().map(one, pairs):
            pass

    def prefixes_holding(self, start: str, leaf: str) -> builtins.list[str]:
        """The names directly below the root that start with `start` and hold the object
        `leaf` (`<name>/<leaf>`), sorted: one delimiter LIST, then a HEAD of each match, at
        once. How a session is named by a prefix of its id (`leaf`: the manifest)."""
        check_names([leaf])
        names = [
            item.name
            for item in self.list("")
            if item.is_prefix
            and item.name.startswith(start)
            and s3_keys.addressable(item.name)  # no id has a name obstore cannot name, nor HEAD
        ]
        held = self._threads().map(lambda name: self.modified(join(name, leaf)) is not None, names)
        return sorted(name for name, there in zip(names, held, strict=True) if there)

    def chunks(self, key: str) -> tuple[int, Iterator[bytes]] | None:
        """The size of the object `key` and its bytes as a stream of chunks (a large
        object is never held whole), both of one GET; None if absent."""
        s3_keys.check_addressable(self, key)  # a listed key may be `../x`
        check_key(key)
        result = self._call(key, obstore.get, self._store, self.url.key(key))
        if result is None:
            return None

        def stream() -> Iterator[bytes]:
            try:
                for chunk in result.stream(min_chunk_size=1 << 20):
                    yield bytes(chunk)
            except Exception as exc:
                raise self._error(exc, key) from None

        start, end = result.range  # the whole object's: its size
        return end - start, stream()

    def tail(self, key: str, length: int) -> tuple[int, bytes] | None:
        """The size of the object `key` and its last `length` bytes (at most), both of one
        suffix-range GET (never one version's size, another's bytes); None if absent."""
        check_key(key)
        failed: StorageError | None = None
        if length > 0:
            try:
                ask = {"range": {"suffix": length}}
                got = self._call(key, obstore.get, self._store, self.url.key(key), options=ask)
                return None if got is None else (got.meta["size"], bytes(got.bytes()))
            except StorageError as exc:
                failed = exc  # maybe an empty object: it has no range to ask for
            except Exception as exc:  # the body cut short
                raise self._error(exc, key) from None
        meta = self._call(key, obstore.head, self._store, self.url.key(key))
        if meta is not None and meta["size"] > 0 and failed is not None:
            raise failed
        return None if meta is None else (meta["size"], b"")

    def files_below(self, prefix: str) -> builtins.list[str]:
        """The relative keys of the objects below `prefix` ("" for the whole store), sorted,
        claim and probe objects left out."""
        check_prefix(prefix)
        below = self.url.key(prefix) if prefix else self.url.prefix
        top, start = len(self.url.key("")) if self.url.prefix else 0, len(prefix) + 1
        keys = sorted(key[top:] for key in s3_keys.real_objects(self, below))
        return [
            k[start:] if prefix else k
            for k in keys
            if k != prefix
            and k.rpartition("/")[2] != CLAIM
            and not k.startswith(f"{PROBE_PREFIX}/")
        ]

    def modified(self, key: str) -> float | None:
        """When the object `key` was last written (seconds since the epoch); None if absent."""
        check_key(key)
        meta = self._call(key, obstore.head, self._store, self.url.key(key))
        return None if meta is None else meta["last_modified"].timestamp()

    def remove(self, key: str) -> None:
        """Delete the object `key`; absent is fine."""
        check_key(key)
        self._writable()
        self._call(key, obstore.delete, self._store, self.url.key(key))

    def probe_conditional(self) -> str:
        """ "" if the server refuses a second `If-None-Match: *` create of one key and a
        PUT with `If-Match` on an ETag it does not have (S3 added them months apart; a
        debris takeover needs it); else the condition it ignores. The probe key is below
        the store's prefix (`.sessionstore-probe/<token>`), removed afterwards. A missing
        bucket, bad credentials or an unreachable endpoint raise here."""
        key = f"{PROBE_PREFIX}/{secrets.token_hex(8)}"
        try:
            if not self.create(key, b"1"):
                raise StorageError(key, "a fresh probe key already exists; try again")
            if self.create(key, b"2"):
                return "If-None-Match: * (conditional create)"
            return "" if refuses_stale_match(self, key) else "If-Match (conditional replace)"
        finally:
            self.remove(key)

    def gate_writes(self, gate: Callable[[], None] | None) -> None:
        """Run `gate` (once, raising to refuse) before the first write of this storage."""
        with self._gate_lock:
            self._gate = gate

    # -- inside ------------------------------------------------------------------

    def _writable(self) -> None:
        """Pass the gate (`gate_writes`) once; until it has passed, every write asks again."""
        if self._gate is None:
            return
        with self._gate_lock:
            if self._gate is None or self._in_gate:
                return
            self._in_gate = True
            try:
                self._gate()
            finally:
                self._in_gate = False
            self._gate = None

    def _call(self, key: str, request: Callable[..., T], *args: Any, **kwargs: Any) -> T | None:
        """`request(*args, **kwargs)` on `key`: None if the key is absent, a missing bucket
        and every other failure a `StorageError` (`client_error`)."""
        try:
            return request(*args, **kwargs)
        except FileNotFoundError as exc:
            if "NoSuchBucket" in str(exc):
                raise self._error(exc, key) from None
            return None
        except Exception as exc:
            raise self._error(exc, key) from None

    def _get(self, key: str, limit: int) -> bytes | None:
        if limit == 0:  # "is anything there" (`files.exists`): a HEAD, no body started
            meta = self._call(key, obstore.head, self._store, self.url.key(key))
            if meta is not None and meta["size"] > 0:
                raise TooLarge(key, limit)
            return None if meta is None else b""
        result = self._call(key, obstore.get, self._store, self.url.key(key))
        if result is None:
            return None
        start, end = result.range  # the whole object's: its size (`meta` costs 13 us more)
        if end - start > limit:
            raise TooLarge(key, limit)  # the body is never read
        try:
            return bytes(result.bytes())
        except Exception as exc:
            raise self._error(exc, key) from None

    def _create_once(self, key: str, data: bytes, is_ours: Callable[[bytes], bool]) -> bool:
        """A conditional create of `key`, retried on 409 and lost answers (module docstring)."""
        if not self.enforced and self.modified(key) is not None:
            return False  # the server would not refuse it: one writer's own check
        lost: StorageError | None = None
        for attempt in range(_ATTEMPTS):
            try:
                self._put_if_absent(key, data)
                return True
            except oe.AlreadyExistsError:
                if lost is None:
                    return False
                try:  # limited to our size: more bytes than ours are another writer's
                    return (got := self._get(key, len(data))) is not None and is_ours(got)
                except TooLarge:
                    return False
            except Lost as exc:
                lost = exc.cause
            except Conflict:
                pass
            time.sleep(min(0.02 * 2**attempt, 1.0) * (0.5 + secrets.randbelow(1000) / 1000))
        if lost is not None:
            raise lost
        raise StorageError(key, f"conditional create still conflicting after {_ATTEMPTS} attempts")

    def _put_if_absent(self, key: str, data: bytes) -> None:
        try:
            put_if_absent(self._once, self.url.key(key), data)
        except Lost as exc:
            raise Lost(self._error(exc.cause, key)) from None
        except (Conflict, oe.AlreadyExistsError):
            raise
        except Exception as exc:
            raise self._error(exc, key) from None

    @property
    def _once(self) -> Any:
        """The client of conditional writes, which retry only in `_create_once` (where a
        lost answer is known and resolved). Made on first use: a reader never pays for it
        (a client costs ~30 ms of CPU to make), the probe's first create makes it."""
        with self._lock:
            if self._once_client is None:
                self._once_client = open_bucket(self.url, self.settings, retries=0)
            return self._once_client

    def _threads(self) -> ThreadPoolExecutor:
        with self._lock:
            if self._pool is None:
                self._pool = ThreadPoolExecutor(_GET_THREADS, thread_name_prefix="s3-get")
            return self._pool

"""Byte-level secret redaction that cannot leak.

A `Redactor` holds registered secrets. Each secret is expanded into needles
(`sessionstore.redact.variants`: stripped, per line, LF/CRLF, base64 at 3 alignments,
hex, percent, JSON and XML escapes). Redaction finds **every** occurrence of
every needle, overlapping ones included, merges overlapping and adjacent
ranges, and replaces each merged range by one marker followed by the CR and
LF bytes the range contained, so line counts (and diff hunk headers) survive.
Bytes outside ranges are copied unchanged.

The pieces: `variants` (the needles of a secret), `secrets_file` (the values
a secrets file stands for), `patterns` (well-known token shapes), `matcher`
(every occurrence, overlapping ones included; `hyperscan_detector` its fast
first stage), `stream` (settling the ranges so the output holds no secret,
chunk by chunk; its docstring has the design and the proof sketch) and
`pieces` (the stream's buffer, never joined whole). Design choices made here:

* Short secrets (under 8 bytes) cannot be matched anywhere without corrupting
  unrelated bytes, so they are refused unless allowed, and an allowed one is
  redacted only when a whole file (of at most `SHORT_FILE_MAX` bytes) is that
  value, ignoring surrounding whitespace.

Thread-safety: registration and the lazy automaton build take a lock; after
registration a `Redactor` may be used from several threads at once. A
`StreamRedactor` holds per-file state and belongs to one thread; it sees the
secrets registered when it was created.
"""

from __future__ import annotations

import os
import re
import threading
from collections.abc import Iterable

from sessionstore.errors import InvalidInput, SecretRefused
from sessionstore.redact.matcher import SHORT_FILE_MAX, Compiled, build
from sessionstore.redact.patterns import pattern_spans
from sessionstore.redact.secrets_file import file_secrets, read_secrets_file
from sessionstore.redact.stream import StreamRedactor
from sessionstore.redact.variants import MIN_NEEDLE_LEN, needles, significant_len

__all__ = [
    "DEFAULT_MARKER",
    "MAX_SECRETS",
    "MAX_SECRETS_BYTES",
    "MIN_SECRET_LEN",
    "SHORT_FILE_MAX",
    "Redactor",
    "StreamRedactor",
    "check_bounds",
]

DEFAULT_MARKER = "REDACTED"
MIN_SECRET_LEN = MIN_NEEDLE_LEN
# What one redactor holds. Its matcher is built from ~12 forms of each secret (about 14
# bytes of forms a byte of secret) whenever secrets were added; measured on 2 shared x86-64
# CPUs (docs/redaction.md): 5,000 secrets of 32 bytes build in 1.2 s (95 MiB at the peak),
# one of 128 KiB in 0.1 s (55 MiB); 50,000 took 29 s and 0.9 GiB, one of 1 MB 433 MiB.
MAX_SECRETS = 5_000
MAX_SECRETS_BYTES = 1 << 17
_MARKER_RE = re.compile(r"[A-Za-z0-9_]+")


class Redactor:
    """Registered secrets and the marker that replaces them."""

    def __init__(self, marker: str = DEFAULT_MARKER, *, patterns: bool = False) -> None:
        """Raises InvalidInput if `marker` is not a plain word or would match a token pattern."""
        if not _MARKER_RE.fullmatch(marker):
            raise InvalidInput(
                "marker",
                "must be a plain word of ASCII letters, digits and '_' so YAML and JSON "
                "scalars stay valid scalars",
            )
        self._marker = marker.encode("ascii")
        if patterns and pattern_spans(self._marker, final=True):
            raise InvalidInput("marker", "looks like a token the patterns redact; choose another")
        self._patterns = patterns
        self._needles: set[bytes] = set()
        self._shorts: set[bytes] = set()
        # The values registered, for the bounds (their needles are held anyway).
        self._values: set[bytes] = set()
        self._values_len = 0
        self._literals = 0
        self._compiled: Compiled | None = None
        self._lock = threading.Lock()

    # -- registration -----------------------------------------------------

    def add(
        self, value: str | bytes, *, origin: str = "literal", allow_short: bool = False
    ) -> None:
        """Register one secret; an empty (or all-whitespace) value is ignored.

        Raises SecretRefused (naming `origin`, never the value) for a value
        under 8 bytes unless `allow_short`, and InvalidInput if the marker and
        the secret contain one another.
        """
        with self._lock:
            if origin == "literal":
                self._literals += 1
                origin = f"literal #{self._literals}"
        raw = value.encode("utf-8", "surrogateescape") if isinstance(value, str) else bytes(value)
        if raw.strip():
            self._register([(raw, origin)], allow_short)

    def add_env(self, name: str, *, allow_short: bool = False) -> None:
        """Register the value of environment variable `name`; SecretRefused if unset or empty."""
        origin = f"env {name}"
        value = os.environ.get(name)
        if value is None or not value.strip():
            raise SecretRefused(origin, "is not set or empty; export it before registering it")
        self._register([(os.fsencode(value), origin)], allow_short)

    def add_file(
        self, path: str | os.PathLike[str], *, allow_short: bool = False, data: bytes | None = None
    ) -> None:
        """Register the secrets of a file: its lines, or the values of its dotenv assignments.

        The file is read as python-dotenv reads it, and every other plausible
        reading of a line is registered too (`secrets_file`, docs/redaction.md).
        Either every value is registered or, on error, none is. Raises
        InvalidInput if the file cannot be read or is not a regular file (a
        FIFO is never waited on), SecretRefused naming `path:line` for a short
        value. `data`: the file's contents, already read (standard input);
        `path` then only names it.
        """
        where = os.fspath(path)
        if data is None:
            data = read_secrets_file(where)
        entries = file_secrets(data, where)
        self._register(((value, f"{where}:{n}") for value, n in entries), allow_short)

    def _register(self, entries: Iterable[tuple[bytes, str]], allow_short: bool) -> None:
        """Validate every entry first, then add them all: no half-registered file.

        Past `MAX_SECRETS` or `MAX_SECRETS_BYTES` in all, SecretRefused names the
        first entry past the bound, before the forms of the rest are computed.
        """
        new_needles: set[bytes] = set()
        new_shorts: set[bytes] = set()
        with self._lock:  # throughout: the bounds hold against concurrent registrations
            added: set[bytes] = set()
            count, size = len(self._values), self._values_len
            for raw, origin in entries:
                if not raw.strip():
                    continue  # an empty value (`KEY=""`) protects nothing
                if raw not in self._values and raw not in added:
                    added.add(raw)
                    count, size = count + 1, size + len(raw)
                    check_bounds(count, size, origin)
                if significant_len(raw) >= MIN_SECRET_LEN:
                    forms = needles(raw)
                    for form in forms:
                        self._check_marker(form, origin)
                    new_needles |= forms
                elif allow_short:
                    self._check_marker(raw.strip(), origin)
                    new_shorts.add(raw.strip())
                else:
                    raise SecretRefused(
                        origin,
                        f"value is shorter than {MIN_SECRET_LEN} bytes and would corrupt "
                        "unrelated text; allow short secrets (allow_short=True, "
                        "--allow-short-secrets) to redact it only where it is a whole file",
                    )
            self._values |= added
            self._values_len = size
            if not (new_needles <= self._needles and new_shorts <= self._shorts):
                self._needles |= new_needles
                self._shorts |= new_shorts
                self._compiled = None  # rebuilt lazily on next use, not per add

    def _check_marker(self, form: bytes, origin: str) -> None:
        # A marker containing a secret would publish it; a secret containing
        # the marker (or lying inside marker + line breaks) would be matched
        # again in redacted output, breaking idempotence.
        if form.strip(b"\r\n") in self._marker or self._marker in form:
            raise InvalidInput(
                origin, "this secret and the marker contain one another; choose another marker"
            )

    # -- queries ------------------------------------------------------------

    @property
    def marker(self) -> str:
        """The word each redacted range is replaced by."""
        return self._marker.decode("ascii")

    @property
    def patterns(self) -> bool:
        """Whether the well-known token patterns are redacted too."""
        return self._patterns

    def needles(self) -> frozenset[bytes]:
        """Every byte string acted on: all needles plus the (whole-file only) short values.

        Short values are under 8 significant bytes and needles never are, so
        the union is unambiguous; it suits a fingerprint of the redactor.
        """
        with self._lock:
            return frozenset(self._needles | self._shorts)

    def __bool__(self) -> bool:
        """True when redaction can change anything: a secret is registered or patterns are on."""
        return bool(self._needles or self._shorts or self._patterns)

    @property
    def max_pattern_len(self) -> int:
        """Length of the longest needle or token pattern; streams hold back up to 3 times it."""
        return self._compile().max_len

    def redact(self, data: bytes) -> bytes:
        """Return `data` with every secret occurrence replaced."""
        return StreamRedactor.redact_whole(self._compile(), data)

    def stream(self) -> StreamRedactor:
        """Fresh streaming state for one file, using the secrets registered so far."""
        return StreamRedactor(self._compile())

    def redact_name(self, name: str) -> str:
        """Redact one path component (str, possibly carrying surrogate-escaped bytes)."""
        return os.fsdecode(self.redact(os.fsencode(name)))

    def _compile(self) -> Compiled:
        with self._lock:
            if self._compiled is None:
                self._compiled = build(self._marker, self._needles, self._shorts, self._patterns)
            return self._compiled


def check_bounds(count: int, size: int, origin: str) -> None:
    """SecretRefused naming `origin` when `count` distinct values of `size` bytes in all
    are past what one redactor holds."""
    if count > MAX_SECRETS:
        past = f"{MAX_SECRETS} secrets"
    elif size > MAX_SECRETS_BYTES:
        past = f"{MAX_SECRETS_BYTES} bytes of secrets"
    else:
        return
    raise SecretRefused(origin, f"would make more than {past} (the most one redactor holds)")

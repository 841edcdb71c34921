"""The mirror's change cache: `.sessionstore-mirror.json` in the destination root.

It lets a pass decide "unchanged" from two stats and no read, also right after
a restart. For each destination relative path (already name-redacted: source
names may contain secrets and never reach this file) it keeps the signature
of the settled source version that was committed and the destination file's
(size, mtime_ns, ino) after the commit:

    {"version": 1,
     "redactor": null | {"salt": "<hex>", "scrypt": "<hex>"},
     "files": {"trials/1/log.txt": [size, mtime_ns, ctime_ns, ino, dev,
                                     dest_size, dest_mtime_ns, dest_ino]}}

It is read and written through the destination `Tree` (never through a
symlink, never blocking on a fifo). The file is written atomically and is
safe to lose: without it (or when it is torn, of another version, or made
with other secrets) every file is read and compared with the destination
before anything is written, so a lost cache costs reads, never rewrites. Only
settled versions are recorded, so a later
write always changes the recorded ctime.

The redactor fingerprint makes "a secret was added" invalidate the cache, so
files mirrored before are re-redacted. It is scrypt (n=2**14, r=8, p=1, random
16-byte salt) over the registered values: a slow salted hash, because the
cache sits next to the data and a fast hash of a short secret is a dictionary
attack away from the secret itself.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any

from sessionstore._orjson import orjson

if TYPE_CHECKING:
    from sessionstore.redact.redactor import Redactor
    from sessionstore.storage.tree import Tree

CACHE_NAME = ".sessionstore-mirror.json"
CACHE_VERSION = 1
# source signature (5) + destination (size, mtime_ns, ino)
ENTRY_LEN = 8

Entry = list[int]


def _encode_key(key: str) -> str:
    """JSON needs UTF-8; a non-UTF-8 name (surrogate-escaped) gets an unambiguous form.

    NUL never occurs in a path, so the prefixed form cannot collide with a real one.
    """
    try:
        key.encode("utf-8")
    except UnicodeEncodeError:
        import base64  # rare: only non-UTF-8 names pay for the import

        return "\0" + base64.b64encode(os.fsencode(key)).decode("ascii")
    return key


def _decode_key(key: str) -> str:
    if key.startswith("\0"):
        import base64

        return os.fsdecode(base64.b64decode(key[1:]))
    return key


def fingerprint(redactor: Redactor | None, salt: bytes, memo: dict[object, str]) -> str | None:
    """A salted scrypt of everything that decides the redacted output; None without secrets.

    `memo` keeps results across passes of one Mirror. Its key holds the
    registered values themselves (in memory only), so a secret added to the
    same Redactor between passes yields a new fingerprint, never a stale one.
    """
    if not redactor:
        return None
    needles = redactor.needles()
    key = (salt, redactor.marker, redactor.patterns, needles)
    found = memo.get(key)
    if found is None:
        import hashlib

        marker = redactor.marker.encode()
        parts = [b"marker", marker, b"patterns", b"1" if redactor.patterns else b"0"]
        parts.extend(sorted(needles))
        # Length-prefix each part so no two different lists serialize alike.
        blob = b"".join(len(p).to_bytes(8, "big") + p for p in parts)
        found = hashlib.scrypt(blob, salt=salt, n=2**14, r=8, p=1, dklen=32).hex()
        memo[key] = found
    return found


class Cache:
    """The loaded cache, and whether its entries may be trusted for this redactor."""

    def __init__(self, entries: dict[str, Entry], salt: bytes, trusted: bool) -> None:
        self.entries = entries
        self.salt = salt
        self.trusted = trusted

    @classmethod
    def load(
        cls, tree: Tree[Any], redactor: Redactor | None, fingerprints: dict[object, str]
    ) -> Cache:
        """Read the cache at the tree's root; anything wrong yields an untrusted, empty one.

        `fingerprints` is the memo of `fingerprint`, kept by the Mirror across passes.
        """
        doc = _read(tree)
        if doc is None:
            return cls({}, os.urandom(16), trusted=False)
        stored = doc.get("redactor")
        salt = os.urandom(16)
        if isinstance(stored, dict) and isinstance(stored.get("salt"), str):
            try:
                salt = bytes.fromhex(stored["salt"])
            except ValueError:
                return cls({}, os.urandom(16), trusted=False)
        expected = fingerprint(redactor, salt, fingerprints)
        actual = stored.get("scrypt") if isinstance(stored, dict) else None
        if actual != expected:
            return cls({}, salt, trusted=False)
        return cls(doc["files"], salt, trusted=True)

    def document(
        self, redactor: Redactor | None, fingerprints: dict[object, str]
    ) -> dict[str, Any]:
        """The JSON document for `entries` (keys encoded, fingerprint for the salt)."""
        fp = fingerprint(redactor, self.salt, fingerprints)
        stored = None if fp is None else {"salt": self.salt.hex(), "scrypt": fp}
        files = {_encode_key(k): v for k, v in self.entries.items()}
        return {"version": CACHE_VERSION, "redactor": stored, "files": files}

    def save(self, tree: Tree[Any], doc: dict[str, Any]) -> None:
        """Replace the cache file atomically (the tree's `flush` fsyncs the root directory)."""
        tree.put_root_file(CACHE_NAME, orjson.dumps(doc), 0o600)


def _read(tree: Tree[Any]) -> dict[str, Any] | None:
    """The cache document if it is well-formed, else None (never raises for bad content)."""
    data = tree.read_root_file(CACHE_NAME)  # never a symlink, fifo or device
    if data is None:
        return None
    try:
        doc = orjson.loads(data)
    except orjson.JSONDecodeError:
        return None
    if not isinstance(doc, dict) or doc.get("version") != CACHE_VERSION:
        return None
    files = doc.get("files")
    if not isinstance(files, dict):
        return None
    # Read on every pass, the no-op one too: C-level loops (map over the values, one
    # join of the keys), and keys rebuilt only when some are encoded (non-UTF-8 names
    # are rare; NUL never occurs in a real name, only as an encoded key's prefix).
    values = files.values()
    if files and ({*map(type, values)} != {list} or {*map(len, values)} != {ENTRY_LEN}):
        return None
    if "\0" in "".join(files):
        try:
            doc["files"] = {_decode_key(k): v for k, v in files.items()}
        except ValueError:
            return None
    return doc

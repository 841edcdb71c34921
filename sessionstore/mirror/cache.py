"""The mirror's change cache: `.sessionstore-mirror.json` in the destination root.

It lets a pass decide "unchanged" from two stats and no read, also right after
a restart. For each destination file (its path already name-redacted: source
names may contain secrets and never reach this file) it keeps the signature
of the settled source version that was committed and the destination file's
(size, mtime_ns, ino) after the commit, grouped by destination directory:

    {"version": 2,
     "redactor": null | {"salt": "<hex>", "scrypt": "<hex>"},
     "dirs": {"trials/1": "{\"log.txt\": [size, mtime_ns, ctime_ns, ino, dev,
                                          dest_size, dest_mtime_ns, dest_ino]}"}}

Each directory's group is a JSON object kept as a string, parsed only when
the pass enters that directory and dropped when it leaves: the loaded cache
is one string per directory, not eight integers per file, so its memory and
its load stay proportional to what a pass looks at (a group the pass finds
unchanged is written back as the same string, never re-encoded). A cache of
version 1 (one flat object of paths) is read too, once, and rewritten as 2.

It is read and written through the destination `Tree` (never through a
symlink, never blocking on a fifo). The file is written atomically and is
safe to lose: without it (or when it is torn, of another version, or made
with other secrets) every file is read and compared with the destination
before anything is written, so a lost cache costs reads, never rewrites; a
malformed group costs the same for its directory only. Only settled versions
are recorded, so a later write always changes the recorded ctime.

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
CACHE_VERSION = 2
_FLAT_VERSION = 1  # one object of paths: read, never written
# source signature (5) + destination (size, mtime_ns, ino)
ENTRY_LEN = 8

Entry = list[int]
Group = dict[str, Entry]  # the files of one destination directory, by name
# A directory's group in a pass's new cache: as stored (the JSON text), or as it made it.
Stored = str | Group


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


def join(rel: str, name: str) -> str:
    """The destination path of `name` in directory `rel` ("" the root)."""
    return f"{rel}/{name}" if rel else name


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
    """The loaded cache (one group's JSON text per directory), and whether it may be trusted.

    `encoded`: some group may hold an encoded (non-UTF-8) name. `rewrite`: the file
    must be written again even if nothing changed (it was of version 1).
    """

    def __init__(
        self,
        groups: dict[str, str],
        salt: bytes,
        trusted: bool,
        *,
        encoded: bool = False,
        rewrite: bool = False,
    ) -> None:
        self.groups = groups
        self.salt = salt
        self.trusted = trusted
        self.encoded = encoded
        self.rewrite = rewrite

    @classmethod
    def load(
        cls, tree: Tree[Any], redactor: Redactor | None, fingerprints: dict[object, str]
    ) -> Cache:
        """Read the cache at the tree's root; anything wrong yields an untrusted, empty one.

        `fingerprints` is the memo of `fingerprint`, kept by the Mirror across passes.
        """
        found = _read(tree)
        if found is None:
            return cls({}, os.urandom(16), trusted=False)
        stored, groups, encoded, flat = found
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
        return cls(groups, salt, trusted=True, encoded=encoded, rewrite=flat)

    def group(self, rel: str) -> Group:
        """The well-formed entries recorded in directory `rel` (off the no-op path)."""
        text = self.groups.get(rel)
        if text is None:
            return {}
        return {k: v for k, v in parse_group(text, self.encoded).items() if is_entry(v)}

    def document(
        self, groups: dict[str, Stored], redactor: Redactor | None, fingerprints: dict[object, str]
    ) -> dict[str, Any]:
        """The JSON document for `groups` (keys encoded, fingerprint for the salt)."""
        fp = fingerprint(redactor, self.salt, fingerprints)
        stored = None if fp is None else {"salt": self.salt.hex(), "scrypt": fp}
        dirs = {
            _encode_key(rel): g if isinstance(g, str) else _dump_group(g)
            for rel, g in groups.items()
            if g
        }
        return {"version": CACHE_VERSION, "redactor": stored, "dirs": dirs}

    def save(self, tree: Tree[Any], doc: dict[str, Any]) -> None:
        """Replace the cache file atomically (the tree's `flush` fsyncs the root directory)."""
        tree.put_root_file(CACHE_NAME, orjson.dumps(doc), 0o600)


def parse_group(text: str, encoded: bool) -> Group:
    """One directory's stored group; empty if it is not a JSON object (never raises).

    Its values are not checked here, where every pass parses every group: a value
    that is not an entry (`is_entry`) vouches for nothing where it is used (`unchanged`
    checks it, `copy` compares before writing, `Cache.group` drops it).
    `encoded`: some name may be encoded (the cache said so), so look for one.
    """
    try:
        group = orjson.loads(text)
    except orjson.JSONDecodeError:
        return {}
    if not isinstance(group, dict):
        return {}
    if encoded and "\\u0000" in text:  # NUL is never in a real name
        try:
            return {_decode_key(k): v for k, v in group.items()}
        except ValueError:
            return {}
    return group


def is_entry(value: object) -> bool:
    """Whether a cached value is an entry: a list of ENTRY_LEN values (integers when ours)."""
    return type(value) is list and len(value) == ENTRY_LEN


def _dump_group(group: Group) -> str:
    return orjson.dumps({_encode_key(k): v for k, v in group.items()}).decode()


# What `_read` finds: the stored redactor, the groups, whether a name may be encoded,
# and whether the file was of version 1.
_Found = tuple[object, dict[str, str], bool, bool]


def _read(tree: Tree[Any]) -> _Found | None:
    """What the cache file holds if it is well-formed, else None (never raises for bad content)."""
    data = tree.read_root_file(CACHE_NAME)  # never a symlink, fifo or device
    if data is None:
        return None
    try:
        doc = orjson.loads(data)
    except orjson.JSONDecodeError:
        return None
    if not isinstance(doc, dict):
        return None
    version = doc.get("version")
    if version == _FLAT_VERSION:
        dirs = _from_flat(doc.get("files"))
        return None if dirs is None else (doc.get("redactor"), dirs, True, True)
    dirs = doc.get("dirs")
    if version != CACHE_VERSION or not isinstance(dirs, dict):
        return None
    if not {*map(type, dirs.values())} <= {str}:
        return None
    if "\0" in "".join(dirs):
        try:
            dirs = {_decode_key(k): v for k, v in dirs.items()}
        except ValueError:
            return None
    # An encoded name's NUL is "\\u0000" in a group's text, escaped once more in the file.
    return doc.get("redactor"), dirs, b"\\\\u0000" in data, False


def _from_flat(files: object) -> dict[str, str] | None:
    """A version 1 cache's flat {path: entry} as groups (read once, after an upgrade)."""
    if not isinstance(files, dict):
        return None
    groups: dict[str, Group] = {}
    try:
        for key, entry in files.items():
            if not (isinstance(entry, list) and len(entry) == ENTRY_LEN):
                return None
            rel, _, name = _decode_key(key).rpartition("/")
            groups.setdefault(rel, {})[name] = entry
    except ValueError:
        return None
    return {rel: _dump_group(g) for rel, g in groups.items()}

"""The mirror's change cache: `.sessionstore-mirror.json` in the destination root.

It lets a pass decide "unchanged" from two stats and no read, also right after
a restart. For each destination file (its path already name-redacted: source
names may contain secrets and never reach this file) it keeps the signature
of the settled source version that was committed and the destination file's
(size, mtime_ns, ino) after the commit, grouped by destination directory.
Version 4 is one JSON document laid out so that a pass reads only what it
looks at:

    {"version":4,"redactor":null,"dirs":["","trials/1"],"sizes":[154,302],"groups":[
    "<hex of notes.md's 8 integers and its name>",
    "<hex of log.txt's and trial.json's>"
    ]}

(`cache_group` has a group's bytes: packed, or the JSON object of version 3
where an integer does not fit int64). The first line (the head) names each
directory that has a group and the byte length of its group; the groups
follow in that order, one a line. A pass parses the head alone; a
directory's group is read by its offset when the pass enters that
directory, parsed, and dropped when it leaves. So the
memory and the load of a pass grow with the number of directories, not with
the bytes of the cache (a no-op pass at 200k files peaks at 39 MiB, not 98).
Groups are written in the order the pass entered their directories, so the
next pass reads them front to back (its forked verifier, back to front)
through one `_WINDOW` at a time, not a read per directory. A directory's
group is referred to by an int (its offset and length); a group the pass
finds unchanged is written back as the bytes read (its int is the same
object: identity, not equality), never re-encoded.
Files of version 1 (one flat object of paths), 2 (every group a JSON string of
one object) and 3 (every group a JSON object) are read too, once, and
rewritten as 4. The bytes of the file are `cache_file`'s; a `Cache` is what
one pass makes of it.

It is read and written through the destination `Tree` (never through a
symlink, never blocking on a fifo), and read from the file opened at the
start of the pass to its end, whatever replaces the name meanwhile. The file
is written atomically and is safe to lose: without it (or when it is torn,
of another version, or made with other secrets) every file is read and
compared with the destination before anything is written, so a lost cache
costs reads, never rewrites; a malformed or unreadable group costs the same
for its directory only. Only settled versions are recorded, so a later write
always changes the recorded ctime.

The redactor fingerprint makes "a secret was added" invalidate the cache, so
files mirrored before are re-redacted. It is of the secrets registered when
the pass loaded the cache (`Secrets`): one registered while the pass runs
(another thread's `Redactor.add`) applies to the files copied after it only,
so the cache the pass writes must not vouch for it. It is scrypt (n=2**14, r=8, p=1, random
16-byte salt) over the registered values: a slow salted hash, because the
cache sits next to the data and a fast hash of a short secret is a dictionary
attack away from the secret itself.
"""

from __future__ import annotations

import os

from sessionstore.mirror.cache_file import MASK, SHIFT, Stored, chunks, read
from sessionstore.mirror.cache_group import (
    Group,
    dump_group,
    encode_key,
    is_entry,
    is_name,
    parse_group,
)

TYPE_CHECKING = False  # typing's, without importing typing (mypy reads it as such)
if TYPE_CHECKING:
    from typing import Any

    from sessionstore.redact.redactor import Redactor
    from sessionstore.storage.journal import Claim
    from sessionstore.storage.tree import RootFile, Tree

CACHE_NAME = ".sessionstore-mirror.json"
_WINDOW = 1 << 16  # bytes of groups read at once (a pass reads them in the order written)


def join(rel: str, name: str) -> str:
    """The destination path of `name` in directory `rel` ("" the root)."""
    return f"{rel}/{name}" if rel else name


# What decides a redactor's output, as it was at one moment: its marker, whether token
# patterns are on, and every needle (None: no redactor, or one that changes nothing).
Secrets = tuple[str, bool, frozenset[bytes]] | None


def secrets_of(redactor: Redactor | None) -> Secrets:
    """What `redactor` redacts with now (a secret registered later is not in it)."""
    if not redactor:
        return None
    return (redactor.marker, redactor.patterns, redactor.needles())


def fingerprint(secrets: Secrets, salt: bytes, memo: dict[object, str]) -> str | None:
    """A salted scrypt of everything that decides the redacted output; None without secrets.

    `memo` keeps results across passes of one Mirror. Its key holds the
    registered values themselves (in memory only), so a secret added to the
    same Redactor between passes yields a new fingerprint, never a stale one.
    """
    if secrets is None:
        return None
    key = (salt, *secrets)
    found = memo.get(key)
    if found is None:
        import hashlib

        marker_text, patterns, needles = secrets
        marker = marker_text.encode()
        parts = [b"marker", marker, b"patterns", b"1" if patterns else b"0"]
        parts.extend(sorted(needles))
        # Length-prefix each part so no two different lists serialize alike.
        blob = b"".join(len(p).to_bytes(8, "big") + p for p in parts)
        found = hashlib.scrypt(blob, salt=salt, n=2**14, r=8, p=1, dklen=32).hex()
        memo[key] = found
    return found


class Cache:
    """The loaded cache (each directory's group by reference), and whether it may be trusted.

    `rewrite`: the file must be written again even if nothing changed (it was of
    version 1, 2 or 3). Holds the file open until `close`.
    """

    def __init__(
        self,
        groups: dict[str, int],
        salt: bytes,
        trusted: bool,
        *,
        file: RootFile | None = None,
        rewrite: bool = False,
        secrets: Secrets = None,
    ) -> None:
        self.groups = groups
        self.salt = salt
        self.trusted = trusted
        self.rewrite = rewrite
        self.secrets = secrets  # as the pass loaded the cache: what `save` vouches for
        self._file = file
        self._window = b""  # the groups' bytes read last, from `_start`
        self._start = 0

    @classmethod
    def load(
        cls, tree: Tree[Any], redactor: Redactor | None, fingerprints: dict[object, str]
    ) -> Cache:
        """Open the cache at the tree's root; anything wrong yields an untrusted, empty one.

        `fingerprints` is the memo of `fingerprint`, kept by the Mirror across passes.
        """
        secrets = secrets_of(redactor)  # before any file is copied with them
        file = tree.open_root_file(CACHE_NAME)  # never a symlink, fifo or device
        if file is None:
            return cls({}, os.urandom(16), trusted=False, secrets=secrets)
        try:
            found = read(file)
        except OSError:
            found = None
        if found is None or found[2] is not file:
            file.close()
        if found is None:
            return cls({}, os.urandom(16), trusted=False, secrets=secrets)
        stored, groups, source, rewrite = found
        salt = os.urandom(16)
        trusted = True
        if isinstance(stored, dict) and isinstance(stored.get("salt"), str):
            try:
                salt = bytes.fromhex(stored["salt"])
            except ValueError:
                salt, trusted = os.urandom(16), False
        if not trusted:
            source.close()
            return cls({}, salt, trusted=False, secrets=secrets)
        expected = fingerprint(secrets, salt, fingerprints)
        trusted = (stored.get("scrypt") if isinstance(stored, dict) else None) == expected
        # Made with other secrets: kept for `add_owned` alone (nothing in it vouches for a file).
        return cls(groups, salt, trusted=trusted, file=source, rewrite=rewrite, secrets=secrets)

    def add_owned(self, claims: dict[str, list[Claim]]) -> None:
        """Add to `claims` what a cache made with other secrets still proves: the files
        this mirror committed, each settled at the end of the pass like an interrupted
        pass's claim (`storage/journal.py`: still exactly that file, still ours); nothing
        when trusted.

        Its signatures vouch for no file now (the redacted output changed), but which
        files the mirror wrote does not depend on the secrets: without this, a file whose
        name a new secret changed (`a-<secret>`, mirrored again as `a-REDACTED`) would be
        no file's to `--delete`, and its old name, holding the secret, would stay for good.
        """
        if self.trusted:
            return
        for rel in self.groups:
            for name, entry in self.group(rel).items():
                claims.setdefault(join(rel, name), []).append((entry[5], entry[6], entry[7]))

    def close(self) -> None:
        """Release the file (the pass is over)."""
        if self._file is not None:
            self._file.close()
        self._window = b""

    def text(self, ref: int) -> bytes:
        """A stored group's bytes, through the window (`OSError` if the file cannot be read;
        short, and so no JSON, if it shrank meanwhile)."""
        offset, n = ref >> SHIFT, ref & MASK
        at = offset - self._start
        window = self._window
        if at < 0 or at + n > len(window):
            assert self._file is not None  # a reference comes from the file
            # The window runs on in the direction of the walk: the forked verifier (`split`)
            # reads its subdirectories' groups from the last one back. It always starts at
            # or before the group (a group may be longer than a window).
            start = min(offset, max(0, offset + n - _WINDOW)) if at < 0 else offset
            window = self._window = self._file.read_at(start, max(offset + n - start, _WINDOW))
            self._start, at = start, offset - start
        return window[at : at + n]

    def parsed(self, ref: int) -> Group:
        """A stored group parsed unchecked (`parse_group`); empty if it cannot be read."""
        try:
            return parse_group(self.text(ref))
        except OSError:
            return {}

    def group(self, rel: str) -> Group:
        """The well-formed entries recorded in directory `rel`, each under a name that is
        one path component (off the no-op path: the leftovers that `--delete` may remove)."""
        ref = self.groups.get(rel)
        if ref is None:
            return {}
        return {k: v for k, v in self.parsed(ref).items() if is_entry(v) and is_name(k)}

    def save(
        self,
        tree: Tree[Any],
        groups: dict[str, Stored],
        redactor: Redactor | None,
        fingerprints: dict[object, str],
    ) -> None:
        """Replace the cache file atomically with `groups`, in their order (the tree's
        `flush` fsyncs the root directory).

        A group kept as stored is copied from the file this pass read; `OSError`
        (the old file left as it was) if that cannot be read back whole. The
        fingerprint is of the secrets the pass began with (`self.secrets`), not of
        what `redactor` holds by now: files copied before a secret registered
        meanwhile do not hold it redacted, and the next pass must copy them again.
        """
        fp = fingerprint(self.secrets, self.salt, fingerprints)
        names: list[str] = []
        parts: list[int | bytes] = []
        for rel, group in groups.items():
            if isinstance(group, int):
                parts.append(group)
            elif group:
                parts.append(dump_group(group))
            else:
                continue
            names.append(encode_key(rel))
        stored = None if fp is None else {"salt": self.salt.hex(), "scrypt": fp}
        tree.put_root_file(CACHE_NAME, chunks(stored, names, parts, self.text), 0o600)

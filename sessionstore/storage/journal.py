"""The in-progress flag as a journal: which files a pass committed, for the pass after a kill.

The change cache (mirror/cache.py) is the mirror's record of which destination
files are its own, and it is written at the end of a pass. A pass killed
midway has committed files the cache does not know: without a record, the
next pass could never prove them its own, and `--delete` would keep them for
good once the source removed them. So a local destination's in-progress flag
(created at a pass's first change, removed after its cache is written) also
holds one *claim* per file the pass commits, appended just before the file
takes its name: the destination path and the size, mtime and inode the file
has (a rename keeps all three). The pass after a kill reads the claims
(`read`) and counts a file as its own only while it is still exactly that
file (mirror/finish.py); a claim whose rename never happened, or whose file
was replaced since, proves nothing and is dropped.

A claim is `<size> <mtime_ns> <ino> <length> <path>` ended by a NUL (a path
can hold a line break, never a NUL), the length the path's in bytes, so a
record cut by a kill, a full disk or a power cut (which can leave zeros where
its end was) is simply not a record; a pass that appends to a flag first ends
whatever record was cut with a NUL. Claims are not fsynced: losing them loses a proof, never makes
one. A path that is not below the destination (a `..`, `.` or empty part, a
leading `/`) is no claim: anyone who can write the flag must not steer a
removal outside. A flag another user made is never read, and one with another
name (a hard link) never appended to (storage/local_tree_root.py).
"""

from __future__ import annotations

import os
import re
import stat

__all__ = ["MAX_BYTES", "Claim", "outside", "proves", "read", "record"]

Claim = tuple[int, int, int]  # the committed file's (size, mtime_ns, ino)
# Read at most this much of a flag (about 200,000 claims, a few tens of MiB as a dict):
# one written by anyone else must not take the memory of the pass; a claim not read
# proves nothing.
MAX_BYTES = 16 << 20
# A claim's head, found only where a record starts (at the flag's start or after a NUL):
# three numbers of at most 20 digits (an int64's range: int() of thousands of digits is
# refused) and the byte length of the path that follows.
_HEAD = re.compile(rb"(?:^|(?<=\0))(\d{1,20}) (\d{1,20}) (\d{1,20}) (\d{1,10}) ")


def outside(paths: list[str]) -> bool:
    """Whether any of these relative paths (none of them the root's "") is not a path
    below the root: a part that is no name or leads out of its parent ("", ".", ".."),
    or a NUL. Joined between slashes, every part of every path is between two slashes,
    so four substring scans of the whole at C speed answer it (a regex over a big
    cache's directories took 20 ms of a 50,000-file no-op pass; this takes 3)."""
    if not paths:
        return False
    joined = "/" + "/".join(paths) + "/"
    return "//" in joined or "/./" in joined or "/../" in joined or "\0" in joined


def record(key: str, claim: Claim) -> bytes:
    """The record of a claim on the file at `key`."""
    path = os.fsencode(key)
    return b"%d %d %d %d %s\0" % (*claim, len(path), path)


def proves(claims: list[Claim], st: os.stat_result) -> bool:
    """Whether the file whose lstat is `st` is still exactly a file claimed."""
    return stat.S_ISREG(st.st_mode) and (st.st_size, st.st_mtime_ns, st.st_ino) in claims


def read(data: bytes) -> dict[str, list[Claim]]:
    """The well-formed claims in a flag's bytes, by path: every one, in order (a pass
    killed after its claim and before its rename leaves a claim no file answers to,
    after the one the file in place answers to).

    Whatever is not a claim is skipped by the regex engine, not a loop per byte.
    """
    found: dict[str, list[Claim]] = {}
    search = _HEAD.search
    m = search(data)
    while m is not None:
        start = m.end()
        stop = start + int(m[4])
        # The path, whole: as long as its head says, no NUL in it, a NUL after it.
        if start < stop < len(data) and data[stop] == 0 and data.find(b"\0", start, stop) < 0:
            key = os.fsdecode(data[start:stop])
            if not outside([key]):
                found.setdefault(key, []).append((int(m[1]), int(m[2]), int(m[3])))
            m = search(data, stop + 1)
        else:
            m = search(data, start)
    return found

"""Names in a mirror pass: what it reserves in a destination, the store's files it never
touches, and how source names become destination names (`redact_name`)."""

from __future__ import annotations

import os
import stat
from collections.abc import Callable

from sessionstore._fs.atomic import TEMP_PREFIX
from sessionstore.errors import RedactionUnsafe
from sessionstore.format.names import CONSTRAINTS, INDEX, MANIFEST, REPORT

TYPE_CHECKING = False  # typing's, without importing typing (mypy reads it as such)
if TYPE_CHECKING:
    from sessionstore.redact.redactor import Redactor

# Destination entries we own (the cache, the daemon's lock): never mirrored over, never deleted.
RESERVED_PREFIX = ".sessionstore-"
# Set while a pass may have temps in flight; its presence makes the next pass sweep.
DIRTY_NAME = RESERVED_PREFIX + "mirror-dirty"
# Files at the top of a session that only the store writes (its readers, for the index).
STORE_OWNED = frozenset([MANIFEST, CONSTRAINTS, REPORT, INDEX])
# Why a source entry under one of those names is skipped (by a full pass and a subset one).
RESERVED = "reserved name"
OWNED = "the store owns it (the destination is a session)"

Pair = tuple[os.DirEntry[str], str]  # (source entry, destination name)
# (rel, dname): does the destination's path to `rel/dname` spell a secret across a `/`?
Spans = Callable[[str, str], bool]
SPANS = "a secret is spelled by a name here and the names above it; not mirrored"


def redacted_names(
    entries: list[os.DirEntry[str]], rel: str, name: Callable[[str], str], spans: Spans | None
) -> tuple[list[Pair], list[tuple[str, str]], dict[str, list[os.DirEntry[str]]]]:
    """With a redactor: the (entry, destination name) pairs, the problems (destination
    path, message) of names that collide, are invalid or complete a secret with the
    path above them (reported at that path: theirs would spell it), and every
    destination name the source accounts for (for --delete). Our temps are ignored."""
    groups: dict[str, list[os.DirEntry[str]]] = {}
    for e in entries:
        if not e.name.startswith(TEMP_PREFIX):
            groups.setdefault(name(e.name), []).append(e)
    problems: list[tuple[str, str]] = []
    pairs: list[Pair] = []
    for dname, group in groups.items():
        drel = f"{rel}/{dname}" if rel else dname
        if len(group) > 1:
            problems.append((drel, f"name collision: {len(group)} source names map to this name"))
        elif not dname or "/" in dname or dname in (".", ".."):
            problems.append((drel, "the redacted name is not a valid file name"))
        elif spans is not None and spans(rel, dname):
            problems.append((rel or ".", SPANS))
        else:
            pairs.append((group[0], dname))
    return pairs, problems, groups


def special_kind(e: os.DirEntry[str]) -> str:
    """Why a non-regular, non-directory, non-symlink entry is skipped (never opened)."""
    try:
        mode = e.stat(follow_symlinks=False).st_mode
    except OSError:
        return "special file"
    if stat.S_ISFIFO(mode):
        return "special file (fifo)"
    if stat.S_ISSOCK(mode):
        return "special file (socket)"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "special file (device)"
    return "special file"


def safe_name(redactor: Redactor) -> Callable[[str], str]:
    """`redact_name` that answers "" (reported as an invalid name) where it refuses a name."""

    def name(value: str) -> str:
        try:
            redacted: str = redactor.redact_name(value)
        except RedactionUnsafe:
            return ""
        return redacted

    return name


def redact_message(redactor: Redactor, text: str) -> str:
    """`text`, a message that may name a path the user gave (the destination root, the
    source), without its secrets; a fixed line where the redactor refuses it.

    A short secret (`allow_short`) is redacted where it is a whole name, so here
    where it is a whole word of the message too (`source ./a: does not exist`):
    the message as one name would hide it only if it were the whole message.
    """
    import re  # here: a pass that reports no error never imports it

    # A word: between spaces, '/', quotes and the punctuation around a name in a message.
    words = re.compile(r"[^\s/'\":,()]+")
    try:
        redacted: str = redactor.redact_name(text)  # first: a secret may hold a space
        redacted = words.sub(lambda word: redactor.redact_name(word[0]), redacted)
    except RedactionUnsafe:
        return "(a message the redactor cannot redact safely)"
    return redacted


def creates_secret(redactor: Redactor, path: str) -> bool:
    """Whether creating the missing directories of `path` (absolute, resolved) would write
    a secret in a name: one of them holds one, or spells one with the names above it."""
    parts = path.split("/")
    made = 1
    while made < len(parts) and os.path.lexists("/".join(parts[: made + 1])):
        made += 1
    if made == len(parts):
        return False  # the destination exists: mirroring into it names nothing anew
    try:
        if any(redactor.redact_name(part) != part for part in parts[made:]):
            return True
    except RedactionUnsafe:
        return True
    full, kept = os.fsencode(path), len(os.fsencode("/".join(parts[:made])))
    # An occurrence ending past the existing directories crosses into a new name.
    return any(full.find(n, max(0, kept - len(n) + 1)) >= 0 for n in redactor.needles())


def identity(name: str) -> str:
    return name


def names_for(redactor: Redactor | None, root: str) -> tuple[Callable[[str], str], Spans | None]:
    """How a pass names destination entries: each component through `redact_name`, and
    the check that a path below `root` (the destination's) spells no secret across a
    `/` (None where none can)."""
    if redactor is None:
        return identity, None
    return safe_name(redactor), spanning(redactor, root)


def spanning(redactor: Redactor, root: str) -> Spans | None:
    """`spans(rel, dname)`: whether `root/rel/dname` holds a secret across its last `/`,
    given that `root/rel` (checked when it was entered; `root`, the destination's path, by
    `creates_secret` when it was made) and `dname` (redacted) hold none.

    Names are redacted one component at a time, so a secret holding a `/`
    (`ab/cdefgh12`, or a base64 spelling with one) would otherwise be spelled by
    the path of the directories holding its halves: on disk, in the cache and in
    the report. An occurrence that no component holds crosses a `/`, and is found
    at the last one it crosses, as a head of it ending `rel` and the rest starting
    `dname`. A name at the top completes one with the destination's own path
    (`defgh12` below `/x/abc` spells `abc/defgh12`; a secret starting with `/`, any
    top name that is the rest of it). Compared as bytes: a needle may cut a UTF-8
    character. None when no needle holds a `/` and patterns are off (this runs for
    every entry).
    """
    from sessionstore.redact.redactor import MIN_SECRET_LEN  # loaded: there is a redactor

    halves = [
        (n[:i], n[i + 1 :])
        for n in redactor.needles()
        if len(n.strip()) >= MIN_SECRET_LEN  # short values match whole names only
        for i in range(len(n))
        if n[i] == 0x2F and 0x2F not in n[i + 1 :]  # the rest lies in one component
    ]
    patterns = redactor.patterns
    if not (halves or patterns):
        return None
    # Tuples, so that most entries are cleared by two calls that loop in C.
    lone_tails = tuple({tail for head, tail in halves if not head})  # the needle starts with /
    lone_heads = tuple({head for head, tail in halves if not tail})  # ... or ends with /
    pairs = [(head, tail) for head, tail in halves if head and tail]
    heads, tails = tuple({head for head, _ in pairs}), tuple({tail for _, tail in pairs})

    top = os.fsencode(root.rstrip("/"))  # "/" itself: the `/` before the name is all
    last = [("", top)]  # the last rel and the path to it: a directory's entries come together

    def spans(rel: str, dname: str) -> bool:
        if rel is not last[0][0]:
            last[0] = (rel, b"%s/%s" % (top, os.fsencode(rel)) if rel else top)
        name, path = os.fsencode(dname), last[0][1]
        if name.startswith(lone_tails) or path.endswith(lone_heads):
            return True
        if (
            name.startswith(tails)
            and path.endswith(heads)
            and any(name.startswith(tail) and path.endswith(head) for head, tail in pairs)
        ):
            return True
        # A token ends in `dname`; only a PEM block (its `-----`) can also hold a `/`.
        joined = f"{os.fsdecode(path)}/{dname}"
        return patterns and "-----" in dname and redactor.redact_name(joined) != joined

    return spans

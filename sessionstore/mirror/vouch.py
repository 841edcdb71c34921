"""The forked verifier's walk (`split`): what it vouches for, never writing.

The child walks each subdirectory of its share with the pass's own code, with
every hook that would write or report anything (the pass's decisions, the
tree's `before_change`) replaced by one that stops the directory it is in.
A directory is *clean* when its walk ended without being stopped, nothing in
it is pending, its new cache group is the stored text itself (or, with none
stored, it has no files), every subdirectory it has was entered and is clean,
and no stored group below it went missing (a file gone or a directory not
walked). What it reports, per subdirectory of the split directory: the whole
of it, or else its topmost clean directories that have a stored group. A
clean directory with no files of its own (a directory of directories) has no
group to name it by: the parent lists it, and adopts its clean subdirectories.
"""

from __future__ import annotations

from collections.abc import Iterator

TYPE_CHECKING = False  # typing's, without importing typing (mypy reads it as such)
if TYPE_CHECKING:
    from typing import Any, NoReturn

    from sessionstore.mirror.claims import Claims
    from sessionstore.mirror.frame import Child, Frame
    from sessionstore.mirror.walk import Pass

WHOLE = -1  # vouched for all of a subdirectory of the split directory


class _NotClean(Exception):
    """This directory needs more than vouching: the parent walks it."""


def _not_clean(*_args: object) -> NoReturn:
    raise _NotClean


def vouch_for(
    run: Pass, frame: Frame, items: list[Child], rels: list[list[str]], claims: Claims
) -> Iterator[list[Any]]:
    """In the child: walk `frame`'s subdirectories read-only from the last, each taken
    from `claims`, until the parent's walk has reached it; a verdict per subdirectory:
    [index, vouched], vouched being [[`WHOLE`, files]] or a [index into its stored rels,
    files vouched for] per topmost clean directory."""
    # Everything that would write, or report anything, stops the directory instead:
    # the pass's own decisions, and the tree's hook that runs before each of its changes.
    for name in ("changed", "touch", "error", "unstable", "hold", "skip"):
        setattr(run, name, _not_clean)
    run.tree.before_change = _not_clean
    depth = frame.rel.count("/") + 2 if frame.rel else 1
    stored, groups = run.stored, run.groups
    for i in reversed(range(len(items))):
        if not claims.take_back(i):
            return
        child = items[i]
        clean = _clean_dirs(run, frame, child, depth, claims)
        if clean is None:
            yield [i, []]
            continue
        # A stored group not found again as itself is a file gone or a directory not
        # walked: no directory above it is clean.
        for rel in rels[i]:
            if groups.get(rel) is not stored[rel]:
                for up in ancestors(rel):
                    clean.pop(up, None)
        if child[2] in clean:
            yield [i, [[WHOLE, clean[child[2]]]]]
            continue
        index = {rel: j for j, rel in enumerate(rels[i])}
        # The topmost clean directories with a stored group (a clean one without
        # one, such as a directory of directories, is walked by the parent).
        tops = {rel: n for rel, n in clean.items() if rel in index}
        yield [
            i,
            [
                [index[rel], n]
                for rel, n in tops.items()
                if not any(map(tops.__contains__, ancestors(rel)))
            ],
        ]


def _clean_dirs(
    run: Pass, frame: Frame, child: Child, depth: int, claims: Claims
) -> dict[str, int] | None:
    """In the child: walk one subdirectory of `frame`; its clean directories (rel ->
    files vouched for below it), or None if it could not be entered.

    A directory is clean when its walk ended without a `_NotClean`, with nothing
    pending and its group kept as stored (or, with none stored, no files), and
    every subdirectory it has was entered and is clean.
    """
    report, stored, groups = run.report, run.stored, run.groups
    clean: dict[str, int] = {}
    start = report.unchanged
    try:
        top = run.child(frame, child, depth)
    except _NotClean:
        return None
    if top is None:
        return None
    stack = [_Level(top, start)]
    try:
        while stack:
            claims.tick()  # the parent waiting for this verdict sees the walk go on
            level = stack[-1]
            sub = next(level.frame.subdirs, None)
            if sub is not None:
                before = report.unchanged
                try:
                    entered = run.child(level.frame, sub, depth + len(stack))
                except _NotClean:
                    entered = None
                if entered is None:  # not clean, or gone since it was listed
                    level.dirty = True
                else:
                    stack.append(_Level(entered, before))
                continue
            done = stack.pop()
            current = done.frame
            try:
                run.leave(current)
            except _NotClean:
                run.release(current)
                done.dirty = True
            rel = current.rel
            kept = groups.get(rel)
            if (
                done.dirty
                or current.pending
                or not (kept is stored[rel] if rel in stored else not kept)
            ):
                if stack:
                    stack[-1].dirty = True
            else:
                clean[rel] = report.unchanged - done.start
    finally:
        for level in stack:  # only after an exception: release what is still open
            run.release(level.frame)
    return clean


class _Level:
    """In the child: one directory on the walk's path."""

    __slots__ = ("dirty", "frame", "start")

    def __init__(self, frame: Frame, start: int) -> None:
        self.frame = frame
        self.start = start  # files counted unchanged before it was entered
        self.dirty = False  # something in or below it is not clean


def ancestors(rel: str) -> Iterator[str]:
    """The rels of the directories above `rel`, nearest first (not the root's "")."""
    while (cut := rel.rfind("/")) > 0:
        rel = rel[:cut]
        yield rel

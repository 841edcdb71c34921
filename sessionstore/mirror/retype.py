"""A source name that changed kind between passes: a directory became a file, or a
file a directory (`finish`, at the end of a pass).

The walk never half-replaces such a name: a source file that finds a directory in
its place is not committed (`Pass.not_dirs`), and a source directory that finds a
file in its place is an error of the tree's. What --delete may remove is decided
from the listings like any leftover (`finish.settle_leftovers`), with what these
add: nothing below a name the source holds as a file is in the source
(`SourceFiles`), nor a file whose name the source lists as a directory
(`gone_file`). The name is then reported: an error while the old entry stays, else
unstable, which the next pass (a daemon's retry) writes.
"""

from __future__ import annotations

import functools
from collections.abc import Container

from sessionstore.mirror.dest_walk import Walker, is_gone

TYPE_CHECKING = False  # typing's, without importing typing (mypy reads it as such)
if TYPE_CHECKING:
    from sessionstore.mirror.walk import Pass


class SourceFiles:
    """The destination rels the source holds as files: those this pass found a directory
    in the place of (`Pass.not_dirs`), and those of its new groups (on a bucket a file
    and a prefix of one name coexist: the file is written, the prefix stays)."""

    __slots__ = ("parsed", "run")

    def __init__(self, run: Pass) -> None:
        self.run = run
        self.parsed = functools.cache(run.read_group)

    def __contains__(self, rel: object) -> bool:
        if not isinstance(rel, str):
            return False
        if rel in self.run.not_dirs:
            return True
        where, _, name = rel.rpartition("/")
        group = self.run.groups.get(where)
        if isinstance(group, int):
            group = self.parsed(group)
        return group is not None and name in group


def gone_file(key: str, listed: dict[str, Container[str]], not_dirs: Container[str]) -> bool:
    """Whether the file `key` is gone from the source: by name, below a name the source
    holds as a file, or where the source now has a directory (it was listed)."""
    return key in listed or is_gone(key, listed, not_dirs)


def made_way(run: Pass, key: str, shown: str) -> None:
    """A file deleted where the source has a directory now: the error the walk met
    there (the tree's, a non-directory in its place) is the retry of the next pass."""
    report = run.report
    report.errors = [item for item in report.errors if item["path"] != key]
    run.unstable(
        shown,
        "--delete removed the file in its place; the next pass makes the directory",
    )


def not_replaced(run: Pass, delete: bool) -> None:
    """Report each source file the pass found a directory in the place of (`not_dirs`).

    Never half-replaced: with `delete`, the files this mirror wrote in it went with
    the leftovers (and the directory, emptied); one found empty goes now. The next
    pass copies the file in its place.
    """
    walker = Walker(run, delete, {})
    try:
        for rel in sorted(run.not_dirs):
            level = walker.to(rel)
            if level is not None and delete:
                level.emptied = True  # removed when left if empty and not sealed (`pop`)
                walker.to(rel.rpartition("/")[0])
                level = walker.to(rel)
            if level is None:
                how = "--delete removed" if delete else "gone from the destination:"
                run.unstable(rel, f"{how} the directory in its place; the next pass copies it")
            elif level.sealed is not None:
                run.error(rel, "a sealed record is in its place in the destination; not replaced")
            elif not delete:
                run.error(
                    rel,
                    "a directory is in its place in the destination; not replaced "
                    "(--delete removes one this mirror wrote)",
                )
            elif run.m.dry_run:
                run.unstable(
                    rel,
                    "a directory is in its place in the destination; --delete "
                    "removes it if it holds only files this mirror wrote",
                )
            else:
                run.error(
                    rel,
                    "a directory is in its place in the destination, with files "
                    "--delete did not remove; not replaced",
                )
    finally:
        walker.close()

"""The end of a pass (`finish_pass`): leftovers, --delete, the new cache, the in-progress flag.

After the walk come the files the change cache says this mirror wrote that
the pass did not see.

The cache is the mirror's record of ownership: a key is a destination file
this mirror committed (or found already identical to its source). A key the
pass did not re-establish is a *leftover*: unstable this time, under a
directory that was not listed, or *gone* from the source. Gone means that
some directory on its path was listed in this pass and the next name on the
path was not in that listing, so an unreadable or unvisited directory never
looks like an empty one; a name that changed kind (a directory now a file, or
the reverse) is settled by the rules of `retype`.

For each gone key, walking the destination through directory fds in sorted
order (one fd per level, never a path string):

- inside a sealed record (its marker is in the destination): never deleted;
  if the record is still in the source, the removal is a divergence;
- with --delete, deleted only if it is still the very file the mirror wrote
  (same size, mtime and inode as the cache says) and not one of the store's
  own files; then emptied directories whose source is gone are removed too.
"""

from __future__ import annotations

import functools
import operator
import stat
from collections.abc import Callable, Container

from sessionstore._fs.atomic import TEMP_PREFIX
from sessionstore.format.names import MARKERS, record_number
from sessionstore.mirror.cache import CACHE_NAME, Cache, join
from sessionstore.mirror.cache_file import Stored
from sessionstore.mirror.cache_group import DEST, Entry, Group, dest_sig, is_entry
from sessionstore.mirror.dest_walk import Level, Walker
from sessionstore.mirror.layout import DIRTY_NAME, RESERVED_PREFIX, STORE_OWNED, redact_message
from sessionstore.mirror.retype import SourceFiles, gone_file, made_way, not_replaced
from sessionstore.mirror.vouch import ancestors
from sessionstore.storage import journal
from sessionstore.storage.local_tree import describe

TYPE_CHECKING = False  # typing's, without importing typing (mypy reads it as such)
if TYPE_CHECKING:
    from sessionstore.mirror.walk import Pass


def listings(run: Pass) -> dict[str, Container[str]]:
    """Dest rel of each directory the pass listed -> every destination name the source
    accounts for (a set, or a vouched directory's `_Vouched`)."""
    return {
        rel: _Vouched(run, rel)
        if names is None
        else frozenset(names)
        if isinstance(names, list)
        else names
        for rel, names in run.listings.items()
    }


class _Vouched:
    """The names of a directory whose every entry the pass vouched for, without a list of
    them: an unchanged file of its group (kept as stored, parsed again only if asked) or
    a subdirectory the pass entered (its rel is a key of the new groups)."""

    __slots__ = ("rel", "run")

    def __init__(self, run: Pass, rel: str) -> None:
        self.run, self.rel = run, rel

    def __contains__(self, name: object) -> bool:
        if not isinstance(name, str):
            return False
        groups = self.run.groups
        if (f"{self.rel}/{name}" if self.rel else name) in groups:
            return True
        group = groups.get(self.rel)
        if isinstance(group, int):
            return name in self.run.read_group(group)
        return group is not None and name in group


def settle_leftovers(run: Pass, leftovers: dict[str, Entry], delete: bool) -> set[str]:
    """Report removals from sealed records, delete (with `delete`); the keys no longer ours."""
    listed = listings(run)
    walker = Walker(run, delete, listed)
    dropped: set[str] = set()
    # An excluded path is never deleted, nor a divergence: the pass did not look at it.
    excluded = _excluded(run) if run.exclude is not None else _nothing
    try:
        files = SourceFiles(run)
        gone = [k for k in leftovers if gone_file(k, listed, files) and not excluded(k)]
        for key in sorted(gone):
            top = "/" not in key
            where, _, name = key.rpartition("/")
            if _reserved(name):
                dropped.add(key)  # never the source's (the walk skips it), so never ours
                continue
            if not delete and not _may_be_in_record(key):
                continue  # nothing to report or do: it just stays in the destination
            level = walker.to(where)
            if level is None:
                dropped.add(key)  # its directory is gone from the destination too
                continue
            if level.sealed is None and delete:
                walker.sealed_now()  # a record sealed since `to` opened it: kept whole
            if level.sealed is not None:
                if level.sealed in listed:  # the record is still in the source
                    run.diverged.setdefault(_shown(run, level.sealed), []).append(_shown(run, key))
                continue
            if not delete or (top and run.is_session and name in STORE_OWNED):
                continue
            deleted = len(run.report.deleted)
            if _remove_if_ours(run, level, name, key, leftovers[key]):
                dropped.add(key)
                # Deleted (not kept as changed) where the source has a directory now.
                if key in listed and len(run.report.deleted) > deleted:
                    made_way(run, key, _shown(run, key))
    finally:
        walker.close()
    return dropped


def _reserved(name: str) -> bool:
    """A name of the mirror's own files (lock, cache, flag) or of a temp: never copied."""
    return name[0] == "." and name.startswith((RESERVED_PREFIX, TEMP_PREFIX))


def _shown(run: Pass, key: str) -> str:
    """`key` as reported: one of a cache or claims made with other secrets was named
    before a secret registered since, and may hold it (`a-<secret>`, deleted now)."""
    return key if run.redactor is None else redact_message(run.redactor, key)


def _nothing(_key: str) -> bool:
    return False


def _excluded(run: Pass) -> Callable[[str], bool]:
    """Whether --exclude covers the destination path `key`: by the patterns, or (names
    redacted) as a path the walk excluded by its source name, or below one."""
    assert run.exclude is not None
    covers, names = run.exclude.covers, run.excluded_names
    if not names:
        return covers
    return lambda key: covers(key) or key in names or any(up in names for up in ancestors(key))


def _may_be_in_record(key: str) -> bool:
    parts = key.split("/")
    return any(
        parts[i - 1] in MARKERS and record_number(parts[i]) is not None
        for i in range(1, len(parts) - 1)
    )


def _remove_if_ours(run: Pass, level: Level, name: str, key: str, entry: Entry) -> bool:
    """Delete `name` if it is still the file the mirror committed; True if the key is dropped."""
    tree = run.tree
    st = tree.lstat(level.dir, name)
    if st is None:
        return True
    if not (stat.S_ISREG(st.st_mode) and dest_sig(st) == entry[DEST]):
        run.skip(
            _shown(run, key), "not deleted: changed in the destination since this mirror wrote it"
        )
        return True
    try:
        removed = tree.unlink(level.dir, name)
    except OSError as exc:
        run.error(_shown(run, key), f"cannot delete: {describe(exc)}")
        return False
    if removed:
        run.report.deleted.append(_shown(run, key))
        level.emptied = True
    return removed


def finish_pass(run: Pass) -> None:
    """--delete, divergence by removal, the new cache, and clearing the in-progress flag."""
    m, cache = run.m, run.cache
    assert cache is not None
    report = run.report
    run.settle_late()  # every commit in place (and durable), what failed taken back
    if m.delete and run.listing_failed:
        report.delete_skipped = "the listing had errors; nothing was deleted"
    elif m.delete and not cache.trusted:
        report.delete_skipped = (
            "the change cache is missing or untrusted (torn, another user's, or made with "
            "other secrets), so no file is known to be this mirror's; nothing was deleted"
        )
    groups, changed = _new_groups(run, cache)
    if run.not_dirs:
        not_replaced(run, m.delete and report.delete_skipped is None)
    report.diverged = [
        {
            "path": record,
            "reason": "the source changed after the record was sealed; not applied",
            "files": sorted(files),
        }
        for record, files in sorted(run.diverged.items())
    ]
    root = run.tree.root
    saved = True
    if changed:
        try:
            if run.tree.check(root):
                run.touch()
                cache.save(run.tree, groups, run.redactor, m.fingerprints)
        except OSError as exc:
            saved = False  # the flag keeps the claims the cache does not hold
            run.error(CACHE_NAME, f"cannot write the change cache: {describe(exc)}")
    if run.dirty and saved and run.tree.check(root):
        # Every temp of this pass is committed or removed, the cache holds every file
        # claimed, and this pass swept the whole destination if the flag was set before
        # it started; a flag kept for another sweep keeps only the claims not settled.
        run.tree.flush()
        if run.unswept:
            run.tree.reset_claims(run.claims)  # those this pass could not settle
            return
        try:
            run.tree.clear_flag(DIRTY_NAME)
        except OSError as exc:  # a directory, another user's file: the next pass sweeps again
            run.error(DIRTY_NAME, f"cannot remove the in-progress flag: {describe(exc)}")


def _new_groups(run: Pass, cache: Cache) -> tuple[dict[str, Stored], bool]:
    """The new cache's groups (leftovers settled), and whether they differ from the stored.

    Entries this pass did not re-establish stay ours: a file unstable now, outside
    the subtrees of a subset pass, or gone from the source was still committed by
    this mirror (what --delete relies on). Only groups that are not the stored one
    itself are parsed: in a no-op pass that is none (identity checks, no parse).
    """
    stored = run.stored
    # The no-op pass: every stored group found again as itself (C-level), no other.
    if not (run.regrouped or cache.rewrite or run.claims) and all(
        map(operator.is_, map(run.groups.get, stored), stored.values())
    ):
        return run.groups, not cache.trusted
    groups = dict(run.groups)
    walked = _walked(run.tops)
    leftovers: dict[str, Entry] = {}
    for rel, ref in stored.items():
        mine = groups.get(rel)
        if mine is ref:
            continue
        if mine is None and not walked(rel):
            groups[rel] = ref  # outside this pass: kept as stored
            continue
        kept = mine if isinstance(mine, dict) else {}  # else None: a reference is `ref`
        for name, entry in cache.group(rel).items():
            if name not in kept:
                leftovers[join(rel, name)] = entry
    if run.claims:
        found, run.claims = _claimed(run, cache)
        for key, entry in found.items():
            if walked(key.rpartition("/")[0]):
                leftovers[key] = entry  # newer than a stored entry of the same key
            else:
                _group(groups, cache, key)[key.rpartition("/")[2]] = entry
    if leftovers:  # only under what this pass walked: those can be proven gone
        delete = run.m.delete and run.report.delete_skipped is None
        dropped = settle_leftovers(run, leftovers, delete)
        for key, entry in leftovers.items():
            if key not in dropped:
                _group(groups, cache, key)[key.rpartition("/")[2]] = entry
    changed = not cache.trusted or cache.rewrite or not stored.keys() <= groups.keys()
    for rel, group in groups.items():
        before = stored.get(rel)
        if group is before:
            continue
        if not group:
            changed = changed or before is not None
        elif before is not None and group == cache.parsed(before):
            groups[rel] = before  # the same entries, found again the slow way
        else:
            changed = True
    return groups, changed


def _group(groups: dict[str, Stored], cache: Cache, key: str) -> Group:
    """The new group of `key`'s directory as a dict to add to (a stored one parsed)."""
    rel = key.rpartition("/")[0]
    group = groups.get(rel)
    if not isinstance(group, dict):
        group = groups[rel] = {} if group is None else cache.group(rel)
    return group


def _claimed(run: Pass, cache: Cache) -> tuple[dict[str, Entry], dict[str, list[journal.Claim]]]:
    """The files an interrupted pass claimed (storage/journal.py) that are still exactly
    a file claimed and that this pass did not make its own again, as entries; and the
    claims not settled (their directory could not be reached, or is gone).

    Such an entry has no source signature (zeros: no source file matches it), so the
    next pass to see its source compares before writing. A claim whose rename never
    happened, or whose file was replaced since, is no proof and is dropped. The file
    in place decides, not this pass's entry: one carried from the stored cache
    describes the file the claimed one replaced.
    """
    walked, parsed = _walked(run.tops), functools.cache(cache.parsed)
    found: dict[str, Entry] = {}
    unsettled: dict[str, list[journal.Claim]] = {}
    walker = Walker(run, False, {})
    try:
        for key in sorted(run.claims):
            where, _, name = key.rpartition("/")
            if _reserved(name):
                continue
            level = walker.to(where)
            if level is None:
                unsettled[key] = run.claims[key]
                continue
            st = run.tree.lstat(level.dir, name)
            if st is None or not journal.proves(run.claims[key], st):
                continue
            place = dest_sig(st)
            mine = run.groups.get(where) if walked(where) else None
            entry = (parsed(mine) if isinstance(mine, int) else mine or {}).get(name)
            if not (is_entry(entry) and entry[DEST] == place):  # else this pass's own
                found[key] = [0, 0, 0, 0, 0, *place]
    finally:
        walker.close()
    return found, unsettled


def _walked(tops: list[str]) -> Callable[[str], bool]:
    """Whether a destination directory is in the subtrees this pass walked."""
    if "" in tops:
        return _everything
    prefixes = tuple(f"{top}/" for top in tops)
    inside = frozenset(tops)
    return lambda rel: rel in inside or rel.startswith(prefixes)


def _everything(_rel: str) -> bool:
    return True

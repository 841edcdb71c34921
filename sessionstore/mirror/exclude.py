"""Exclusion for the mirror: gitignore patterns (`pathspec`) over source paths.

`Exclude(patterns)` compiles `--exclude` patterns and the lines of
`--exclude-from` files (`read_exclude_file`) in order; the last pattern that
matches a path decides, as in one `.gitignore` at the source root. Paths are
source paths (names before redaction) relative to the source root, so a
pattern with a slash other than a trailing one is anchored at the root.

The walk asks per directory (`kept`) before it looks at any entry, so an
excluded file is never opened and an excluded directory is never listed:
that is also git's rule that nothing below an excluded directory can be
re-included with `!`. `--delete` asks `covers` of each destination file it
would remove. Two corrections make pathspec answer as git does:

- a directory is matched as `path/`, which pathspec also takes to be inside
  itself for a pattern ending in `/**` or `/**/` (git: `dir/**` matches what
  is inside `dir`, not `dir`, and `dir/**/` the directories inside it), so
  for directories those patterns are matched as `/*/**` (something inside,
  then anything) and `/**/*/` (a directory inside, at any depth);
- pathspec's expressions end with `$`, which Python also lets match before a
  final newline, and `.` does not match a newline: names and patterns are
  matched with every newline written as NUL, which no name can contain (a
  pattern holding NUL is refused);
- pathspec lets a pattern that matches a directory match everything inside
  it too, and then lets the last such pattern decide for a path below, where
  git asks only the patterns that match the path itself (`a/b` then `!/*`:
  git keeps `a` and excludes `a/b`, pathspec's `/*` re-includes `a/b`). The
  walk never asks about a path below an excluded directory, so a path is
  decided by the last pattern whose expression matches it to its end
  (`_exact`); pathspec's compiled set only says first, at its speed, whether
  any pattern matches at all.

git matches bytes: `?` is one byte, so it does not match `é` (two bytes in
UTF-8) and `??` does. Names and patterns that are not ASCII are matched with
each of their bytes written as the character of that number (Latin-1), so
every wildcard and class (`*`, `?`, `[!x]`, `[é]`) counts bytes as git's
does, also the bytes of a name that is not UTF-8 (a surrogate escape in the
str). A pattern must be UTF-8 (as a pattern file must be).

A set is bounded (`MAX_PATTERNS`, `MAX_PATTERN_LEN`, `MAX_PATTERNS_LEN`):
Hyperscan, pathspec's backend where it is installed, compiles in time that
grows faster than the set, so a large pattern file would hold the mirror for
minutes before its first pass. Each line is checked with Python's `re`
(cheap); what Hyperscan alone refuses is found when the set is compiled,
where a failure is traced back to the pattern that causes it.

pathspec is imported only when there are patterns (`mirror` without them
never pays for it).
"""

from __future__ import annotations

import functools
import os
import re
import sys
import warnings
from collections.abc import Callable, Iterable, Sequence
from typing import TYPE_CHECKING

from sessionstore._fs import read as fsread
from sessionstore.errors import InvalidInput

if TYPE_CHECKING:
    from pathspec import GitIgnoreSpec

    from sessionstore.mirror.frame import Frame
    from sessionstore.mirror.walk import Pass

__all__ = [
    "MAX_PATTERNS",
    "MAX_PATTERNS_LEN",
    "MAX_PATTERN_LEN",
    "Exclude",
    "not_excluded",
    "read_exclude_file",
    "read_named_patterns",
]

# A pattern file is read whole; anything larger is not a list of patterns.
MAX_PATTERN_FILE = 1 << 20
# What one set may hold, blank lines and comments aside. Measured with Hyperscan on 2
# shared x86-64 CPUs (docs/mirror.md): 1,000 ordinary patterns (~16 characters) compile
# in 1.4 s, 2,000 in 4.4 s, 8,000 in 54 s; one pattern of 1,024 characters in up to
# 1.7 s, of 8,192 in 2.7 s to minutes (by its wildcards). The same bounds hold without it.
MAX_PATTERNS = 1000
MAX_PATTERN_LEN = 1024
MAX_PATTERNS_LEN = 1 << 15
# What a pattern ending in the first of each pair is matched as against a directory.
_FOR_DIRS = (("/**", "/*/**"), ("/**/", "/**/*/"))
_DIR_MARK = "ps_d"  # the group pathspec's expressions end with where a directory matches


def _compile(lines: list[str], backend: str | None = None) -> GitIgnoreSpec:
    from pathspec import GitIgnoreSpec  # only when there are patterns: see the module docstring

    with warnings.catch_warnings():
        # `re`'s "Possible nested set" for `[[a]`, naming pathspec's file: not the user's
        # concern, and a second stderr line for a pattern git takes.
        warnings.simplefilter("ignore", FutureWarning)
        return GitIgnoreSpec.from_lines(lines, backend=backend)


def _matchable(text: str) -> str:
    text = text.replace("\n", "\0")
    if text.isascii():
        return text
    try:  # a byte per character (see the module docstring)
        data = text.encode("utf-8", "surrogateescape")
    except UnicodeEncodeError:  # a surrogate no file system name holds (a hand-made cache)
        data = text.encode("utf-8", "surrogatepass")
    return data.decode("latin-1")


def _for_dirs(line: str) -> str:
    """`line` as it must be matched against a directory's `path/` (see the module docstring)."""
    core = line.rstrip(" ")
    for suffix, for_dirs in _FOR_DIRS:
        if core.endswith(suffix) and not core.endswith("\\" + suffix):
            return core[: -len(suffix)] + for_dirs
    return line


def _exact(spec: GitIgnoreSpec) -> list[tuple[bool, re.Pattern[str]]]:
    """The patterns of `spec`, last first, each with an expression that matches a path
    only itself, never by matching a directory above it (see the module docstring).

    pathspec ends an expression with its directory mark (`/`, then anything may
    follow) or `$`; `\\Z` after it leaves only the path itself. One without the mark
    (`dir/**`, `*`) matches everything it reaches, as in git.
    """
    exact = []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)  # as in `_compile`
        for pattern in reversed(spec.patterns):
            regex = pattern.regex
            if pattern.include is None or regex is None:
                continue  # a blank line or a comment
            if _DIR_MARK in regex.groupindex:
                regex = re.compile(regex.pattern + r"\Z", regex.flags)
            exact.append((pattern.include, regex))
    return exact


def check_pattern(pattern: str, origin: str) -> bool:
    """Whether `pattern` is a pattern (not a blank line or a comment); raise `InvalidInput`
    naming `origin` if it is not a valid gitignore pattern.

    Checked with Python's `re`: what Hyperscan alone refuses is found by `Exclude`.
    """
    if "\0" in pattern:
        raise InvalidInput(origin, "invalid pattern: it contains a NUL byte")
    if not pattern.isascii():
        try:
            pattern.encode("utf-8")
        except UnicodeEncodeError:  # bytes that are not UTF-8, surrogate-escaped (argv)
            raise InvalidInput(origin, "invalid pattern: it is not UTF-8 text") from None
    if not pattern.rstrip(" ") or pattern.startswith("#"):
        return False  # git's blank line or comment: a file of them is not compiled line by line
    if len(pattern) > MAX_PATTERN_LEN:
        # Said without the pattern, which may fill a screen.
        problem = f"a pattern of {len(pattern)} characters; at most {MAX_PATTERN_LEN} are allowed"
        raise InvalidInput(origin, problem)
    try:
        return _is_pattern(pattern)
    except ValueError:  # pathspec's GitIgnorePatternError (it only repeats the pattern)
        # Quoted, not repr'd: the message is escaped where it is printed, which would double
        # the backslashes of repr (a gitignore pattern's own escape character).
        raise InvalidInput(origin, f"'{pattern}' is not a valid gitignore pattern") from None
    except re.error as exc:  # a class pathspec copies into its regex as it is: `[z-a]`
        problem = f"'{pattern}' is not a valid gitignore pattern ({exc.msg})"
        raise InvalidInput(origin, problem) from None


# The CLI checks a file's lines as it reads them, then `Exclude` checks them again.
@functools.lru_cache(maxsize=MAX_PATTERNS)
def _is_pattern(pattern: str) -> bool:
    return _compile([_matchable(pattern)], backend="simple").patterns[0].include is not None


def _check_all(lines: Sequence[str], origin: Callable[[int], str]) -> None:
    """Check each line, and that the set is within the bounds (naming the line past them)."""
    count = size = 0
    for i, line in enumerate(lines):
        if not check_pattern(line, origin(i)):
            continue
        count, size = count + 1, size + len(line)
        if count > MAX_PATTERNS:
            raise InvalidInput(origin(i), f"more than {MAX_PATTERNS} patterns; not compiled")
        if size > MAX_PATTERNS_LEN:
            problem = f"patterns of more than {MAX_PATTERNS_LEN} characters in all; not compiled"
            raise InvalidInput(origin(i), problem)


def _compile_checked(
    lines: list[str], origin: Callable[[int], str], given: Sequence[str]
) -> GitIgnoreSpec:
    """The set compiled; `InvalidInput` naming the pattern its backend refuses (its
    length as `given`, before `_matchable` wrote each byte as a character).

    Hyperscan refuses a pattern too large for it, which Python's `re` takes
    (about 16,000 characters of regex, or 64 `[!x]` of a 4-byte character).
    """
    try:
        return _compile(lines)
    except Exception as exc:
        hyperscan = sys.modules.get("hyperscan")  # pathspec's backend, where installed
        if hyperscan is None or not isinstance(exc, hyperscan.error):
            raise
        failed = exc
    for i, line in enumerate(lines):  # a refusal only: which one, at one compile each
        try:
            _compile([line])
        except hyperscan.error as exc:
            problem = f"a pattern of {len(given[i])} characters cannot be compiled: {exc}"
            raise InvalidInput(origin(i), problem) from None  # said without the pattern
    raise InvalidInput(origin(0), f"the patterns cannot be compiled together: {failed}")


class Exclude:
    """Compiled exclusion patterns: `kept` filters a directory's entries, `covers` a path.

    Raises `InvalidInput` for an invalid pattern or a set past the bounds,
    named by `origins[i]` (as `read_named_patterns` gives them), by default
    by its position (`exclude pattern 3`).
    """

    def __init__(self, patterns: Iterable[str], origins: Sequence[str] | None = None) -> None:
        lines = list(patterns)

        def origin(i: int) -> str:
            return origins[i] if origins is not None else f"exclude pattern {i + 1}"

        _check_all(lines, origin)
        matchable = [_matchable(line) for line in lines]
        self._files = _compile_checked(matchable, origin, lines)
        dirs = [_for_dirs(line) for line in matchable]
        # Most sets hold no `dir/**`: their two are one, compiled once.
        self._dirs = self._files if dirs == matchable else _compile_checked(dirs, origin, lines)
        self._files_exact = _exact(self._files)
        self._dirs_exact = self._files_exact if dirs == matchable else _exact(self._dirs)

    def excluded(self, path: str, is_dir: bool) -> bool:
        """Whether the source path `path` (relative to the root, no trailing slash) is excluded.

        Asked only of a path whose directories are not excluded (see the module docstring).
        """
        if is_dir:
            spec, exact, name = self._dirs, self._dirs_exact, _matchable(path) + "/"
        else:
            spec, exact, name = self._files, self._files_exact, _matchable(path)
        if spec.check_file(name).include is None:
            return False  # no pattern matches it, nor a directory above it
        for include, regex in exact:
            if regex.search(name) is not None:
                return include
        return False

    def kept(self, base: str, entries: list[os.DirEntry[str]]) -> list[os.DirEntry[str]]:
        """The entries of the source directory `base` ("" the root) that are not excluded.

        Decided from the listing alone: nothing is opened.
        """
        prefix = f"{base}/" if base else ""
        return [
            e
            for e in entries
            if not self.excluded(prefix + e.name, e.is_dir(follow_symlinks=False))
        ]

    def covers(self, path: str) -> bool:
        """Whether the file `path` is excluded, itself or by one of its directories."""
        parts = path.split("/")
        return any(
            self.excluded("/".join(parts[:i]), True) for i in range(1, len(parts))
        ) or self.excluded(path, False)


def not_excluded(
    run: Pass, frame: Frame, entries: list[os.DirEntry[str]]
) -> list[os.DirEntry[str]]:
    """The entries of `frame`'s source directory that the pass's --exclude leaves to mirror.

    With names redacted, the destination paths of the others go to `run.excluded_names`:
    `covers` is asked of destination paths by --delete, and a pattern may match a
    source name only by the secret redacted out of it (`hf_*`).
    """
    exclude = run.exclude
    assert exclude is not None
    rels = run.src_rels
    up = frame.up
    if up is not None and frame.src_name is not None:  # else the root or a subtree's top
        above = rels[up.rel]
        rels[frame.rel] = f"{above}/{frame.src_name}" if above else frame.src_name
    kept = exclude.kept(rels.setdefault(frame.rel, ""), entries)
    if run.redactor is not None and len(kept) < len(entries):
        names = {e.name for e in kept}
        prefix = f"{frame.rel}/" if frame.rel else ""
        run.excluded_names.update(prefix + run.name(e.name) for e in entries if e.name not in names)
    return kept


def read_exclude_file(path: str | os.PathLike[str]) -> list[str]:
    """The patterns of a gitignore-style file (`-` reads standard input), checked.

    The user's own file, so a symlink is followed; but it must be a regular
    file (a FIFO or device is refused at once, never waited on), at most
    1 MiB, UTF-8 (a leading BOM is dropped). Lines end at `\\n` (a `\\r`
    before it is dropped, as git does). Raises `InvalidInput` naming the file,
    and the line for an invalid pattern or the first past the bounds. What
    Hyperscan alone refuses is found by `Exclude`.
    """
    return [line for _, line in read_named_patterns(path)]


def read_named_patterns(path: str | os.PathLike[str]) -> list[tuple[str, str]]:
    """`read_exclude_file`'s lines, each with its name in errors (`FILE:LINE`)."""
    where = os.fspath(path)
    if where == "-":
        where = "- (standard input)"
        # As a secrets file on it is read: a stdin closed at start-up is the CLI's stand-in,
        # which has no descriptor and fails as the closed one would (`stdin: Bad file ...`).
        data = sys.stdin.buffer.read(MAX_PATTERN_FILE + 1)
        data = data if len(data) <= MAX_PATTERN_FILE else None
    else:
        data = fsread.read_named(where, MAX_PATTERN_FILE)
    if data is None:
        raise InvalidInput(where, f"is larger than {MAX_PATTERN_FILE} bytes; not a pattern file")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        at = data.count(b"\n", 0, exc.start) + 1
        raise InvalidInput(where, f"is not UTF-8 text (line {at})") from None
    lines = [line.removesuffix("\r") for line in text.removeprefix("\ufeff").split("\n")]
    named = [(f"{where}:{n}", line) for n, line in enumerate(lines, 1)]
    _check_all(lines, lambda i: named[i][0])
    return named

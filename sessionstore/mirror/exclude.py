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
  itself for a pattern ending in `/**` (git: `dir/**` matches what is inside
  `dir`, not `dir`), so for directories those patterns are matched as
  `/*/**` (something inside, then anything);
- pathspec's expressions end with `$`, which Python also lets match before a
  final newline, and `.` does not match a newline: names and patterns are
  matched with every newline written as NUL, which no name can contain (a
  pattern holding NUL is refused).

pathspec is imported only when there are patterns (`mirror` without them
never pays for it).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterable
from typing import TYPE_CHECKING

from sessionstore._fs import read as fsread
from sessionstore.errors import InvalidInput

if TYPE_CHECKING:
    from pathspec import GitIgnoreSpec

__all__ = ["Exclude", "read_exclude_file"]

# A pattern file is read whole; anything larger is not a list of patterns.
MAX_PATTERN_FILE = 1 << 20
_DIR_SUFFIX, _DIR_SUFFIX_FOR_DIRS = "/**", "/*/**"


def _compile(lines: list[str]) -> GitIgnoreSpec:
    from pathspec import GitIgnoreSpec  # only when there are patterns: see the module docstring

    return GitIgnoreSpec.from_lines(lines)


def _matchable(text: str) -> str:
    return text.replace("\n", "\0")


def _for_dirs(line: str) -> str:
    """`line` as it must be matched against a directory's `path/` (see the module docstring)."""
    core = line.rstrip(" ")
    if core.endswith(_DIR_SUFFIX) and not core.endswith("\\" + _DIR_SUFFIX):
        return core[: -len(_DIR_SUFFIX)] + _DIR_SUFFIX_FOR_DIRS
    return line


def check_pattern(pattern: str, origin: str) -> None:
    """Raise `InvalidInput` naming `origin` if `pattern` is not a valid gitignore pattern."""
    if "\0" in pattern:
        raise InvalidInput(origin, "invalid pattern: it contains a NUL byte")
    try:
        _compile([_matchable(pattern)])
    except ValueError:  # pathspec's GitIgnorePatternError (it only repeats the pattern)
        raise InvalidInput(origin, f"{pattern!r} is not a valid gitignore pattern") from None
    except Exception as exc:
        hyperscan = sys.modules.get("hyperscan")  # pathspec's backend, where installed
        if hyperscan is None or not isinstance(exc, hyperscan.error):
            raise
        # One too long for it (~16,000 characters of regex): said without the pattern.
        problem = f"a pattern of {len(pattern)} characters cannot be compiled: {exc}"
        raise InvalidInput(origin, problem) from None


class Exclude:
    """Compiled exclusion patterns: `kept` filters a directory's entries, `covers` a path.

    Raises `InvalidInput` for an invalid pattern (named by its position).
    """

    def __init__(self, patterns: Iterable[str]) -> None:
        lines = list(patterns)
        for i, pattern in enumerate(lines, 1):
            check_pattern(pattern, f"exclude pattern {i}")
        matchable = [_matchable(line) for line in lines]
        self._files = _compile(matchable)
        self._dirs = _compile([_for_dirs(line) for line in matchable])

    def excluded(self, path: str, is_dir: bool) -> bool:
        """Whether the source path `path` (relative to the root, no trailing slash) is excluded."""
        if is_dir:
            return self._dirs.match_file(_matchable(path) + "/")
        return self._files.match_file(_matchable(path))

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


def read_exclude_file(path: str | os.PathLike[str]) -> list[str]:
    """The patterns of a gitignore-style file (`-` reads standard input), validated.

    The user's own file, so a symlink is followed; but it must be a regular
    file (a FIFO or device is refused at once, never waited on), at most
    1 MiB, UTF-8 (a leading BOM is dropped). Lines end at `\\n` (a `\\r`
    before it is dropped, as git does). Raises `InvalidInput` naming the file,
    and the line for an invalid pattern.
    """
    where = os.fspath(path)
    if where == "-":
        where = "- (standard input)"
        data = fsread.read_capped(sys.stdin.fileno(), MAX_PATTERN_FILE)
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
    for n, line in enumerate(lines, 1):
        check_pattern(line, f"{where}:{n}")
    return lines

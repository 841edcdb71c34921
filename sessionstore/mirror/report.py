"""What one mirror pass did: `PassReport`, and its JSON form."""

from __future__ import annotations

import os

TYPE_CHECKING = False  # typing's, without importing typing (mypy reads it as such)
if TYPE_CHECKING:
    from typing import Any

# The reason a marker is held back with when it is itself unstable ("unstable: REASON").
UNSTABLE_MARKER = "unstable: "


class PassReport:
    """What one pass did. Paths are destination (name-redacted) paths relative to its root.

    Messages never contain file content, secret values or source names.
    `diverged` lists sealed records whose source changed after they were
    sealed: `{path: record, reason, files: [changed, added or removed files]}`;
    the change was not applied. `new` is the part of `copied` the destination
    did not hold, `created_dirs` the directories the pass created ("" the
    root). With `dry_run` nothing was written: the lists say what the pass
    would have done. (A plain class, not a dataclass: see `config.PassConfig`.)
    """

    def __init__(self) -> None:
        self.dry_run = False
        self.source_missing = False
        self.copied: list[str] = []
        self.new: list[str] = []
        self.created_dirs: list[str] = []
        self.unchanged = 0
        self.unstable: list[dict[str, str]] = []
        self.held_back: list[dict[str, str]] = []
        self.skipped: list[dict[str, str]] = []
        self.diverged: list[dict[str, Any]] = []
        self.errors: list[dict[str, str]] = []
        self.deleted: list[str] = []
        self.delete_skipped: str | None = None
        self.duration = 0.0

    @property
    def ok(self) -> bool:
        """True when no file failed because of an error (unstable and held back are fine)."""
        return not self.errors

    @property
    def settling(self) -> bool:
        """Whether a later pass may take what this one could not: an unstable file, or a
        marker held back because it was itself unstable (too recent, changing)."""
        return bool(self.unstable) or any(
            h["reason"].startswith(UNSTABLE_MARKER) for h in self.held_back
        )

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict (non-UTF-8 name bytes shown as backslash escapes)."""
        return {
            "ok": self.ok,
            "dry_run": self.dry_run,
            "source_missing": self.source_missing,
            "copied": [show(p) for p in self.copied],
            "new": [show(p) for p in self.new],
            "created_dirs": [show(p) for p in self.created_dirs],
            "unchanged": self.unchanged,
            "unstable": _show_items(self.unstable),
            "held_back": _show_items(self.held_back),
            "skipped": _show_items(self.skipped),
            "diverged": [
                {**item, "path": show(item["path"]), "files": [show(f) for f in item["files"]]}
                for item in self.diverged
            ],
            "errors": _show_items(self.errors),
            "deleted": [show(p) for p in self.deleted],
            "delete_skipped": self.delete_skipped,
            "duration": round(self.duration, 6),
        }


def show(path: str) -> str:
    """A destination path as valid UTF-8 (undecodable bytes as backslash escapes)."""
    return os.fsencode(path).decode("utf-8", "backslashreplace")


def _show_items(items: list[dict[str, str]]) -> list[dict[str, str]]:
    return [{k: show(v) if k == "path" else v for k, v in item.items()} for item in items]

"""Messages as the tables show them (no rich: the empty list needs none)."""

from __future__ import annotations

from sessionstore import TYPE_CHECKING
from sessionstore._display import escape

if TYPE_CHECKING:
    from pathlib import Path


def no_sessions(root: Path | str, filtered: bool = False) -> str:
    """What an empty session list says (escaped): `no sessions in ROOT`."""
    which = "no matching sessions" if filtered else "no sessions"
    return escape(f"{which} in {root}")

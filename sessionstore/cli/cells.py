"""Numbers and messages as the tables show them (no rich: the empty list needs none)."""

from __future__ import annotations

from pathlib import Path

from sessionstore._display import escape


def fmt_number(value: float) -> str:
    """Short human form: integers whole, large values to one decimal, small to 4 digits."""
    if value.is_integer() and abs(value) < 1e15:
        return str(int(value))
    if abs(value) >= 1000:
        return f"{value:.1f}"
    return f"{value:.4g}"


def no_sessions(root: Path, filtered: bool = False) -> str:
    """What an empty session list says (escaped): `no sessions in ROOT`."""
    which = "no matching sessions" if filtered else "no sessions"
    return escape(f"{which} in {root}")

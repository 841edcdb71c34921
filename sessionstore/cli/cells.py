"""Numbers as the tables show them."""

from __future__ import annotations


def fmt_number(value: float) -> str:
    """Short human form: integers whole, large values to one decimal, small to 4 digits."""
    if value.is_integer() and abs(value) < 1e15:
        return str(int(value))
    if abs(value) >= 1000:
        return f"{value:.1f}"
    return f"{value:.4g}"

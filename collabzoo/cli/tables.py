"""Numbers and aligned tables as the commands print them."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any


def fmt(value: Any, signed: bool = False) -> str:
    """A number with 3 decimals (-0.000 shown as 0.000); anything else as str."""
    if isinstance(value, (bool, str)) or value is None:
        return str(value)
    try:
        number = float(value) or 0.0  # `or` turns -0.0 into 0.0
    except (TypeError, ValueError):
        return str(value)
    return f"{number:+.3f}" if signed else f"{number:.3f}"


def table(headers: Sequence[str], rows: Iterable[Sequence[str]], numeric: Sequence[bool]) -> str:
    """Aligned columns: text left-aligned, numbers right-aligned."""
    rows = [list(r) for r in rows]
    widths = [max([len(h)] + [len(r[i]) for r in rows]) for i, h in enumerate(headers)]

    def line(cells: Sequence[str]) -> str:
        parts = [
            c.rjust(w) if num else c.ljust(w)
            for c, w, num in zip(cells, widths, numeric, strict=True)
        ]
        return "  ".join(parts).rstrip()

    rule = "  ".join("-" * w for w in widths)
    return "\n".join([line(headers), rule, *(line(r) for r in rows)])

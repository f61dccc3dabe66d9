"""Reading the leaderboard's markdown back, for the tests: {task title: [row dicts]}."""

from __future__ import annotations

import re

_NUMBER = re.compile(r"^-?\d+(?:\.\d+)?")


def parse_tables(markdown: str) -> dict[str, list[dict[str, str]]]:
    tables: dict[str, list[dict[str, str]]] = {}
    title = None
    headers: list[str] = []
    for line in markdown.splitlines():
        if line.startswith("## "):
            title, headers = line[3:].strip(), []
            tables[title] = []
        elif line.startswith("|") and title is not None:
            cells = [c.strip() for c in line.strip().strip("|").split(" | ")]
            if not headers:
                headers = cells
            elif not set("".join(cells)) <= set("-:|"):
                tables[title].append(dict(zip(headers, cells, strict=True)))
    return tables


def mean_of(cell: str) -> float:
    """The mean of a cell like '99.3 ± 0.0' (or a bare published '30.3')."""
    found = _NUMBER.match(cell)
    assert found, f"no number in cell {cell!r}"
    return float(found.group())

"""A benchmark's results file, and the Markdown table the docs build from it.

A speed benchmark writes what it measured to `benchmarks/results/<name>.json` with the run's
`provenance` and a `headline` (the one figure and ratio the Performance page's summary shows),
and owns a renderer `<table>(results) -> str` that turns that file into the page's table.
tests/test_docs_numbers.py calls the renderer on the stored file and compares it with the page,
so a figure in the page cannot drift from the run it came from. The scripts run as
`python benchmarks/x.py` and import this module as a sibling.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from provenance import provenance

RESULTS = Path(__file__).resolve().parent / "results"
"""Where the published results files live, one per benchmark table (or group of tables)."""

HEADLINE_KEYS = ("benchmark", "figure", "ratio", "section")
"""What each row of a results file's `headline` holds: the benchmark's name in the summary, the
figure in words, the ratio it is about (a number, or None where the benchmark has none), and the
Performance page's section heading it links to."""


def results_path(name: str) -> Path:
    return RESULTS / f"{name}.json"


def write_results(path: str | Path, results: dict[str, Any], argv: list[str] | None = None) -> Path:
    """Write `results` with this run's provenance first; returns the path written."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    record = {"provenance": provenance(argv), **results}
    path.write_text(json.dumps(record, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    print(f"results written to {path}")
    return path


def load_results(path: str | Path) -> dict[str, Any]:
    return json.loads(Path(path).read_text(encoding="utf-8"))


def markdown_table(header: Sequence[str], rows: Sequence[Sequence[str]], align: str = "") -> str:
    """A Markdown table; `align` has one letter per column, "l" (`---`) or "r" (`---:`), left
    for every column it does not reach. The rule line is written `|---|---:|`, as in the docs."""
    width = len(header)
    for row in rows:
        if len(row) != width:
            raise ValueError(f"a row has {len(row)} cells, the header {width}: {row!r}")
    rules = ["---:" if align[i : i + 1] == "r" else "---" for i in range(width)]
    lines = [
        "|" + "|".join(f" {c} " if c else " " for c in cells) + "|" for cells in (header, *rows)
    ]
    lines.insert(1, "|" + "|".join(rules) + "|")
    return "\n".join(lines)


def thousands(value: float, digits: int = 0) -> str:
    """16760 -> "16,760"; the page writes every figure of four or more digits this way."""
    return f"{value:,.{digits}f}"


def times(value: float, digits: int = 2) -> str:
    """A ratio as the page writes it: 2.6 -> "2.6×" at digits=1."""
    return f"{value:.{digits}f}×"


def significant(value: float, digits: int = 3) -> str:
    """`digits` significant digits, trailing zeros dropped, never an exponent: 48.5, 41, 4.1;
    a figure with more integer digits than that keeps them all (1,234)."""
    if abs(value) >= 10**digits:
        return thousands(value)
    return f"{value:.{digits}g}"

"""The Performance page's summary: every benchmark's headline figure, read from its results file.

Each results file (benchmarks/results/*.json, and the learning curves' docs/assets/plots/*.json)
may carry a `headline`: one row, a list of rows, or none (`[]`, a file whose section another
file summarises), each row {"benchmark", "figure", "ratio", "section"}, written by the
benchmark that made the file. This script gathers them in the page's order, with each file's
machine and date from its provenance and a link to the section, into
benchmarks/results/summary.json; `summary_table` renders that as the page's opening table.
tests/test_speed_results.py checks that summary.json is what the results files hold now, and
tests/test_docs_numbers.py that the page's table is what summary.json renders, so the summary
cannot drift from the sections below it.

    python benchmarks/summary_table.py            # rewrites benchmarks/results/summary.json
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path
from typing import Any

from markdown.extensions.toc import slugify

sys.path.insert(0, str(Path(__file__).resolve().parent))
from results_table import HEADLINE_KEYS, RESULTS, markdown_table, results_path, write_results

REPOSITORY = Path(__file__).resolve().parents[1]
PAGE = REPOSITORY / "docs" / "performance.md"
SOURCES = (RESULTS, REPOSITORY / "docs" / "assets" / "plots")
SUMMARY = results_path("summary")


def headlines(record: dict[str, Any]) -> list[dict[str, Any]]:
    """A results file's headline rows (none when it has no `headline` or an empty one)."""
    found = record.get("headline")
    if not found:
        return []
    return [found] if isinstance(found, dict) else list(found)


def headline_problems(record: dict[str, Any]) -> list[str]:
    """What a results file's `headline` lacks; empty when it is complete (or absent)."""
    problems = []
    for row in headlines(record):
        missing = [key for key in HEADLINE_KEYS if key not in row]
        if missing:
            problems.append(f"headline {row.get('benchmark', row)!r} lacks {', '.join(missing)}")
        ratio = row.get("ratio")
        if ratio is not None and not isinstance(ratio, int | float):
            problems.append(f"headline {row.get('benchmark')!r}: ratio {ratio!r} is not a number")
    return problems


def short_machine(machine: str) -> str:
    """A provenance's machine in a few words: the GPU's model, else the CPU's core count."""
    named = re.search(r", GPU (\S.*?)(?: x\d+)?(?:,|$)", machine)  # provenance()'s own
    if named:
        return named.group(1)
    for gpu in ("H100", "H200", "A100", "L40S", "A10G"):  # a transcribed file's words
        if gpu in machine:
            return f"{gpu} GPU"
    cores = re.search(r"(\d+)[- ]cores?", machine)
    if machine.startswith("one core of") and cores:
        return f"one core of a {cores.group(1)}-core CPU"
    return f"{cores.group(1)}-core CPU" if cores else machine.split(",")[0]


def page_sections(page: Path = PAGE) -> dict[str, tuple[int, str]]:
    """Every heading of the page: its line and its anchor, as mkdocs' `toc` makes them."""
    sections: dict[str, tuple[int, str]] = {}
    fenced = False
    for number, line in enumerate(page.read_text(encoding="utf-8").splitlines(), 1):
        if line.lstrip().startswith("```"):
            fenced = not fenced
        elif not fenced and re.match(r"#{1,6} ", line):
            title = line.lstrip("#").strip()
            sections.setdefault(title, (number, slugify(title, "-")))
    return sections


def collect(page: Path = PAGE) -> dict[str, Any]:
    """The summary's rows from every results file's headline, in the order of their sections
    on the page; a headline naming no heading of the page is an error."""
    sections = page_sections(page)
    rows = []
    for folder in SOURCES:
        for path in sorted(folder.glob("*.json")):
            if path == SUMMARY:
                continue
            record = json.loads(path.read_text(encoding="utf-8"))
            for headline in headlines(record):
                if headline["section"] not in sections:
                    raise ValueError(
                        f"{path.relative_to(REPOSITORY)}: its headline's section "
                        f"{headline['section']!r} is no heading of {page.name}"
                    )
                line, anchor = sections[headline["section"]]
                provenance = record.get("provenance", {})
                rows.append(
                    {
                        "benchmark": headline["benchmark"],
                        "figure": headline["figure"],
                        "ratio": headline["ratio"],
                        "machine": short_machine(provenance.get("machine", "")),
                        "date": provenance.get("date", ""),
                        "anchor": anchor,
                        "file": path.relative_to(REPOSITORY).as_posix(),
                        "line": line,
                    }
                )
    rows.sort(key=lambda row: (row["line"], row["file"]))
    for row in rows:
        del row["line"]
    return {"rows": rows}


def ratio_cell(ratio: float | None) -> str:
    """The ratio as its file rounded it (2.0 stays 2.0)."""
    return "-" if ratio is None else f"{ratio}×"


def summary_table(results: dict[str, Any]) -> str:
    """The page's opening table: a row per headline, its benchmark linked to its section."""
    cells = [
        [
            f"[{row['benchmark']}](#{row['anchor']})",
            row["figure"],
            ratio_cell(row["ratio"]),
            row["machine"],
            row["date"],
        ]
        for row in results["rows"]
    ]
    return markdown_table(["benchmark", "headline", "ratio", "machine", "date"], cells, "llrll")


def main() -> int:
    write_results(SUMMARY, collect())
    return 0


if __name__ == "__main__":
    sys.exit(main())

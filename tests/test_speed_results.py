"""The speed benchmarks' stored results files, the Performance page's summary built from them,
and the speed plots drawn from them.

tests/test_docs_numbers.py checks every table against its file; this module checks what the
summary and the plots add: every file names its headline (or says it has none), a headline is
what its benchmark's `headline()` makes of the file's own figures, benchmarks/results/summary.json
is what the files hold now, its rows link to headings the page has, and the plots draw from the
files alone.
"""

from __future__ import annotations

import json
import re
import struct
from pathlib import Path

import pytest

from tests.conftest import REPOSITORY, benchmark_module

RESULTS = REPOSITORY / "benchmarks" / "results"
PAGE = REPOSITORY / "docs" / "performance.md"
MARKER = re.compile(
    r"<!-- results-table: benchmarks/(?P<script>\w+)\.py:\w+ (?P<path>benchmarks/results/\S+) -->"
)


def module(name: str):
    return benchmark_module(name, registered=f"{name}_speed_results")


def results_files() -> list[Path]:
    return sorted(RESULTS.glob("*.json"))


def scripts_by_file() -> dict[str, set[str]]:
    """Each results file under benchmarks/results and the scripts whose renderers read it."""
    found: dict[str, set[str]] = {}
    for match in MARKER.finditer(PAGE.read_text(encoding="utf-8")):
        found.setdefault(match["path"], set()).add(match["script"])
    return found


def png_size(path: Path) -> tuple[int, int]:
    """A PNG's width and height from its header; fails on anything that is not a PNG."""
    head = path.read_bytes()[:24]
    assert head[:8] == b"\x89PNG\r\n\x1a\n", f"{path.name} is not a PNG"
    return struct.unpack(">II", head[16:24])


def test_every_speed_results_file_backs_a_table_or_the_summary() -> None:
    """A results file no page table reads would be a figure the page does not show."""
    used = set(scripts_by_file())
    unused = [p.name for p in results_files() if f"benchmarks/results/{p.name}" not in used]
    assert unused == [], f"results files no table of {PAGE.name} renders: {unused}"


def headlined() -> list[tuple[str, str]]:
    """(results file, the script that writes its headline): the pairs of the page's markers whose
    script defines `headline()` (read from its source, not imported, at collection)."""
    return [
        (path, script)
        for path, scripts in sorted(scripts_by_file().items())
        for script in sorted(scripts)
        if "\ndef headline(" in (REPOSITORY / "benchmarks" / f"{script}.py").read_text("utf-8")
    ]


@pytest.mark.parametrize(("path", "script"), headlined(), ids=lambda v: Path(v).stem)
def test_a_headline_is_what_its_benchmark_makes_of_the_file(path: str, script: str) -> None:
    """Every file of a benchmark that writes headlines has one (`[]`: another file's row stands
    for its section), complete, and it is what `headline()` makes of the file's own figures, so
    the summary's figure and ratio cannot drift from the tables they sum up."""
    record = json.loads((REPOSITORY / path).read_text(encoding="utf-8"))
    assert "headline" in record, f"{path} has no headline (give [] if another file's row stands)"
    assert module("summary_table").headline_problems(record) == []
    made = module(script).headline(record)
    assert made == record["headline"], f"{path}: its headline is stale; {script}.py makes {made}"


def test_most_speed_results_carry_a_summary_row() -> None:
    assert len(headlined()) >= 25


def test_the_summary_is_what_the_results_files_hold_now() -> None:
    summary = module("summary_table")
    stored = json.loads(summary.SUMMARY.read_text(encoding="utf-8"))
    assert stored["rows"] == summary.collect()["rows"], (
        "benchmarks/results/summary.json is stale: run python benchmarks/summary_table.py"
    )
    assert len(stored["rows"]) >= 10


def test_the_summary_links_every_row_to_a_heading_of_the_page() -> None:
    summary = module("summary_table")
    anchors = {anchor for _, anchor in summary.page_sections().values()}
    rows = summary.collect()["rows"]
    assert {row["anchor"] for row in rows} <= anchors
    assert any(row["anchor"] == "compiled-generation-h100-h200" for row in rows)
    table = summary.summary_table({"rows": rows})
    assert "[Env steps of the building games](#env-steps-of-the-building-games)" in table


def test_a_headline_naming_no_heading_of_the_page_is_refused(tmp_path: Path) -> None:
    summary = module("summary_table")
    page = tmp_path / "performance.md"
    text = PAGE.read_text(encoding="utf-8").replace("## The code sandbox\n", "## Sandboxes\n")
    page.write_text(text, encoding="utf-8")
    with pytest.raises(ValueError, match="'The code sandbox' is no heading"):
        summary.collect(page)


def test_short_machine_names_the_gpu_or_the_cores() -> None:
    short = module("summary_table").short_machine
    assert short("2-core AMD EPYC CPU, 24 GB, no GPU, shared; Python 3.11") == "2-core CPU"
    assert short("AMD EPYC, 2 cores, 24 GiB memory") == "2-core CPU"
    assert short("one core of a 2-core AMD EPYC CPU, 24 GB") == "one core of a 2-core CPU"
    assert short("one NVIDIA H200 (143,771 MiB), 16 CPU cores") == "H200 GPU"
    assert short("Intel Xeon, 16 cores, 128 GiB memory, GPU NVIDIA GH200 x1") == "NVIDIA GH200"


def test_the_plots_are_drawn_from_the_stored_results(tmp_path: Path) -> None:
    plots = module("plot_speed")
    assert plots.main(["--out", str(tmp_path)]) == 0
    for name in plots.PLOTS:
        width, height = png_size(tmp_path / name)
        assert width >= 1200 and height >= 600, (name, width, height)
    ratios = {(s, n): r for s, n, r, _ in plots.comlrl_ratios()}
    assert ratios["SmolLM2-135M, 2-core CPU", "MAGRPO"] == pytest.approx(1.48)
    changes = dict((name, ratio) for name, ratio, _ in plots.change_speedups())
    assert changes["warm-start steps in micro-batches"] == pytest.approx(210.4 / 106.3)


def test_the_page_shows_every_plot_with_alt_text() -> None:
    plots = module("plot_speed")
    text = PAGE.read_text(encoding="utf-8")
    for name in plots.PLOTS:
        assert (REPOSITORY / "docs" / "assets" / "plots" / name).is_file(), name
        assert re.search(rf"!\[[^\]]{{12,}}\]\(assets/plots/{re.escape(name)}\)", text), name

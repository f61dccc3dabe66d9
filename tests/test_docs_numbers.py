"""The docs' benchmark tables, rebuilt from the results files they come from.

Every Markdown table in the Performance page and the learners' pages carries a marker on the
line before it (a blank line allowed between). A table a benchmark measured names its renderer
and its results file,

    <!-- results-table: benchmarks/<script>.py:<function> <results file> -->

and the test calls `<function>(results)` from that script on the file and asserts the page's
table is what it returns, cell for cell, and that the file records where it came from
(`benchmarks/provenance.py`: commit, date, machine, command). Any other table (settings, a
comparison in words) is marked `<!-- prose-table -->`. So a figure cannot be edited on the page
without the file, nor a file rerun without the page, and a new table cannot slip in unmarked.
"""

from __future__ import annotations

import datetime
import difflib
import functools
import importlib.util
import json
import os
import re
import shutil
import subprocess
import types
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.conftest import REPOSITORY, benchmark_module

PAGES = (
    REPOSITORY / "docs" / "performance.md",
    *sorted((REPOSITORY / "docs" / "learners").glob("*.md")),
)
RESULTS_MARKER = re.compile(
    r"<!-- results-table: benchmarks/(?P<script>\w+)\.py:(?P<function>\w+) (?P<path>\S+) -->"
)
PROSE_MARKER = "<!-- prose-table -->"
SEPARATOR = re.compile(r"^\|(\s*:?-+:?\s*\|)+$")
FENCE = re.compile(r"^\s*(```|~~~)")
RESULTS_FILES = sorted(
    [
        *(REPOSITORY / "benchmarks" / "results").glob("*.json"),
        *(REPOSITORY / "docs" / "assets" / "plots").glob("*.json"),
    ]
)


@dataclass(frozen=True)
class Table:
    """One Markdown table of a page, with the marker comment before it (None: no marker)."""

    page: Path
    line: int
    """The header row's line, counted from 1."""
    section: str
    """The nearest heading above the table."""
    text: str
    """Header, separator and rows, each line's trailing spaces dropped."""
    marker: str | None

    @property
    def where(self) -> str:
        return f"{self.page.relative_to(REPOSITORY)}:{self.line} ({self.section})"


def page_tables(text: str, page: Path) -> list[Table]:
    """Every table of a Markdown page, outside code fences."""
    lines = [line.rstrip() for line in text.splitlines()]
    tables, fenced, section, index = [], False, "", 0
    while index < len(lines):
        line = lines[index]
        if FENCE.match(line):
            fenced = not fenced
        elif not fenced and line.startswith("#"):
            section = line.lstrip("#").strip()
        elif (
            not fenced
            and line.startswith("|")
            and index + 1 < len(lines)
            and SEPARATOR.match(lines[index + 1])
        ):
            end = index
            while end < len(lines) and lines[end].startswith("|"):
                end += 1
            before = index - 1
            if before >= 0 and not lines[before].strip():
                before -= 1
            marker = lines[before].strip() if before >= 0 else ""
            marker = marker if marker.startswith("<!--") else None
            body = "\n".join(lines[index:end])
            tables.append(Table(page, index + 1, section, body, marker))
            index = end
            continue
        index += 1
    return tables


def read(page: Path) -> list[Table]:
    return page_tables(page.read_text(encoding="utf-8"), page)


def results_tables() -> list[Table]:
    return [
        t for page in PAGES for t in read(page) if t.marker and RESULTS_MARKER.fullmatch(t.marker)
    ]


@functools.cache
def script(name: str) -> types.ModuleType:
    """`benchmarks/<name>.py` under a name of its own: a test module that imported it as
    `name` keeps its module object (a worker pickles its functions by that name)."""
    return benchmark_module(name, registered=f"{name}_docs_numbers")


def provenance_problems(results: object) -> list[str]:
    """What a results file's `provenance` lacks; empty when it is complete."""
    if not isinstance(results, dict) or not isinstance(results.get("provenance"), dict):
        return ['no top-level "provenance" object']
    record = results["provenance"]
    problems = [
        f"provenance {key!r} missing or empty"
        for key in script("provenance").KEYS
        if not isinstance(record.get(key), str) or not record[key].strip()
    ]
    commit = record.get("commit")
    if (
        isinstance(commit, str)
        and commit != "unknown"
        and not re.fullmatch(r"[0-9a-f]{40}", commit)
    ):
        problems.append(f"provenance commit {commit!r} is not a full git hash")
    date = record.get("date")
    if isinstance(date, str) and not re.fullmatch(r"\d{4}-\d{2}-\d{2}", date):
        problems.append(f"provenance date {date!r} is not YYYY-MM-DD")
    return problems


def check(table: Table) -> None:
    """The page's table is what its renderer makes of its results file, which names its
    provenance; an AssertionError that says which cells differ otherwise."""
    found = RESULTS_MARKER.fullmatch(table.marker or "")
    assert found, f"{table.where}: not a results table: {table.marker!r}"
    module = script(found["script"])
    renderer = getattr(module, found["function"], None)
    assert callable(renderer), (
        f"{table.where}: benchmarks/{found['script']}.py has no renderer {found['function']}()"
    )
    path = REPOSITORY / found["path"]
    assert path.is_file(), f"{table.where}: results file {found['path']} does not exist"
    results = json.loads(path.read_text(encoding="utf-8"))
    problems = provenance_problems(results)
    assert not problems, f"{found['path']}: " + "; ".join(problems)
    expected = renderer(results)
    if table.text != expected:
        diff = "\n".join(
            difflib.unified_diff(
                expected.splitlines(),
                table.text.splitlines(),
                f"{found['script']}.{found['function']}({found['path']})",
                table.where,
                lineterm="",
            )
        )
        raise AssertionError(f"{table.where} differs from its results file:\n{diff}")


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(REPOSITORY)))
def test_every_table_carries_a_marker(page: Path) -> None:
    tables = read(page)
    assert tables or page.name != "performance.md", "the Performance page lost its tables"
    unmarked = [
        f"  {t.where}: {t.text.splitlines()[0][:80]}"
        for t in tables
        if t.marker is None or not (t.marker == PROSE_MARKER or RESULTS_MARKER.fullmatch(t.marker))
    ]
    if unmarked:
        pytest.fail(
            f"{len(unmarked)} of {len(tables)} tables have no results-table or prose-table marker "
            "on the line before them:\n" + "\n".join(unmarked),
            pytrace=False,
        )


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(REPOSITORY)))
def test_every_marker_stands_before_a_table(page: Path) -> None:
    """A marker whose table moved away would check nothing."""
    text = page.read_text(encoding="utf-8")
    attached = {t.marker for t in read(page)}
    lines = text.splitlines()
    orphans = [
        f"  line {number}: {line.strip()}"
        for number, line in enumerate(lines, 1)
        if (line.strip() == PROSE_MARKER or RESULTS_MARKER.fullmatch(line.strip()))
        and line.strip() not in attached
    ]
    assert not orphans, "markers with no table after them:\n" + "\n".join(orphans)


def test_the_pages_hold_results_tables() -> None:
    """The parametrized checks below check nothing if the markers' pattern stopped matching."""
    assert len(results_tables()) >= 5


@pytest.mark.parametrize("table", results_tables(), ids=lambda t: f"{t.page.name}:{t.line}")
def test_a_results_table_is_what_its_file_renders(table: Table) -> None:
    check(table)


def plant(table: Table) -> str:
    """The table with one digit of its last row that holds one changed."""
    *rows, last = table.text.splitlines()
    cells = last.split("|")
    for place in range(len(cells) - 1, -1, -1):
        digit = re.search(r"\d", cells[place])
        if digit:
            wrong = str((int(digit.group()) + 1) % 10)
            cells[place] = cells[place][: digit.start()] + wrong + cells[place][digit.end() :]
            return "\n".join([*rows, "|".join(cells)])
    pytest.fail(f"{table.where}: its last row has no number to plant a wrong one in")


@pytest.mark.parametrize("table", results_tables(), ids=lambda t: f"{t.page.name}:{t.line}")
def test_a_planted_wrong_number_fails(table: Table, tmp_path: Path) -> None:
    """One cell of a copy of the page edited: the check must catch it, for every table."""
    text = table.page.read_text(encoding="utf-8")
    assert text.count(table.text) == 1, f"{table.where}: the table changed while the tests ran"
    wrong = plant(table)
    copy = tmp_path / table.page.name
    copy.write_text(text.replace(table.text, wrong), encoding="utf-8")
    planted = [
        t for t in page_tables(copy.read_text(encoding="utf-8"), table.page) if t.text == wrong
    ]
    assert len(planted) == 1 and planted[0].marker == table.marker
    with pytest.raises(AssertionError, match="differs from its results file"):
        check(planted[0])


def test_a_micro_rate_the_file_did_not_pool_is_not_shown() -> None:
    """TravelPlanner's micro columns are rates pooled over checks (`Column.pooled_over`); the
    five-task file's cells predate that and it keeps no episodes. Over one episode a stored
    mean is the pooled rate; over more it is a mean of rates that the file cannot turn into the
    pooled one, so the round's table says so instead of showing it."""
    report = script("raw_model_report")
    results = json.loads(
        (REPOSITORY / "benchmarks/results/raw_model_five_tasks.json").read_text(encoding="utf-8")
    )
    row = next(r for r in results["rows"] if r["env"] == "travelplanner")
    assert row["summary"]["Hard (micro)"]["n"] == 1 and "Hard (micro) 0.0" in report.score(row)
    cell = {"mean": 50.0, "ci95": [10.0, 90.0], "n": 2}
    unpooled = {**row, "summary": {**row["summary"], "episodes": 2, "Hard (micro)": cell}}
    assert "Hard (micro) – (not pooled in this file)" in report.score(unpooled)
    pooled_cell = {**cell, "pooled_over": "hard_applicable", "checks": 3.0}
    pooled = {**unpooled, "summary": {**unpooled["summary"], "Hard (micro)": pooled_cell}}
    assert "Hard (micro) 50.0 ± 40.0" in report.score(pooled)


def test_the_checker_finds_the_tables_and_their_markers(tmp_path: Path) -> None:
    page = tmp_path / "page.md"
    text = (
        "# Title\n\n<!-- prose-table -->\n| a | b |\n|---|---:|\n| 1 | 2 |\n\n"
        "```text\n| not | a table |\n|---|---|\n```\n\n## Part\n\n"
        "<!-- results-table: benchmarks/long_horizon.py:docs_table docs/x.json -->\n\n"
        "| c |\n|---|\n| 3 |\n\nprose\n| d |\n|---|\n"
    )
    tables = page_tables(text, page)
    assert [(t.line, t.section, t.marker) for t in tables] == [
        (4, "Title", PROSE_MARKER),
        (17, "Part", "<!-- results-table: benchmarks/long_horizon.py:docs_table docs/x.json -->"),
        (22, "Part", None),
    ]
    assert tables[0].text == "| a | b |\n|---|---:|\n| 1 | 2 |"
    assert RESULTS_MARKER.fullmatch(tables[1].marker)["path"] == "docs/x.json"


def test_a_results_file_without_provenance_is_refused() -> None:
    record = {"commit": "0" * 40, "date": "2026-12-02", "machine": "x", "command": "python b.py"}
    assert provenance_problems({"provenance": record}) == []
    assert provenance_problems({"rows": []}) == ['no top-level "provenance" object']
    assert provenance_problems({"provenance": {**record, "machine": " "}}) == [
        "provenance 'machine' missing or empty"
    ]
    assert provenance_problems({"provenance": {**record, "commit": "abc", "date": "Dec 2"}}) == [
        "provenance commit 'abc' is not a full git hash",
        "provenance date 'Dec 2' is not YYYY-MM-DD",
    ]


@pytest.mark.parametrize("path", RESULTS_FILES, ids=lambda p: str(p.relative_to(REPOSITORY)))
def test_every_results_file_records_its_provenance(path: Path) -> None:
    problems = provenance_problems(json.loads(path.read_text(encoding="utf-8")))
    assert not problems, f"{path.relative_to(REPOSITORY)}: " + "; ".join(problems)


# ----- benchmarks/provenance.py -------------------------------------------------------------
def test_provenance_names_the_commit_date_machine_and_command() -> None:
    module = script("provenance")

    def head() -> str:
        done = subprocess.run(
            ["git", "rev-parse", "HEAD"], cwd=REPOSITORY, capture_output=True, text=True
        )
        return done.stdout.strip() if done.returncode == 0 else "unknown"

    before = head()  # a commit made meanwhile moves HEAD: either side is right
    record = module.provenance(
        [str(REPOSITORY / "benchmarks" / "x.py"), "--seeds", "0 1", "--quick"]
    )
    assert tuple(record) == module.KEYS == ("commit", "date", "machine", "command")
    assert record["commit"] in {before, head()}
    assert record["date"] == datetime.datetime.now(datetime.timezone.utc).date().isoformat()
    assert record["command"] == "python benchmarks/x.py --seeds '0 1' --quick"
    assert f"{os.cpu_count()} cores" in record["machine"] and "\n" not in record["machine"]
    assert provenance_problems({"provenance": record}) == []


def test_provenance_publishes_no_folder_of_the_machine(tmp_path: Path) -> None:
    """A results file goes into the repository: paths in its command are the checkout's own,
    relative, or a file's name."""
    module = script("provenance")
    argv = [str(REPOSITORY / "benchmarks" / "x.py"), "--json", str(tmp_path / "out.json")]
    argv += [f"--plot={tmp_path}", "--data", str(REPOSITORY / "docs" / "assets"), "--every", "-1"]
    command = module.provenance(argv)["command"]
    assert command == (
        f"python benchmarks/x.py --json out.json --plot={tmp_path.name} --data docs/assets "
        "--every -1"
    )
    assert str(tmp_path.parent) not in command


def test_provenance_outside_a_checkout_says_unknown(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An unpacked release has no git history: the commit says so rather than failing."""
    shutil.copy(REPOSITORY / "benchmarks" / "provenance.py", tmp_path / "provenance.py")
    spec = importlib.util.spec_from_file_location("provenance_unpacked", tmp_path / "provenance.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    monkeypatch.setenv("GIT_CEILING_DIRECTORIES", str(tmp_path.parent))
    record = module.provenance(["elsewhere.py", "--quick"])
    assert record["commit"] == "unknown"
    assert record["command"] == "python elsewhere.py --quick"

"""The leaderboard: every results file in a folder, one table per task, with the paper's
columns and the published rows beside the local ones, marked as such; and the score-against-
cost plot.

Cells are mean ± the half-width of the 95% t-interval over episodes (see `stats`); published
cells are the poster's numbers, which have no intervals. Scores are recomputed from each
file's episodes, never taken from its stored summary.
"""

from __future__ import annotations

import csv
import io
import json
import math
import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from collabzoo.bench.columns import COST, TIME, TaskColumns, board_order, task_columns
from collabzoo.bench.protocols import PROTOCOLS
from collabzoo.bench.published import SOURCE
from collabzoo.bench.published import models as published_models
from collabzoo.bench.published import published as published_table
from collabzoo.bench.results import FORMAT, ResultsError, read_results

FORMATS = ("markdown", "csv", "json")
PUBLISHED_MARK = "(published)"


@dataclass
class Row:
    """One leaderboard row: a local run or a published method."""

    method: str
    protocol: str
    data: str
    split: str
    episodes: str
    cells: dict[str, tuple[float, float]]
    """Column -> (mean, half-width of the 95% interval; NaN when there is none)."""
    published: bool = False
    source: str = ""
    extra: dict[str, Any] = field(default_factory=dict)
    defined: dict[str, tuple[int, int]] = field(default_factory=dict)
    """Score column -> (episodes where it is defined, episodes), for columns undefined in some
    (StrBuild's Adj on a wall with no touching blocks) or about a subset of them (BFCL's AST
    match of one category)."""


def find_results(paths: Sequence[str | os.PathLike[str]]) -> tuple[list[dict], list[str]]:
    """(the bench results under `paths`, notes on the files that were left out). Folders are
    searched recursively for *.json; JSON files of other formats are passed over quietly."""
    documents, notes = [], []
    for given in paths:
        path = Path(given)
        if path.is_dir():
            files = sorted(p for p in path.rglob("*.json") if not p.name.startswith("."))
        elif path.is_file():
            files = [path]
        else:
            raise ResultsError(f"no such results folder or file: {given}")
        for file in files:
            try:
                head = json.loads(file.read_text(encoding="utf-8"))
            except (OSError, UnicodeDecodeError, json.JSONDecodeError) as error:
                notes.append(f"skipped {file}: not readable JSON ({error})")
                continue
            if not isinstance(head, dict) or head.get("format") != FORMAT:
                continue
            try:
                document = read_results(file)
            except ResultsError as error:
                notes.append(f"skipped {file}: {error}")
                continue
            document["_path"] = str(file)
            documents.append(document)
    return documents, notes


def _task_order(name: str) -> tuple[int, str]:
    order = board_order()
    return (order.index(name), name) if name in order else (len(order), name)


def _protocol_label(document: dict[str, Any]) -> str:
    protocol = document.get("protocol", {})
    name = str(protocol.get("name", "?"))
    return f"{name} (R={protocol['rounds']})" if name == "discussion" else name


def _local_row(document: dict[str, Any], columns: TaskColumns) -> Row:
    summary = document["summary"]
    cells = {}
    done, planned = summary["episodes"], document.get("episodes_planned")
    defined = {}
    for name in [TIME, COST, *(c.name for c in columns.columns)]:
        entry = summary.get(name) or {}
        mean = entry.get("mean")
        low, high = (entry.get("ci95") or [None, None])[:2]
        half = (high - low) / 2 if low is not None and high is not None else math.nan
        cells[name] = (math.nan if mean is None else float(mean), half)
        kept = entry.get("n")
        partial = any(
            c.name == name and (c.defined_by or c.subset or c.pooled_over is not None)
            for c in columns.columns
        )
        if partial and kept != done:
            defined[name] = (int(kept or 0), int(done))
    episodes = str(done)
    if planned and done != planned:
        episodes = f"{done}/{planned} ({document.get('status', 'partial')})"
    return Row(
        method=str(document.get("team", {}).get("spec", "?")),
        protocol=_protocol_label(document),
        data=str(document.get("env", {}).get("data", "?")),
        split=str(document.get("split", "?")),
        episodes=episodes,
        cells=cells,
        source=str(document.get("_path", "")),
        defined=defined,
    )


def _published_rows(task: str) -> list[Row]:
    rows = []
    for published in published_table().get(task, []):
        cells = {TIME: (published.time, math.nan), COST: (published.cost, math.nan)}
        cells.update({k: (v, math.nan) for k, v in published.scores.items()})
        rows.append(
            Row(
                method=f"{published.method} {PUBLISHED_MARK}",
                protocol=published.protocol,
                data="benchmark (paper)",
                split="-",
                episodes="-",
                cells=cells,
                published=True,
                source=SOURCE,
            )
        )
    return rows


def leaderboard(
    documents: Sequence[dict[str, Any]], published: bool = True
) -> list[tuple[str, TaskColumns, list[Row]]]:
    """(env short name, its columns, its rows) for every task with local results, in the
    paper's task order; local rows by team then protocol, the published rows after them."""
    by_task: dict[str, list[dict[str, Any]]] = {}
    for document in documents:
        by_task.setdefault(str(document.get("env", {}).get("name", "?")), []).append(document)
    tables = []
    for task in sorted(by_task, key=_task_order):
        first = by_task[task][0]
        columns = task_columns(task, first.get("env", {}).get("title"))
        runs = sorted(
            by_task[task],
            key=lambda d: (
                str(d.get("team", {}).get("spec")),
                PROTOCOLS.index(d["protocol"]["name"])
                if d.get("protocol", {}).get("name") in PROTOCOLS
                else len(PROTOCOLS),
                json.dumps(d.get("protocol"), sort_keys=True),
                str(d.get("split")),
                str(d.get("env", {}).get("data")),
            ),
        )
        rows = [_local_row(d, columns) for d in runs]
        if published:
            rows += _published_rows(task)
        tables.append((task, present_columns(columns, rows), rows))
    return tables


def present_columns(columns: TaskColumns, rows: Sequence[Row]) -> TaskColumns:
    """The task's columns less those about a subset of episodes (`Column.subset`, e.g. a BFCL
    category) that no row has a value for: the categories the runs played, not every one the
    env knows."""
    kept = tuple(
        c
        for c in columns.columns
        if not c.subset or any(math.isfinite(r.cells.get(c.name, (math.nan,))[0]) for r in rows)
    )
    return TaskColumns(columns.title, kept, columns.plotted)


def pooled_note(columns: TaskColumns) -> str:
    """What a table's pooled columns (`Column.pooled_over`) are, in a line; "" if none."""
    parts = []
    for column in columns.columns:
        checks = column.pooled_over
        if checks is not None:
            counted = checks if isinstance(checks, str) else f"{checks:g} checks"
            parts.append(f"{column.name}: {counted} per episode")
    if not parts:
        return ""
    return (
        "Pooled over the run's checks, as the benchmark reports a micro rate (all passes over "
        f"all checks, not a mean of the episodes' rates; {'; '.join(parts)}), with the ratio "
        "estimator's 95% interval."
    )


def _number(value: float, digits: int) -> str:
    return "-" if not math.isfinite(value) else f"{value:.{digits}f}"


def _cell(mean: float, half: float, digits: int) -> str:
    if not math.isfinite(mean):
        return "-"
    if not math.isfinite(half):
        return _number(mean, digits)
    return f"{_number(mean, digits)} ± {_number(half, digits)}"


def _digits(name: str, mean: float, published: bool) -> int:
    """Cost in whole tokens, scores to 0.1 point, local Times to 0.01 s below 10 s (scripted
    teams take milliseconds), published cells as the poster prints them."""
    if name == COST:
        return 0
    if name == TIME and not published:
        return 2 if math.isfinite(mean) and mean < 10 else 1
    return 1


def markdown_table(rows: Sequence[Row], columns: TaskColumns) -> list[str]:
    """One task's rows as Markdown table lines (the leaderboard's and reproduce's tables)."""
    headers = row_headers(columns)
    lines = ["| " + " | ".join(headers) + " |"]
    lines.append("|" + "|".join("---" if k < 5 else "---:" for k in range(len(headers))) + "|")
    for row in rows:
        cells = [c.replace("|", "\\|") for c in row_cells(row, columns)]
        lines.append("| " + " | ".join(cells) + " |")
    return lines


def row_headers(columns: TaskColumns) -> list[str]:
    scores = [
        f"{c.name}{' ' + c.unit if c.unit else ''}{'' if c.higher_is_better else ' ↓'}"
        for c in columns.columns
    ]
    return ["Method", "Protocol", "Data", "Split", "Episodes", "Time (s)", "Cost (tokens)", *scores]


def row_cells(row: Row, columns: TaskColumns) -> list[str]:
    names = [TIME, COST, *(c.name for c in columns.columns)]
    values = []
    for name in names:
        mean, half = row.cells.get(name, (math.nan, math.nan))
        cell = _cell(mean, half, _digits(name, mean, row.published))
        if name in row.defined:
            kept, done = row.defined[name]
            about = next((c.subset for c in columns.columns if c.name == name), "")
            cell += f" ({kept} of {done} {'episodes' if about else 'defined'})"
        values.append(cell)
    return [row.method, row.protocol, row.data, row.split, row.episodes, *values]


def render_markdown(
    documents: Sequence[dict[str, Any]], published: bool = True, title: str = "Leaderboard"
) -> str:
    tables = leaderboard(documents, published)
    lines = [f"# {title}", ""]
    if not tables:
        lines.append("No results yet: run `collabzoo bench` first.")
        return "\n".join(lines) + "\n"
    lines += [
        f"{len(documents)} run(s). Cells: mean ± half-width of the 95% t-interval over "
        "episodes. Time: seconds per episode, wall clock. Cost: generated tokens per episode, "
        "summed over agents, turns and discussion rounds. Scores: the final turn's metric, "
        "in percent (↓: lower is better).",
        "",
    ]
    if published:
        lines += [
            f"Rows marked {PUBLISHED_MARK} are from the {SOURCE}, measured on the benchmark "
            "data with the models named under each table; a local row is comparable to them "
            "only when its Data is the benchmark's too.",
            "",
        ]
    for task, columns, rows in tables:
        lines += [f"## {columns.title}", "", *markdown_table(rows, columns)]
        pooled = pooled_note(columns)
        if pooled:
            lines += ["", pooled]
        if published and task in published_models() and published_table().get(task):
            lines += ["", f"Published models: {published_models()[task]}."]
        lines.append("")
    return "\n".join(lines)


def render_csv(documents: Sequence[dict[str, Any]], published: bool = True) -> str:
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(
        ["task", "method", "protocol", "data", "split", "episodes", "column", "mean", "ci95_half"]
    )
    for task, columns, rows in leaderboard(documents, published):
        for row in rows:
            for name in [TIME, COST, *(c.name for c in columns.columns)]:
                mean, half = row.cells.get(name, (math.nan, math.nan))
                writer.writerow(
                    [
                        task,
                        row.method,
                        row.protocol,
                        row.data,
                        row.split,
                        row.episodes,
                        name,
                        "" if not math.isfinite(mean) else f"{mean:.6g}",
                        "" if not math.isfinite(half) else f"{half:.6g}",
                    ]
                )
    return out.getvalue()


def render_json(documents: Sequence[dict[str, Any]], published: bool = True) -> str:
    def plain(value: float) -> float | None:
        return value if math.isfinite(value) else None

    tables = []
    for task, columns, rows in leaderboard(documents, published):
        tables.append(
            {
                "task": task,
                "title": columns.title,
                "columns": [TIME, COST, *(c.name for c in columns.columns)],
                "rows": [
                    {
                        "method": r.method,
                        "protocol": r.protocol,
                        "data": r.data,
                        "split": r.split,
                        "episodes": r.episodes,
                        "published": r.published,
                        "source": r.source,
                        "cells": {
                            k: {"mean": plain(m), "ci95_half": plain(h)}
                            for k, (m, h) in r.cells.items()
                        },
                    }
                    for r in rows
                ],
            }
        )
    return json.dumps({"tables": tables}, indent=1, ensure_ascii=False) + "\n"


def plot_score_vs_cost(
    documents: Sequence[dict[str, Any]], output: str | os.PathLike[str], published: bool = True
) -> Path:
    """One panel per task: each run's main score against its Cost, with 95% intervals on both;
    published rows as hollow grey markers. Needs matplotlib."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    tables = leaderboard(documents, published)
    if not tables:
        raise ResultsError("nothing to plot: no results")
    columns_count = min(3, len(tables))
    rows_count = math.ceil(len(tables) / columns_count)
    figure = Figure(figsize=(5.2 * columns_count, 4.2 * rows_count), layout="constrained")
    FigureCanvasAgg(figure)
    for k, (_, columns, rows) in enumerate(tables):
        axes = figure.add_subplot(rows_count, columns_count, k + 1)
        score = columns.plotted
        for row in rows:
            x, x_half = row.cells.get(COST, (math.nan, math.nan))
            y, y_half = row.cells.get(score, (math.nan, math.nan))
            if not (math.isfinite(x) and math.isfinite(y)):
                continue
            label = row.method.replace(f" {PUBLISHED_MARK}", "")
            if row.published:
                axes.scatter([x], [y], facecolors="none", edgecolors="0.5", marker="s")
                axes.annotate(
                    label,
                    (x, y),
                    fontsize=6,
                    color="0.4",
                    xytext=(3, 3),
                    textcoords="offset points",
                )
                continue
            axes.errorbar(
                [x],
                [y],
                xerr=[[x_half]] if math.isfinite(x_half) else None,
                yerr=[[y_half]] if math.isfinite(y_half) else None,
                fmt="o",
                capsize=3,
                label=f"{label} · {row.protocol}",
            )
        axes.set_title(columns.title)
        axes.set_xlabel("Cost (generated tokens / episode)")
        axes.set_ylabel(f"{score} (%)")
        axes.grid(alpha=0.3)
        if axes.get_legend_handles_labels()[0]:
            axes.legend(fontsize=6, loc="best")
    path = Path(output)
    path.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(path, format="png", dpi=120)
    return path

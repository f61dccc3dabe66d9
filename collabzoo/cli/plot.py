"""`collabzoo plot`: a metric of training runs against another, into a PNG, and a summary."""

from __future__ import annotations

import argparse
import math
import os
from typing import Any

from collabzoo.cli.tables import fmt, table
from collabzoo.cli.usage import UsageError


def cmd_plot(args: argparse.Namespace) -> int:
    from collabzoo.algos.runtime.run_log import metrics_path, read_metrics

    def number(value: Any) -> float | None:
        ok = isinstance(value, (int, float)) and not isinstance(value, bool)
        return float(value) if ok and math.isfinite(value) else None

    runs = []  # (label, records)
    for run in args.runs:
        path = metrics_path(run)
        if not path.is_file():
            where = f"{run} has no metrics.jsonl" if os.path.isdir(run) else f"no such file: {run}"
            raise UsageError(f"{where}; give a run directory or its metrics.jsonl")
        try:
            records = read_metrics(path, drop_rewound=args.x == "update")
        except (OSError, ValueError) as error:
            raise UsageError(f"cannot read {path}: {error}") from None
        label = path.parent.name if path.name == "metrics.jsonl" else path.stem
        present = list(dict.fromkeys(k for r in records for k in r))
        for key, option in ((args.metric, "--metric"), (args.x, "--x")):
            if key not in present:
                listed = ", ".join(present) if present else "none (the file is empty)"
                raise UsageError(f"{option} {key!r} is not in {path}; its metrics: {listed}")
        runs.append((label or str(path), records))
    labels = [label for label, _ in runs]
    if len(set(labels)) < len(labels):  # two runs with one dir name: label them by their paths
        paths = [str(metrics_path(run)) for run in args.runs]
        runs = [(path, records) for path, (_, records) in zip(paths, runs, strict=True)]

    lower = args.best == "min" or (args.best is None and "loss" in args.metric.lower())
    output = args.output
    if output is None:
        output = os.path.join(os.path.dirname(metrics_path(args.runs[0])), "curves.png")

    try:
        from matplotlib.backends.backend_agg import FigureCanvasAgg
        from matplotlib.figure import Figure
    except ImportError:
        raise UsageError("plot needs matplotlib: pip install matplotlib") from None

    figure = Figure(figsize=(8, 5), layout="constrained")
    FigureCanvasAgg(figure)
    axes = figure.add_subplot()
    rows = []
    for label, records in runs:
        points = [(number(r.get(args.x)), number(r.get(args.metric))) for r in records]
        points = [(x, y) for x, y in points if x is not None and y is not None]
        marker = "o" if len(points) == 1 else None  # a lone point draws no line
        axes.plot([x for x, _ in points], [y for _, y in points], marker=marker, label=label)
        values = [y for _, y in points]
        best = (min if lower else max)(values) if values else None
        first, last = (values[0], values[-1]) if values else (None, None)
        cells = [fmt(v) if v is not None else "-" for v in (first, last, best)]
        rows.append([label, str(len(values)), *cells])
    axes.set_xlabel(args.x)
    axes.set_ylabel(args.metric)
    axes.set_title(f"{args.metric} against {args.x}")
    axes.grid(alpha=0.3)
    axes.legend()
    try:
        os.makedirs(os.path.dirname(os.path.abspath(output)), exist_ok=True)
        figure.savefig(output, format="png", dpi=120)
    except (OSError, ValueError) as error:
        raise UsageError(f"cannot write {output}: {error}") from None
    print(output)
    best_header = "best (min)" if lower else "best (max)"
    headers = ["run", "points", "first", "last", best_header]
    print(table(headers, rows, [False, True, True, True, True]))
    return 0


def add_commands(commands: Any) -> None:
    """Add `plot` to the `collabzoo` subcommands."""
    plot = commands.add_parser(
        "plot",
        help="plot a metric of one or more training runs",
        description="Draw a metric of each run (its metrics.jsonl) against --x, one line per "
        "run, into a PNG; print its path and each run's first, last and best value.",
    )
    plot.add_argument(
        "runs", nargs="+", metavar="RUN", help="a run directory holding metrics.jsonl, or the file"
    )
    plot.add_argument("--metric", default="mean_return", help="metric to plot (%(default)s)")
    plot.add_argument("--x", default="update", help="metric on the x axis (%(default)s)")
    plot.add_argument(
        "--output",
        default=None,
        metavar="PNG",
        help="where to write (default: FIRST_RUN/curves.png)",
    )
    plot.add_argument(
        "--best",
        choices=("max", "min"),
        default=None,
        help="which extreme is best (default: min for a metric named *loss*, else max)",
    )
    plot.set_defaults(handler=cmd_plot)

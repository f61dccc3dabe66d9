"""Where one update's time goes: a `torch.profiler` summary of a learner's update on a real model.

Builds the trainer `benchmarks/learn_real_model.py` runs (its recipe: one base model, a LoRA
adapter per agent and per separate critic), runs `--warmup` updates, then profiles one update
and splits its wall time by the ranges the learners mark: rollout (of which generation),
scoring (the log-probabilities the loss needs), separate critics' values, backward and the
optimizer step; what is left is the environment, the reward and the bookkeeping. The top
operators by self time follow.

The profiler keeps an event per operator call, and turning them into a summary takes memory:
one MAGRPO update at the benchmark recipe's size (64 new tokens, K = 4) passed 13 GB after the
profiler stopped on the real model. The defaults are therefore 32 new tokens and K = 2.

    python benchmarks/profile_update.py [--learner magrpo] [--task tldr] [--threads 2]
        [--model smollm2-135m-instruct] [--data-dir DIR] [--trace trace.json] [--json [PATH]]

`--json` adds the run to a results file (alone: benchmarks/results/profile_update.json), in place
of an earlier run of the same learner and task there; `profile_table` builds the Performance
page's table from the file's runs, a column pair per learner.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
import torch
from learn_real_model import LEARNERS, TASKS, Recipe, build_trainer, make_job
from provenance import provenance
from results_table import load_results, markdown_table, results_path, write_results
from torch.profiler import ProfilerActivity, profile

RANGES = {
    "collabzoo.rollout": "rollout (generation, env, reward)",
    "collabzoo.generate": "  of which generation",
    "collabzoo.score": "scoring (log-probs, value heads on actors)",
    "collabzoo.values": "separate critics' values (forward)",
    "collabzoo.backward": "backward",
    "collabzoo.optimizer_step": "optimizer step",
}


def summary(events: Any, wall: float) -> list[dict[str, Any]]:
    """Each marked range's total wall time in the profiled update, and its share."""
    totals = {name: 0.0 for name in RANGES}
    for event in events:
        if event.key in totals:
            totals[event.key] += event.cpu_time_total / 1e6
    marked = sum(v for k, v in totals.items() if k != "collabzoo.generate")
    rows = [{"range": RANGES[k], "seconds": v, "share": v / wall} for k, v in totals.items()]
    rows.append({"range": "other (outside the ranges)", "seconds": wall - marked})
    rows[-1]["share"] = rows[-1]["seconds"] / wall
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--learner", default="magrpo", choices=LEARNERS)
    parser.add_argument("--task", default="tldr", choices=sorted(TASKS))
    parser.add_argument("--model", default=Recipe.model)
    parser.add_argument("--data-dir", default=os.environ.get("COLLABZOO_SHARED_DATA"))
    parser.add_argument("--max-new-tokens", type=int, default=32)
    parser.add_argument("--group", type=int, default=2)
    parser.add_argument("--threads", type=int, default=torch.get_num_threads())
    parser.add_argument("--warmup", type=int, default=1)
    parser.add_argument("--top", type=int, default=12, help="operators listed by self time")
    parser.add_argument("--output", default="runs/profile_update")
    parser.add_argument("--trace", help="also write a Chrome trace here")
    parser.add_argument(
        "--json",
        nargs="?",
        const=str(results_path("profile_update")),
        help="add the run to this results file (alone: benchmarks/results/profile_update.json)",
    )
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    recipe = Recipe(model=args.model, max_new_tokens=args.max_new_tokens, group=args.group)
    job = make_job(args.task, args.learner, 0, recipe, args.data_dir, args.threads, args.output)
    trainer = build_trainer(job)
    try:
        for _ in range(args.warmup):
            trainer.train_step()
        with profile(activities=[ProfilerActivity.CPU]) as profiler:
            started = time.perf_counter()
            metrics = trainer.train_step()
            wall = time.perf_counter() - started
    finally:
        trainer.close()
    events = profiler.key_averages()
    rows = summary(events, wall)
    print(f"{args.learner} on {args.task}, {args.model}, {args.threads} threads: one update")
    print(f"{wall:.1f} s, {metrics['joint_samples_per_s']:.3f} joint samples/s")
    print("| part | seconds | share |\n|---|---:|---:|")
    for row in rows:
        print(f"| {row['range']} | {row['seconds']:.1f} | {row['share']:.0%} |")
    print(events.table(sort_by="self_cpu_time_total", row_limit=args.top))
    if args.trace:
        profiler.export_chrome_trace(args.trace)
    if args.json:
        report = {"provenance": provenance(), "learner": args.learner, "task": args.task}
        report.update(model=args.model, threads=args.threads, seconds=wall, parts=rows)
        report["table"] = table_parts(rows, wall)
        runs = load_results(args.json)["runs"] if Path(args.json).is_file() else []
        runs = [r for r in runs if (r["learner"], r["task"]) != (args.learner, args.task)]
        results = {"runs": [*runs, report]}
        write_results(args.json, {"headline": headline(results), **results})
    return 0


# ----- the Performance page's table --------------------------------------------------------------
TABLE_PARTS = (
    ("generation", "generation"),
    ("scoring", "scoring the actors' log-probabilities"),
    ("values", "the critics' values (forward)"),
    ("backward", "backward"),
    ("optimizer_step", "optimizer step (AdamW on the adapters)"),
    ("rest", "env, reward and the rest"),
)
LEARNER_NAMES = {"magrpo": "MAGRPO", "iac": "IAC", "ippo": "IPPO", "cc": "CC"}


def table_parts(rows: list[dict[str, Any]], wall: float) -> dict[str, dict[str, float]]:
    """The page's rows from `summary`'s: the rollout's time outside generation joins the time
    outside every range as "the rest" (the env and the reward)."""
    seconds = {row["range"]: row["seconds"] for row in rows}
    parts = {
        "generation": seconds[RANGES["collabzoo.generate"]],
        "scoring": seconds[RANGES["collabzoo.score"]],
        "values": seconds[RANGES["collabzoo.values"]],
        "backward": seconds[RANGES["collabzoo.backward"]],
        "optimizer_step": seconds[RANGES["collabzoo.optimizer_step"]],
        "rest": seconds[RANGES["collabzoo.rollout"]]
        - seconds[RANGES["collabzoo.generate"]]
        + seconds["other (outside the ranges)"],
    }
    return {key: {"seconds": value, "share": value / wall} for key, value in parts.items()}


def profile_table(results: dict[str, Any]) -> str:
    """A seconds and a share column per profiled learner; a part a learner lacks (a separate
    critic's values in MAGRPO) reads "-"."""
    runs = results["runs"]
    header = ["part"]
    for run in runs:
        header += [LEARNER_NAMES.get(run["learner"], run["learner"]), "share"]
    cells = []
    for key, name in TABLE_PARTS:
        row = [name]
        for run in runs:
            part = run["table"][key]
            if part["seconds"] == 0 and key == "values":
                row += ["-", "-"]
            else:
                row += [f"{part['seconds']:.1f} s", f"{part['share']:.0%}"]
        cells.append(row)
    last = ["one update"]
    for run in runs:
        last += [f"{run['seconds']:.1f} s", ""]
    cells.append(last)
    return markdown_table(header, cells, "l" + "rr" * len(runs))


def headline(results: dict[str, Any]) -> dict[str, Any]:
    """The first run's update by its two largest parts."""
    run = results["runs"][0]
    parts = sorted(run["table"].items(), key=lambda item: -item[1]["seconds"])[:2]
    shares = ", ".join(f"{key} {part['share']:.0%}" for key, part in parts)
    return {
        "benchmark": "Where an update's time goes",
        "figure": f"one {LEARNER_NAMES.get(run['learner'], run['learner'])} update of "
        f"{run['model']}'s LoRA team {run['seconds']:.1f} s: {shares}",
        "ratio": None,
        "section": "Where an update's time goes",
    }


if __name__ == "__main__":
    raise SystemExit(main())

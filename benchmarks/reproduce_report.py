"""The papers' table on this machine: a `collabzoo reproduce` folder as a results file, the docs'
tables and the trained rows' learning curves.

`collabzoo reproduce` writes its runs to a folder (`plan.json`, and per run `done.json`, the
bench results and the training's metrics.jsonl). This script reads that folder back and keeps
what the docs show: the shared settings, every row's per-seed scores, Time and Cost, each run's
wall time, each trained run's training curve (the mean return of every update's rollouts), which
trained rows moved the metric beyond the seeds' spread (`collabzoo.bench.seed_effects`), and
the runs that did not finish, with why.

    python benchmarks/reproduce_report.py FOLDER [--json [out.json]] [--plot DIR] [--name NAME]
        [--readings final_reward,parse_success,...]
    python benchmarks/reproduce_report.py --from-json out.json --plot DIR     # re-plot only

`--json` alone writes benchmarks/results/reproduce_<NAME>.json (NAME: smollm2), from which
`reproduction_table` and `moved_table` build the Performance page's tables. `--readings` adds
episode readings that are not a leaderboard column (the env's reward, `final_reward`, or a name
of the episodes' `final_metrics`, such as BFCL's parse rate), compared the same way, for
`readings_table`: where the published metric stays at 0, they say whether anything moved.
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from results_table import load_results, markdown_table, results_path, write_results

from collabzoo.algos.runtime.run_log import read_metrics
from collabzoo.bench.columns import COST, TIME, task_columns
from collabzoo.bench.results import ResultsError, read_results, summarize
from collabzoo.bench.seed_effects import Effect, SeedSpread, effects, p_cell, trained_pairs


def read_folder(folder: Path, readings: tuple[str, ...] = ()) -> dict[str, Any]:
    """Everything the docs need from one reproduction folder, as plain JSON; `readings`: the
    episode readings to compare beside the task's columns (`reading_effects`)."""
    plan = json.loads((folder / "plan.json").read_text(encoding="utf-8"))
    first = plan[0]["run"]
    rows: dict[tuple[str, str], dict[str, Any]] = {}
    documents: dict[tuple[str, str], dict[int, dict[str, Any]]] = {}
    unfinished = []
    for entry in plan:
        run, where = entry["run"], folder / entry["folder"]
        key = (run["task"], run["row"]["name"])
        row = rows.setdefault(
            key,
            {
                "task": run["task"],
                "row": run["row"]["name"],
                "protocol": run["row"]["protocol"],
                "learner": run["row"]["learner"],
                "updates": (run.get("train") or {}).get("updates"),
                "seeds": {},
            },
        )
        done_path = where / "done.json"
        if not done_path.is_file():
            failed = where / "failed.json"
            reason = "not run"
            if failed.is_file():
                reason = json.loads(failed.read_text(encoding="utf-8"))["error"]
            unfinished.append({"task": run["task"], "row": row["row"], "seed": run["seed"]})
            unfinished[-1]["reason"] = reason
            continue
        done = json.loads(done_path.read_text(encoding="utf-8"))
        try:
            document = read_results(where / done["results"])
        except ResultsError as error:
            reason = f"results unreadable: {error}"
            unfinished.append({"task": run["task"], "row": row["row"], "seed": run["seed"]})
            unfinished[-1]["reason"] = reason
            continue
        documents.setdefault(key, {})[run["seed"]] = document
        summary = summarize(document)
        names = [TIME, COST, *(c.name for c in task_columns(run["task"]).columns)]
        curve = []
        metrics = where / "train" / "metrics.jsonl"
        if metrics.is_file():  # a run cut and resumed redid the updates past its checkpoint
            for record in read_metrics(metrics, drop_rewound=True):
                point = [record.get("env_steps"), record.get("mean_return")]
                if None not in point:  # an update with nothing to learn (no pairs) logs neither
                    curve.append(point)
        row["seeds"][str(run["seed"])] = {
            "episodes": summary["episodes"],
            "means": {n: (summary.get(n) or {}).get("mean") for n in names},
            "seconds": done.get("seconds"),
            "env_steps": (done.get("train") or {}).get("env_steps"),
            "curve": curve,
        }
    order = [(r["task"], r["row"], r["protocol"], r["learner"] is not None) for r in rows.values()]
    found = effects(documents, order)
    read = reading_effects(documents, order, readings)
    bench = first["bench"]
    return {
        "settings": {
            "models": first["models"],
            "sampling": bench["sampling"],
            "episodes": bench["episodes"],
            "split": bench["split"],
            "seeds": sorted({e["run"]["seed"] for e in plan}),
            "tasks": list(dict.fromkeys(e["run"]["task"] for e in plan)),
            "trained": {  # each trained row's learner, updates and config, as planned
                e["run"]["row"]["name"]: e["run"]["train"] for e in plan if e["run"].get("train")
            },
        },
        "rows": list(rows.values()),
        "effects": [e.as_dict() for e in found],
        **({"readings": [e.as_dict() for e in read]} if readings else {}),
        "unfinished": unfinished,
    }


def episode_reading(episode: dict[str, Any], name: str) -> float | None:
    """An episode's `final_reward`, or its `final_metrics[name]`; None where it has neither."""
    value = episode.get(name) if name == "final_reward" else episode["final_metrics"].get(name)
    return None if value is None else float(value)


def reading_effects(
    documents: dict[tuple[str, str], dict[int, dict[str, Any]]],
    order: list[tuple[str, str, str, bool]],
    names: tuple[str, ...],
) -> list[Effect]:
    """Each trained row against its untrained row (`trained_pairs`, as `effects` pairs them) on
    each episode reading in `names`, higher taken as better."""
    found = []
    for task, row, baseline in trained_pairs(order):
        for name in names:
            sides = []
            for key in ((task, row), (task, baseline)):
                per_seed, pooled = [], []
                for _, document in sorted(documents.get(key, {}).items()):
                    values = [episode_reading(e, name) for e in document.get("episodes", [])]
                    kept = [v for v in values if v is not None and math.isfinite(v)]
                    if kept:
                        per_seed.append(statistics.fmean(kept))
                        pooled += kept
                sides.append((SeedSpread(tuple(per_seed)), tuple(pooled)))
            (mine, mine_episodes), (theirs, their_episodes) = sides
            found.append(
                Effect(task, name, True, row, baseline, mine, theirs, mine_episodes, their_episodes)
            )
    return found


def _spread(values: list[float], digits: int = 1) -> str:
    kept = [v for v in values if v is not None and not math.isnan(v)]
    if not kept:
        return "-"
    if len(kept) == 1:
        return f"{kept[0]:.{digits}f}"
    return f"{statistics.fmean(kept):.{digits}f} ± {statistics.stdev(kept):.{digits}f}"


def reproduction_table(results: dict[str, Any]) -> str:
    """Every row on every task: each score column, Time and Cost as mean ± sd over seeds (each
    seed's mean over its episodes), and the wall time of one run (training and bench)."""
    body = []
    for row in results["rows"]:
        seeds = row["seeds"]
        if not seeds:
            continue
        names = [c.name for c in task_columns(row["task"]).columns]
        scores = ", ".join(f"{n} {_spread([s['means'][n] for s in seeds.values()])}" for n in names)
        training = f"{row['learner']} × {row['updates']}" if row["learner"] else "-"
        body.append(
            [
                row["task"],
                row["row"],
                row["protocol"],
                training,
                str(len(seeds)),
                scores,
                _spread([s["means"][TIME] for s in seeds.values()]),
                _spread([s["means"][COST] for s in seeds.values()], 0),
                _spread([s["seconds"] for s in seeds.values()], 0),
            ]
        )
    header = [
        "Task",
        "Row",
        "Protocol",
        "Training (updates)",
        "Seeds",
        "Scores (%, each column by name)",
        "Time (s / episode)",
        "Cost (tokens / episode)",
        "Wall time (s / run)",
    ]
    return markdown_table(header, body, "lllllrrrr")


def moved_table(results: dict[str, Any]) -> str:
    """Which trained rows moved which metric beyond the seeds' spread, with the permutation
    test over their episodes; a row no seed of which finished is left to the list of runs not
    finished."""
    return effect_table(results["effects"], "Metric", digits=1)


def readings_table(results: dict[str, Any]) -> str:
    """`moved_table` for the episode readings (`--readings`), to three decimals."""
    return effect_table(results.get("readings", []), "Reading", digits=3)


def effect_table(items: list[dict[str, Any]], measure: str, digits: int) -> str:
    """The rows of `moved_table` and `readings_table`: each effect (as `Effect.as_dict` wrote
    it) with a trained seed, its cells to `digits` decimals; `measure` heads the metric's
    column."""
    body = []
    for item in items:
        if not item["trained"]:
            continue
        trained, untrained = (
            SeedSpread(tuple(item["trained"])),
            SeedSpread(tuple(item["untrained"])),
        )
        difference = trained.mean - untrained.mean
        body.append(
            [
                item["task"],
                item["metric"],
                item["row"],
                item["baseline"],
                untrained.cell(digits),
                trained.cell(digits),
                "-" if math.isnan(difference) else f"{difference:+.{digits}f}",
                item["verdict"],
                p_cell(item.get("p_episodes", math.nan)),
            ]
        )
    header = [
        "Task",
        measure,
        "Row",
        "Against",
        "Untrained",
        "Trained",
        "Difference",
        "Verdict (seeds)",
        "p (episodes)",
    ]
    return markdown_table(header, body, "llllrrrlr")


SECTION = "The papers' table on this machine"


def headline(results: dict[str, Any]) -> dict[str, Any]:
    """The summary's row: MAGRPO's effect on the first task's metric against the untrained team
    of its protocol, or which rows moved where MAGRPO was not run; named and linked as the
    file's `summary_name` and `section` say (the main table's by default)."""
    benchmark = results.get("summary_name", "The papers' table")
    section = results.get("section", SECTION)
    found = [e for e in results["effects"] if e["row"] == "MAGRPO" and e["trained"]]
    models = ", ".join(results["settings"]["models"])
    if not found:
        figure = f"{models}: no MAGRPO row finished"
    else:
        item = found[0]
        trained, untrained = (
            SeedSpread(tuple(item["trained"])),
            SeedSpread(tuple(item["untrained"])),
        )
        ran = {e["row"] for e in results["effects"] if e["trained"]}
        moved = {e["row"] for e in results["effects"] if e["verdict"] == "moved: better"}
        figure = (
            f"{models}, {item['task']} {item['metric']}: MAGRPO {trained.cell()} against the "
            f"untrained {item['baseline']} team's {untrained.cell()}; {len(moved)} of "
            f"{len(ran)} trained rows that ran moved a metric beyond the seeds' spread"
        )
    return {"benchmark": benchmark, "figure": figure, "ratio": None, "section": section}


def plot(results: dict[str, Any], folder: Path, name: str) -> list[Path]:
    """One PNG per task: each trained row's training mean return against env steps, mean over
    its seeds (thin lines: each seed)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    written = []
    for task in results["settings"]["tasks"]:
        trained = [r for r in results["rows"] if r["task"] == task and r["learner"]]
        if not trained:
            continue
        figure, axis = plt.subplots(figsize=(7, 4))
        for index, row in enumerate(trained):
            colour = f"C{index % 10}"
            curves = [s["curve"] for s in row["seeds"].values() if s["curve"]]
            for curve in curves:
                axis.plot(*zip(*curve, strict=True), color=colour, alpha=0.25, linewidth=0.8)
            if curves:
                length = min(len(c) for c in curves)
                steps = [curves[0][k][0] for k in range(length)]
                means = [statistics.fmean(c[k][1] for c in curves) for k in range(length)]
                axis.plot(steps, means, color=colour, marker="o", label=row["row"])
        models = ", ".join(results["settings"]["models"])
        axis.set_title(f"{task}: training mean return per update ({models})")
        axis.set_xlabel("environment steps")
        axis.set_ylabel("mean return of the update's rollouts")
        axis.legend(fontsize=7)
        figure.tight_layout()
        path = folder / f"reproduce_{name}_{task}.png"
        folder.mkdir(parents=True, exist_ok=True)
        figure.savefig(path, dpi=110)
        plt.close(figure)
        written.append(path)
    return written


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("folder", nargs="?", type=Path, help="a `collabzoo reproduce` --output")
    parser.add_argument("--json", nargs="?", const="", default=None)
    parser.add_argument("--plot", type=Path)
    parser.add_argument("--name", default="smollm2")
    parser.add_argument("--from-json", type=Path)
    parser.add_argument("--note", default="", help="how the runs were made (kept in the file)")
    parser.add_argument("--benchmark", default="The papers' table", help="the summary's name")
    parser.add_argument("--section", default=SECTION, help="the Performance page's heading")
    parser.add_argument(
        "--readings",
        default="",
        help="episode readings to compare too, comma-separated: final_reward or a name of the "
        "episodes' final_metrics (higher taken as better)",
    )
    args = parser.parse_args(argv)
    if args.from_json:
        results = load_results(args.from_json)
    elif args.folder:
        results = read_folder(args.folder, tuple(n for n in args.readings.split(",") if n))
    else:
        parser.error("give a reproduction folder, or --from-json")
    print(reproduction_table(results))
    print()
    print(moved_table(results))
    if results.get("readings"):
        print()
        print(readings_table(results))
    if args.json is not None and not args.from_json:
        if args.benchmark != "The papers' table" or args.section != SECTION:
            results.update(summary_name=args.benchmark, section=args.section)
        results["headline"] = headline(results)
        results["note"] = args.note
        write_results(args.json or results_path(f"reproduce_{args.name}"), results, argv)
    if args.plot:
        for path in plot(results, args.plot, args.name):
            print(f"plot written to {path}")


if __name__ == "__main__":
    main()

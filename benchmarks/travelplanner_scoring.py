"""TravelPlanner scoring speed: collabzoo's TravelPlanner reward against the reference's own
reward code, on the same answer pairs, side by side in one run.

The pairs are tests/data/travelplanner_conformance.json's (285 pairs on the 45 shipped train
queries: slot-split annotated plans and their perturbations, under both caps), rebuilt from
their recipes by benchmarks/travelplanner_conformance.py. The reference is imported from a
checkout of OpenMLRL/LLM_Collab_Travel (`--reference`): `score_single_turn_response`, given each
pair and its row as its trainer does (the row normalised by its own loader; for the corrected
cap, its two merger calls given `capacities=`). collabzoo's is `score_travel` as the env calls
it, on the query's `TravelTask`, which reads its catalog, scaffold and tables once and keeps
them (a query is scored many times in training), with TravelPlanner's own checks of the plan
computed too, which the reference does not compute. `reward only` leaves those checks out.
`fresh` is each with nothing kept between pairs: a new `TravelTask` per pair for collabzoo,
the reference's caches cleared before each pair. Every pass scores every pair once; passes of
the five alternate, `--rounds` times each, and each reports its median.

    python benchmarks/travelplanner_scoring.py --reference CHECKOUT [--data DIR] [--rounds 5]
        [--json [out.json]]

`--json` alone writes benchmarks/results/travelplanner_scoring.json, from which
`travelplanner_scoring_table` builds the Performance page's table.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import platform
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
import travelplanner_conformance as conformance
from results_table import markdown_table, results_path, write_results
from side_by_side import headline_against_reference, medians, time_rounds, timed

from collabzoo.envs.records import load_records
from collabzoo.tasks.travelplanner.envs.data import tasks_from_records
from collabzoo.tasks.travelplanner.rewards import TravelTask, score_travel

REPOSITORY = Path(__file__).resolve().parents[1]
WAYS = ("reference", "collabzoo", "collabzoo reward only", "reference fresh", "collabzoo fresh")
FIELDS = [f.name for f in dataclasses.fields(TravelTask)]


def load_pairs(data: Path, normalise: Callable[..., dict]) -> list[dict[str, Any]]:
    cases = conformance.json.loads(
        (REPOSITORY / "tests" / "data" / "travelplanner_conformance.json").read_text()
    )["cases"]
    tasks = {t.task_id: t for t in tasks_from_records(load_records(data), data.name)}
    items = {
        t.task_id: normalise(conformance.hub_row(t), i, source_split="train")
        for i, t in enumerate(tasks.values())
    }
    return [
        {
            "task": tasks[c["task"]],
            "item": items[c["task"]],
            "answers": conformance.answers_for(tasks[c["task"]], c["recipe"]),
            "capacity": c["capacity"],
        }
        for c in cases
    ]


def fresh_task(task: TravelTask) -> TravelTask:
    """The same query with nothing derived from it yet."""
    return TravelTask(**{name: getattr(task, name) for name in FIELDS})


def passes(pairs: list[dict[str, Any]], reference: Path) -> dict[str, Callable[[], None]]:
    score, _, _ = conformance.reference_scorer(reference)
    evaluator = sys.modules["single_turn.rewards.reference_evaluator"]
    shaping = sys.modules["single_turn.rewards.reward_shaping"]

    def reference_pass() -> None:
        for p in pairs:
            score(p["answers"], p["item"], p["capacity"])

    def reference_fresh() -> None:
        for p in pairs:
            evaluator.parse_reference_catalog.cache_clear()
            shaping._reference_ngrams.cache_clear()
            score(p["answers"], p["item"], p["capacity"])

    def ours(official: bool) -> Callable[[], None]:
        def run() -> None:
            for p in pairs:
                score_travel(p["task"], p["answers"], capacity=p["capacity"], official=official)

        return run

    def ours_fresh() -> None:
        for p in pairs:
            score_travel(fresh_task(p["task"]), p["answers"], capacity=p["capacity"])

    return dict(
        zip(
            WAYS,
            (reference_pass, ours(True), ours(False), reference_fresh, ours_fresh),
            strict=True,
        )
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--reference", required=True, type=Path, help="LLM_Collab_Travel checkout")
    shared = Path(os.environ.get("COLLABZOO_SHARED_DATA", REPOSITORY.parent / "shared" / "data"))
    parser.add_argument("--data", type=Path, default=shared / "travelplanner")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument(
        "--json",
        nargs="?",
        const=str(results_path("travelplanner_scoring")),
        help="write the results here (alone: benchmarks/results/travelplanner_scoring.json)",
    )
    args = parser.parse_args(argv)
    reference = args.reference.resolve()
    sys.path.insert(0, str(reference))
    from single_turn.data import normalize_travelplanner_row

    pairs = load_pairs(args.data / conformance.DATA_FILE, normalize_travelplanner_row)
    runs = passes(pairs, reference)
    for run in runs.values():  # warm-up: imports, and each side's per-query caches
        run()
    seconds = time_rounds(WAYS, args.rounds, lambda way: timed(runs[way]))
    report = {
        "pairs": len(pairs),
        "queries": len({p["task"].task_id for p in pairs}),
        "rounds": args.rounds,
        "python": platform.python_version(),
        "seconds": seconds,
    }
    print(travelplanner_scoring_table(report))
    if args.json:
        write_results(args.json, {"headline": headline(report), **report}, argv)
    return 0


# ----- the Performance page's table --------------------------------------------------------------
def travelplanner_scoring_table(results: dict[str, Any]) -> str:
    """Each way's median pass, per pair, and the reference's time over it."""
    pairs = results["pairs"]
    median = medians(results["seconds"])
    cells = []
    for way in WAYS:
        against = median["reference fresh" if "fresh" in way else "reference"]
        cells.append(
            [
                way,
                f"{median[way] * 1e3:.0f} ms",
                f"{median[way] / pairs * 1e6:,.0f} µs",
                "" if way.startswith("reference") else f"{against / median[way]:.2f}×",
            ]
        )
    header = ["scoring", f"a pass ({pairs} pairs)", "a pair", "the reference's time over it"]
    return markdown_table(header, cells, "lrrr")


def headline(results: dict[str, Any]) -> dict[str, Any]:
    pairs = results["pairs"]
    return headline_against_reference(
        results,
        "TravelPlanner scoring",
        "collabzoo",
        lambda reference, ours: (
            f"{ours / pairs * 1e6:.0f} µs a pair against the reference's "
            f"{reference / pairs * 1e6:.0f} µs, TravelPlanner's own checks included"
        ),
    )


if __name__ == "__main__":
    raise SystemExit(main())

"""ClassEval episodes per second: collabzoo's sandbox pool against the reference's own test
runner, on the same answer pairs, side by side in one run.

An episode is two turns on one of the 100 tasks, each turn scored from a fresh build: turn 1 is
the canonical solution split by the reference's rule, turn 2 the same answers revised (a
comment added, so the program differs and no cache of either side can answer it). Every
program runs ClassEval's unittest suites under the reference's limits (40 s a test, three
timed-out tests, 125 s a run).

- reference: OpenMLRL/LLM_Collab_Code_Completion's `get_reward_function` (`--reference`, a
  checkout), scoring each turn's batch as its trainer does: one child Python per program, one
  program after another. It runs inside one container of ClassEval's sandbox image, so that it
  has the same Python and packages as the pool; its test cache is emptied every round.
- collabzoo pool: `evaluate_batch` on a Docker pool of `--workers` containers (the pool's
  default on this machine: one per core), each turn's batch in one `run_many` call, as a
  trainer scores a batch of episodes.
- collabzoo pool, one program at a time: the same pool given one program per call (an env
  stepped alone).

Both sides give the same rewards, checked before the timing on every task whose tests depend
only on the answer. Rounds alternate which side goes first; each side reports its median.

    python benchmarks/classeval_throughput.py --reference CHECKOUT [--rounds 3] [--json]

`--json` alone writes benchmarks/results/classeval_throughput.json, from which
`classeval_throughput_table` builds the Performance page's table.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from classeval_conformance import (
    MACHINE_DEPENDENT,
    REFERENCE,
    classeval_image,
    reference_commit,
    run_in_image,
)
from results_table import markdown_table, results_path, write_results
from side_by_side import headline_against_reference, medians, speed_rows, time_rounds

from collabzoo.sandbox import get_sandbox
from collabzoo.tasks.classeval.rewards import ClassTask, evaluate_batch
from collabzoo.tasks.classeval.rewards.harness import SANDBOX_PACKAGES
from collabzoo.tasks.classeval.teams import oracle_answers

REPOSITORY = Path(__file__).resolve().parents[1]
DATA = Path(
    os.environ.get("COLLABZOO_SHARED_DATA", str(REPOSITORY.parent / "shared" / "data")),
    "classeval",
    "ClassEval_data.json",
)
WAYS = ("reference", "collabzoo pool", "collabzoo pool, one program at a time")
TOLERANCE = 1e-6

DRIVER = r"""
import json, sys, time
sys.path.insert(0, "/ref")
from LLM_Collab_Code_Completion.rewards import CE_reward
from LLM_Collab_Code_Completion.train.strategies import ParamCountStrategy

CE_reward.VERBOSE = False
io = json.load(open(sys.argv[1]))
reward = CE_reward.get_reward_function(ParamCountStrategy(num_agents=2, seed=0), 2)
rounds = []
for _ in range(io["rounds"]):
    CE_reward._TEST_CACHE.clear()
    started = time.perf_counter()
    totals = [reward(t["a0"], t["a1"], batch_items=io["rows"]) for t in io["turns"]]
    rounds.append({"seconds": time.perf_counter() - started, "totals": totals})
json.dump(rounds, open(sys.argv[2], "w"))
"""


def episode_turns(rows: list[dict[str, Any]]) -> list[dict[str, list[str]]]:
    """Each turn's answers for every task: the solution split, then the same revised."""
    first = [oracle_answers(ClassTask.from_record(r)) for r in rows]
    revised = [tuple(a + "\n    # revised" if a else a for a in pair) for pair in first]
    return [{"a0": [p[0] for p in t], "a1": [p[1] for p in t]} for t in (first, revised)]


def run_reference(
    reference: Path, image: str, rows: list[dict[str, Any]], turns: list[Any], rounds: int
) -> list[dict[str, Any]]:
    """The reference's rounds, timed inside one container of `image` (its start not timed)."""
    return run_in_image(reference, image, DRIVER, {"rows": rows, "turns": turns, "rounds": rounds})


def run_ours(
    sandbox: Any, tasks: list[ClassTask], turns: list[Any], one_at_a_time: bool
) -> tuple[float, list[list[float]]]:
    """One pass of every episode's two turns: seconds, and each turn's totals."""
    started = time.perf_counter()
    totals = []
    for turn in turns:
        pairs = list(zip(tasks, turn["a0"], turn["a1"], strict=True))
        if one_at_a_time:
            outcomes = [evaluate_batch([p], sandbox)[0] for p in pairs]
        else:
            outcomes = evaluate_batch(pairs, sandbox)
        totals.append([o.breakdown.total for o in outcomes])
    return time.perf_counter() - started, totals


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--reference", type=Path, required=True, help="a checkout of " + REFERENCE)
    parser.add_argument("--data", type=Path, default=DATA, help="ClassEval_data.json")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--workers", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--limit", type=int, default=None, help="the first N tasks only (a try)")
    parser.add_argument(
        "--json",
        nargs="?",
        const=str(results_path("classeval_throughput")),
        help="write the results here (alone: benchmarks/results/classeval_throughput.json)",
    )
    args = parser.parse_args(argv)
    rows = json.loads(args.data.read_text())[: args.limit]
    tasks = [ClassTask.from_record(r) for r in rows]
    turns = episode_turns(rows)
    image = classeval_image()
    compared = set(range(len(rows))) - set(MACHINE_DEPENDENT)
    totals: dict[str, list[list[float]]] = {}  # the round's latest, the reference's and ours

    def check_round(_: int) -> None:
        differing = [
            (turn, task)
            for turn in range(len(turns))
            for task in sorted(compared)
            if abs(totals["reference"][turn][task] - totals["ours"][turn][task]) > TOLERANCE
        ]
        if differing:
            raise SystemExit(f"the rewards differ on (turn, task) {differing}")

    with get_sandbox("docker", size=args.workers, packages=SANDBOX_PACKAGES) as sandbox:

        def run(way: str) -> float:
            if way == "reference":
                ran = run_reference(args.reference, image, rows, turns, 1)[0]
                totals["reference"] = ran["totals"]
                return ran["seconds"]
            took, totals["ours"] = run_ours(sandbox, tasks, turns, way != "collabzoo pool")
            return took

        warm_up = [{k: v[:4] for k, v in turns[0].items()}]  # the containers, started
        run_ours(sandbox, tasks[:4], warm_up, one_at_a_time=False)
        seconds = time_rounds(WAYS, args.rounds, run, "reverse", after_round=check_round)
    episodes = len(rows)
    median = medians(seconds)
    for way in WAYS:
        print(f"{way}: {median[way]:.1f} s for {episodes} episodes, "
              f"{episodes / median[way]:.2f} episodes/s")  # fmt: skip
    if args.json:
        report = {
            "episodes": episodes,
            "programs": episodes * len(turns),
            "rounds": args.rounds,
            "workers": args.workers,
            "python": platform.python_version(),
            "reference": f"{REFERENCE}@{reference_commit(args.reference)[:7]} "
            "rewards/CE_reward.py (get_reward_function)",
            "image_packages": list(SANDBOX_PACKAGES),
            "compared_tasks": len(compared),
            "seconds": seconds,
        }
        write_results(args.json, {"headline": headline(report), **report}, argv)
    return 0


# ----- the Performance page's table --------------------------------------------------------------
def classeval_throughput_table(results: dict[str, Any]) -> str:
    """Each way's median pass over the episodes, episodes a second, and the speed against the
    reference's."""
    episodes = results["episodes"]
    cells = speed_rows(
        results["seconds"], WAYS, lambda median: [f"{median:.1f} s", f"{episodes / median:.2f}"]
    )
    header = [
        "runner",
        f"{episodes} episodes (median of {results['rounds']})",
        "episodes/s",
        "speed",
    ]
    return markdown_table(header, cells, "lrrr")


def headline(results: dict[str, Any]) -> dict[str, Any]:
    episodes = results["episodes"]
    return headline_against_reference(
        results,
        "ClassEval episodes",
        "collabzoo pool",
        lambda reference, ours: (
            f"the sandbox pool {episodes / ours:.2f} episodes/s, the "
            f"reference's runner {episodes / reference:.2f}"
        ),
    )


if __name__ == "__main__":
    raise SystemExit(main())

"""Actor-critic loss passes in prompt order and in shuffled order, on one update's samples.

An actor-critic update (IAC, IPPO, CC) shuffles its samples into mini-batches and scores each
in chunks of `logprob_batch_size`. Shuffled, the K first-turn branches of a state land in
different chunks, and each chunk runs their shared prompt again (and the critic values the same
state again); `group_by_prompt` (the default) sorts each mini-batch by prompt first, which
changes no gradient (`tests/test_actor_critic.py`). This script builds the trainer that
`benchmarks/learn_real_model.py` runs (its recipe, its task sizes), rolls out one update, and
then times the learner's loss passes (`learn`: scoring, critic values, backward, optimizer
steps) on those same samples in both orders, alternating, `--rounds` times each. It also counts
the token positions the loss passes embed (padding included), the work the order changes:
fixed in prompt order, and different for each shuffle. Each pass also steps the optimizers,
so later passes start from other weights: the same work on the same samples.

    python benchmarks/prompt_order.py [--learner iac] [--task mbpp] [--data-dir DIR]
        [--threads 2] [--rounds 2] [--json [out.json]]

IPPO's update is `ppo_epochs` (4) such passes, IAC's and CC's one: `--learner iac` shows the
change in a quarter of IPPO's time. `--json` alone writes benchmarks/results/prompt_order.json, from
which `prompt_order_table` builds the Performance page's table.
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
import torch
from learn_real_model import TASKS, Recipe, build_trainer, make_job
from results_table import markdown_table, results_path, thousands, write_results

ORDERS = {False: "shuffled", True: "prompt order"}


def timed_learn(trainer: Any, roots: list, grouped: bool, positions: list[int]) -> dict:
    """One `learn` on `roots` in the given order: seconds and embedded token positions."""
    trainer.args.group_by_prompt = grouped
    positions[0] = 0
    started = time.perf_counter()
    metrics = trainer.learn(roots)
    seconds = time.perf_counter() - started
    return {"seconds": seconds, "positions": positions[0], "steps": metrics["optimizer_steps"]}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--learner", default="iac", choices=("iac", "ippo", "cc"))
    parser.add_argument("--task", default="mbpp", choices=sorted(TASKS))
    parser.add_argument("--model", default=Recipe.model)
    parser.add_argument("--data-dir", default=os.environ.get("COLLABZOO_SHARED_DATA"))
    parser.add_argument("--threads", type=int, default=torch.get_num_threads())
    parser.add_argument("--rounds", type=int, default=2, help="learn passes per order")
    parser.add_argument("--output", default="runs/prompt_order")
    parser.add_argument(
        "--json",
        nargs="?",
        const=str(results_path("prompt_order")),
        help="write the results here (alone: benchmarks/results/prompt_order.json)",
    )
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    job = make_job(
        args.task,
        args.learner,
        0,
        Recipe(model=args.model),
        args.data_dir,
        args.threads,
        args.output,
    )
    trainer = build_trainer(job)
    positions = [0]

    def count(module: Any, inputs: Any, output: torch.Tensor) -> None:
        positions[0] += output.shape[0] * output.shape[1]

    base = trainer.policies[trainer.agents[0]].model
    base.get_input_embeddings().register_forward_hook(count)
    try:
        started = time.perf_counter()
        roots = trainer.rollout_update()
        rollout = time.perf_counter() - started
        runs: dict[bool, list[dict]] = {False: [], True: []}
        for round_ in range(args.rounds):  # F T, T F, ...: neither order always goes first
            for grouped in (False, True) if round_ % 2 == 0 else (True, False):
                runs[grouped].append(timed_learn(trainer, roots, grouped, positions))
                print(ORDERS[grouped], runs[grouped][-1], flush=True)
    finally:
        trainer.close()
    seconds = {g: statistics.median(r["seconds"] for r in runs[g]) for g in runs}
    tokens = {g: ", ".join(f"{r['positions']:,}" for r in runs[g]) for g in runs}  # per run
    print(f"{args.learner} on {args.task}, {args.model}, {args.threads} threads")
    print(f"rollout {rollout:.0f} s (once); then the loss passes on its samples")
    print("| order | loss passes (median) | token positions embedded |\n|---|---:|---:|")
    for grouped, name in ORDERS.items():
        print(f"| {name} | {seconds[grouped]:.1f} s | {tokens[grouped]} |")
    ratio = seconds[False] / seconds[True]
    print(f"prompt order: {ratio:.2f}x faster (medians)")
    if args.json:
        report = {
            "learner": args.learner,
            "task": args.task,
            "model": args.model,
            "threads": args.threads,
            "python": platform.python_version(),
            "rollout_seconds": rollout,
            "epochs": trainer.rule.epochs,
            "runs": {ORDERS[g]: r for g, r in runs.items()},
            "speedup": ratio,
        }
        write_results(args.json, {"headline": headline(report), **report})
    return 0


# ----- the Performance page's table --------------------------------------------------------------
def prompt_order_table(results: dict[str, Any]) -> str:
    """Each order's passes in the order they ran, their median, and the positions embedded."""
    cells = []
    for name in ORDERS.values():
        runs = results["runs"][name]
        seconds = ", ".join(f"{r['seconds']:.0f}" for r in runs)
        median = statistics.median(r["seconds"] for r in runs)
        positions = [r["positions"] for r in runs]
        if len(set(positions)) == 1:
            tokens = f"{thousands(positions[0])} " + (
                "both times" if len(runs) == 2 else "each time"
            )
        else:
            tokens = " and ".join(thousands(p) for p in positions)
            tokens += " (each shuffle pads differently)"
        cells.append([name, f"{seconds} s ({median:.0f} s)", tokens])
    count = len(results["runs"][ORDERS[False]])
    header = ["order", f"loss passes, {count} runs (median)", "token positions embedded"]
    return markdown_table(header, cells, "lrr")


def headline(results: dict[str, Any]) -> dict[str, Any]:
    shuffled, grouped = (
        statistics.median(r["seconds"] for r in results["runs"][name]) for name in ORDERS.values()
    )
    learner = results["learner"].upper()
    return {
        "benchmark": "Scoring in prompt order",
        "figure": f"{learner}'s loss passes on {results['task'].upper()}: {grouped:.0f} s in "
        f"prompt order against {shuffled:.0f} s shuffled",
        "ratio": round(shuffled / grouped, 2),
        "section": "Scoring in prompt order",
    }


if __name__ == "__main__":
    raise SystemExit(main())

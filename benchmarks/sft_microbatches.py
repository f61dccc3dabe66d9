"""A warm start's steps in token-budget micro-batches and as whole padded batches, side by side.

With `max_tokens_per_microbatch`, `SupervisedTrainer` runs a step's rows in micro-batches of at
most that many token positions, shortest rows first, and adds up their gradients weighted by
completion tokens, so that the step is the whole batch's (`tests/test_warm_start.py`); without
it (the default), a whole batch pads every row to its longest: SmolLM2's StrBuild rows average
about 900 tokens and reach 2,100. This script
builds the warm start that `benchmarks/learn_building.py --model` runs (its LoRA team, its
noisy-oracle rows and sizes, gradient checkpointing), then times the forward and backward of the
same `--steps` batches both ways, alternating which goes first, and checks that the two
gradients agree. It counts the token positions each way embeds (padding included): the work
the budget removes.

    python benchmarks/sft_microbatches.py [--model smollm2-135m-instruct] [--steps 4]
        [--budget 1024] [--threads 2] [--json [out.json]]

`--json` alone writes benchmarks/results/sft_microbatches.json, from which `microbatch_table`
builds the Performance page's table.
"""

from __future__ import annotations

import argparse
import platform
import statistics
import sys
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

import torch
from learn_building import (
    PRETRAINED,
    SFT_MICROBATCH_TOKENS,
    TASKS,
    Recipe,
    demonstrations,
    env_kwargs,
    fresh_team,
    prompt_tokens,
)

from collabzoo.algos import SupervisedConfig, SupervisedTrainer
from collabzoo.algos.learners.supervised import microbatches

sys.path.insert(0, str(Path(__file__).resolve().parent))
from results_table import markdown_table, results_path, thousands, times, write_results

WAYS = {None: "whole batch", "budget": "micro-batches"}


def timed_step(trainer: Any, policy: Any, batch: list, positions: list[int]) -> dict[str, Any]:
    """One step's forward and backward: seconds, embedded token positions, the gradients."""
    positions[0] = 0
    started = time.perf_counter()
    loss = trainer.accumulate(policy, batch)
    seconds = time.perf_counter() - started
    gradients = [p.grad.clone() for p in policy.trainable_parameters()]
    policy.model.zero_grad(set_to_none=True)
    return {"seconds": seconds, "positions": positions[0], "loss": loss, "grads": gradients}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--model", default="smollm2-135m-instruct")
    parser.add_argument("--steps", type=int, default=4, help="batches timed each way")
    parser.add_argument("--budget", type=int, default=SFT_MICROBATCH_TOKENS)
    parser.add_argument("--threads", type=int, default=torch.get_num_threads())
    parser.add_argument("--work", default="runs/learn_building", help="learn_building's folder")
    parser.add_argument(
        "--json",
        nargs="?",
        const=str(results_path("sft_microbatches")),
        help="write the results here (alone: benchmarks/results/sft_microbatches.json)",
    )
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    task = TASKS["strbuild"]
    recipe = replace(Recipe(), model=args.model, **PRETRAINED)
    kwargs = env_kwargs(task, recipe, None)
    rows = demonstrations(task, recipe, kwargs, Path(args.work) / task.name / "data")
    policies = fresh_team(recipe, rows, prompt_tokens(task, recipe))
    trainers = {
        way: SupervisedTrainer(
            policies,
            rows,
            SupervisedConfig(
                output_dir=str(Path(args.work) / "sft_microbatches"),
                per_device_train_batch_size=recipe.sft_batch or task.sft_batch,
                max_steps=args.steps,
                device=recipe.device,
                gradient_checkpointing=recipe.sft_gradient_checkpointing,
                max_tokens_per_microbatch=None if way is None else args.budget,
            ),
        )
        for way in WAYS
    }
    policy = trainers[None].distinct[0]  # the first builder's adapter: the same in both
    batches = trainers[None]._batches(policy)
    positions = [0]

    def count(module: Any, inputs: Any, output: torch.Tensor) -> None:
        positions[0] += output.shape[0] * output.shape[1]

    policy.model.get_input_embeddings().register_forward_hook(count)
    runs: dict[Any, list[dict[str, Any]]] = {way: [] for way in WAYS}
    worst, shapes = 0.0, []
    for index, batch in enumerate(batches):  # W M, M W, ...: neither way always goes first
        for way in WAYS if index % 2 == 0 else reversed(WAYS):
            runs[way].append(timed_step(trainers[way], policy, batch, positions))
        whole, split = runs[None][-1], runs["budget"][-1]
        for a, b in zip(whole.pop("grads"), split.pop("grads"), strict=True):
            worst = max(worst, float((a - b).abs().max() / a.abs().max().clamp(min=1e-12)))
        lengths = sorted(len(p) + len(c) for p, c in batch)
        parts = len(microbatches(batch, args.budget))
        shapes.append({"lengths": lengths, "micro_batches": parts})
        print(f"batch {index}: rows {lengths} in {parts} micro-batches;", whole, split, flush=True)
    seconds = {way: sum(r["seconds"] for r in runs[way]) for way in WAYS}
    ratio = seconds[None] / seconds["budget"]
    medians = statistics.median(
        w["seconds"] / m["seconds"] for w, m in zip(runs[None], runs["budget"], strict=True)
    )
    print(f"{args.model} on StrBuild rows, {args.steps} batches, {args.threads} threads")
    print("| way | forward + backward, all batches | token positions embedded |\n|---|---:|---:|")
    for way, name in WAYS.items():
        tokens = sum(r["positions"] for r in runs[way])
        print(f"| {name} | {seconds[way]:.1f} s | {tokens:,} |")
    print(f"micro-batches of {args.budget} tokens: {ratio:.2f}x faster (median {medians:.2f}x)")
    print(f"largest gradient difference, relative to the largest gradient: {worst:.1e}")
    if args.json:
        report = {
            "model": args.model,
            "budget": args.budget,
            "threads": args.threads,
            "python": platform.python_version(),
            "batches": shapes,
            "runs": {WAYS[way]: r for way, r in runs.items()},
            "speedup": ratio,
            "median_batch_speedup": medians,
            "largest_relative_gradient_difference": worst,
        }
        write_results(args.json, {"headline": headline(report), **report})
    return 0


# ----- the Performance page's table --------------------------------------------------------------
ALL = {2: "both", 3: "all three", 4: "all four", 5: "all five"}


def microbatch_table(results: dict[str, Any]) -> str:
    """A row per timed batch (its rows' lengths), then the sums over all of them."""
    whole, split = results["runs"]["whole batch"], results["runs"]["micro-batches"]

    def row(name: str, a: list[dict[str, Any]], b: list[dict[str, Any]]) -> list[str]:
        positions = [thousands(sum(r["positions"] for r in way)) for way in (a, b)]
        return [
            name,
            f"{sum(r['seconds'] for r in a):.1f} s",
            f"{sum(r['seconds'] for r in b):.1f} s",
            " / ".join(positions),
        ]

    cells = [
        row(", ".join(thousands(n) for n in shape["lengths"]), [a], [b])
        for shape, a, b in zip(results["batches"], whole, split, strict=True)
    ]
    cells.append(row(ALL.get(len(whole), f"all {len(whole)}"), whole, split))
    header = [
        "batch (row lengths in tokens)",
        "whole batch",
        "micro-batches",
        "token positions, whole / micro",
    ]
    return markdown_table(header, cells, "lrrr")


def headline(results: dict[str, Any]) -> dict[str, Any]:
    whole, split = (
        sum(r["seconds"] for r in results["runs"][way]) for way in ("whole batch", "micro-batches")
    )
    return {
        "benchmark": "Warm-start steps in micro-batches",
        "figure": f"{len(results['batches'])} warm-start batches' forward and backward "
        f"{split:.1f} s in micro-batches against {whole:.1f} s whole (median batch "
        f"{times(results['median_batch_speedup'])})",
        "ratio": round(whole / split, 2),
        "section": "Warm-start steps in micro-batches",
    }


if __name__ == "__main__":
    raise SystemExit(main())

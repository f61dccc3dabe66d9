"""Warm start, then MARL on StrBuild and HouseBuild: every learner on the games' own metrics.

The pipeline a researcher runs before spending GPU hours, at CPU scale, on the real tasks with
the reference rewards (H = 4, the reference feedback and memory):

1. Episodes of a deliberately imperfect team: the scripted oracle with each answer line dropped
   with probability 0.3 (`scripted:noisy`), `--episodes` of them on the train split, written by
   `collabzoo export` as a Hugging Face dataset.
2. A supervised warm start (`SupervisedTrainer`) of a small model per agent: a Qwen2-shaped
   transformer of 1.9M parameters (4 layers of width 192) with a BPE tokenizer learnt from the
   dataset (`small_causal_lm`). One warm start per task: the common starting point of every
   run, as a pretrained model is in the papers. With `--model` (a folder or a short name such
   as smollm2-135m-instruct) the warm start trains a LoRA adapter per agent on that pretrained
   model instead (`PRETRAINED`'s sizes: its own tokens, LoRA learning rates), and the raw
   model and the warm start are each evaluated before any learner runs.
3. Each learner (MA-REINFORCE, MAGRPO, IAC, IPPO, CC) trained from it with the same settings
   (sampling at temperature 1 without top-k / top-p cuts, one learning rate for every actor and
   critic, the reference discount 0.9, each learner's own defaults otherwise) for the same
   number of environment steps, per seed.
4. The task's own metrics of the last turn (StrBuild: IoU and adjacency; HouseBuild: IoU and
   HP), the columns of the published table, over evaluation episodes that play every train
   target equally often (StrBuild's 8 words 4 times, HouseBuild's 8 houses once), at 0 and
   after every `--every` environment steps. The warm start's own score is each curve's first
   point.

    python benchmarks/learn_building.py [--tasks strbuild housebuild] [--learners cc magrpo]
        [--seeds 0 1 2] [--housebuild-data houses.json] [--json out.json] [--plot DIR]
    python benchmarks/learn_building.py --quick          # minutes: the whole pipeline, tiny
    python benchmarks/learn_building.py --tasks strbuild --model smollm2-135m-instruct
    python benchmarks/learn_building.py --tasks strbuild --model M --warm-only  # no learners
    python benchmarks/learn_building.py --from-json out.json --plot DIR   # re-plot only

Runs go to `--work` (runs/learn_building): each task's dataset, warm start and metrics. Each
(task, learner, seed) runs in its own process with one torch thread unless `--threads` says
otherwise, `--workers` at a time. Run it again and what is finished is read back: the dataset,
the warm start made with the same settings, and every run whose settings match and whose budget
reached this one's (its curve cut there). `--warm-only` stops after the warm starts and their
evaluations. `--device cuda` runs the warm start, the evaluations and every learner on a GPU, in
folders of their own (`<task>-cuda`): StrBuild needs no sandbox, and a real model's warm start
on it takes hours on a CPU.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

from provenance import provenance

LEARNERS = ("mareinforce", "magrpo", "iac", "ippo", "cc")
LABELS = {
    "warm": "warm start",
    "mareinforce": "MA-REINFORCE",
    "magrpo": "MAGRPO",
    "iac": "IAC",
    "ippo": "IPPO",
    "cc": "CC",
}
COLOURS = {
    "mareinforce": "#1f77b4",
    "magrpo": "#ff7f0e",
    "iac": "#2ca02c",
    "ippo": "#d62728",
    "cc": "#9467bd",
}
AGENTS = ("first_builder", "second_builder")


@dataclass(frozen=True)
class Task:
    """One game's settings: what to report and the sizes that fit its prompts and answers."""

    name: str
    metrics: tuple[str, ...]
    """The published table's columns, as the env's metric names (last turn)."""
    lower_is_better: tuple[str, ...]
    max_prompt_tokens: int
    """The policies' prompt budget: a later turn keeps its newest tokens (its last answer and
    the feedback); the first turn's prompt fits whole for StrBuild, its tail for HouseBuild."""
    max_new_tokens: int
    """Above the longest oracle answer in the task's tokens."""
    budget: int
    """Environment steps per run (a HouseBuild step costs about three of StrBuild's)."""
    every: int
    """Environment steps between evaluations."""
    eval_episodes: int
    """Every train target equally often: StrBuild's 8 words 4 times, HouseBuild's 8 houses once."""
    sft_steps: int
    sft_batch: int


TASKS = {
    "strbuild": Task(
        "strbuild", ("iou", "adjacency"), ("adjacency",), 256, 192, 960, 480, 32, 400, 16
    ),
    "housebuild": Task("housebuild", ("iou", "hp"), (), 384, 448, 160, 80, 8, 150, 8),
}
METRIC_LABELS = {"iou": "IoU %", "adjacency": "Adj % ↓", "hp": "HP %"}


@dataclass(frozen=True)
class Recipe:
    """Every size of the pipeline; `QUICK` is the same pipeline in a few minutes."""

    drop: float = 0.3
    """The demonstrator's chance of dropping each line of the oracle's answer."""
    episodes: int = 64
    """Demonstration episodes (train split)."""
    hidden_size: int = 192
    num_layers: int = 4
    vocab_size: int = 1024
    sft_steps: int | None = None
    """Warm-start optimiser steps; None: the task's."""
    sft_batch: int | None = None
    sft_learning_rate: float = 1e-3
    learning_rate: float = 3e-5
    """Every learner's actor and critic learning rate."""
    budget: int | None = None
    """Environment steps per run; None: the task's."""
    every: int | None = None
    """Environment steps between evaluations; None: the task's."""
    eval_episodes: int | None = None
    """Episodes per evaluation; None: the task's."""
    targets: tuple[str, ...] | None = None
    """StrBuild words to play instead of the reference train split (the quick run's)."""
    model: str | None = None
    """A pretrained causal LM warm-started as a LoRA team (an adapter per agent on one base);
    None: a small model per agent built from the dataset."""
    lora_rank: int = 8
    max_prompt_tokens: int | None = None
    """The policies' prompt budget; None: the task's (sized for the small model's tokens)."""
    max_new_tokens: int | None = None
    """None: the task's."""
    sft_gradient_checkpointing: bool = False
    device: str = "cpu"
    """Where the warm start, the evaluations and every run compute (`cpu`, `cuda`): a GPU draws
    other samples, so its runs have folders and keys of their own."""


QUICK = Recipe(
    episodes=8,
    hidden_size=64,
    num_layers=2,
    vocab_size=512,
    sft_steps=60,
    sft_batch=8,
    sft_learning_rate=1e-2,
    learning_rate=3e-4,
    budget=960,
    every=480,
    eval_episodes=16,
    targets=("I", "L"),
)


PRETRAINED = {
    "lora_rank": 8,
    "sft_learning_rate": 5e-4,
    "learning_rate": 5e-4,
    "sft_batch": 4,
    "sft_gradient_checkpointing": True,
    "max_prompt_tokens": 2048,
    "max_new_tokens": 256,
}
"""What `--model` changes: LoRA learning rates (the RL one is `learn_real_model`'s frozen
recipe), and sizes in a pretrained tokenizer's tokens (SmolLM2's: StrBuild prompts of 810 tokens
on average and 1,974 at most, oracle answers up to 208)."""
SFT_MICROBATCH_TOKENS = 1024
"""A pretrained model's warm-start micro-batches (`SupervisedConfig.max_tokens_per_microbatch`)."""


# ----- the pipeline -----------------------------------------------------------------------------
def prompt_tokens(task: Task, recipe: Recipe) -> int:
    return recipe.max_prompt_tokens or task.max_prompt_tokens


def new_tokens(task: Task, recipe: Recipe) -> int:
    return recipe.max_new_tokens or task.max_new_tokens


def env_kwargs(task: Task, recipe: Recipe, housebuild_data: str | None) -> dict[str, Any]:
    if task.name == "strbuild" and recipe.targets:
        return {"targets": list(recipe.targets)}
    if task.name == "housebuild" and housebuild_data:
        return {"data": housebuild_data}
    return {}


def demonstrations(task: Task, recipe: Recipe, kwargs: dict[str, Any], folder: Path) -> Any:
    """The noisy oracle's episodes, exported as `collabzoo export` writes them."""
    import datasets

    from collabzoo.cli import main as collabzoo

    if not (folder / "state.json").is_file():
        argv = ["export", task.name, "--team", f"scripted:noisy:{recipe.drop}"]
        argv += ["--episodes", str(recipe.episodes), "--split", "train", "-o", str(folder)]
        argv += ["--overwrite", "--no-progress"]
        for key, value in kwargs.items():
            argv += ["--env-arg", f"{key}={json.dumps(value)}"]
        if collabzoo(argv) != 0:
            raise RuntimeError(f"collabzoo {' '.join(argv)} failed")
    return datasets.load_from_disk(str(folder))


def fresh_team(recipe: Recipe, rows: Any, max_prompt_tokens: int) -> dict[str, Any]:
    """The team before its warm start: a small model per agent built from the dataset, or the
    pretrained `recipe.model` with a fresh LoRA adapter per agent."""
    from collabzoo.algos import LLMPolicy, load_causal_lm, lora_team
    from collabzoo.algos.policies.model_loading import small_causal_lm

    if recipe.model:
        policies = lora_team(*load_causal_lm(recipe.model), list(AGENTS), rank=recipe.lora_rank)
        for policy in policies.values():
            policy.max_prompt_tokens = max_prompt_tokens
        return policies
    texts = [*rows["prompt"], *rows["completion"]]
    policies = {}
    for index, agent in enumerate(AGENTS):
        model, tokenizer = small_causal_lm(
            texts,
            seed=index,
            vocab_size=recipe.vocab_size,
            hidden_size=recipe.hidden_size,
            num_layers=recipe.num_layers,
            intermediate_size=3 * recipe.hidden_size,
        )
        policies[agent] = LLMPolicy(model, tokenizer, max_prompt_tokens=max_prompt_tokens)
    return policies


def evaluate_team(
    task: Task, recipe: Recipe, kwargs: dict[str, Any], policies: dict[str, Any], folder: Path
) -> dict[str, float]:
    """The task's metrics (last turn) and return of a team over the evaluation episodes, as the
    learners' curves measure them (MAGRPO's `evaluate`, the runs' sampling)."""
    import collabzoo
    from collabzoo.algos import MAGRPOConfig, MAGRPOTrainer

    config = MAGRPOConfig(**learner_settings("magrpo", task, recipe, 0, folder))
    trainer = MAGRPOTrainer(
        lambda: collabzoo.make(task.name, **kwargs),
        policies,
        config,
        eval_env=lambda: every_target(collabzoo.make(task.name, **kwargs)),
    )
    try:
        found = trainer.evaluate(recipe.eval_episodes or task.eval_episodes)
    finally:
        trainer.close()
    point = {"mean_return": found["mean_return"]}
    point.update({m: found[f"final/{m}"] for m in task.metrics})
    return point


def saved_evaluation(
    path: Path, task: Task, recipe: Recipe, kwargs: dict[str, Any], policies: dict[str, Any]
) -> tuple[dict[str, float], float | None]:
    """`evaluate_team`'s result and the minutes it took, written to `path` as soon as it exists
    and read back on a rerun with the same task, model, device (`keyed_device`) and evaluation
    settings (the raw model's evaluation, which does not depend on the warm start's)."""
    key = jsonable(
        {
            "task": task.name,
            "kwargs": kwargs,
            "model": recipe.model,
            "episodes": recipe.eval_episodes or task.eval_episodes,
            "max_prompt_tokens": prompt_tokens(task, recipe),
            "max_new_tokens": new_tokens(task, recipe),
            **keyed_device(recipe),
        }
    )
    if path.is_file():
        saved = json.loads(path.read_text())
        if saved.get("key") == key:
            return saved["point"], saved.get("minutes")
    began = time.perf_counter()
    point = evaluate_team(task, recipe, kwargs, policies, path.parent / "eval")
    minutes = (time.perf_counter() - began) / 60
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"key": key, "point": point, "minutes": minutes}, indent=1))
    return point, minutes


def warm_start(
    task: Task, recipe: Recipe, rows: Any, folder: Path, kwargs: dict[str, Any]
) -> dict[str, Any]:
    """Fine-tune the fresh team (`fresh_team`) on its rows; saved to folder/final. A pretrained
    team is evaluated before and after (a small model knows nothing before)."""
    from collabzoo.algos import SupervisedConfig, SupervisedTrainer

    summary_file = folder / "summary.json"
    key = jsonable({"task": task.name, "kwargs": kwargs, "recipe": warm_recipe(recipe)})
    if summary_file.is_file():
        saved = json.loads(summary_file.read_text())
        if saved.pop("key", None) == key:
            return saved
    began = time.perf_counter()
    policies = fresh_team(recipe, rows, prompt_tokens(task, recipe))
    raw, parts = None, {}
    if recipe.model:  # about an hour on one core for SmolLM2 on StrBuild: kept once finished
        raw, parts["raw_evaluation"] = saved_evaluation(
            folder / "raw.json", task, recipe, kwargs, policies
        )
    steps = recipe.sft_steps or task.sft_steps
    config = SupervisedConfig(
        output_dir=str(folder),
        learning_rate=recipe.sft_learning_rate,
        lr_scheduler_type="cosine",
        warmup_steps=max(1, steps // 20),
        max_steps=steps,
        per_device_train_batch_size=recipe.sft_batch or task.sft_batch,
        logging_steps=max(1, steps // 20),
        device=recipe.device,
        gradient_checkpointing=recipe.sft_gradient_checkpointing,
        # a pretrained tokenizer's rows run from 300 to 2,100 tokens: micro-batches halve a step
        # (benchmarks/sft_microbatches.py) and change it only by rounding
        max_tokens_per_microbatch=SFT_MICROBATCH_TOKENS if recipe.model else None,
    )
    trainer = SupervisedTrainer(policies, rows, config)
    started = time.perf_counter()
    before = trainer.evaluate_loss()
    parts["loss_before"] = (time.perf_counter() - started) / 60
    trainer.train()
    parts["steps"] = (time.perf_counter() - started) / 60 - parts["loss_before"]
    after = trainer.evaluate_loss()
    seconds = time.perf_counter() - started
    parts["loss_after"] = seconds / 60 - parts["loss_before"] - parts["steps"]
    summary = {
        "loss_before": before,
        "loss_after": after,
        "seconds": seconds,
        "parameters": sum(p.numel() for p in policies[AGENTS[0]].model.parameters()),
        "vocabulary": len(policies[AGENTS[0]].tokenizer),
    }
    trainer.save(folder / "final")
    if recipe.model:
        summary["raw"] = raw
        evaluated = time.perf_counter()
        summary["warm"] = evaluate_team(task, recipe, kwargs, policies, folder / "eval")
        parts["warm_evaluation"] = (time.perf_counter() - evaluated) / 60
        summary["minutes_with_evaluations"] = (time.perf_counter() - began) / 60
    summary["part_minutes"] = parts
    summary_file.write_text(json.dumps({**summary, "key": key}, indent=2))
    return summary


def warm_recipe(recipe: Recipe) -> dict[str, Any]:
    """The recipe's fields a warm start depends on: all but the learners' (budget, evaluation
    interval, RL learning rate). A warm start of other settings is made again, not read back."""
    unkeyed = ("budget", "every", "learning_rate", "device")
    return {**{k: v for k, v in asdict(recipe).items() if k not in unkeyed}, **keyed_device(recipe)}


def keyed_device(recipe: Recipe) -> dict[str, str]:
    """The device as every saved result's key holds it: only off the CPU, so what was saved
    before the device was an option still reads back."""
    return {} if recipe.device == "cpu" else {"device": recipe.device}


def every_target(env: Any) -> Any:
    """The env with reset(seed) playing train target seed mod n: an evaluation's consecutive
    seeds visit every target equally often."""
    from pettingzoo.utils import BaseParallelWrapper

    class EveryTarget(BaseParallelWrapper):
        def reset(self, seed: int | None = None, options: dict | None = None) -> Any:
            count = len(self.env.unwrapped.items("train"))
            options = {**(options or {}), "task": (seed or 0) % count, "split": "train"}
            return self.env.reset(seed=seed, options=options)

    return EveryTarget(env)


def learner_settings(name: str, task: Task, recipe: Recipe, seed: int, output: Path) -> dict:
    """One learner's config: the shared settings, and the rollout shape of its family (about
    30 environment steps per update either way)."""
    settings: dict[str, Any] = {
        "output_dir": str(output),
        "seed": seed,
        "max_new_tokens": new_tokens(task, recipe),
        "temperature": 1.0,
        "top_p": 1.0,
        "top_k": None,
        "eval_num_samples": recipe.eval_episodes or task.eval_episodes,
        "tensorboard": False,
        "progress": False,
        "save_steps": 0,
        "device": recipe.device,
    }
    if name in ("mareinforce", "magrpo"):  # a full tree of branching 2 over 4 turns: 30 steps
        settings.update(
            agent_learning_rate=recipe.learning_rate, rollout_buffer_size=1, num_generations=2
        )
    else:  # 4 episodes of 2 branches of 4 turns: 32 steps
        settings.update(
            actor_learning_rate=recipe.learning_rate,
            critic_learning_rate=recipe.learning_rate,
            rollout_buffer_size=4,
            num_generations=2,
        )
    return settings


def settings_key(job: dict[str, Any]) -> dict[str, Any]:
    """What a run's curve depends on, but for its length: a finished longer run answers a shorter
    budget with its first points (the learners' learning rates are constant)."""
    task, recipe = TASKS[job["task"]], Recipe(**job["recipe"])
    fields = {k: v for k, v in asdict(recipe).items() if k not in ("budget", "device")}
    return {
        "task": {k: v for k, v in asdict(task).items() if k != "budget"},
        "recipe": {**fields, **keyed_device(recipe)},
        "every": recipe.every or task.every,
        **{k: job[k] for k in ("kwargs", "learner", "seed", "warm")},
    }


def jsonable(value: Any) -> Any:
    """The value as JSON gives it back (tuples as lists)."""
    return json.loads(json.dumps(value))


def finished(job: dict[str, Any], budget: int, every: int) -> dict[str, Any] | None:
    """The curve of an earlier run in the job's folder with these settings and at least this
    budget, cut at the budget; None if there is none (an interrupted run starts again)."""
    output = Path(job["output"])
    try:
        same = json.loads((output / "job.json").read_text()) == jsonable(settings_key(job))
        lines = (output / "metrics.jsonl").read_text().splitlines()
    except (OSError, ValueError):
        return None
    if not same or budget % every:
        return None
    points, seconds = [], 0.0
    for line in map(json.loads, lines):
        if "eval/env_steps" in line:
            points.append({k[5:]: v for k, v in line.items() if k.startswith("eval/")})
            seconds = line["time"]
            if points[-1]["env_steps"] >= budget:
                task, learner, seed = job["task"], job["learner"], job["seed"]
                return {
                    "task": task,
                    "learner": learner,
                    "seed": seed,
                    "points": points,
                    "seconds": seconds,
                }
    return None


def run(job: dict[str, Any]) -> dict[str, Any]:
    """One learner from the warm start: the last-turn metrics at 0, every `every` steps and at
    the end of the budget."""
    import torch

    import collabzoo
    from collabzoo.algos import LEARNERS as CLASSES
    from collabzoo.algos.policies.model_loading import load_saved_team
    from collabzoo.algos.runtime.run_log import RunLogger

    torch.set_num_threads(job["threads"] or 1)
    task, recipe = TASKS[job["task"]], Recipe(**job["recipe"])
    kwargs, name, seed = job["kwargs"], job["learner"], job["seed"]
    output = Path(job["output"])
    budget, every = recipe.budget or task.budget, recipe.every or task.every
    earlier = finished(job, budget, every)
    if earlier is not None:
        return earlier
    output.mkdir(parents=True, exist_ok=True)
    (output / "metrics.jsonl").unlink(missing_ok=True)
    (output / "job.json").write_text(json.dumps(settings_key(job), indent=1))
    policies = load_saved_team(job["warm"], AGENTS)
    for policy in policies.values():
        policy.max_prompt_tokens = prompt_tokens(task, recipe)
    config_class, trainer_class = CLASSES[name]
    config = config_class(**learner_settings(name, task, recipe, seed, output))
    trainer = trainer_class(
        lambda: collabzoo.make(task.name, **kwargs),
        policies,
        config,
        eval_env=lambda: every_target(collabzoo.make(task.name, **kwargs)),
    )
    started = time.perf_counter()
    points = []

    def evaluate(log: RunLogger) -> None:
        found = trainer.evaluate(recipe.eval_episodes or task.eval_episodes)
        point = {"env_steps": trainer.rollout.env_steps, "mean_return": found["mean_return"]}
        point.update({m: found[f"final/{m}"] for m in task.metrics})
        points.append(point)
        log.log(trainer.update, {f"eval/{k}": v for k, v in point.items()})

    try:
        with RunLogger(output, tensorboard=False, progress=False) as log:  # `collabzoo plot`s
            evaluate(log)
            while trainer.rollout.env_steps < budget:
                log.log(trainer.update + 1, trainer.train_step())
                if trainer.rollout.env_steps >= every * len(points):
                    evaluate(log)
            if points[-1]["env_steps"] < trainer.rollout.env_steps:  # a budget off the grid
                evaluate(log)
    finally:
        trainer.close()
    seconds = time.perf_counter() - started
    result = {
        "task": task.name,
        "learner": name,
        "seed": seed,
        "points": points,
        "seconds": seconds,
    }
    if recipe.device != "cpu":  # the GPU's name, not just "cuda"
        result["device"] = torch.cuda.get_device_name() if torch.cuda.is_available() else "?"
    return result


# ----- reporting ------------------------------------------------------------------------------
def _spread(values: list[float], scale: float = 100.0, digits: int = 1) -> str:
    mean = statistics.mean(values)
    spread = statistics.stdev(values) if len(values) > 1 else 0.0
    return f"{scale * mean:.{digits}f} ± {scale * spread:.{digits}f}"


def table(task: str, runs: list[dict[str, Any]]) -> str:
    """Per learner: each metric (in percent) and the team's return (what the learners
    maximise) at the warm start (step 0) and at the end of the budget, mean ± std over the
    seeds; the warm start's row first."""
    metrics = TASKS[task].metrics
    head = ["learner", "seeds", "env steps"]
    head += [f"{METRIC_LABELS[m]} start" for m in metrics] + ["return start"]
    head += [f"{METRIC_LABELS[m]} end" for m in metrics] + ["return end"]
    head.append("min/run")
    lines = ["| " + " | ".join(head) + " |", "|---|---:|---:|" + "---:|" * (2 * len(metrics) + 3)]
    ours = [r for r in runs if r["task"] == task]
    warm = [r["points"][0] for r in ours if r["learner"] == ours[0]["learner"]]
    if warm:
        cells = ["warm start", str(len(warm)), "0"]
        cells += [_spread([p[m] for p in warm]) for m in metrics]
        cells += [_spread([p["mean_return"] for p in warm], 1.0, 2)] + ["-"] * (len(metrics) + 1)
        lines.append("| " + " | ".join(cells) + " | - |")
    for name in LEARNERS:
        mine = [r for r in ours if r["learner"] == name]
        if not mine:
            continue
        steps = statistics.mean(r["points"][-1]["env_steps"] for r in mine)
        cells = [LABELS[name], str(len(mine)), f"{steps:.0f}"]
        for point in (0, -1):
            cells += [_spread([r["points"][point][m] for r in mine]) for m in metrics]
            cells.append(_spread([r["points"][point]["mean_return"] for r in mine], 1.0, 2))
        cells.append(f"{statistics.mean(r['seconds'] for r in mine) / 60:.1f}")
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def strbuild_table(results: dict[str, Any]) -> str:
    """The Performance page's StrBuild table, from a `--json` file."""
    return table("strbuild", results["runs"])


def housebuild_table(results: dict[str, Any]) -> str:
    """The Performance page's HouseBuild table, from a `--json` file."""
    return table("housebuild", results["runs"])


def _signed(value: float) -> str:
    return f"{value:.2f}".replace("-", "−")


def _evaluated(point: dict[str, float]) -> str:
    return (
        f"IoU {100 * point['iou']:.1f} %, Adj {100 * point['adjacency']:.1f} %, "
        f"return {_signed(point['mean_return'])}"
    )


def warm_start_table(results: dict[str, Any]) -> str:
    """A pretrained model's StrBuild warm start (`--model ... --warm-only`), part by part: the
    wall time of each and what it gave. The parts' minutes must add up to the measured totals."""
    recipe, summary = results["recipe"], results["warm_starts"]["strbuild"]
    parts = summary["part_minutes"]
    training = parts["loss_before"] + parts["steps"] + parts["loss_after"]
    evaluations = parts["raw_evaluation"] + parts["warm_evaluation"]
    if (
        abs(training - summary["seconds"] / 60) > 1.5
        or abs(training + evaluations - summary["minutes_with_evaluations"]) > 1.5
    ):
        raise ValueError(f"the parts' minutes {parts} do not add up to the measured totals")
    task = TASKS["strbuild"]
    rows = recipe["episodes"] * 4 * len(AGENTS)  # a row per builder and turn, H = 4
    steps, batch = recipe["sft_steps"] or task.sft_steps, recipe["sft_batch"] or task.sft_batch
    episodes = recipe["eval_episodes"] or task.eval_episodes
    losses = [
        f"{summary['loss_before'][a]:.2f} → {summary['loss_after'][a]:.2f} ({who})"
        for a, who in zip(AGENTS, ("first builder", "second"), strict=True)
    ]
    lines = [
        "| part | wall time | result |",
        "|---|---:|---|",
        f"| the raw model's evaluation, {episodes} episodes of 4 turns "
        f"| {parts['raw_evaluation']:.0f} min | {_evaluated(summary['raw'])} |",
        f"| the token loss over all {rows} rows (before, and again after) "
        f"| {parts['loss_before']:.0f} and {parts['loss_after']:.0f} min | {', '.join(losses)} |",
        f"| {steps} optimiser steps ({steps * batch} rows per builder, "
        f"{steps * batch / (rows / len(AGENTS)):.1f} of an epoch) "
        f"| {parts['steps']:.0f} min ({60 * parts['steps'] / steps:.0f} s a step) | |",
        f"| the warm start's evaluation, {episodes} episodes "
        f"| {parts['warm_evaluation']:.0f} min | {_evaluated(summary['warm'])} |",
    ]
    return "\n".join(lines)


PLOT_STYLE = {
    "font.size": 13,
    "axes.labelsize": 13,
    "xtick.labelsize": 12,
    "ytick.labelsize": 12,
    "legend.fontsize": 12,
    "figure.titlesize": 13,
}
"""Text sizes for a figure 10 inches wide that the docs show about 750 px wide: 13 pt there
is 13 px. At the earlier 8-10 pt on 11.4 inches, the legend and title read at 5-7 px."""


def plot(task: str, runs: list[dict[str, Any]], out: str, subtitle: str, stamp: str = "") -> str:
    """One figure per task, a panel per metric: each learner's mean over the seeds (its band
    the seeds' min to max) against environment steps; the warm start dashed. The legend sits
    below the panels (inside one it hid curves); `stamp` (machine and date) under the title."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from collabzoo.envs import entries

    metrics = TASKS[task].metrics
    ours = [r for r in runs if r["task"] == task]
    title = next((e.name for e in entries() if e.short_name == task), task)
    with plt.rc_context(PLOT_STYLE):
        figure = _plot_panels(plt, ours, metrics)
        handles, labels = figure.axes[0].get_legend_handles_labels()
        figure.legend(handles, labels, loc="outside lower center", ncol=3, frameon=False)
        figure.suptitle(f"{title}: {subtitle}" + (f"\n{stamp}" if stamp else ""))
        os.makedirs(out, exist_ok=True)
        path = os.path.join(out, f"learn_{task}.png")
        figure.savefig(path, dpi=160)
    plt.close(figure)
    return path


def _plot_panels(plt: Any, ours: list[dict[str, Any]], metrics: tuple[str, ...]) -> Any:
    """The figure's panels, a metric each, drawn under the caller's text sizes."""
    figure, panels = plt.subplots(
        1, len(metrics), figsize=(5.0 * len(metrics), 4.8), layout="constrained"
    )
    for axes, metric in zip(panels, metrics, strict=True):
        warm = [r["points"][0][metric] for r in ours]
        if warm:
            axes.axhline(
                100 * statistics.mean(warm), color="black", ls="--", lw=1, label="warm start"
            )
        for name in LEARNERS:
            mine = [r for r in ours if r["learner"] == name]
            if not mine:
                continue
            width = min(len(r["points"]) for r in mine)
            steps = [
                statistics.mean(r["points"][i]["env_steps"] for r in mine) for i in range(width)
            ]
            values = [[100 * r["points"][i][metric] for r in mine] for i in range(width)]
            colour = COLOURS[name]
            axes.plot(
                steps, [statistics.mean(v) for v in values], color=colour, lw=2, label=LABELS[name]
            )
            axes.fill_between(
                steps,
                [min(v) for v in values],
                [max(v) for v in values],
                color=colour,
                alpha=0.12,
                lw=0,
            )
        axes.set_xlabel("environment steps")
        axes.set_ylabel(f"{METRIC_LABELS[metric]}, last turn")
        axes.grid(alpha=0.3)
    return figure


def plot_stamp(saved: dict[str, Any]) -> str:
    """The machine and date a saved --json file records (its provenance where it has one)."""
    here = saved.get("provenance") or {}
    machine = str(here.get("machine", "")).split(";")[0]
    return " · ".join(p for p in (machine, here.get("date") or saved.get("date", "")) if p)


# ----- the command ------------------------------------------------------------------------------
def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--tasks", nargs="+", choices=sorted(TASKS), default=list(TASKS))
    parser.add_argument("--learners", nargs="+", choices=LEARNERS, default=list(LEARNERS))
    parser.add_argument("--seeds", nargs="+", type=int, default=[0, 1, 2])
    parser.add_argument(
        "--budget", type=int, default=None, help="env steps per run (StrBuild 960, HouseBuild 160)"
    )
    parser.add_argument("--every", type=int, default=None, help="env steps between evaluations")
    parser.add_argument(
        "--learning-rate", type=float, default=None, help="every learner's actor and critic rate"
    )
    parser.add_argument("--eval-episodes", type=int, default=None, help="episodes per evaluation")
    parser.add_argument(
        "--model",
        default=None,
        help="warm-start a LoRA team on this pretrained model (a folder or a short name)",
    )
    parser.add_argument("--sft-steps", type=int, default=None, help="warm-start optimiser steps")
    parser.add_argument(
        "--warm-only",
        action="store_true",
        help="stop after the warm starts and their evaluations (no learner runs)",
    )
    parser.add_argument(
        "--housebuild-data",
        default=None,
        metavar="PATH",
        help="the reference houses (houses.json); default: the package's houses",
    )
    parser.add_argument("--quick", action="store_true", help="the whole pipeline at toy sizes")
    parser.add_argument(
        "--device", default="cpu", help="where the warm start and every run compute: cpu, cuda"
    )
    parser.add_argument("--workers", type=int, default=2, help="runs at a time")
    parser.add_argument(
        "--threads",
        type=int,
        default=None,
        help="torch threads of the warm start (default: all) and of each run (default: one)",
    )
    parser.add_argument("--work", default="runs/learn_building", help="datasets, warm starts, runs")
    parser.add_argument("--json", help="also write every curve here (with --from-json: merged)")
    parser.add_argument("--plot", metavar="DIR", help="draw learn_<task>.png into DIR")
    parser.add_argument(
        "--from-json", nargs="+", metavar="FILE", help="report and plot saved --json files"
    )
    args = parser.parse_args(argv)
    saved = merged(args.from_json) if args.from_json else run_all(args)
    for task in saved["tasks"]:
        print(f"\n{task}: {saved['subtitle']}")
        if not any(r["task"] == task for r in saved["runs"]):
            print(f"no learner runs; warm start: {saved['warm_starts'].get(task)}")
            continue
        print(table(task, saved["runs"]))
        if args.plot:
            drawn = plot(task, saved["runs"], args.plot, saved["subtitle"], plot_stamp(saved))
            print(f"wrote {drawn}")
    if args.json:  # with --from-json: the files merged into one
        here = provenance(None if argv is None else [__file__, *argv])
        saved = {"provenance": here, **{k: v for k, v in saved.items() if k != "provenance"}}
        Path(args.json).write_text(json.dumps(saved, indent=1))
    return 0


def merged(paths: list[str]) -> dict[str, Any]:
    """Saved --json files as one (runs of the tasks run apart, e.g. one task at a time)."""
    documents = [json.loads(Path(p).read_text()) for p in paths]
    result = dict(documents[0])
    result["merged_from"] = [d.get("provenance") for d in documents]
    result["tasks"] = [t for d in documents for t in d["tasks"]]
    result["runs"] = [r for d in documents for r in d["runs"]]
    result["warm_starts"] = {k: v for d in documents for k, v in d["warm_starts"].items()}
    houses = [d.get("houses") for d in documents if "housebuild" in d["tasks"]]
    result["houses"] = houses[0] if houses else result.get("houses")
    return result


def run_all(args: argparse.Namespace) -> dict[str, Any]:
    recipe = QUICK if args.quick else Recipe()
    if args.model is not None:
        recipe = replace(recipe, model=args.model, **PRETRAINED)
    if args.sft_steps is not None:
        recipe = replace(recipe, sft_steps=args.sft_steps)
    if args.budget is not None:
        recipe = replace(recipe, budget=args.budget)
    if args.every is not None:
        recipe = replace(recipe, every=args.every)
    if args.learning_rate is not None:
        recipe = replace(recipe, learning_rate=args.learning_rate)
    if args.eval_episodes is not None:
        recipe = replace(recipe, eval_episodes=args.eval_episodes)
    recipe = replace(recipe, device=args.device)
    work = Path(args.work)
    if args.threads:
        import torch

        torch.set_num_threads(args.threads)
    jobs, warm_starts = [], {}
    for name in args.tasks:
        task = TASKS[name]
        kwargs = env_kwargs(task, recipe, args.housebuild_data)
        folder = work / (name if recipe.device == "cpu" else f"{name}-{recipe.device}")
        rows = demonstrations(task, recipe, kwargs, folder / "data")
        warm_starts[name] = warm_start(task, recipe, rows, folder / "warm", kwargs)
        print(f"{name}: warm start {warm_starts[name]}", flush=True)
        for learner in [] if args.warm_only else args.learners:
            for seed in args.seeds:
                jobs.append(
                    {
                        "task": name,
                        "learner": learner,
                        "seed": seed,
                        "kwargs": kwargs,
                        "recipe": asdict(recipe),
                        "warm": str(folder / "warm" / "final"),
                        "output": str(folder / learner / f"seed{seed}"),
                        "threads": args.threads,
                    }
                )
    with ProcessPoolExecutor(max_workers=args.workers) as pool:
        runs = []
        for done in pool.map(run, jobs):
            print(
                f"{done['task']} {done['learner']} seed {done['seed']}: {done['points'][-1]} "
                f"({done['seconds'] / 60:.1f} min)",
                flush=True,
            )
            runs.append(done)
    subtitle = f"warm start on {recipe.episodes} noisy-oracle episodes (drop {recipe.drop})"
    if jobs:  # a warm-only run trained no seed
        subtitle = f"seeds {', '.join(map(str, args.seeds))}, {subtitle}"
    if recipe.model:
        subtitle = f"{recipe.model} (LoRA rank {recipe.lora_rank}), {subtitle}"
    if recipe.device != "cpu":
        subtitle = f"{subtitle}, on {recipe.device}"
    houses = Path(args.housebuild_data).name if args.housebuild_data else "the package's houses"
    return {
        "tasks": args.tasks,
        "recipe": asdict(recipe),
        "houses": houses,
        "warm_starts": warm_starts,
        "subtitle": subtitle,
        "runs": runs,
        "date": time.strftime("%Y-%m-%d"),
    }


if __name__ == "__main__":
    sys.exit(main())

"""A pretrained LLM team trained on the CPU: SmolLM2-135M-Instruct, every learner, real tasks.

One base model with a LoRA adapter per agent (and, for the actor-critic learners, a LoRA
adapter per separate critic on the same base: each learner's default critic), trained by
MA-REINFORCE, MAGRPO, IAC, IPPO and CC with the same recipe: the same sampling, learning rate,
LoRA rank and budget in environment steps (`Recipe`, chosen once on a MAGRPO pilot on TLDR and
then frozen for every learner and task). Before training and every `every` environment steps,
each run is evaluated on held-out prompts (the task's eval split) with the training sampling:
the mean return and every reward component the env reports, over the episodes' last turns.
Each evaluation's episodes (prompts, answers, rewards, components) are saved in the run's
folder, `evaluations/update-NNNNNNNN.jsonl`: what passed, and what each agent wrote.

Tasks: `tldr` (H = 1, dense; the env's embedded sample: 8 train posts, 4 held out, NOT the
benchmark), `mbpp` and `coophumaneval` (H = 2 with level feedback, the reference code reward
run in the sandbox; train split for training, eval split held out; the data files from
`--data-dir`, by default $COLLABZOO_SHARED_DATA).

    python benchmarks/learn_real_model.py [--tasks tldr] [--learners magrpo iac]
        [--seeds 0 1 2] [--budget STEPS] [--json out.json] [--plot DIR]
    python benchmarks/learn_real_model.py --quick         # minutes: the whole pipeline, tiny
    python benchmarks/learn_real_model.py --from-json out.json --plot DIR   # re-plot only

Each (task, learner, seed) runs in its own process with `--threads` torch threads, `--workers`
at a time; runs go to `--work` (runs/learn_real_model), and a run whose settings match and
whose budget reached this one's is read back instead of run again. A run cut short (killed,
or finished at a smaller budget) continues from its last update's checkpoint, so a long run
(IPPO on a code task: hours on one core) can run in parts. The model is the short name
`smollm2-135m-instruct` (pulled once with `collabzoo model pull`) or any folder (`--model`).
`--device cuda` runs the same recipe on a GPU, `--generation hf-compiled` with its compiled
sampler; both change the samples, so such runs have folders and keys of their own. Every
update's wall time is printed and saved (`update_seconds`): a compiled sampler's first
updates pay its compilations, and its break-even is read from two runs' times.
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
LABELS = {"mareinforce": "MA-REINFORCE", "magrpo": "MAGRPO", "iac": "IAC", "ippo": "IPPO"}
LABELS["cc"] = "CC"
COLOURS = {"mareinforce": "#1f77b4", "magrpo": "#ff7f0e", "iac": "#2ca02c", "ippo": "#d62728"}
COLOURS["cc"] = "#9467bd"


@dataclass(frozen=True)
class Task:
    """A task's env and the sizes that fit its prompts and answers."""

    env: str
    data_file: str | None
    """The local data file under --data-dir (None: the env's own data)."""
    max_new_tokens: int
    max_prompt_tokens: int
    num_turns: int
    headline: str
    """The published metric reported first (an env metric of the last turn)."""
    logprob_batch_size: int = 16
    """Sequences per scoring pass in the loss: memory only (16 of a code task's ~900-token
    sequences took a run past 13.7 GB)."""
    gradient_checkpointing: bool = False
    """Recompute activations in backward: memory only (one IAC update on MBPP peaks at
    6.9 GB with it, 11.0 GB without, so two code runs fit in 24 GB)."""


TASKS = {
    "tldr": Task("tldr", None, 64, 512, 1, "mean_return"),
    "mbpp": Task(
        "mbpp",
        "mbpp/MBPP.json",
        160,
        768,
        2,
        "pass",
        logprob_batch_size=4,
        gradient_checkpointing=True,
    ),
    "coophumaneval": Task(
        "coophumaneval",
        "coophumaneval/CoopHumanEval.json",
        160,
        768,
        2,
        "pass",
        logprob_batch_size=4,
        gradient_checkpointing=True,
    ),
}


@dataclass(frozen=True)
class Recipe:
    """What every learner shares (chosen on the MAGRPO pilot, then frozen)."""

    model: str = "smollm2-135m-instruct"
    lora_rank: int = 8
    lora_alpha: int = 16
    learning_rate: float = 5e-4
    """Every actor's and every critic's AdamW learning rate."""
    temperature: float = 1.0
    top_p: float = 1.0
    budget: int = 160
    """Environment steps per run."""
    every: int = 40
    """Evaluate every this many environment steps (and at 0)."""
    eval_episodes: int = 16
    max_new_tokens: int | None = None
    """Over the task's own (None: the task's)."""
    group: int = 4
    """Samples per agent at the first turn (K of the tree learners, the actor-critic learners'
    first-turn branches); episodes per update: 2. Both families see 8 first-turn joint
    actions per update."""


QUICK = Recipe(budget=8, every=8, eval_episodes=2, max_new_tokens=16, group=2)

RUN_DEFAULTS = {"device": "cpu", "generation": "hf"}
"""Where a run trains and what samples it, as the CPU runs had them (before these were options)."""


def off_defaults(job: dict[str, Any]) -> dict[str, str]:
    """The job's device and sampler where they are not `RUN_DEFAULTS`: both change the samples,
    so they mark a run's key and folder (a CPU run's key and folder stay as they were)."""
    return {name: job[name] for name, default in RUN_DEFAULTS.items() if job[name] != default}


def learner_settings(
    name: str,
    task: Task,
    recipe: Recipe,
    seed: int,
    output: Path,
    device: str,
    generation: str,
) -> dict:
    settings: dict[str, Any] = {
        "output_dir": str(output),
        "seed": seed,
        "num_turns": task.num_turns,
        "max_new_tokens": recipe.max_new_tokens or task.max_new_tokens,
        "temperature": recipe.temperature,
        "top_p": recipe.top_p,
        "top_k": None,
        "rollout_buffer_size": 2,
        "num_generations": recipe.group,
        "logprob_batch_size": task.logprob_batch_size,
        "gradient_checkpointing": task.gradient_checkpointing,
        "tensorboard": False,
        "progress": False,
        "save_steps": 0,
        "eval_save_episodes": True,
        "device": device,
        "generation_backend": generation,
    }
    if name in ("mareinforce", "magrpo"):
        settings["agent_learning_rate"] = recipe.learning_rate
    else:
        settings.update(
            actor_learning_rate=recipe.learning_rate, critic_learning_rate=recipe.learning_rate
        )
    return settings


def env_kwargs(task: Task, data_dir: str | None, split: str) -> dict[str, Any]:
    if task.data_file is None:
        return {"data": "sample", "split": split}
    if not data_dir:
        raise SystemExit(
            f"{task.env} reads {task.data_file}: pass --data-dir (or set "
            "COLLABZOO_SHARED_DATA) to the folder that holds it"
        )
    return {"data": str(Path(data_dir) / task.data_file), "split": split}


def make_job(
    task: str,
    learner: str,
    seed: int,
    recipe: Recipe,
    data_dir: str | None,
    threads: int,
    work: str | Path,
    device: str = RUN_DEFAULTS["device"],
    generation: str = RUN_DEFAULTS["generation"],
) -> dict[str, Any]:
    """One run's settings (plain data: it goes to a worker process), saved under `work`; a run
    off the CPU's defaults gets a folder of its own, so it never overwrites a CPU run."""
    marks = off_defaults({"device": device, "generation": generation})
    where = "".join(f"-{value.replace(':', '')}" for value in marks.values())
    return {
        "task": task,
        "learner": learner,
        "seed": seed,
        "recipe": asdict(recipe),
        "data_dir": data_dir if TASKS[task].data_file else None,
        "threads": threads,
        "device": device,
        "generation": generation,
        "output": str(Path(work) / task / f"{learner}-seed{seed}{where}"),
    }


def job_key(job: dict[str, Any]) -> dict[str, Any]:
    """What a run's curve depends on, but for its length (`off_defaults`: device, sampler)."""
    recipe = {k: v for k, v in job["recipe"].items() if k != "budget"}
    key = {**{k: job[k] for k in ("task", "learner", "seed", "data_dir")}, "recipe": recipe}
    return {**key, **off_defaults(job)}


def finished(job: dict[str, Any], budget: int) -> dict[str, Any] | None:
    """An earlier run of these settings that reached this budget, cut there; else None."""
    try:
        saved = json.loads((Path(job["output"]) / "result.json").read_text())
    except (OSError, ValueError):
        return None
    if saved.get("key") != json.loads(json.dumps(job_key(job))):
        return None
    points = [p for p in saved["points"] if p["env_steps"] <= budget]
    if not points or points[-1]["env_steps"] < budget:
        return None
    if len(points) < len(saved["points"]):  # cut: its update times run past the budget
        saved.pop("update_seconds", None)
    return {**saved, "points": points}


def build_trainer(job: dict[str, Any]) -> Any:
    """`job`'s learner on a LoRA team of the recipe's model, trained on its task's train split
    and evaluated on the eval split (also what `benchmarks/profile_update.py` profiles)."""
    import collabzoo
    from collabzoo.algos import LEARNERS as CLASSES
    from collabzoo.algos import load_causal_lm, lora_team
    from collabzoo.algos.policies.pretrained import resolve_model

    recipe, task = Recipe(**job["recipe"]), TASKS[job["task"]]
    output = Path(job["output"])
    output.mkdir(parents=True, exist_ok=True)
    train = env_kwargs(task, job["data_dir"], "train")
    held_out = env_kwargs(task, job["data_dir"], "eval")
    agents = collabzoo.make(task.env, **train).possible_agents
    model, tokenizer = load_causal_lm(str(resolve_model(recipe.model)))
    team = lora_team(model, tokenizer, agents, rank=recipe.lora_rank, alpha=recipe.lora_alpha)
    for policy in team.values():
        policy.max_prompt_tokens = task.max_prompt_tokens
    config_class, trainer_class = CLASSES[job["learner"]]
    settings = learner_settings(
        job["learner"], task, recipe, job["seed"], output, job["device"], job["generation"]
    )
    return trainer_class(
        lambda: collabzoo.make(task.env, **train),
        team,
        config_class(**settings),
        eval_env=lambda: collabzoo.make(task.env, **held_out),
    )


def resumed_progress(trainer: Any, job: dict[str, Any]) -> dict[str, Any]:
    """Where an interrupted run of these settings stopped, its trainer loaded from the run's
    checkpoint (its adapters, optimizers, RNGs and counters); a fresh start otherwise. A
    checkpoint of other settings, or past this budget, is ignored: the fresh run's first save
    replaces it."""
    from collabzoo.algos.runtime.checkpoint import latest_checkpoint, load_checkpoint

    key = json.loads(json.dumps(job_key(job)))
    fresh = {"key": key, "points": [], "update_seconds": [], "seconds": 0.0, "grid": 0}
    fresh["resumed_at"] = []
    found = latest_checkpoint(job["output"])
    if found is None:
        return fresh
    state = load_checkpoint(found)
    progress = state.get("run")
    if progress is None or progress["key"] != key or state["env_steps"] > job["recipe"]["budget"]:
        return fresh
    trainer.load_state_dict(state)
    progress["resumed_at"].append(trainer.rollout.env_steps)
    print(job["task"], job["learner"], job["seed"], f"resumed at {found.name}", flush=True)
    return progress


def run(job: dict[str, Any]) -> dict[str, Any]:
    """One learner from the pretrained model: eval at 0, every `every` steps, and at the end.

    A checkpoint after every evaluation and update holds the run's progress too, so a run cut
    short (a killed process, a job's time limit, a larger `--budget`) continues from its last
    update on a rerun, on the same trajectory as an uncut run; its `seconds` add up the parts.
    """
    import torch

    from collabzoo.algos.runtime.checkpoint import save_checkpoint

    recipe = Recipe(**job["recipe"])
    earlier = finished(job, recipe.budget)
    if earlier is not None:
        return earlier
    torch.set_num_threads(job["threads"])
    torch.manual_seed(job["seed"])
    trainer = build_trainer(job)
    progress = resumed_progress(trainer, job)
    points, update_seconds = progress["points"], progress["update_seconds"]
    started = time.perf_counter() - progress["seconds"]

    def save() -> None:
        progress["seconds"] = time.perf_counter() - started
        state = {**trainer.state_dict(), "run": progress}
        save_checkpoint(job["output"], trainer.update, state, keep=1)

    def evaluate(on_grid: bool = True) -> None:
        found = trainer.evaluate(recipe.eval_episodes)
        point = {"env_steps": trainer.rollout.env_steps, "mean_return": found["mean_return"]}
        point.update({k[6:]: v for k, v in found.items() if k.startswith("final/")})
        point["seconds"] = time.perf_counter() - started
        points.append(point)
        progress["grid"] += on_grid
        print(job["task"], job["learner"], job["seed"], json.dumps(point), flush=True)

    try:
        while True:  # saved after every update and evaluation: a kill loses at most one of them
            if trainer.rollout.env_steps >= recipe.every * progress["grid"]:
                evaluate()
                save()
            if trainer.rollout.env_steps >= recipe.budget:
                break
            began = time.perf_counter()
            trainer.train_step()
            update_seconds.append(seconds := time.perf_counter() - began)
            done = (
                f"update {trainer.update} ({trainer.rollout.env_steps} env steps) {seconds:.2f} s"
            )
            print(job["task"], job["learner"], job["seed"], done, flush=True)
            save()
        if points[-1]["env_steps"] < trainer.rollout.env_steps:
            evaluate(on_grid=False)  # the budget's end, off the `every` grid
            save()
    finally:
        trainer.close()
    result = {
        "key": progress["key"],
        "task": job["task"],
        "learner": job["learner"],
        "seed": job["seed"],
        "points": points,
        "seconds": time.perf_counter() - started,
        "updates": trainer.update,
        "update_seconds": [round(seconds, 3) for seconds in update_seconds],
    }
    if progress["resumed_at"]:
        result["resumed_at"] = progress["resumed_at"]
    result.update(off_defaults(job))
    if "device" in result:  # the GPU's name, not just "cuda"
        result["device"] = torch.cuda.get_device_name() if torch.cuda.is_available() else "?"
    (Path(job["output"]) / "result.json").write_text(json.dumps(result, indent=1))
    return result


# ----- reporting ------------------------------------------------------------------------------
def spread(values: list[float]) -> str:
    if not values:
        return "-"
    mean = statistics.fmean(values)
    sd = statistics.stdev(values) if len(values) > 1 else 0.0
    return f"{mean:.3f} ± {sd:.3f}"


def table(task: str, runs: list[dict[str, Any]]) -> str:
    """Per learner: the raw model's and the trained team's held-out metrics, mean ± sd over
    seeds, and the wall time per run. Every learner starts from the same untrained team on the
    same seeded evaluation, so the raw model's row has one entry per seed."""
    mine = [r for r in runs if r["task"] == task]
    metrics = sorted({k for r in mine for k in r["points"][0]} - {"env_steps", "seconds"})
    head = TASKS[task].headline
    metrics.sort(key=lambda m: (m != head, m != "mean_return", m))
    lines = [
        f"| {task} | seeds | " + " | ".join(metrics) + " | minutes |",
        "|---|---|" + "---|" * (len(metrics) + 1),
    ]
    first = list({r["seed"]: r["points"][0] for r in mine}.values())  # one untrained team a seed
    lines.append(
        "| raw model (update 0) | "
        + f"{len(first)} | "
        + " | ".join(spread([p[m] for p in first if m in p]) for m in metrics)
        + " | - |"
    )
    for learner in LEARNERS:
        done = [r for r in mine if r["learner"] == learner]
        if not done:
            continue
        last = [r["points"][-1] for r in done]
        minutes = statistics.fmean(r["seconds"] for r in done) / 60
        lines.append(
            f"| {LABELS[learner]} | {len(done)} | "
            + " | ".join(spread([p[m] for p in last if m in p]) for m in metrics)
            + f" | {minutes:.0f} |"
        )
    return "\n".join(lines)


# ----- the docs' tables (tests/test_docs_numbers.py compares them with the pages) ----------
TLDR_COLUMNS = (
    ("mean return (max 3)", "mean_return", 1.0, 2),
    ("score %", "score", 100.0, 1),
    ("levels reached", "level", 1.0, 2),
    ("concise words", "words_1", 1.0, 1),
    ("detailed words", "words_2", 1.0, 1),
    ("length ratio", "length_ratio", 1.0, 2),
    ("unique-word ratio", "unique_ratio", 1.0, 2),
    ("Jaccard", "jaccard", 1.0, 3),
)
"""The TLDR table's columns: heading, the evaluation's metric, its scale and its decimals."""
CODE_COLUMNS = (
    ("pass", "pass", 100.0, 1),
    ("tests passed", "pass_fraction", 100.0, 1),
    ("return", "mean_return", 1.0, 2),
    ("aux defined", "aux_defined", 100.0, 1),
    ("main defined", "main_defined", 100.0, 1),
    ("compiles", "syntax_ok", 100.0, 1),
    ("main calls aux", "aux_used", 100.0, 1),
)
"""The code tasks' columns (the last turn's rates in percent, the return over both turns)."""
CODE_ORDER = ("magrpo", "mareinforce", "iac", "cc", "ippo")
"""The order the code tables list the learners in (the order they were run)."""
CODE_TITLES = {"mbpp": "MBPP", "coophumaneval": "CoopHumanEval"}


def _markdown(header: list[str], rows: list[list[str]]) -> str:
    lines = ["| " + " | ".join(cells) + " |" for cells in (header, *rows)]
    lines.insert(1, "|" + "---|" * len(header))
    return "\n".join(lines)


def _mean_sd(values: list[float], scale: float, digits: int, zero: str | None = None) -> str:
    """ "mean ± sd" of the scaled values; `zero` where every value is 0 (a rate nobody reached)."""
    if zero is not None and not any(values):
        return zero
    sd = statistics.stdev(values) if len(values) > 1 else 0.0
    return f"{scale * statistics.fmean(values):.{digits}f} ± {scale * sd:.{digits}f}"


def _rate(value: float, scale: float, digits: int) -> str:
    return "0" if value == 0 else f"{scale * value:.{digits}f}"


def _untrained(runs: list[dict[str, Any]], task: str) -> dict[int, dict[str, Any]]:
    """Each seed's untrained evaluation: the same team on the same seeded episodes for every
    learner, so any run of the seed holds it."""
    return {r["seed"]: r["points"][0] for r in runs if r["task"] == task}


def _runs(results: dict[str, Any], task: str, learner: str) -> list[dict[str, Any]]:
    found = [r for r in results["runs"] if r["task"] == task and r["learner"] == learner]
    return sorted(found, key=lambda r: r["seed"])


def tldr_table(results: dict[str, Any]) -> str:
    """TLDR held out after the budget, mean ± sd over the seeds, and each run's minutes."""
    header = ["TLDR, held out", *(c[0] for c in TLDR_COLUMNS), "minutes a run"]
    untrained = list(_untrained(results["runs"], "tldr").values())
    rows = [
        [
            "untrained (update 0)",
            *(
                _mean_sd([p[key] for p in untrained], scale, digits)
                for _, key, scale, digits in TLDR_COLUMNS
            ),
            "-",
        ]
    ]
    for learner in LEARNERS:
        done = _runs(results, "tldr", learner)
        if not done:
            continue
        last = [r["points"][-1] for r in done]
        minutes = [r["seconds"] / 60 for r in done]
        rows.append(
            [
                LABELS[learner],
                *(
                    _mean_sd([p[key] for p in last], scale, digits)
                    for _, key, scale, digits in TLDR_COLUMNS
                ),
                f"{min(minutes):.0f}-{max(minutes):.0f}",
            ]
        )
    return _markdown(header, rows)


def tldr_seeds_table(results: dict[str, Any]) -> str:
    """TLDR per seed: the held-out return of the untrained team and of every trained one."""
    learners = [n for n in LEARNERS if _runs(results, "tldr", n)]
    untrained = _untrained(results["runs"], "tldr")
    rows = []
    for seed in sorted(untrained):
        finals = {
            r["learner"]: r["points"][-1]["mean_return"]
            for r in results["runs"]
            if r["task"] == "tldr" and r["seed"] == seed
        }
        cells = [f"{finals[n]:.2f}" if n in finals else "-" for n in learners]
        rows.append([str(seed), f"{untrained[seed]['mean_return']:.2f}", *cells])
    return _markdown(["seed", "untrained", *(LABELS[n] for n in learners)], rows)


def code_runs_table(results: dict[str, Any]) -> str:
    """Every code-task run: the last turn's held-out rates (%) and the return, after the budget."""
    budget = results["recipe"]["budget"]
    header = [f"held out, {budget} env steps", "seed", *(c[0] for c in CODE_COLUMNS), "minutes"]
    header[4] = "return (max 8)"
    rows = []
    for task, title in CODE_TITLES.items():
        untrained = _untrained(results["runs"], task)
        for seed in sorted(untrained):
            point = untrained[seed]
            cells = [_rate(point[key], scale, digits) for _, key, scale, digits in CODE_COLUMNS]
            cells[2] = f"{point['mean_return']:.2f}"
            rows.append([f"{title}, untrained", str(seed), *cells, "-"])
            for learner in CODE_ORDER:
                run = [r for r in _runs(results, task, learner) if r["seed"] == seed]
                if not run:
                    continue
                last = run[0]["points"][-1]
                cells = [_rate(last[key], scale, digits) for _, key, scale, digits in CODE_COLUMNS]
                cells[2] = f"{last['mean_return']:.2f}"
                minutes = f"{run[0]['seconds'] / 60:.0f}"
                rows.append([f"{title}, {LABELS[learner]}", str(seed), *cells, minutes])
    return _markdown(header, rows)


def code_means_table(results: dict[str, Any]) -> str:
    """The code tasks over the seeds: mean ± sd of the last turn's held-out rates and the return."""
    columns = CODE_COLUMNS[:6]
    header = [f"{results['recipe']['budget']} env steps", *(c[0] for c in columns)]
    rows = []
    for task, title in CODE_TITLES.items():
        groups = [("untrained", list(_untrained(results["runs"], task).values()))]
        for learner in CODE_ORDER:
            done = _runs(results, task, learner)
            if done:
                groups.append((LABELS[learner], [r["points"][-1] for r in done]))
        for name, points in groups:
            cells = [
                _mean_sd(
                    [p[key] for p in points], scale, digits, None if key == "mean_return" else "0"
                )
                for _, key, scale, digits in columns
            ]
            rows.append([f"{title}, {name}", *cells])
    return _markdown(header, rows)


def code_returns_table(results: dict[str, Any]) -> str:
    """The learners page's summary: each learner's held-out return on the code tasks."""
    rows = []
    for learner in ("magrpo", "mareinforce", "iac", "cc", "ippo"):
        cells = [
            _mean_sd(
                [r["points"][-1]["mean_return"] for r in _runs(results, task, learner)], 1.0, 2
            )
            for task in CODE_TITLES
        ]
        rows.append([LABELS[learner], *cells])
    return _markdown(["learner", *CODE_TITLES.values()], rows)


def plot(task: str, runs: list[dict[str, Any]], folder: str) -> str:
    """The held-out mean return against environment steps: a thin line per seed, the mean
    over seeds thick, one colour per learner, its seed count in the legend."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, axis = plt.subplots(figsize=(6.4, 4.0))
    for learner in LEARNERS:
        done = [r for r in runs if r["task"] == task and r["learner"] == learner]
        if not done:
            continue
        for r in done:
            xs = [p["env_steps"] for p in r["points"]]
            axis.plot(
                xs,
                [p["mean_return"] for p in r["points"]],
                color=COLOURS[learner],
                alpha=0.3,
                linewidth=0.8,
            )
        length = min(len(r["points"]) for r in done)
        xs = [done[0]["points"][i]["env_steps"] for i in range(length)]
        mean = [
            statistics.fmean(r["points"][i]["mean_return"] for r in done) for i in range(length)
        ]
        seeds = f"{len(done)} seed" + "s" * (len(done) > 1)  # a one-seed line is not a mean
        label = f"{LABELS[learner]} ({seeds})"
        axis.plot(xs, mean, color=COLOURS[learner], linewidth=2, label=label)
    axis.set_xlabel("environment steps")
    axis.set_ylabel("held-out mean return")
    axis.set_title(f"SmolLM2-135M-Instruct LoRA team on {task}")
    axis.legend(fontsize=8)
    figure.tight_layout()
    Path(folder).mkdir(parents=True, exist_ok=True)
    path = str(Path(folder) / f"learn_real_model_{task}.png")
    figure.savefig(path, dpi=120)
    plt.close(figure)
    return path


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tasks", nargs="+", default=["tldr"], choices=sorted(TASKS))
    parser.add_argument("--learners", nargs="+", default=list(LEARNERS), choices=LEARNERS)
    parser.add_argument("--seeds", nargs="+", type=int, default=[0, 1, 2])
    parser.add_argument("--budget", type=int, help="environment steps per run")
    parser.add_argument("--every", type=int, help="evaluate every this many environment steps")
    parser.add_argument("--learning-rate", type=float)
    parser.add_argument("--model", help="a model folder or short name")
    parser.add_argument("--data-dir", default=os.environ.get("COLLABZOO_SHARED_DATA"))
    parser.add_argument("--work", default="runs/learn_real_model")
    parser.add_argument("--workers", type=int, default=1)
    parser.add_argument("--threads", type=int, default=1, help="torch threads per run")
    parser.add_argument(
        "--device", default=RUN_DEFAULTS["device"], help="where every run trains: cpu, cuda"
    )
    parser.add_argument(
        "--generation",
        default=RUN_DEFAULTS["generation"],
        choices=("hf", "hf-compiled"),
        help="the rollouts' sampler (generation_backend); hf-compiled: CUDA graphs on a GPU",
    )
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--json")
    parser.add_argument("--plot")
    parser.add_argument("--from-json", nargs="+")
    args = parser.parse_args(argv)
    if args.from_json:
        runs = [r for path in args.from_json for r in json.loads(Path(path).read_text())["runs"]]
    else:
        recipe = QUICK if args.quick else Recipe()
        changes = {
            "budget": args.budget,
            "every": args.every,
            "learning_rate": args.learning_rate,
            "model": args.model,
        }
        recipe = replace(recipe, **{k: v for k, v in changes.items() if v is not None})
        jobs = [
            make_job(
                task,
                learner,
                seed,
                recipe,
                args.data_dir,
                args.threads,
                args.work,
                args.device,
                args.generation,
            )
            for task in args.tasks
            for learner in args.learners
            for seed in args.seeds
        ]
        started = time.perf_counter()
        with ProcessPoolExecutor(max_workers=args.workers) as pool:
            runs = list(pool.map(run, jobs))
        print(f"{len(runs)} runs in {(time.perf_counter() - started) / 60:.1f} min", flush=True)
        if args.json:
            report = {
                "provenance": provenance(None if argv is None else [__file__, *argv]),
                "recipe": asdict(recipe),
                "machine": os.uname().machine,
                "runs": runs,
                "date": time.strftime("%Y-%m-%d"),
                "cpus": os.cpu_count(),
            }
            Path(args.json).write_text(json.dumps(report, indent=1))
    for task in sorted({r["task"] for r in runs}):
        print(table(task, runs))
        if args.plot:
            print("plot:", plot(task, runs, args.plot))
    return 0


if __name__ == "__main__":
    sys.exit(main())

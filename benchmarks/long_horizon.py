"""Every learner on a long-horizon sparse task at equal environment steps.

TinyCoop with H = 4 turns and the sparse reward (paid at the last turn only: the fraction of
turns won), tiny byte-level models trained from scratch, every learner given the same budget of
environment steps. The eval mean return (32 episodes, one sample per agent and turn) is taken at
0 and after every `--every` steps. The paper's claim to check: on long-horizon or sparse tasks
the Monte-Carlo learners need more samples and decentralised critics are non-stationary, so the
centralized critic (CC) wins.

Settings (the from-scratch ones: temperature 1, no top-k / top-p cut, learning rate 1e-2):
- MA-REINFORCE (rloo baseline) and MAGRPO: full rollout trees of branching 2 over 4 turns
  (30 env steps per episode), 4 episodes per update;
- IAC, IPPO, CC: 4 branches of 4 turns per episode (16 env steps), 8 episodes per update;
  IPPO with its PPO defaults (4 epochs, clip 0.2, GAE lambda 0.95).

    python benchmarks/long_horizon.py [--seeds 0 1 2] [--learners cc iac] [--json out.json]
        [--plot DIR]              # DIR/long_horizon.png and one DIR/long_horizon_<learner>.png each
    python benchmarks/long_horizon.py --from-json out.json --plot DIR     # re-plot, no training

Each (learner, seed) runs in its own process with one torch thread, `--workers` at a time.
`tests/test_actor_critic.py` runs the same function for four learners and two seeds.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from concurrent.futures import ProcessPoolExecutor
from typing import Any

from provenance import provenance

LEARNERS = ("mareinforce", "magrpo", "iac", "ippo", "cc")
BUDGET = 6000
"""Environment steps per run."""
EVERY = 1500
"""Environment steps between evaluations."""
FROM_SCRATCH = {
    "max_new_tokens": 1,
    "temperature": 1.0,
    "top_p": 1.0,
    "top_k": None,
    "tensorboard": False,
    "progress": False,
    "save_steps": 0,
    "discount": 1.0,
    "output_dir": "unused",
}


def run(name: str, seed: int, budget: int = BUDGET, every: int = EVERY) -> list[float]:
    """Eval mean return of one learner at 0 and after every `every` env steps, to `budget`."""
    import torch

    import collabzoo
    from collabzoo.algos import LEARNERS as CLASSES
    from collabzoo.algos import LLMPolicy, tiny_causal_lm

    def make_env() -> Any:
        return collabzoo.make("tinycoop", horizon=4, sparse=True)

    config_class, trainer_class = CLASSES[name]
    settings: dict[str, Any] = {**FROM_SCRATCH, "seed": seed}
    if name in ("mareinforce", "magrpo"):
        settings.update(agent_learning_rate=1e-2, rollout_buffer_size=4, num_generations=2)
        if name == "mareinforce":
            settings["advantage_mode"] = "rloo"
    else:
        settings.update(
            actor_learning_rate=1e-2,
            critic_learning_rate=1e-2,
            rollout_buffer_size=8,
            num_generations=4,
        )
    torch.manual_seed(seed)
    policies = {
        a: LLMPolicy(*tiny_causal_lm(seed=10 * seed + i)) for i, a in enumerate(("alpha", "beta"))
    }
    trainer = trainer_class(make_env, policies, config_class(**settings))
    curve = [trainer.evaluate(32)["mean_return"]]
    while trainer.rollout.env_steps < budget:
        trainer.train_step()
        if trainer.rollout.env_steps >= every * len(curve):
            curve.append(trainer.evaluate(32)["mean_return"])
    return curve


def _run_in_child(job: tuple[str, int, int, int]) -> list[float]:
    import torch

    torch.set_num_threads(1)
    return run(*job)


def run_all(
    learners: list[str], seeds: list[int], budget: int, every: int, workers: int
) -> dict[str, list[list[float]]]:
    """{learner: one curve per seed}, each run in a child process of its own."""
    jobs = [(n, s, budget, every) for n in learners for s in seeds]
    with ProcessPoolExecutor(max_workers=workers) as pool:
        results = list(pool.map(_run_in_child, jobs))
    curves: dict[str, list[list[float]]] = {}
    for (name, _, _, _), curve in zip(jobs, results, strict=True):
        curves.setdefault(name, []).append(curve)
    return curves


def table(curves: dict[str, list[list[float]]], every: int) -> str:
    """Mean curve over the seeds per learner, and each seed's final return (the docs' table)."""
    width = max(len(runs[0]) for runs in curves.values())
    steps = [every * i for i in range(width)]
    head = "| learner | " + " | ".join(f"{s:,}" for s in steps) + " | finals per seed |"
    lines = [head, "|---" * (width + 2) + "|"]
    for name, runs in curves.items():
        mean = [statistics.mean(points) for points in zip(*runs, strict=True)]
        finals = ", ".join(f"{r[-1]:.3f}" for r in runs)
        cells = " | ".join(f"{v:.3f}" for v in mean)
        lines.append(f"| {LABELS.get(name, name)} | {cells} | {finals} |")
    return "\n".join(lines)


def docs_table(results: dict[str, Any]) -> str:
    """The Performance page's table, from a `--json` file."""
    return table(results["curves"], results["every"])


LABELS = {
    "mareinforce": "MA-REINFORCE (rloo)",
    "magrpo": "MAGRPO",
    "iac": "IAC",
    "ippo": "IPPO",
    "cc": "CC",
}


def plot(curves: dict[str, list[list[float]]], every: int, seeds: list[int], out: str) -> list[str]:
    """The learning curves: every learner on one figure, then one figure per learner with the
    others faded in their own colours (one grey for all would hide which is which). Each line
    is the mean over the seeds, its band the seeds' min to max."""
    import os

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    os.makedirs(out, exist_ok=True)
    colours = dict(
        zip(LEARNERS, ("#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd"), strict=True)
    )

    def draw(axes: Any, name: str, highlight: bool) -> None:
        runs = curves[name]
        steps = [every * i for i in range(len(runs[0]))]
        points = list(zip(*runs, strict=True))
        mean = [statistics.mean(p) for p in points]
        colour = colours.get(name, "black")
        axes.plot(
            steps,
            mean,
            color=colour,
            lw=2.2 if highlight else 1.0,
            alpha=1.0 if highlight else 0.45,
            ls="-" if highlight else "--",
            label=LABELS[name],
        )
        if highlight:
            low, high = [min(p) for p in points], [max(p) for p in points]
            axes.fill_between(steps, low, high, color=colour, alpha=0.15, lw=0)

    def finish(axes: Any, title: str) -> None:
        axes.set_xlabel("environment steps")
        axes.set_ylabel("eval mean return (32 episodes)")
        axes.set_ylim(0, 1)
        axes.set_title(title)
        axes.grid(alpha=0.3)
        axes.legend(loc="upper left", fontsize=8)

    written = []
    subtitle = f"TinyCoop H=4, sparse reward; mean of seeds {', '.join(map(str, seeds))}"
    figure, axes = plt.subplots(figsize=(7, 4.2))
    for name in curves:
        draw(axes, name, True)
    finish(axes, f"Every learner\n{subtitle}")
    figure.tight_layout()
    written.append(os.path.join(out, "long_horizon.png"))
    figure.savefig(written[-1], dpi=110)
    plt.close(figure)
    for name in curves:
        figure, axes = plt.subplots(figsize=(7, 4.2))
        for other in curves:
            if other != name:
                draw(axes, other, False)
        draw(axes, name, True)
        finish(axes, f"{LABELS[name]} (band: min to max over the seeds)\n{subtitle}")
        figure.tight_layout()
        written.append(os.path.join(out, f"long_horizon_{name}.png"))
        figure.savefig(written[-1], dpi=110)
        plt.close(figure)
    return written


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--learners", nargs="+", choices=LEARNERS, default=list(LEARNERS))
    parser.add_argument("--seeds", nargs="+", type=int, default=[0, 1, 2])
    parser.add_argument("--budget", type=int, default=BUDGET, help="env steps per run")
    parser.add_argument("--every", type=int, default=EVERY, help="env steps between evaluations")
    parser.add_argument("--workers", type=int, default=2, help="runs at a time")
    parser.add_argument("--json", help="also write the curves here")
    parser.add_argument("--plot", metavar="DIR", help="draw the learning curves into DIR")
    parser.add_argument("--from-json", metavar="FILE", help="plot curves saved by --json")
    args = parser.parse_args(argv)
    if args.from_json:
        with open(args.from_json) as handle:
            saved = json.load(handle)
        curves, seeds, every = saved["curves"], saved["seeds"], saved["every"]
    else:
        seeds, every = args.seeds, args.every
        curves = run_all(args.learners, seeds, args.budget, every, args.workers)
    print(f"TinyCoop H=4, sparse reward, seeds {seeds}: eval mean return at env steps")
    print(table(curves, every))
    if args.json and not args.from_json:
        with open(args.json, "w") as handle:
            record = {"seeds": seeds, "every": every, "curves": curves}
            json.dump(
                {"provenance": provenance(None if argv is None else [__file__, *argv]), **record},
                handle,
            )
    if args.plot:
        for path in plot(curves, every, seeds, args.plot):
            print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

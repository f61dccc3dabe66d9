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


def table(curves: dict[str, list[list[float]]], every: int) -> str:
    """Mean curve over the seeds per learner, and each seed's final return."""
    width = max(len(runs[0]) for runs in curves.values())
    steps = [every * i for i in range(width)]
    head = "| learner | " + " | ".join(f"{s:,}" for s in steps) + " | finals (per seed) |"
    lines = [head, "|---" * (width + 2) + "|"]
    for name, runs in curves.items():
        mean = [statistics.mean(points) for points in zip(*runs, strict=True)]
        finals = ", ".join(f"{r[-1]:.3f}" for r in runs)
        lines.append(f"| {name} | " + " | ".join(f"{v:.3f}" for v in mean) + f" | {finals} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--learners", nargs="+", choices=LEARNERS, default=list(LEARNERS))
    parser.add_argument("--seeds", nargs="+", type=int, default=[0, 1, 2])
    parser.add_argument("--budget", type=int, default=BUDGET, help="env steps per run")
    parser.add_argument("--every", type=int, default=EVERY, help="env steps between evaluations")
    parser.add_argument("--workers", type=int, default=2, help="runs at a time")
    parser.add_argument("--json", help="also write the curves here")
    args = parser.parse_args(argv)
    jobs = [(n, s, args.budget, args.every) for n in args.learners for s in args.seeds]
    with ProcessPoolExecutor(max_workers=args.workers) as pool:
        results = list(pool.map(_run_in_child, jobs))
    curves: dict[str, list[list[float]]] = {}
    for (name, _, _, _), curve in zip(jobs, results, strict=True):
        curves.setdefault(name, []).append(curve)
    print(f"TinyCoop H=4, sparse reward, seeds {args.seeds}: eval mean return at env steps")
    print(table(curves, args.every))
    if args.json:
        with open(args.json, "w") as handle:
            json.dump({"seeds": args.seeds, "every": args.every, "curves": curves}, handle)
    return 0


if __name__ == "__main__":
    sys.exit(main())

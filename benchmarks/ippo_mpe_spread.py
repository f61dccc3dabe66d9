"""IPPO with MLP policies on MPE simple_spread (mpe2), against a random and a scripted team.

The learner is collabzoo's own `IPPOTrainer` (the one that trains LLM teams), driving the
`mpe2` ParallelEnv through the PettingZoo API with `MLPPolicy` actors; nothing here is specific
to MPE beyond the env constructor. Every figure is the team return of one episode (25 steps,
per step the mean of the three agents' rewards, so 0.5 * global + 0.5 * own collisions with
mpe2's default local_ratio), averaged over the same held-out episode seeds for every team:

- random: every agent picks uniformly among its 5 actions;
- scripted: every agent rebuilds the whole scene from its own observation, solves the same
  agent-to-landmark assignment (least total distance over the 3! matchings) and steers to its
  landmark with a damped bang-bang controller; a decentralized hand-written reference;
- IPPO: the trained policies, sampled (as trained) and greedy.

    python benchmarks/ippo_mpe_spread.py              # 450 updates of 32 episodes: 360k steps

`--json` alone writes benchmarks/results/ippo_mpe_spread.json: a row per team (random, IPPO per
seed, scripted), the rows `mpe_table` renders as the Performance page's table. The page's file
also holds the rows of `benchmarks/torchrl_mappo_mpe_spread.py`'s reports, added by hand.
"""

from __future__ import annotations

import argparse
import itertools
import json
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import torch
from mpe2 import simple_spread_v3

sys.path.insert(0, str(Path(__file__).resolve().parent))
from results_table import markdown_table, results_path, write_results

from collabzoo.algos import IPPOConfig, IPPOTrainer
from collabzoo.algos.policies.mlp import mlp_team

MAX_CYCLES = 25


def make_env() -> Any:
    return simple_spread_v3.parallel_env(N=3, max_cycles=MAX_CYCLES)


def team_return(act: Callable[[dict[str, np.ndarray]], dict[str, int]], seed: int) -> float:
    """One episode's team return: per step the mean reward over the agents, summed."""
    env = make_env()
    observations, _ = env.reset(seed=seed)
    total = 0.0
    while env.agents:
        actions = act({a: observations[a] for a in env.agents})
        observations, rewards, _, _, _ = env.step(actions)
        total += float(np.mean(list(rewards.values())))
    return total


def scripted_action(observation: np.ndarray) -> int:
    """Steer to this agent's landmark under the least-total-distance assignment."""
    velocity, position = observation[0:2], observation[2:4]
    landmarks = observation[4:10].reshape(3, 2) + position
    others = observation[10:14].reshape(2, 2) + position
    agents = [position, *others]
    best, mine = np.inf, 0
    for order in itertools.permutations(range(3)):
        cost = sum(np.linalg.norm(agents[i] - landmarks[j]) for i, j in enumerate(order))
        if cost < best:
            best, mine = cost, order[0]
    error = landmarks[mine] - position - 0.4 * velocity  # brake ahead of the target
    if np.abs(error).max() < 0.02:
        return 0
    axis = int(np.abs(error).argmax())
    return (2 if error[0] > 0 else 1) if axis == 0 else (4 if error[1] > 0 else 3)


def evaluate(trainer: IPPOTrainer, seeds: list[int], greedy: bool) -> float:
    policies = trainer.policies
    sampling = trainer.args.sampling()
    if greedy:
        sampling = type(sampling)(do_sample=False)

    @torch.no_grad()
    def act(observations: dict[str, np.ndarray]) -> dict[str, int]:
        return {a: policies[a].generate([o], sampling)[0].text for a, o in observations.items()}

    return float(np.mean([team_return(act, s) for s in seeds]))


def train(
    seed: int, updates: int, episodes: int, eval_seeds: list[int], lr: float, scale: float
) -> dict[str, Any]:
    torch.manual_seed(seed)
    env = make_env()
    args = IPPOConfig(
        output_dir=f"runs/ippo-mpe-spread-{seed}",
        seed=seed,
        max_updates=updates,
        rollout_buffer_size=episodes,
        discount=0.99,
        gae_lambda=0.95,
        actor_learning_rate=lr,
        critic_learning_rate=lr,
        reward_scale=scale,
        ppo_epochs=4,
        mini_batch_size=episodes * MAX_CYCLES // 4,
        clip_range=0.2,
        value_clip_range=None,
        entropy_coef=0.01,
        max_grad_norm=0.5,
        temperature=1.0,
        top_p=1.0,
        top_k=None,
        logprob_batch_size=10_000,
        tensorboard=False,
        progress=False,
        save_steps=0,
    )
    trainer = IPPOTrainer(env=make_env, models=mlp_team(env, shared=True, seed=seed), args=args)
    started = time.perf_counter()
    curve = []
    for update in range(updates):
        metrics = trainer.train_step()
        if (update + 1) % max(1, updates // 20) == 0:
            curve.append((update + 1, round(evaluate(trainer, eval_seeds[:20], False), 2)))
            print(f"seed {seed} update {update + 1}: return {curve[-1][1]}", flush=True)
    return {
        "seed": seed,
        "env_steps": int(metrics["env_steps"]),
        "seconds": round(time.perf_counter() - started, 1),
        "sampled": round(evaluate(trainer, eval_seeds, False), 2),
        "greedy": round(evaluate(trainer, eval_seeds, True), 2),
        "curve": curve,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--updates", type=int, default=450)
    parser.add_argument("--episodes", type=int, default=32, help="episodes per update")
    parser.add_argument("--seeds", type=int, nargs="+", default=[0])
    parser.add_argument("--eval-episodes", type=int, default=100)
    parser.add_argument("--lr", type=float, default=3e-3, help="actor and critic learning rate")
    parser.add_argument("--reward-scale", type=float, default=0.1, help="rewards x this to learn")
    parser.add_argument(
        "--json",
        nargs="?",
        const=str(results_path("ippo_mpe_spread")),
        help="also write the table's rows here (alone: benchmarks/results/ippo_mpe_spread.json)",
    )
    options = parser.parse_args()
    eval_seeds = [10_000 + i for i in range(options.eval_episodes)]
    rng = np.random.default_rng(0)
    report: dict[str, Any] = {
        "random": round(
            float(
                np.mean(
                    [
                        team_return(lambda o: {a: int(rng.integers(5)) for a in o}, s)
                        for s in eval_seeds
                    ]
                )
            ),
            2,
        ),
        "scripted": round(
            float(
                np.mean(
                    [
                        team_return(lambda o: {a: scripted_action(x) for a, x in o.items()}, s)
                        for s in eval_seeds
                    ]
                )
            ),
            2,
        ),
    }
    print(json.dumps(report), flush=True)
    report["ippo"] = [
        train(
            seed,
            options.updates,
            options.episodes,
            eval_seeds,
            options.lr,
            options.reward_scale,
        )
        for seed in options.seeds
    ]
    print(json.dumps(report))
    if options.json:
        ippo = "collabzoo IPPO, one shared MLP (64, 64)"
        rows = [{"team": "random actions", "env_steps": None, "sampled": report["random"]}]
        for run in report["ippo"]:
            rows.append(
                {"team": ippo, "env_steps": run["env_steps"], "sampled": run["sampled"]}
                | {"greedy": run["greedy"], "seed": run["seed"], "curve": run["curve"]}
            )
        rows.append(
            {
                "team": "scripted: least-distance assignment + steering, per agent",
                "env_steps": None,
                "sampled": report["scripted"],
            }
        )
        results = {"eval_episodes": options.eval_episodes, "rows": rows}
        write_results(options.json, {"headline": headline(results), **results})


# ----- the Performance page's table --------------------------------------------------------------
def steps(row: dict[str, Any]) -> str:
    if row.get("env_steps") is None:
        return "-"
    text = f"{row['env_steps'] / 1000:.0f}k"
    return f"{text} ({row['steps_note']})" if row.get("steps_note") else text


def returns(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}"


def mpe_table(results: dict[str, Any]) -> str:
    """A row per team: its training budget, and its mean return sampled and greedy."""
    cells = [
        [row["team"], steps(row), returns(row["sampled"]), returns(row.get("greedy"))]
        for row in results["rows"]
    ]
    return markdown_table(["team", "env steps", "return (sampled)", "return (greedy)"], cells)


def headline(results: dict[str, Any]) -> dict[str, Any]:
    """collabzoo's longest IPPO run against random play and the scripted team."""
    rows = results["rows"]
    ippo = max(
        (r for r in rows if r["team"].startswith("collabzoo IPPO") and not r.get("steps_note")),
        key=lambda r: r["env_steps"],
    )
    random = next(r for r in rows if r["team"] == "random actions")
    scripted = next(r for r in rows if r["team"].startswith("scripted"))
    return {
        "benchmark": "IPPO on MPE simple_spread",
        "figure": f"collabzoo IPPO {ippo['sampled']:.2f} after {steps(ippo)} env steps (random "
        f"{random['sampled']:.2f}, scripted {scripted['sampled']:.2f})",
        "ratio": None,
        "section": "IPPO on MPE simple_spread",
    }


if __name__ == "__main__":
    main()

"""AT-GRPO's cost per update against MAGRPO's, at two horizons, side by side in one run.

MAGRPO grows a full aligned rollout tree: at depth t every one of the K^t nodes samples K
completions per agent, so an episode of H turns costs N (K + K^2 + ... + K^H) generations and
K + ... + K^H env steps. AT-GRPO keeps one branch per turn (`rollout.beam`): N K H generations
and K H env steps. This script trains both learners on TinyCoop at H = 2 and H = 4 with the
same tiny byte-level models, K and episodes per update, and times whole updates (rollout and
learning), alternating the learners round by round so that the machine's load falls on both.

    python benchmarks/atgrpo_cost.py [--k 4] [--episodes 2] [--rounds 3] [--threads 1]
        [--json [out.json]]

`--json` alone writes benchmarks/results/atgrpo_cost.json, from which `atgrpo_cost_table`
builds the Performance page's table.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
import torch
from results_table import markdown_table, results_path, significant, thousands, times, write_results

HORIZONS = (2, 4)
LEARNERS = ("magrpo", "atgrpo")
AGENTS = 2  # TinyCoop's


def build(learner: str, horizon: int, k: int, episodes: int, folder: str) -> Any:
    """A trainer of `learner` on TinyCoop at `horizon`, tiny models trained from scratch."""
    import collabzoo
    from collabzoo.algos import LEARNERS as KNOWN
    from collabzoo.algos import LLMPolicy, tiny_causal_lm

    config_class, trainer_class = KNOWN[learner]
    config = config_class(
        output_dir=folder,
        num_generations=k,
        rollout_buffer_size=episodes,
        num_turns=horizon,
        max_new_tokens=4,
        temperature=1.0,
        top_p=1.0,
        top_k=None,
        agent_learning_rate=1e-2,
        tensorboard=False,
        progress=False,
        save_steps=0,
    )
    team = {a: LLMPolicy(*tiny_causal_lm(seed=i)) for i, a in enumerate(("alpha", "beta"))}
    return trainer_class(lambda: collabzoo.make("tinycoop", horizon=horizon), team, config)


def timed_update(trainer: Any) -> dict[str, float]:
    """One update (rollout, then learning): seconds of each, generations and env steps."""
    from collabzoo.algos.rollout.beam import tree_generations

    steps = trainer.rollout.env_steps
    started = time.perf_counter()
    roots = trainer.rollout_update()
    rolled = time.perf_counter()
    trainer.learn(roots)
    trainer.update += 1
    done = time.perf_counter()
    return {
        "seconds": done - started,
        "rollout_seconds": rolled - started,
        "learn_seconds": done - rolled,
        "generations": tree_generations(roots),
        "env_steps": trainer.rollout.env_steps - steps,
    }


def expected_generations(learner: str, k: int, horizon: int) -> int:
    """Generations per episode by the formula: N (K + ... + K^H) or N K H."""
    if learner == "magrpo":
        return AGENTS * sum(k**t for t in range(1, horizon + 1))
    return AGENTS * k * horizon


def measure(k: int, episodes: int, rounds: int) -> list[dict[str, Any]]:
    rows = []
    with tempfile.TemporaryDirectory() as folder:
        for horizon in HORIZONS:
            trainers = {
                name: build(name, horizon, k, episodes, f"{folder}/{name}-{horizon}")
                for name in LEARNERS
            }
            for trainer in trainers.values():
                timed_update(trainer)  # warm-up: first-call allocations, thread pools
            runs: dict[str, list[dict[str, float]]] = {name: [] for name in LEARNERS}
            for _ in range(rounds):
                for name, trainer in trainers.items():
                    runs[name].append(timed_update(trainer))
            for name in LEARNERS:
                found = runs[name]
                generations = found[0]["generations"] / episodes
                assert generations == expected_generations(name, k, horizon), (name, horizon)
                rows.append(
                    {
                        "learner": name,
                        "horizon": horizon,
                        "k": k,
                        "agents": AGENTS,
                        "episodes_per_update": episodes,
                        "generations_per_episode": generations,
                        "env_steps_per_episode": found[0]["env_steps"] / episodes,
                        "update_seconds": statistics.median(r["seconds"] for r in found),
                        "rollout_seconds": statistics.median(r["rollout_seconds"] for r in found),
                        "learn_seconds": statistics.median(r["learn_seconds"] for r in found),
                        "rounds": rounds,
                    }
                )
            for trainer in trainers.values():
                trainer.close()
    return rows


def ratios(rows: list[dict[str, Any]]) -> dict[str, dict[str, float]]:
    """Per horizon, MAGRPO's generations and update time over AT-GRPO's."""
    found = {}
    for horizon in sorted({r["horizon"] for r in rows}):
        by = {r["learner"]: r for r in rows if r["horizon"] == horizon}
        found[str(horizon)] = {
            "generations": by["magrpo"]["generations_per_episode"]
            / by["atgrpo"]["generations_per_episode"],
            "time": by["magrpo"]["update_seconds"] / by["atgrpo"]["update_seconds"],
        }
    return found


def atgrpo_cost_table(results: dict[str, Any]) -> str:
    """The Performance page's table: per horizon and learner, the cost of one update."""
    names = {"magrpo": "MAGRPO (full aligned tree)", "atgrpo": "AT-GRPO (one branch per turn)"}
    header = [
        "H",
        "learner",
        "generations / episode",
        "env steps / episode",
        "update (s)",
        "rollout (s)",
        "learning (s)",
        "MAGRPO / AT-GRPO",
    ]
    body = []
    for row in results["rows"]:
        ratio = results["ratios"][str(row["horizon"])]
        versus = (
            f"{times(ratio['generations'], 1)} generations, {times(ratio['time'], 1)} time"
            if row["learner"] == "atgrpo"
            else ""
        )
        body.append(
            [
                str(row["horizon"]),
                names[row["learner"]],
                thousands(row["generations_per_episode"]),
                thousands(row["env_steps_per_episode"]),
                significant(row["update_seconds"]),
                significant(row["rollout_seconds"]),
                significant(row["learn_seconds"]),
                versus,
            ]
        )
    return markdown_table(header, body, "rlrrrrrl")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--k", type=int, default=4, help="K, samples per agent and state")
    parser.add_argument("--episodes", type=int, default=2, help="episodes per update")
    parser.add_argument("--rounds", type=int, default=3, help="timed updates per learner")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument(
        "--json",
        nargs="?",
        const=str(results_path("atgrpo_cost")),
        help="write the results here (alone: benchmarks/results/atgrpo_cost.json)",
    )
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    rows = measure(args.k, args.episodes, args.rounds)
    found = ratios(rows)
    results = {
        "settings": {
            "env": "tinycoop",
            "model": "tiny (byte-level Qwen2, about 0.1M parameters, from scratch)",
            "max_new_tokens": 4,
            "threads": args.threads,
        },
        "rows": rows,
        "ratios": found,
        "headline": {
            "benchmark": "AT-GRPO against MAGRPO, cost per update",
            "figure": (
                f"at H = 4, K = {args.k}: AT-GRPO samples "
                f"{thousands(rows[3]['generations_per_episode'])} completions per episode where "
                f"MAGRPO samples {thousands(rows[2]['generations_per_episode'])}; its update is "
                f"{times(found['4']['time'], 1)} faster"
            ),
            "ratio": round(found["4"]["time"], 2),
            "section": "AT-GRPO against MAGRPO: cost per update",
        },
    }
    print(atgrpo_cost_table(results))
    if args.json:
        write_results(args.json, results, sys.argv)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""MADPO and MARLHF learn TinyCoop from the command line: `collabzoo train madpo|marlhf --env
tinycoop --model tiny`, the final evaluation (64 episodes, the task's own reward) read back
from summary.json. Random byte-level policies win 2-3% of TinyCoop's episodes (test_learners);
each of two run seeds must clear a bound set from the spread over four seeds (below)."""

from __future__ import annotations

import json

import pytest

from tests.optional import require_module

require_module("torch", "train")

SEEDS = (0, 1)

LEARNED = {"madpo": 0.15, "marlhf": None, "madpo_iter": 0.25}
"""The final evaluation return each seed must reach, from the CLI runs below over seeds 0-3
(64 evaluation episodes each; the project's 2-core CPU, 2026-12-07):

    learner      seeds 0-3                        mean   sd
    MADPO        0.328 0.281 0.344 0.234          0.297  0.048
    MARLHF       MARLHF_ROW
    MADPOIter    0.516 0.422 0.531 0.375          0.461  0.074

Each bound is about three standard deviations under its learner's mean and at least five times
random play (0.016-0.031); a learner that does not learn stays near 0.03."""

COMMON = [
    "--env",
    "tinycoop",
    "--model",
    "tiny",
    "--eval-episodes",
    "64",
    "--set",
    "max_new_tokens=1",
    "--set",
    "progress=false",
    "--set",
    "tensorboard=false",
    "--set",
    "save_steps=0",
]
SETTINGS = {
    "madpo": [
        "preference_num_candidates=16",
        "preference_num_items=8",
        "train_batch_size=8",
    ],
    "madpo_iter": [
        "preference_num_candidates=16",
        "preference_num_items=8",
        "preference_pairs_per_sample=8",
        "train_batch_size=8",
        "num_train_epochs=2",
    ],
    "marlhf": [
        "preference_num_candidates=32",
        "preference_num_items=8",
        "reward_learning_rate=0.01",
        "reward_num_train_epochs=3",
        "reward_train_batch_size=4",
        "rollout_buffer_size=8",
        "num_generations=8",
    ],
}


def trained(algo: str, seed: int, path) -> tuple[float, list[dict]]:
    """(the final evaluation's mean return, the metrics of every update) of one CLI run."""
    from collabzoo.cli import main

    updates = ["--updates", "6" if algo.endswith("_iter") else "40"]
    extra = [*updates, *(part for setting in SETTINGS[algo] for part in ("--set", setting))]
    command = ["train", algo, "--output", str(path), *COMMON, *extra, "--set", f"seed={seed}"]
    assert main(command) == 0
    summary = json.loads((path / "summary.json").read_text())
    records = [json.loads(line) for line in (path / "metrics.jsonl").read_text().splitlines()]
    return summary["eval"]["mean_return"], records


@pytest.mark.slow(seconds=240)
@pytest.mark.parametrize("algo", ["madpo", "madpo_iter", "marlhf"])
def test_preference_learners_learn_tinycoop_from_the_command_line(algo: str, tmp_path) -> None:
    for seed in SEEDS:
        after, records = trained(algo, seed, tmp_path / str(seed))
        assert after >= LEARNED[algo], (algo, seed, after)
    first, last = records[0], records[-1]
    if algo == "madpo":  # the DPO loss falls from log 2 (a frozen reference) as pairs separate
        assert abs(first["loss"] - 0.6931) < 0.05 and last["dpo/accuracy"] > 0.5
    if algo == "marlhf":  # the reward model ranks held-out pairs better than chance
        assert last["reward_model/heldout_accuracy"] > 0.5
        assert "task/env_reward" in last
    if algo == "madpo_iter":
        assert [r["update"] for r in records] == list(range(1, 7))
        assert all(r["iter/train_preference_pairs"] > 0 for r in records)

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

LEARNED = {"madpo": 0.10, "madpo-iter": 0.10, "marlhf": 0.10, "marlhf-iter": 0.10}
"""The final evaluation return each seed must reach. Measured with `trained` below over seeds
0-3 (64 evaluation episodes each; the project's 2-core CPU, 2026-12-07):

    learner      seeds 0-3                        mean   sd
    MADPO        0.203 0.250 0.484 0.297          0.309  0.123
    MADPOIter    0.172 0.141 0.500 0.547          0.340  0.213
    MARLHF       0.469 0.438 0.391 0.000          0.324  0.219
    MARLHFIter   0.469 0.234 0.313 0.016          0.258  0.189

Random play wins 0.016-0.031 (test_learners). The spreads are wide and two-sided (a run either
finds the winning parities or settles part-way), so three standard deviations under the mean
would bound nothing: every bound is 0.10, three to six times random play and under every
measured MADPO and MADPOIter seed. The reward-model learners fail one seed of four (seed 3):
the reward model, trained on one iteration's pairs, is over-optimised (the training batches'
env reward rises, then falls while the model's score keeps rising; see the MARLHF page), so
for them the bound is cleared by three seeds of four, the two tested among them."""

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
    "madpo-iter": [
        "preference_num_candidates=16",
        "preference_num_items=8",
        "preference_pairs_per_sample=8",
        "train_batch_size=8",
        "num_train_epochs=2",
    ],
    "marlhf-iter": [
        "preference_num_candidates=16",
        "preference_num_items=8",
        "preference_pairs_per_sample=8",
        "reward_learning_rate=0.01",
        "reward_num_train_epochs=3",
        "reward_train_batch_size=4",
        "rollout_buffer_size=8",
        "num_generations=8",
        "num_train_epochs=10",
    ],
    "marlhf": [
        "preference_num_candidates=32",
        "preference_num_items=8",
        "reward_learning_rate=0.003",
        "reward_num_train_epochs=3",
        "reward_train_batch_size=4",
        "rollout_buffer_size=8",
        "num_generations=8",
    ],
}
UPDATES = {"madpo": 40, "madpo-iter": 6, "marlhf": 24, "marlhf-iter": 4}


def trained(algo: str, seed: int, path) -> tuple[float, list[dict]]:
    """(the final evaluation's mean return, the metrics of every update) of one CLI run."""
    import torch

    from collabzoo.cli import main

    torch.manual_seed(seed)  # training samples from torch's global RNG: the same start each run

    extra = [
        "--updates",
        str(UPDATES[algo]),
        *(part for setting in SETTINGS[algo] for part in ("--set", setting)),
    ]
    command = ["train", algo, "--output", str(path), *COMMON, *extra, "--set", f"seed={seed}"]
    assert main(command) == 0
    summary = json.loads((path / "summary.json").read_text())
    records = [json.loads(line) for line in (path / "metrics.jsonl").read_text().splitlines()]
    return summary["eval"]["mean_return"], records


@pytest.mark.parametrize(
    "algo",
    [  # seconds: two seeds' CLI runs (--durations, 2-core machine, four at once)
        pytest.param("madpo", marks=pytest.mark.slow(seconds=120)),
        pytest.param("madpo-iter", marks=pytest.mark.slow(seconds=125)),
        pytest.param("marlhf", marks=pytest.mark.slow(seconds=195)),
        pytest.param("marlhf-iter", marks=pytest.mark.slow(seconds=230)),
    ],
)
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
    if algo.endswith("-iter"):  # one record per iteration, each trained on its pairs
        count = len(records)
        assert [r["update"] for r in records] == list(range(1, count + 1)) and count in (4, 6)
        assert all(r["iter/train_preference_pairs"] > 0 for r in records)

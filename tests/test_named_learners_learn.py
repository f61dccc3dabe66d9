"""The learners CoMLRL users look for by name learn TinyCoop from the command line, from
scratch, as test_learners' learners do from Python: MARLOO, and MAAC (the centralized critic's
second name).

MAReMax is not here. MAReMax (max baseline, unnormalised: the spec's default) with COMMON: seed
0 ended at 0.031 after 50 updates; after 100 updates seed 0 at 0.000 and seed 1 at 0.562; with
agent_learning_rate 3e-2, 0.469 (seed 0) and 0.000 (seed 1); with advantage_normalization='std'
and 100 updates, 0.531 (seed 0) and 0.000 (seed 1). Every advantage is <= 0, so the update only
pushes samples down: a group with one win pushes its seven other samples down, good halves of
failed joint actions included, and a team that stops winning gets zero advantages from then on
(no way back). It is not a learner this budget can test for learning; its loss and gradient are
checked against CoMLRL's in test_comlrl_parity."""

from __future__ import annotations

import json

import pytest

from tests.optional import require_module

require_module("torch", "train")

from tests.test_learners import LEARNING_SEEDS  # noqa: E402

LEARNED = 0.35
"""The final evaluation return (64 episodes) each of LEARNING_SEEDS must reach; random play
wins 0.016-0.031 of TinyCoop's episodes. Measured with COMMON (50 updates of 8 episodes x 8
samples, `--set seed=N`) on the project's 2-core CPU, 2026-12-07:

    learner   eval after 50 updates, seeds 0-3   mean   sd
    marloo    0.469 0.562 0.531 0.453            0.504  0.044
    maac      0.469 0.562 0.469 0.453            0.488  0.043

0.35 is at least three standard deviations below each mean and ten times random play."""


COMMON = [
    "--env",
    "tinycoop",
    "--model",
    "tiny",
    "--updates",
    "50",
    "--eval-episodes",
    "64",
    *("--set", "rollout_buffer_size=8", "--set", "num_generations=8"),
    *("--set", "max_new_tokens=1", "--set", "progress=false", "--set", "tensorboard=false"),
    *("--set", "save_steps=0"),
]


@pytest.mark.slow(seconds=300)
@pytest.mark.parametrize("algo", ["marloo", "maac"])
def test_named_learners_learn_tinycoop_from_the_command_line(algo: str, tmp_path) -> None:
    from collabzoo.cli import main

    for seed in LEARNING_SEEDS:
        out = tmp_path / str(seed)
        command = ["train", algo, "--output", str(out), *COMMON, "--set", f"seed={seed}"]
        assert main(command) == 0
        records = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
        assert [r["update"] for r in records] == list(range(1, 51))
        assert records[0]["mean_return"] <= 0.1, (seed, records[0])  # the untrained team
        after = json.loads((out / "summary.json").read_text())["eval"]["mean_return"]
        assert after >= LEARNED, (algo, seed, after)

"""Every learner on the real pretrained model: SmolLM2-135M-Instruct (the `smollm2` fixture),
one base with a LoRA adapter per agent, and per critic where the learner has critics (IAC's,
IPPO's and CC's separate critics become adapters on the same base). Each learner trains one
update, and one update + checkpoint + resume + one update ends exactly where two straight
updates end (torch.equal on every weight, adapter, optimizer state and counter).

The env is test_resume_every_learner's `FirstCharacters` (a dense reward from the answers'
first characters, short prompts): the model is real, the task small enough for CI.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.optional import require_module

torch = require_module("torch", "train")
require_module("peft", "train")

from collabzoo.algos import (  # noqa: E402
    CentralCriticConfig,
    CentralCriticTrainer,
    IACConfig,
    IACTrainer,
    IPPOConfig,
    IPPOTrainer,
    MAGRPOConfig,
    MAGRPOTrainer,
    MAREINFORCEConfig,
    MAREINFORCETrainer,
    load_causal_lm,
    lora_team,
)
from tests.test_resume_every_learner import (  # noqa: E402
    AGENTS,
    assert_same_run,
    straight_and_resumed,
)

REAL = {  # a few sampled tokens at temperature 1: every sample differs, every update learns
    "max_new_tokens": 4,
    "temperature": 1.0,
    "top_p": 1.0,
    "top_k": None,
    "rollout_buffer_size": 2,
    "num_generations": 2,
    "tensorboard": False,
    "progress": False,
    "device": "cpu",
    "save_steps": 1,
}
LEARNERS = {
    "magrpo": (MAGRPOTrainer, MAGRPOConfig, {"agent_learning_rate": 1e-3}),
    "mareinforce": (
        MAREINFORCETrainer,
        MAREINFORCEConfig,
        {"agent_learning_rate": 1e-3, "advantage_mode": "rloo"},
    ),
    "iac": (IACTrainer, IACConfig, {"actor_learning_rate": 1e-3, "critic_learning_rate": 1e-3}),
    "ippo": (
        IPPOTrainer,
        IPPOConfig,
        {"actor_learning_rate": 1e-3, "critic_learning_rate": 1e-3, "ppo_epochs": 2},
    ),
    "cc": (
        CentralCriticTrainer,
        CentralCriticConfig,
        {"actor_learning_rate": 1e-3, "critic_learning_rate": 1e-3},
    ),
}


@pytest.mark.parametrize("name", sorted(LEARNERS))
@pytest.mark.slow(seconds=60)
def test_every_learner_trains_and_resumes_a_lora_team_of_the_real_model(
    name: str, smollm2: Path, tmp_path
) -> None:
    trainer_class, config_class, own = LEARNERS[name]

    def config(path: Path, updates: int, **more):
        return config_class(output_dir=str(path), max_updates=updates, **REAL, **own, **more)

    def real_team() -> dict:
        return lora_team(*load_causal_lm(str(smollm2)), AGENTS, rank=4)

    whole, resumed = straight_and_resumed(trainer_class, config, tmp_path, make_team=real_team)
    state = assert_same_run(whole, resumed)
    assert sorted(state["policies"]) == list(AGENTS)
    adapters = state["policies"].values()
    assert all(weights and all("lora_" in n for n in weights) for weights in adapters)
    base = whole.distinct[0].model
    assert base.get_base_model().config.num_hidden_layers == 30, "SmolLM2-135M's 30 layers"
    if hasattr(whole, "critics"):  # every critic is an adapter of its own on the same base
        backbones = [c.backbone for c in whole.critics.values()]
        assert backbones and all(b.model is base and b.adapter for b in backbones)
        assert {b.adapter for b in backbones}.isdisjoint(AGENTS)
        assert state["extra"]["critic_backbones"]

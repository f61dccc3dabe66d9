"""Every learner trains every agent of a LoRA team.

A LoRA team's agents are adapters on one shared base, and activating one adapter (peft's
`set_adapter`) turns the others' `requires_grad` off. Autograd then drops the gradient of a
leaf that no longer requires it, so a learner that scores every agent first and steps them
afterwards silently trains only the agent scored last. MADPO and MADPOIter did exactly that
until this test: their first agent never moved. Full models, which every other test of these
learners uses, cannot show it.
"""

from __future__ import annotations

import warnings
from pathlib import Path

import pytest

from tests.optional import require_module

torch = require_module("torch", "train")
require_module("peft", "train")

import collabzoo  # noqa: E402
from collabzoo.algos import LEARNERS, lora_team, tiny_causal_lm  # noqa: E402

ONE_POLICY = {"joint", "joint-ac"}
"""The joint learners train one policy for the whole team: nothing per agent to check."""
SMALL = {  # one or two tiny updates, whatever the learner's own sizes are called
    "max_updates": 2,
    "max_new_tokens": 2,
    "temperature": 1.0,
    "top_p": 1.0,
    "top_k": None,
    "tensorboard": False,
    "progress": False,
    "rollout_buffer_size": 2,
    "num_generations": 4,
    "agent_learning_rate": 1e-2,
    "actor_learning_rate": 1e-2,
    "critic_learning_rate": 1e-2,
    "preference_num_candidates": 8,
    "preference_num_items": 4,
    "train_batch_size": 2,
    "reward_heldout_items": 0,
}


def adapter_weights(policy) -> dict[str, torch.Tensor]:
    """This agent's own LoRA weights (its adapter's name in the parameter's)."""
    mark = f".{policy.adapter}."
    return {
        name: p.detach().clone()
        for name, p in policy.model.named_parameters()
        if "lora_" in name and mark in name
    }


@pytest.mark.parametrize("name", sorted(set(LEARNERS) - ONE_POLICY))
def test_every_agent_of_a_lora_team_is_trained(name: str, tmp_path: Path) -> None:
    config_class, trainer_class = LEARNERS[name][:2]
    fields = config_class.__dataclass_fields__
    settings = {k: v for k, v in SMALL.items() if k in fields}
    agents = list(collabzoo.make("tinycoop").possible_agents)
    torch.manual_seed(0)
    team = lora_team(*tiny_causal_lm(seed=0), agents, rank=4)
    config = config_class(output_dir=str(tmp_path / name), **settings)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        trainer = trainer_class(lambda: collabzoo.make("tinycoop"), team, config)
        before = {a: adapter_weights(trainer.policies[a]) for a in agents}
        assert all(before.values()), "every agent has an adapter of its own"
        try:
            trainer.train()
        finally:
            trainer.close()
    for agent in agents:
        now = dict(trainer.policies[agent].model.named_parameters())
        moved = max(float((now[n] - w).abs().max()) for n, w in before[agent].items())
        assert moved > 0, f"{name}: agent {agent!r}'s adapter did not move"


@pytest.mark.parametrize("checkpointing", [False, True])
def test_policy_backward_is_its_own_adapter_s_whichever_is_active(checkpointing: bool) -> None:
    """`Policy.backward` after another agent's scoring gives the gradient the agent's loss has
    alone. A bare `loss.backward()` there loses it (peft turned the adapter's `requires_grad`
    off), and under gradient checkpointing the recomputed forward would run the other adapter."""
    agents = ["a", "b"]
    torch.manual_seed(0)
    team = lora_team(*tiny_causal_lm(seed=0), agents, rank=4)
    with torch.no_grad():  # LoRA's B starts at 0: give both adapters an effect to mix up
        for name, p in team["a"].model.named_parameters():
            if "lora_" in name:
                p.normal_(0.0, 0.3)
    if checkpointing:
        team["a"].enable_gradient_checkpointing()
    prompts, completions = [[5, 6, 7, 8]], [[9, 10, 11]]

    def loss_of(agent: str) -> torch.Tensor:
        policy = team[agent]
        with policy.mode(train=True):
            return -policy.score(prompts, completions).log_probs.sum()

    def gradients(agent: str) -> dict[str, torch.Tensor]:
        """The agent's adapter gradients, then cleared."""
        mark = f".{team[agent].adapter}."
        own = {n: p for n, p in team[agent].model.named_parameters() if "lora_" in n and mark in n}
        missing = sorted(n for n, p in own.items() if p.grad is None)
        assert not missing, f"agent {agent}'s adapter got no gradient: {missing[:2]}"
        grads = {n: p.grad.clone() for n, p in own.items()}
        team[agent].model.zero_grad(set_to_none=True)
        return grads

    team["a"].backward(loss_of("a"))
    alone = gradients("a")
    assert all(g.abs().max() > 0 for g in alone.values()), "agent a's loss reaches its adapter"

    loss = loss_of("a")
    loss_of("b")  # activates b's adapter, as a learner scoring the team does
    team["a"].backward(loss)
    after_b = gradients("a")
    assert after_b.keys() == alone.keys()
    for name, grad in alone.items():
        assert torch.allclose(after_b[name], grad, atol=1e-6), name

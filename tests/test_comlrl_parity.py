"""CoMLRL 1.4.3's MAGRPO family and MAAC against collabzoo's learners on one fixed batch: the
same tiny model, the same samples, the same returns, the loss and every gradient to 1e-6
(learners-2.md sections 1 and 3).

Both sides compute in float32 (collabzoo keeps trainable weights as float32 masters) and sum in
different orders, so "equal" is to 1e-6 of the compared value's scale (at least 1).
The reference's MAGRPO loss scores completion tokens 0..L-2 (its logits are sliced one short),
so it gets each completion with one sentinel token appended and collabzoo the completion alone;
both score at temperature 1 without truncation (the reference always does, collabzoo when it
samples that way). The reference's optimizer steps are replaced by no-ops so that the gradients
it computed can be read."""

from __future__ import annotations

import copy
import itertools
from typing import Any

import pytest

from tests.optional import require_module

torch = require_module("torch", "train")
require_module("comlrl", "interop")

import collabzoo  # noqa: E402
from collabzoo.algos import (  # noqa: E402
    LLMPolicy,
    MAACConfig,
    MAACTrainer,
    MAGRPOConfig,
    MAGRPOTrainer,
    MAREINFORCEConfig,
    MAREINFORCETrainer,
    MAReMaxConfig,
    MAReMaxTrainer,
    MARLOOConfig,
    MARLOOTrainer,
    tiny_causal_lm,
)
from collabzoo.algos.learners.critic_batches import TEAM, CriticSample, Sample  # noqa: E402
from collabzoo.algos.learners.tree_learner import TreeSample  # noqa: E402
from collabzoo.algos.objectives import group_advantages  # noqa: E402

TOLERANCE = 1e-6
PROMPT = [5, 17, 40, 41, 42, 9]
COMPLETIONS = [[50, 51, 52], [60], [70, 71, 72, 73], [80, 81]]
"""Pad-free completions of different lengths (the reference would score pads)."""
RETURNS = [0.9, 0.1, 0.4, 0.4]
SENTINEL = 99
PLAIN = {"temperature": 1.0, "top_p": 1.0, "top_k": None, "max_new_tokens": 4}
"""Sampling whose log-probabilities are the plain log-softmax the reference scores with."""
QUIET = {"tensorboard": False, "progress": False, "device": "cpu"}

# (reference module's trainer and config, collabzoo's trainer and config, reference mode)
FAMILY = {
    "magrpo": ("MAGRPOTrainer", "MAGRPOConfig", MAGRPOTrainer, MAGRPOConfig, "mean"),
    "marloo": ("MARLOOTrainer", "MARLOOConfig", MARLOOTrainer, MARLOOConfig, "rloo"),
    "maremax": ("MAReMaxTrainer", "MAReMaxConfig", MAReMaxTrainer, MAReMaxConfig, "max"),
    "mareinforce": (
        "MAREINFORCETrainer",
        "MAREINFORCEConfig",
        MAREINFORCETrainer,
        MAREINFORCEConfig,
        "raw",
    ),
}


@pytest.fixture(autouse=True)
def _no_wandb(monkeypatch) -> None:
    monkeypatch.setenv("WANDB_MODE", "disabled")


def tiny_model(seed: int) -> tuple[Any, Any]:
    """A dropout-free tiny model (Qwen2 architecture, no dropout), float32 on both sides."""
    return tiny_causal_lm(seed)


def close(ours: float, theirs: float) -> bool:
    """Equal to 1e-6 of the value's scale (at least 1): float32, summed in another order."""
    return abs(ours - theirs) <= TOLERANCE * max(1.0, abs(theirs))


def gradient(model: Any) -> torch.Tensor:
    return torch.cat(
        [
            (p.grad if p.grad is not None else torch.zeros_like(p)).flatten()
            for p in model.parameters()
        ]
    )


def assert_same_gradient(ours: torch.Tensor, theirs: torch.Tensor) -> None:
    scale = theirs.abs().max().item()
    assert scale > 1e-3, "a gradient to compare"
    assert (ours - theirs).abs().max().item() <= TOLERANCE * max(1.0, scale)


def reference_family_loss(name: str, normalize: bool, model: Any, tokenizer: Any):
    """The reference trainer's loss on the fixed batch (its gradient is in `model`)."""
    from comlrl.trainers import reinforce

    trainer_name, config_name, *_ = FAMILY[name]
    config = getattr(reinforce, config_name)(
        num_turns=1,
        num_generations=len(COMPLETIONS),
        rollout_buffer_size=1,
        logging_steps=10**9,
        advantage_normalization=normalize,
        **PLAIN,
    )
    trainer = getattr(reinforce, trainer_name)(
        agents=[model, copy.deepcopy(model)],
        tokenizer=tokenizer,
        reward_func=lambda a, b, **kwargs: [0.0] * len(a),
        formatters=[lambda item: "a", lambda item: "b"],
        args=config,
    )
    assert trainer.advantage_mode == FAMILY[name][4]
    data = {
        "prompt_input_ids": torch.tensor([PROMPT]),
        "completion_input_ids": [[torch.tensor([*c, SENTINEL]) for c in COMPLETIONS]],
        "reference_kls": [],
    }
    loss = trainer._compute_loss_with_gradients(model, data, RETURNS)
    loss.backward()
    return loss.item()


def our_family_loss(name: str, normalization: str, model: Any, tokenizer: Any, tmp_path):
    """collabzoo's loss on the same batch (its gradient is in `model`). The reference's baseline
    is set explicitly: collabzoo's MA-REINFORCE defaults to the mean baseline, CoMLRL's to
    none ('raw')."""
    *_, trainer_class, config_class, mode = FAMILY[name]
    config = config_class(
        output_dir=str(tmp_path),
        advantage_mode=mode,
        num_generations=len(COMPLETIONS),
        advantage_normalization=normalization,
        **PLAIN,
        **QUIET,
    )
    team = {
        "alpha": LLMPolicy(model, tokenizer),
        "beta": LLMPolicy(copy.deepcopy(model), tokenizer),
    }
    trainer = trainer_class(lambda: collabzoo.make("tinycoop"), team, config)
    advantages = group_advantages(
        RETURNS, config.advantage_mode, config.advantage_normalization, std=config.advantage_std
    )
    samples = [TreeSample(PROMPT, c, a) for c, a in zip(COMPLETIONS, advantages, strict=True)]
    metrics: dict[str, float] = {}
    with trainer.policies["alpha"].mode(train=True):
        assert trainer._policy_loss("alpha", samples, metrics)
    return metrics["loss/alpha"]


@pytest.mark.parametrize("name", sorted(FAMILY))
@pytest.mark.parametrize("normalize", [True, False], ids=["zscore", "none"])
def test_the_magrpo_family_matches_comlrl_loss_and_gradient(name, normalize, tmp_path) -> None:
    """CoMLRL's advantage_normalization=True is collabzoo's 'zscore', False is 'none'."""
    model, tokenizer = tiny_model(0)
    theirs_model, ours_model = copy.deepcopy(model), copy.deepcopy(model)
    theirs = reference_family_loss(name, normalize, theirs_model, tokenizer)
    ours = our_family_loss(name, "zscore" if normalize else "none", ours_model, tokenizer, tmp_path)
    assert close(ours, theirs), (ours, theirs)
    assert_same_gradient(gradient(ours_model), gradient(theirs_model))


def test_the_four_are_one_algorithm_under_zscore_and_four_without(tmp_path) -> None:
    """z-scoring removes every baseline's group constant (and rloo's K/(K-1)): one loss; without
    it four different losses (learners-2.md section 1's main finding), on both sides."""
    model, tokenizer = tiny_model(0)
    losses = {}
    for normalize in (True, False):
        for name in FAMILY:
            mode = "zscore" if normalize else "none"
            ours = our_family_loss(name, mode, copy.deepcopy(model), tokenizer, tmp_path / name)
            theirs = reference_family_loss(name, normalize, copy.deepcopy(model), tokenizer)
            losses[(normalize, name)] = (ours, theirs)
    zscored = [losses[(True, n)] for n in FAMILY]
    assert all(close(o, zscored[0][0]) and close(t, zscored[0][1]) for o, t in zscored), zscored
    plain = sorted(losses[(False, n)][0] for n in FAMILY)
    assert all(b - a > 1e-3 for a, b in itertools.pairwise(plain)), plain
    # rloo without normalisation is K/(K-1) times the mean baseline: a step size, not a direction
    k = len(RETURNS)
    assert losses[(False, "marloo")][0] == pytest.approx(
        losses[(False, "magrpo")][0] * k / (k - 1), rel=1e-5
    )


# ----- MAAC (the reference's CoLLM-CC) against collabzoo's centralized critic --------------------
REWARDS = [1.0, 0.0]
VALUE = 0.3
"""V(s) of the hand case: the value head's weight 0 and its bias 0.3."""
MAAC_COMPLETIONS = [[50, 51, 52], [60, 61]]
JOINT = [7, 8, 9, 10, 11]
"""The critic's input (the joint prompt), the same ids on both sides."""


def constant_head(linear: torch.nn.Linear) -> None:
    with torch.no_grad():
        linear.weight.zero_()
        linear.bias.fill_(VALUE)


def reference_maac(actor: Any, critic: Any, tokenizer: Any):
    from comlrl.trainers.actor_critic import MAACConfig as ReferenceConfig
    from comlrl.trainers.actor_critic import MAACTrainer as ReferenceTrainer
    from comlrl.trainers.actor_critic.iac import RolloutSample

    config = ReferenceConfig(num_turns=1, num_generations=2, rollout_buffer_size=2, **PLAIN)
    trainer = ReferenceTrainer(
        agents=[actor, copy.deepcopy(actor)],
        critics=[critic],
        tokenizer=tokenizer,
        reward_func=lambda a, b, **kwargs: [0.0] * len(a),
        formatters=[lambda item: "a", lambda item: "b"],
        args=config,
    )
    constant_head(trainer.critics[0].value_head.value_projection)
    samples = []
    for completion, reward in zip(MAAC_COMPLETIONS, REWARDS, strict=True):
        ids = torch.tensor([*PROMPT, *completion])
        samples.append(
            RolloutSample(
                agent_idx=0,
                prompt="p",
                completion="c",
                full_input_ids=ids,
                attention_mask=torch.ones_like(ids),
                prompt_len=len(PROMPT),
                response_len=len(completion),
                old_logprob=torch.zeros(1),
                old_value=torch.tensor([VALUE]),
                reward=torch.tensor([reward]),
                returns=torch.tensor([reward]),
                advantage=torch.zeros(1),
                metadata={
                    "value_target": torch.tensor([reward]),
                    "joint_input_ids": torch.tensor([JOINT]),
                    "joint_attention_mask": torch.ones(1, len(JOINT), dtype=torch.long),
                    "joint_prompt_len": len(JOINT),
                },
            )
        )
    return trainer, samples


def our_cc(actor: Any, critic: Any, tokenizer: Any, tmp_path):
    config = MAACConfig(
        output_dir=str(tmp_path), num_generations=2, rollout_buffer_size=1, **PLAIN, **QUIET
    )
    team = {
        "alpha": LLMPolicy(actor, tokenizer),
        "beta": LLMPolicy(copy.deepcopy(actor), tokenizer),
    }
    trainer = MAACTrainer(
        lambda: collabzoo.make("tinycoop"), team, config, critics=LLMPolicy(critic, tokenizer)
    )
    constant_head(trainer.critics[TEAM].head.net[-1])
    return trainer


def recorded_backward(monkeypatch) -> list[float]:
    """The value of every loss the reference backpropagates (it returns none of them)."""
    seen: list[float] = []
    original = torch.Tensor.backward

    def backward(self, *args, **kwargs):
        seen.append(self.item())
        return original(self, *args, **kwargs)

    monkeypatch.setattr(torch.Tensor, "backward", backward)
    return seen


def test_maac_hand_case_and_parity_through_prepare_advantages_and_ac_step(
    tmp_path, monkeypatch
) -> None:
    """One agent buffer of two single-turn samples, rewards [1, 0], V(s) = 0.3: advantages
    [0.7, -0.3] z-score to [1, -1]; critic loss 0.6 * (0.49 + 0.09) / 2 = 0.174; actor loss
    -(log pi(a1) - log pi(a2)) / 2 (learners-2.md section 3). Both sides, and the same actor
    and critic gradients."""
    actor, tokenizer = tiny_model(0)
    critic, _ = tiny_model(1)
    theirs_actor, theirs_critic = copy.deepcopy(actor), copy.deepcopy(critic)
    reference, samples = reference_maac(theirs_actor, theirs_critic, tokenizer)
    reference._prepare_advantages(samples)
    assert [s.advantage.item() for s in samples] == pytest.approx([0.7, -0.3], abs=1e-6)
    assert [s.normalized_advantage.item() for s in samples] == pytest.approx([1.0, -1.0], abs=1e-5)
    reference.agent_optimizers[0].step = lambda *a, **k: None  # keep the gradients readable
    reference.critic_optimizer.step = lambda *a, **k: None
    losses = recorded_backward(monkeypatch)
    reference._ac_step(0, samples)
    monkeypatch.undo()
    their_actor_loss, their_critic_loss = losses
    assert their_critic_loss == pytest.approx(0.174, abs=1e-6)

    ours = our_cc(copy.deepcopy(actor), copy.deepcopy(critic), tokenizer, tmp_path)
    assert ours.critics[TEAM].values([JOINT]).item() == pytest.approx(VALUE)
    mine = [
        Sample(PROMPT, c, r - VALUE, r, VALUE)
        for c, r in zip(MAAC_COMPLETIONS, REWARDS, strict=True)
    ]
    ours._normalise(mine)
    assert [s.advantage for s in mine] == pytest.approx([1.0, -1.0], abs=1e-5)
    policy = ours.policies["alpha"]
    with policy.mode(train=True):
        actor_loss = ours._actor_loss("alpha", mine, 1.0, {})
        actor_loss.backward()
        log_pi = policy.score([PROMPT] * 2, MAAC_COMPLETIONS, sampling=ours.sampling)
    by_hand = -(log_pi.log_probs.sum(-1) * torch.tensor([1.0, -1.0])).mean().item()
    assert actor_loss.item() == pytest.approx(by_hand, abs=1e-6)
    assert close(actor_loss.item(), their_actor_loss)
    assert_same_gradient(gradient(policy.model), gradient(theirs_actor))
    critic_samples = [CriticSample(JOINT, r, VALUE) for r in REWARDS]
    with ours.critics[TEAM].backbone.mode(train=True):
        critic_loss = ours._critic_loss(TEAM, critic_samples, 1.0, {})
        critic_loss.backward()
    assert critic_loss.item() == pytest.approx(0.174, abs=1e-6)
    assert close(critic_loss.item(), their_critic_loss)
    their_head = reference.critics[0].value_head.value_projection
    our_head = ours.critics[TEAM].head.net[-1]
    assert_same_gradient(our_head.bias.grad, their_head.bias.grad)
    assert_same_gradient(our_head.weight.grad.flatten(), their_head.weight.grad.flatten())


def test_the_reference_steps_the_shared_critic_once_per_agent_collabzoo_once(
    tmp_path, monkeypatch
) -> None:
    """The documented difference: one 2-agent joint rollout drains two agent buffers in the
    reference, and each drain steps the one shared critic (2 steps on duplicated samples);
    collabzoo's centralized critic takes one step per update on one sample per transition."""
    actor, tokenizer = tiny_model(0)
    critic, _ = tiny_model(1)
    reference, samples = reference_maac(copy.deepcopy(actor), copy.deepcopy(critic), tokenizer)
    steps = {"critic": 0}

    def count(*args, **kwargs) -> None:
        steps["critic"] += 1

    reference.critic_optimizer.step = count
    for agent in (0, 1):
        buffer = [copy.deepcopy(s) for s in samples]
        for s in buffer:
            s.agent_idx = agent
        reference._process_buffer(agent, buffer)
    assert steps["critic"] == 2

    ours = our_cc(copy.deepcopy(actor), copy.deepcopy(critic), tokenizer, tmp_path)
    ours.args.max_updates, ours.args.num_turns, ours.args.save_steps = 1, 1, 0
    group = ours.groups["critic/team"]
    original = group.step
    calls = []

    def counted(*args, **kwargs):
        calls.append(1)
        return original(*args, **kwargs)

    monkeypatch.setattr(group, "step", counted)
    ours.train()
    assert len(calls) == 1

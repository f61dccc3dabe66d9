"""What one update of a learner does to the team, for every learner family: it scores under the
sampling distribution, updates each agent on its own, keeps float32 master weights that move at
real learning rates, and runs loss passes in train mode and everything else in eval mode."""

from __future__ import annotations

import dataclasses

import pytest

from tests.optional import require_module

torch = require_module("torch", "train")

import collabzoo  # noqa: E402
from collabzoo.algos import (  # noqa: E402
    CentralCriticConfig,
    CentralCriticTrainer,
    IACConfig,
    IACTrainer,
    IPPOConfig,
    IPPOTrainer,
    LLMPolicy,
    MAGRPOConfig,
    MAGRPOTrainer,
    lora_team,
    tiny_causal_lm,
)
from tests.test_learners import team  # noqa: E402

QUIET = {"tensorboard": False, "progress": False, "save_steps": 0}
SMALL = {"rollout_buffer_size": 2, "num_generations": 4, "max_new_tokens": 3, **QUIET}


def tinycoop(horizon: int = 1):
    return lambda: collabzoo.make("tinycoop", horizon=horizon)


def agent_weights(trainer, agent: str) -> list:
    return [p.detach().clone() for p in trainer.policies[agent].trainable_parameters()]


def fixed_advantages(batch: dict, scale: dict[str, float]) -> dict:
    """The tree learners' batch with advantages +-1 (times the agent's scale) in turn."""
    return {
        agent: [
            dataclasses.replace(s, advantage=(-1.0) ** i * scale.get(agent, 1.0))
            for i, s in enumerate(items)
        ]
        for agent, items in batch.items()
    }


# ----- decentralised updates ----------------------------------------------------------------------
def test_a_huge_loss_of_one_agent_leaves_the_other_agents_update_unchanged(tmp_path) -> None:
    """Two updates; in the second, beta's advantages are 1000x. With one clip over the team,
    alpha's second gradient would be scaled down by beta's norm (and Adam's moments with it)."""
    torch.manual_seed(0)
    config = MAGRPOConfig(output_dir=str(tmp_path), agent_learning_rate=1e-3, **SMALL)
    probe = MAGRPOTrainer(tinycoop(), team(), config)
    batch = probe.training_batch(probe.rollout.build(probe.episode_seeds(0), 0.9))
    results = {}
    for beta_scale in (1.0, 1000.0):
        trainer = MAGRPOTrainer(tinycoop(), team(), config)
        first = trainer.optimize(fixed_advantages(batch, {}))
        second = trainer.optimize(fixed_advantages(batch, {"beta": beta_scale}))
        assert first["skipped"] == second["skipped"] == 0.0
        assert second["grad_norm/beta"] > second["grad_norm/alpha"] * (beta_scale / 10)
        results[beta_scale] = {a: agent_weights(trainer, a) for a in ("alpha", "beta")}
    for a, b in zip(results[1.0]["alpha"], results[1000.0]["alpha"], strict=True):
        assert torch.equal(a, b), "alpha's update must not depend on beta's loss"
    assert any(
        not torch.equal(a, b)
        for a, b in zip(results[1.0]["beta"], results[1000.0]["beta"], strict=True)
    )


def poison(policy: LLMPolicy) -> None:
    """NaN in the last norm: every log-probability of this policy becomes NaN."""
    with torch.no_grad():
        policy.model.model.norm.weight.fill_(float("nan"))


def test_a_non_finite_loss_skips_only_that_agents_step(tmp_path) -> None:
    torch.manual_seed(0)
    config = MAGRPOConfig(output_dir=str(tmp_path), agent_learning_rate=1e-3, **SMALL)
    trainer = MAGRPOTrainer(tinycoop(), team(), config)
    batch = fixed_advantages(
        trainer.training_batch(trainer.rollout.build(trainer.episode_seeds(0), 0.9)), {}
    )
    poison(trainer.policies["beta"])
    alpha, beta = agent_weights(trainer, "alpha"), agent_weights(trainer, "beta")
    metrics = trainer.optimize(batch)
    assert metrics["skipped"] == 1.0 and metrics["skipped/beta"] == 1.0
    assert "grad_norm/alpha" in metrics and trainer.skipped_updates == 1
    assert any(
        not torch.equal(a, b) for a, b in zip(alpha, agent_weights(trainer, "alpha"), strict=True)
    )
    after = agent_weights(trainer, "beta")
    for a, b in zip(beta, after, strict=True):
        assert torch.equal(a, b) or (a.isnan().any() and b.isnan().any())
    assert all(p.grad is None for p in trainer.policies["beta"].trainable_parameters())


def test_actor_critic_agents_and_critics_update_on_their_own(tmp_path) -> None:
    """IAC with separate critics: four groups. beta's 1000x advantages change neither alpha's
    actor nor any critic; a NaN critic loss skips that critic only."""
    torch.manual_seed(0)
    config = IACConfig(
        output_dir=str(tmp_path),
        actor_learning_rate=1e-3,
        critic_learning_rate=1e-3,
        advantage_normalization=False,
        **SMALL,
    )
    probe = IACTrainer(tinycoop(2), team(), config)
    assert set(probe.groups) == {"alpha", "beta", "critic/alpha", "critic/beta"}
    samples, critic_samples = probe.training_batch(probe.rollout.build(probe.episode_seeds(0), 0.9))

    def with_advantages(scale: float) -> dict:
        for agent, items in samples.items():
            for i, sample in enumerate(items):
                sample.advantage = (-1.0) ** i * (scale if agent == "beta" else 1.0)
        return samples

    results = {}
    for beta_scale in (1.0, 1000.0):
        torch.manual_seed(1)  # the same value heads and mini-batch order in both runs
        trainer = IACTrainer(tinycoop(2), team(), config)
        trainer.optimize(with_advantages(1.0), critic_samples)
        trainer.optimize(with_advantages(beta_scale), critic_samples)
        results[beta_scale] = (agent_weights(trainer, "alpha"), critic_weights(trainer))
    for a, b in zip(results[1.0][0], results[1000.0][0], strict=True):
        assert torch.equal(a, b)
    for a, b in zip(results[1.0][1], results[1000.0][1], strict=True):
        assert torch.equal(a, b), "an actor's loss never reaches a separate critic's step"

    trainer = IACTrainer(tinycoop(2), team(), config)
    for sample in critic_samples["beta"]:
        sample.target = float("inf")
    before = agent_weights(trainer, "beta")
    metrics = trainer.optimize(with_advantages(1.0), critic_samples)
    assert metrics["skipped"] == 1.0 and trainer.groups["critic/beta"].skipped == 1
    assert any(
        not torch.equal(a, b) for a, b in zip(before, agent_weights(trainer, "beta"), strict=True)
    )


def critic_weights(trainer) -> list:
    return [p.detach().clone() for c in trainer.critics.values() for p in c.parameters()]


# ----- precision ---------------------------------------------------------------------------------
def moved_fraction(dtype: torch.dtype, tmp_path) -> float:
    """Fraction of master weights that 5 MAGRPO steps at lr 5e-6 move, from a model loaded in
    `dtype` (the same bf16-rounded starting values either way)."""
    torch.manual_seed(0)
    model, tokenizer = tiny_causal_lm(seed=0)
    model.to(torch.bfloat16).to(dtype)
    config = MAGRPOConfig(output_dir=str(tmp_path / str(dtype)), agent_learning_rate=5e-6, **SMALL)
    trainer = MAGRPOTrainer(tinycoop(), LLMPolicy(model, tokenizer), config)
    policy = trainer.distinct[0]
    assert all(p.dtype == torch.float32 for p in policy.trainable_parameters())
    assert policy.compute_dtype == (torch.bfloat16 if dtype == torch.bfloat16 else None)
    batch = fixed_advantages(trainer.training_batch(trainer.rollout.build([0, 1], 0.9)), {})
    start = [p.detach().clone() for p in policy.trainable_parameters()]
    for _ in range(5):
        assert trainer.optimize(batch)["skipped"] == 0.0
    moved = sum(
        int((p.detach() != s).sum())
        for p, s in zip(policy.trainable_parameters(), start, strict=True)
    )
    return moved / sum(s.numel() for s in start)


def test_a_bf16_loaded_model_learns_at_real_learning_rates(tmp_path) -> None:
    """AdamW on bf16 weights rounds lr-5e-6 steps away; float32 masters (computing in bf16
    under autocast) must move the weights as a float32 run does."""
    full = moved_fraction(torch.float32, tmp_path)
    mixed = moved_fraction(torch.bfloat16, tmp_path)
    assert full > 0.5, full
    assert mixed >= 0.9 * full, (mixed, full)


def test_a_kl_reference_copy_stays_in_the_compute_precision(tmp_path) -> None:
    model, tokenizer = tiny_causal_lm(seed=0)
    config = MAGRPOConfig(output_dir=str(tmp_path), reference_kl_enabled=True, **SMALL)
    trainer = MAGRPOTrainer(tinycoop(), LLMPolicy(model.to(torch.bfloat16), tokenizer), config)
    (reference,) = trainer.references.values()
    assert {p.dtype for p in reference.model.parameters()} == {torch.bfloat16}
    assert not any(p.requires_grad for p in reference.model.parameters())
    assert trainer.train_step()["skipped"] == 0.0


# ----- train and eval modes ----------------------------------------------------------------------
def record_modes(models) -> list[tuple[bool, bool]]:
    """(gradients enabled, train mode) of every forward pass of these models."""
    seen: list[tuple[bool, bool]] = []
    for model in models:
        model.register_forward_pre_hook(
            lambda module, args: seen.append((torch.is_grad_enabled(), module.training))
        )
    return seen


@pytest.mark.parametrize("learner", ["magrpo-lora-kl", "ippo-separate-critics"])
def test_loss_passes_train_and_every_other_pass_evaluates(learner, tmp_path) -> None:
    """Dropout (LoRA dropout included) is on exactly when a loss is being differentiated: not
    while sampling, scoring old log-probabilities, reading a KL reference or critic values."""
    torch.manual_seed(0)
    if learner.startswith("magrpo"):
        model, tokenizer = tiny_causal_lm(seed=0)
        policies = lora_team(model, tokenizer, ["alpha", "beta"], rank=4, dropout=0.1)
        config = MAGRPOConfig(output_dir=str(tmp_path), reference_kl_enabled=True, **SMALL)
        trainer = MAGRPOTrainer(tinycoop(), policies, config)
        peft_model = policies["alpha"].model  # generate runs the base model's forward
        base = peft_model.get_base_model()
        models = [peft_model, base, base.get_decoder()]  # scoring runs the transformer alone
    else:
        config = IPPOConfig(output_dir=str(tmp_path), ppo_epochs=2, **SMALL)
        trainer = IPPOTrainer(tinycoop(2), team(), config)
        models = [p.model for p in trainer.distinct]
        models += [c.backbone.model for c in trainer.critics.values()]
        models += [m.get_decoder() for m in list(models)]  # scoring runs the transformer alone
    for model in models:
        model.train()  # whatever mode a model comes in, each pass must set its own
    seen = record_modes(models)
    trainer.train_step()
    differentiated = {training for grad, training in seen if grad}
    inference = {training for grad, training in seen if not grad}
    assert differentiated == {True}, "loss passes run in train mode"
    assert inference == {False}, "sampling, old log-probs, references and critic reads: eval"
    assert all(m.training for m in models), "each model is left in the mode it came in"


# ----- every score is under the sampling distribution ---------------------------------------------
@pytest.mark.parametrize("learner", ["magrpo", "ippo", "cc-q"])
def test_every_learner_scores_under_its_own_sampling_settings(learner, tmp_path) -> None:
    settings = {"temperature": 0.7, "top_p": 0.8, "top_k": 20, **SMALL}
    if learner == "magrpo":
        trainer = MAGRPOTrainer(
            tinycoop(),
            team(),
            MAGRPOConfig(output_dir=str(tmp_path), reference_kl_enabled=True, **settings),
        )
    elif learner == "ippo":
        trainer = IPPOTrainer(tinycoop(2), team(), IPPOConfig(output_dir=str(tmp_path), **settings))
    else:
        trainer = CentralCriticTrainer(
            tinycoop(2),
            team(),
            CentralCriticConfig(output_dir=str(tmp_path), critic_type="q", **settings),
        )
    calls = []
    scorers = [*trainer.distinct, *getattr(trainer, "references", {}).values()]
    for policy in scorers:
        original = policy.score

        def spy(*args, _original=original, **kwargs):
            calls.append(kwargs.get("sampling"))
            return _original(*args, **kwargs)

        policy.score = spy
    metrics = trainer.train_step()
    assert calls and all(s == trainer.sampling for s in calls), calls
    assert trainer.sampling.temperature == 0.7 and trainer.sampling.top_k == 20
    if learner != "ippo":  # one pass, before any step: every scored token was in the kept set
        assert metrics["outside_kept_tokens"] == 0.0


def test_greedy_decoding_cannot_be_trained(tmp_path) -> None:
    with pytest.raises(ValueError, match="greedily"):
        MAGRPOTrainer(tinycoop(), team(), MAGRPOConfig(do_sample=False, **QUIET))
    with pytest.raises(ValueError, match="greedily"):
        IACTrainer(tinycoop(), team(), IACConfig(do_sample=False, **QUIET))


def test_chat_template_options_of_the_config_reach_every_policy_and_critic(tmp_path) -> None:
    options = {"enable_thinking": False}
    trainer = CentralCriticTrainer(
        tinycoop(),
        team(),
        CentralCriticConfig(output_dir=str(tmp_path), chat_template_kwargs=options, **SMALL),
    )
    encoders = trainer.prompt_encoders()
    assert len(encoders) == 3 and all(p.chat_template_kwargs == options for p in encoders)

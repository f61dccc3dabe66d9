"""The off-policy correction of rollouts sampled by another engine (vLLM): truncated importance
weights min(pi_train / pi_sampler, C) per token, in the Monte-Carlo and actor-critic losses, and
the drift they log.

The sampler's log-probabilities are forced here (the trainer's own plus a known drift), so the
weights and gradients can be checked by hand; tests/vllm checks them on a real engine.
"""

from __future__ import annotations

import math
import sys

import pytest

from tests.optional import require_module

torch = require_module("torch", "train")

from collabzoo.algos import (  # noqa: E402
    IACConfig,
    IACTrainer,
    IPPOConfig,
    IPPOTrainer,
    MAGRPOConfig,
    MAGRPOTrainer,
)
from collabzoo.algos.learners.critic_batches import Sample  # noqa: E402
from collabzoo.algos.learners.stats import DriftLog  # noqa: E402
from collabzoo.algos.learners.tree_learner import TreeSample  # noqa: E402
from collabzoo.algos.objectives import clipped_policy_loss, truncated_importance_weights  # noqa: E402
from collabzoo.algos.policies.llm import Completion  # noqa: E402
from collabzoo.algos.rollout.tree import generate_in_process  # noqa: E402
from tests.test_learner_maths import (  # noqa: E402
    LOG_PROBS,
    MASK,
    SMALL,
    leaf,
    scored_stub,
    tinycoop,
)
from tests.test_learners import team  # noqa: E402
from tests.tolerance import assert_close_to_scale  # noqa: E402

DRIFT = [[0.3, -0.4], [-0.1, 0.0]]
"""log pi_train - log pi_sampler at each token (the last position is padding)."""
SAMPLER = [[-1.3, -1.6], [-0.4]]
"""The sampler's log-probabilities: LOG_PROBS - DRIFT at the real tokens."""


def test_the_weights_are_exp_drift_clipped_at_the_cap() -> None:
    """Cap 1.0: exp(0.3) is cut to 1, exp(-0.4) and exp(-0.1) pass; padding weighs 1."""
    found = truncated_importance_weights(torch.tensor(LOG_PROBS), SAMPLER, MASK, 1.0)
    expected = [[1.0, math.exp(-0.4)], [math.exp(-0.1), 1.0]]
    torch.testing.assert_close(found.weights, torch.tensor(expected))
    assert found.tokens == 3 and found.capped == 1
    assert found.abs_log_ratio == pytest.approx(0.8, rel=1e-6)
    uncapped = truncated_importance_weights(torch.tensor(LOG_PROBS), SAMPLER, MASK, None)
    assert uncapped.weights[0, 0].item() == pytest.approx(math.exp(0.3), rel=1e-6)
    assert uncapped.capped == 0


def test_a_row_the_sampler_did_not_score_is_not_corrected() -> None:
    found = truncated_importance_weights(torch.tensor(LOG_PROBS), [SAMPLER[0], None], MASK, 1.0)
    assert found.weights[1].tolist() == [1.0, 1.0]
    assert found.tokens == 2
    drift = DriftLog()
    drift.add(found)
    assert drift.metrics() == pytest.approx(
        {"sampler/mean_abs_log_ratio": 0.35, "sampler/capped_fraction": 0.5}
    )
    assert DriftLog().metrics() == {}, "no sampler, no drift to report"


def test_bad_sampler_input_is_refused() -> None:
    with pytest.raises(ValueError, match="positive"):
        truncated_importance_weights(torch.tensor(LOG_PROBS), SAMPLER, MASK, 0.0)
    with pytest.raises(ValueError, match="same completion tokens"):
        truncated_importance_weights(torch.tensor(LOG_PROBS), [[-1.0, -1.0, -1.0], None], MASK, 1)


def test_magrpo_weights_each_tokens_gradient_by_the_truncated_ratio(tmp_path, monkeypatch) -> None:
    """loss = -mean_g(A_g sum_t w_t log pi): d loss / d log pi_t = -A_g w_t / 2, with the
    weights above (cap 1.0) and A = (1, -2)."""
    config = MAGRPOConfig(output_dir=str(tmp_path), vllm_importance_sampling_cap=1.0, **SMALL)
    trainer = MAGRPOTrainer(tinycoop, team(), config)
    log_probs = leaf(LOG_PROBS)
    monkeypatch.setattr(trainer.policies["alpha"], "score", scored_stub(log_probs))
    samples = [TreeSample([1], [2, 3], 1.0, SAMPLER[0]), TreeSample([1], [4], -2.0, SAMPLER[1])]
    assert trainer._policy_loss("alpha", samples, {})
    expected = torch.tensor([[-0.5, -0.5 * math.exp(-0.4)], [1.0 * math.exp(-0.1), 0.0]])
    assert_close_to_scale(log_probs.grad, expected)
    assert trainer.drift.metrics()["sampler/mean_abs_log_ratio"] == pytest.approx(0.8 / 3)


@pytest.mark.parametrize("clip_range", [None, 0.2])
def test_ppo_weights_its_clipped_surrogate_per_token(clip_range) -> None:
    """-mean_g sum_t w_t min(rho_t A, clip(rho_t) A): the weight multiplies each token's term."""
    ratios = torch.tensor([[1.1, 1.5], [0.9, 1.0]])
    weights = torch.tensor([[0.5, 2.0], [1.0, 1.0]])
    advantages = torch.tensor([1.0, 1.0])
    loss, _ = clipped_policy_loss(
        ratios.log(), torch.zeros_like(ratios), advantages, MASK, clip_range, weights
    )
    kept = [1.1, 1.5 if clip_range is None else 1.2, 0.9]
    assert loss.item() == pytest.approx(-(0.5 * kept[0] + 2.0 * kept[1] + kept[2]) / 2)


def test_iac_weights_its_policy_gradient_per_token(tmp_path, monkeypatch) -> None:
    """IAC (no ratio): -mean_g A_g sum_t w_t log pi, w against the current policy."""
    config = IACConfig(
        output_dir=str(tmp_path),
        vllm_importance_sampling_cap=1.0,
        use_separate_critic=True,
        **SMALL,
    )
    trainer = IACTrainer(tinycoop, team(), config)
    log_probs = leaf(LOG_PROBS)
    monkeypatch.setattr(
        trainer.policies["alpha"], "score", scored_stub(log_probs, torch.zeros(2, 2))
    )
    part = [
        Sample([1], [2, 3], 1.0, 0.0, 0.0, sampler_log_probs=SAMPLER[0]),
        Sample([1], [4], -2.0, 0.0, 0.0, sampler_log_probs=SAMPLER[1]),
    ]
    trainer.drift = DriftLog()
    trainer._actor_loss("alpha", part, 1.0, {}).backward()
    expected = torch.tensor([[-0.5, -0.5 * math.exp(-0.4)], [1.0 * math.exp(-0.1), 0.0]])
    assert_close_to_scale(log_probs.grad, expected)


def test_ippo_takes_the_weight_at_the_recorded_old_policy(tmp_path, monkeypatch) -> None:
    """IPPO's weight is min(pi_old / pi_sampler, C) with pi_old the log-probabilities recorded
    before its epochs: here pi_old = pi_sampler + 0.5 on every token, so w = min(e^0.5, 2)."""
    config = IPPOConfig(output_dir=str(tmp_path), vllm_importance_sampling_cap=2.0, **SMALL)
    trainer = IPPOTrainer(tinycoop, team(), config)
    log_probs = leaf(LOG_PROBS)
    monkeypatch.setattr(
        trainer.policies["alpha"], "score", scored_stub(log_probs, torch.zeros(2, 2))
    )
    part = [
        Sample([1], [2, 3], 1.0, 0.0, 0.0, [-1.0, -2.0], [-1.5, -2.5]),
        Sample([1], [4], 1.0, 0.0, 0.0, [-0.5], [-1.0]),
    ]
    trainer.drift = DriftLog()
    trainer._actor_loss("alpha", part, 1.0, {}).backward()
    # rho = 1 at pi = pi_old, inside the clip band: d/dlogp of -mean_g sum_t w rho A = -w / 2
    weight = math.exp(0.5)
    expected = torch.tensor([[-weight / 2, -weight / 2], [-weight / 2, 0.0]])
    assert_close_to_scale(log_probs.grad, expected)
    assert trainer.drift.metrics()["sampler/mean_abs_log_ratio"] == pytest.approx(0.5)


def drifting_sampler(drift: float):
    """A rollout `generate` that samples with the policies themselves and reports their
    log-probabilities shifted by `drift`, as an engine with a known bias would."""

    def generate(row_policies, prompts, sampling) -> list[Completion]:
        completions = generate_in_process(row_policies, prompts, sampling)
        for policy, completion in zip(row_policies, completions, strict=True):
            scored = policy.score(
                [completion.prompt_ids], [completion.completion_ids], sampling=sampling
            )
            real = scored.log_probs[0][scored.mask[0]]
            completion.sampler_log_probs = (real - drift).tolist()
        return completions

    return generate


@pytest.mark.parametrize(
    ("trainer_class", "config_class"), [(MAGRPOTrainer, MAGRPOConfig), (IPPOTrainer, IPPOConfig)]
)
def test_an_updates_metrics_report_the_samplers_drift(
    trainer_class, config_class, tmp_path
) -> None:
    """A rollout whose sampler reports log pi - 0.25 on every token: the update's metrics say
    mean |log-ratio| 0.25, and cap 1.0 cuts every token's ratio exp(0.25)."""
    config = config_class(output_dir=str(tmp_path), vllm_importance_sampling_cap=1.0, **SMALL)
    trainer = trainer_class(tinycoop, team(), config)
    trainer.rollout.generate = drifting_sampler(0.25)
    metrics = trainer.train_step()
    assert metrics["sampler/mean_abs_log_ratio"] == pytest.approx(0.25, abs=1e-5)
    assert metrics["sampler/capped_fraction"] == 1.0
    trainer.rollout.generate = generate_in_process
    assert "sampler/mean_abs_log_ratio" not in trainer.train_step(), "hf samples: no drift"


def test_generation_settings_a_learner_refuses(tmp_path, monkeypatch) -> None:
    with pytest.raises(ValueError, match="generation_backend must be one of"):
        MAGRPOTrainer(tinycoop, team(), MAGRPOConfig(generation_backend="sglang", **SMALL))
    with pytest.raises(ValueError, match="vllm_importance_sampling_cap must be positive"):
        MAGRPOTrainer(tinycoop, team(), MAGRPOConfig(vllm_importance_sampling_cap=0, **SMALL))
    monkeypatch.setitem(sys.modules, "vllm", None)  # vLLM absent, whatever this machine has
    with pytest.raises(ImportError, match=r"pip install 'collabzoo\[vllm\]'"):
        MAGRPOTrainer(
            tinycoop,
            team(),
            MAGRPOConfig(output_dir=str(tmp_path), generation_backend="vllm", **SMALL),
        )

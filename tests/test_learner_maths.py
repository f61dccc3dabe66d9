"""The learners' loss terms against hand-computed values on paper-sized tensors: the k3 KL to the
reference and its pull, the entropy bonus's sign and coefficient, the value-loss coefficient, and
the centralized critic's one TD error for the whole team (learners.md).

Where a formula lives inside a learner's update, the scoring pass is replaced by hand-made
tensors (a `Scored` with leaf tensors), so the loss and its gradient can be read exactly.
"""

from __future__ import annotations

import math

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
    MAGRPOConfig,
    MAGRPOTrainer,
)
from collabzoo.algos.learners.critic_batches import CriticSample, Sample  # noqa: E402
from collabzoo.algos.learners.tree_learner import TreeSample  # noqa: E402
from collabzoo.algos.objectives import clipped_policy_loss  # noqa: E402
from collabzoo.algos.policies.scoring import Scored  # noqa: E402
from collabzoo.algos.rollout.tree import expanded_nodes  # noqa: E402
from tests.test_learner_updates import QUIET  # noqa: E402
from tests.test_learners import ScriptedPolicy, Sum, team  # noqa: E402
from tests.tolerance import assert_close_to_scale  # noqa: E402

SMALL = {"rollout_buffer_size": 1, "num_generations": 2, "max_new_tokens": 2, **QUIET}

# Two completions: 2 real tokens, then 1 real token and one padding position.
LOG_PROBS = [[-1.0, -2.0], [-0.5, 0.0]]
MASK = torch.tensor([[True, True], [True, False]])
ENTROPY = [[1.0, 2.0], [0.5, 0.0]]
"""Mean token entropy per completion: (1 + 2) / 2 = 1.5 and 0.5 / 1 = 0.5; their mean is 1.0."""


def leaf(values: list) -> torch.Tensor:
    return torch.tensor(values, requires_grad=True)


def scored_stub(log_probs: torch.Tensor, entropy: torch.Tensor | None = None, hidden=None):
    """A `policy.score` that returns these tensors, zero at padding as a real pass does (so the
    padding gets no gradient)."""

    def score(*args, **kwargs) -> Scored:
        masked_entropy = None if entropy is None else entropy.masked_fill(~MASK, 0.0)
        return Scored(log_probs.masked_fill(~MASK, 0.0), MASK, masked_entropy, hidden)

    return score


def tinycoop():
    return collabzoo.make("tinycoop")


# ----- the KL term (MAGRPO / MA-REINFORCE) --------------------------------------------------------
class FrozenReference:
    """A reference policy whose token log-probabilities are given."""

    def __init__(self, log_probs: list) -> None:
        self.log_probs = torch.tensor(log_probs)

    def token_log_probs(self, prompts, completions, *, sampling=None):
        return self.log_probs.masked_fill(~MASK, 0.0), MASK


REFERENCE = [[-1.5, -1.0], [-0.5, 9.0]]
"""q = ref - logp at the real tokens: -0.5, 1.0, 0.0 (the 9.0 sits at padding)."""


def kl_trainer(tmp_path, coef: float) -> MAGRPOTrainer:
    config = MAGRPOConfig(
        output_dir=str(tmp_path), reference_kl_enabled=True, reference_kl_coef=coef, **SMALL
    )
    return MAGRPOTrainer(tinycoop, team(), config)


def test_magrpo_loss_is_policy_gradient_plus_coef_times_k3_kl(tmp_path, monkeypatch) -> None:
    """loss = -mean_g(A_g sum_t logp) + coef * mean over real tokens of (e^q - q - 1),
    q = log p_ref - log p. A = (1, -2): policy term -(1 * -3 + -2 * -0.5) / 2 = 1.
    KL = ((e^-0.5 + 0.5 - 1) + (e - 1 - 1) + 0) / 3. d loss / d logp_gt = -A_g / 2 +
    coef * (1 - e^q) / 3 at real tokens, 0 at padding."""
    coef = 0.5
    trainer = kl_trainer(tmp_path, coef)
    policy = trainer.policies["alpha"]
    log_probs = leaf(LOG_PROBS)
    monkeypatch.setattr(policy, "score", scored_stub(log_probs))
    monkeypatch.setitem(trainer.references, id(policy), FrozenReference(REFERENCE))
    metrics: dict[str, float] = {}
    samples = [TreeSample([1], [2, 3], 1.0), TreeSample([1], [4], -2.0)]
    assert trainer._policy_loss("alpha", samples, metrics)

    kl = ((math.exp(-0.5) + 0.5 - 1.0) + (math.e - 2.0) + 0.0) / 3
    assert metrics["kl/alpha"] == pytest.approx(kl, rel=1e-6)
    assert metrics["loss/alpha"] == pytest.approx(1.0 + coef * kl, rel=1e-6)
    expected = torch.tensor(
        [
            [-0.5 + coef * (1 - math.exp(-0.5)) / 3, -0.5 + coef * (1 - math.e) / 3],
            [1.0 + coef * (1 - math.exp(0.0)) / 3, 0.0],
        ]
    )
    assert_close_to_scale(log_probs.grad, expected)


def test_kl_gradient_pulls_each_token_toward_the_reference(tmp_path, monkeypatch) -> None:
    """With zero advantages only the KL acts: where log p > log p_ref (q < 0) the gradient is
    positive, so a descent step lowers log p; where log p < log p_ref it raises it; at the
    reference it is 0. A small step along -grad lowers the KL."""
    trainer = kl_trainer(tmp_path, 1.0)
    policy = trainer.policies["alpha"]
    log_probs = leaf(LOG_PROBS)
    monkeypatch.setattr(policy, "score", scored_stub(log_probs))
    monkeypatch.setitem(trainer.references, id(policy), FrozenReference(REFERENCE))
    samples = [TreeSample([1], [2, 3], 0.0), TreeSample([1], [4], 0.0)]
    assert trainer._policy_loss("alpha", samples, {})
    grad = log_probs.grad
    assert grad[0, 0] > 0 and grad[0, 1] < 0, "toward -1.5 from -1.0, toward -1.0 from -2.0"
    assert grad[1, 0] == 0 and grad[1, 1] == 0

    def k3(logp: torch.Tensor) -> float:
        q = (torch.tensor(REFERENCE) - logp)[MASK]
        return float((torch.exp(q) - q - 1).mean())

    stepped = log_probs.detach() - 0.1 * grad
    assert k3(stepped) < k3(log_probs.detach())


# ----- the entropy bonus --------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("trainer_class", "config_class", "policy_loss"),
    [
        # IAC: -mean_g(A_g sum_t logp) = -(1 * -3 + -1 * -0.5) / 2
        (IACTrainer, IACConfig, 1.25),
        # IPPO, first pass (ratio 1): -mean_g sum_t A_g = -(2 * 1 + 1 * -1) / 2
        (IPPOTrainer, IPPOConfig, -0.5),
    ],
    ids=["iac", "ippo"],
)
@pytest.mark.parametrize("coef", [0.0, 0.1, 0.3])
def test_entropy_bonus_is_subtracted_and_scaled_by_its_coefficient(
    trainer_class, config_class, policy_loss, coef, tmp_path, monkeypatch
) -> None:
    """loss = policy loss - entropy_coef * mean_g(mean token entropy of g); here the entropy
    term is 1.0, so loss = policy loss - coef. Its gradient on each token's entropy is
    -coef / (2 completions * tokens of g): negative, so minimising the loss raises entropy."""
    config = config_class(output_dir=str(tmp_path), entropy_coef=coef, **SMALL)
    trainer = trainer_class(tinycoop, team(), config)
    log_probs, entropy = leaf(LOG_PROBS), leaf(ENTROPY)
    monkeypatch.setattr(trainer.policies["alpha"], "score", scored_stub(log_probs, entropy))
    part = [Sample([1], [2, 3], 1.0, 0.0, 0.0), Sample([1], [4], -1.0, 0.0, 0.0)]
    stats: dict = {}
    loss = trainer._actor_loss("alpha", part, 1.0, stats)
    assert loss.item() == pytest.approx(policy_loss - coef * 1.0, rel=1e-6)
    assert stats["entropy"] == [pytest.approx(1.0)]
    loss.backward()
    expected = torch.tensor([[-coef / 4, -coef / 4], [-coef / 2, 0.0]])
    assert_close_to_scale(entropy.grad, expected)


# ----- the value-loss coefficient -----------------------------------------------------------------
VALUES, TARGETS = [0.5, -1.0], [2.5, 0.0]
"""mean (V - y)^2 = ((-2)^2 + (-1)^2) / 2 = 2.5; d/dV of coef * that = coef * (V - y)."""


@pytest.mark.parametrize("coef", [0.6, 0.3])
def test_value_loss_coefficient_scales_a_separate_critics_loss(coef, tmp_path, monkeypatch) -> None:
    """A separate IAC critic (no value clipping): loss = coef * mean (V - y)^2 = coef * 2.5."""
    config = IACConfig(output_dir=str(tmp_path), value_loss_coef=coef, **SMALL)
    trainer = IACTrainer(tinycoop, team(), config)
    critic = trainer.critics["alpha"]
    assert not critic.shares_actor
    values = leaf(VALUES)
    monkeypatch.setattr(critic, "values", lambda ids: values)
    part = [CriticSample([1], y, v) for y, v in zip(TARGETS, VALUES, strict=True)]
    loss = trainer._critic_loss("alpha", part, 1.0, {})
    assert loss.item() == pytest.approx(coef * 2.5, rel=1e-6)
    loss.backward()
    assert_close_to_scale(values.grad, torch.tensor([coef * -2.0, coef * -1.0]))


@pytest.mark.parametrize("coef", [0.6, 0.3])
def test_value_loss_coefficient_scales_a_value_head_on_the_actor(
    coef, tmp_path, monkeypatch
) -> None:
    """A value head on the actor: its loss joins the actor's, times the coefficient. Zero
    advantages and entropy_coef 0 leave only coef * mean (V - y)^2 = coef * 2.5."""
    config = IACConfig(
        output_dir=str(tmp_path),
        use_separate_critic=False,
        value_clip_range=None,
        value_loss_coef=coef,
        **SMALL,
    )
    trainer = IACTrainer(tinycoop, team(), config)
    critic = trainer.critics["alpha"]
    assert critic.shares_actor
    values = leaf(VALUES)
    stub = scored_stub(leaf(LOG_PROBS), leaf(ENTROPY), hidden=values)
    monkeypatch.setattr(trainer.policies["alpha"], "score", stub)
    monkeypatch.setattr(critic, "head", lambda hidden: hidden)  # V = the hand-made values
    part = [Sample([1], [2, 3], 0.0, TARGETS[0], 0.0), Sample([1], [4], 0.0, TARGETS[1], 0.0)]
    loss = trainer._actor_loss("alpha", part, 1.0, {})
    assert loss.item() == pytest.approx(coef * 2.5, rel=1e-6)
    loss.backward()
    assert_close_to_scale(values.grad, torch.tensor([coef * -2.0, coef * -1.0]))


# ----- the centralized critic: one TD error for the team ------------------------------------------
def test_centralized_critic_gives_every_agent_the_same_td_error(tmp_path, monkeypatch) -> None:
    """CC on Sum (H = 2) with scripted answers and a scripted critic: V(s0) = 0.5 at the root,
    V(s1) = 0.25 below it, gamma 0.9, lambda 0. Root branches (left, right) = (1, 2) and (0, 0):
    r0 = 3, 0; each next turn repeats its branch's answers: r1 = 3, 0.
        delta0 = r0 + 0.9 * 0.25 - 0.5 = 2.725, -0.275;   delta1 = r1 - 0.25 = 2.75, -0.25.
    Both agents get exactly these; the critic's targets r + gamma V(s') are 3.225, 0.225, 3, 0,
    one critic sample per transition (not one per agent)."""
    config = CentralCriticConfig(
        output_dir=str(tmp_path), num_generations=2, advantage_normalization=False, **QUIET
    )
    trainer = CentralCriticTrainer(Sum, team(("left", "right")), config)
    trainer.rollout.policies = {
        "left": ScriptedPolicy(["1", "0"]),
        "right": ScriptedPolicy(["2", "0"]),
    }
    roots = trainer.rollout.build([0], trainer.args.discount)
    depth = {id(n): n.depth for root in roots for n in expanded_nodes(root)}
    inputs = trainer.critic_inputs(roots)["team"]
    value_of_ids = {tuple(ids): (0.5, 0.25)[depth[key]] for key, ids in inputs.items()}
    assert len(set(value_of_ids.values())) == 2, "the root and the next states read apart"
    monkeypatch.setattr(
        trainer, "_values", lambda critic, ids: [value_of_ids[tuple(i)] for i in ids]
    )
    samples, critic_samples = trainer.training_batch(roots)
    deltas = [2.725, -0.275, 2.75, -0.25]  # root's two branches, then each branch's next turn
    for agent in ("left", "right"):
        assert [s.advantage for s in samples[agent]] == pytest.approx(deltas, rel=1e-9)
    assert [s.target for s in critic_samples["team"]] == pytest.approx([3.225, 0.225, 3.0, 0.0])
    assert len(critic_samples["team"]) == len(deltas)


def test_the_clip_fraction_counts_real_tokens_whose_ratio_left_the_band() -> None:
    """Ratios 1.1, 1.05 and 1.5 on real tokens and one padded position, clip range 0.2: only
    1.5 is outside [0.8, 1.2], so 1 of 3 real tokens. The loss by hand: with A = 1 each
    token contributes min(rho, clip(rho)) = 1.1 + 1.05 + 1.2."""
    ratios = torch.tensor([[1.1, 1.05, 1.5, 9.0]])
    mask = torch.tensor([[True, True, True, False]])
    old = torch.zeros_like(ratios)
    loss, fraction = clipped_policy_loss(ratios.log(), old, torch.tensor([1.0]), mask, 0.2)
    assert fraction.item() == pytest.approx(1 / 3)
    assert loss.item() == pytest.approx(-(1.1 + 1.05 + 1.2))

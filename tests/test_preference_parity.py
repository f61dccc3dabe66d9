"""The preference learners against CoMLRL 1.4.3 itself and against cases worked by hand.

Parity runs the reference's own methods (`MADPOTrainer._detached_agent_deltas`,
`_agent_preference_loss`, `JointRewardModel`, `IterativeMADPOTrainer`'s pair selection) on
objects built without their constructor (`object.__new__`: the constructor loads models from the
hub, which this machine cannot reach), holding the same tiny models we train."""

from __future__ import annotations

import math
import random
from types import SimpleNamespace

import pytest

from tests.optional import require_module

torch = require_module("torch", "train")

from collabzoo.algos import LLMPolicy, tiny_causal_lm  # noqa: E402
from collabzoo.algos.learners.madpo import MADPOConfig, MADPOTrainer  # noqa: E402
from collabzoo.algos.learners.preference_pairs import (  # noqa: E402
    PreferencePair,
    select_comparison_pairs,
    select_pair_indices,
)
from collabzoo.algos.preference_objectives import (  # noqa: E402
    agent_preference_loss,
    bradley_terry_loss,
    joint_preference_logits,
    lambda_decay_weights,
    pool_last_real,
)
from tests.test_learners import EvenStart  # noqa: E402

AGENTS = ("left", "right")


def comlrl_preference():
    return require_module("comlrl.trainers.preference.madpo", "interop")


# ----- hand cases ---------------------------------------------------------------------------
def test_two_agent_pair_loss_and_gradient_by_hand() -> None:
    """beta 0.1, Delta = (2, -1): each agent's loss is log(1 + e^-0.1) and dL/dDelta_i is
    -beta sigmoid(-0.1), whichever agent carries the gradient."""
    for agent in (0, 1):
        deltas = torch.tensor([[2.0, -1.0]])
        own = deltas[:, agent].clone().requires_grad_(True)
        loss = agent_preference_loss(own, deltas, agent, 0.1)
        loss.backward()
        assert loss.item() == pytest.approx(0.6443967, abs=1e-7)
        assert loss.item() == pytest.approx(math.log1p(math.exp(-0.1)), abs=1e-7)
        assert own.grad.item() == pytest.approx(-0.0475021, abs=1e-7)


def test_with_a_reference_equal_to_the_policy_every_pair_starts_at_log_2() -> None:
    deltas = torch.tensor([[2.0, -1.0], [0.3, 4.0]])
    loss = agent_preference_loss(deltas[:, 0].clone(), deltas, 0, 0.1, reference_deltas=deltas)
    assert loss.item() == pytest.approx(math.log(2), abs=1e-7)
    assert joint_preference_logits(deltas, deltas, 0.1).tolist() == [0.0, 0.0]


def test_bradley_terry_and_pooling_by_hand() -> None:
    assert bradley_terry_loss(torch.tensor([1.0]), torch.tensor([0.0])).item() == pytest.approx(
        0.3132617, abs=1e-7
    )
    hidden = torch.arange(10.0).reshape(2, 5, 1)
    mask = torch.tensor([[1, 1, 1, 0, 0], [0, 0, 1, 1, 1]])
    assert pool_last_real(hidden, mask).flatten().tolist() == [2.0, 9.0]  # positions 2 and 4


def test_lambda_decay_weights_oldest_first() -> None:
    assert lambda_decay_weights(3, 0.5) == pytest.approx([1 / 7, 2 / 7, 4 / 7])
    assert lambda_decay_weights(3, 1.0) == pytest.approx([1 / 3] * 3)
    assert lambda_decay_weights(2, 0.0) == pytest.approx([0.0, 1.0])


def test_online_pairs_of_the_spec_example() -> None:
    """Current [1, 0, .5, .2, .9] vs comparator [0, 1, .5, .8, .3]: (comp 1 > cur 1),
    (comp 3 > cur 3), (cur 4 > comp 4), (cur 0 > comp 0); index 2 is a tie, dropped."""
    chosen = select_comparison_pairs(
        [1.0, 0.0, 0.5, 0.2, 0.9],
        [0.0, 1.0, 0.5, 0.8, 0.3],
        "comparator_reward",
        None,
        random.Random(0),
    )
    assert chosen == [
        (("comparator", 1), ("current", 1)),
        (("comparator", 3), ("current", 3)),
        (("current", 4), ("comparator", 4)),
        (("current", 0), ("comparator", 0)),
    ]


# ----- against the reference ------------------------------------------------------------------
def reference_iterative(selection: str, limit):
    module = require_module("comlrl.trainers.preference.iterative", "interop")
    trainer = object.__new__(module.MADPOIterTrainer)
    trainer.args = SimpleNamespace(pair_selection=selection, preference_pairs_per_sample=limit)
    return trainer


@pytest.mark.parametrize(
    ("selection", "limit"), [("comparator_reward", 4), ("reward_gap", 2), ("all", None)]
)
def test_online_selection_equals_the_reference(selection: str, limit) -> None:
    current, comparator = [1.0, 0.0, 0.5, 0.2, 0.9], [0.0, 1.0, 0.5, 0.8, 0.3]
    theirs = reference_iterative(selection, limit)._select_policy_comparison_pairs(
        current, comparator
    )
    ours = select_comparison_pairs(current, comparator, selection, limit, random.Random(0))
    assert ours == theirs


@pytest.mark.parametrize(
    ("selection", "limit"), [("reward_gap", 16), ("reward_gap", 3), ("all", None)]
)
def test_offline_selection_equals_the_reference(selection: str, limit) -> None:
    module = comlrl_preference()
    trainer = object.__new__(module.MADPOTrainer)
    trainer.args = SimpleNamespace(pair_selection=selection, preference_pairs_per_sample=limit)
    rewards = [0.2, 1.0, 0.2, 0.0, 0.7, 1.0]
    assert select_pair_indices(rewards, selection, limit, random.Random(0)) == (
        trainer._select_preference_pair_indices(rewards)
    )


def fixed_pairs(policies: dict[str, LLMPolicy]) -> list[PreferencePair]:
    """Three pairs of two agents, prompts and answers from each agent's own tokenizer."""
    generator = torch.Generator().manual_seed(0)

    def ids(count: int) -> list[int]:
        return torch.randint(70, 120, (count,), generator=generator).tolist()

    pairs = []
    for lengths in ((3, 2), (5, 4), (2, 6)):
        pairs.append(
            PreferencePair(
                prompts=dict.fromkeys(AGENTS, "p"),
                chosen=dict.fromkeys(AGENTS, "w"),
                rejected=dict.fromkeys(AGENTS, "l"),
                prompt_ids={a: ids(4) for a in AGENTS},
                chosen_ids={a: ids(lengths[0]) for a in AGENTS},
                rejected_ids={a: ids(lengths[1]) for a in AGENTS},
            )
        )
    return pairs


SENTINEL = 5
"""The reference leaves a completion's last token unscored (its logits are cut one short):
appending one token it ignores makes it score exactly our whole completion."""


def reference_madpo(policies: dict[str, LLMPolicy], beta: float):
    module = comlrl_preference()
    trainer = object.__new__(module.MADPOTrainer)
    trainer.agents = [policies[a].model for a in AGENTS]
    trainer.tokenizers = [policies[a].tokenizer for a in AGENTS]
    trainer.num_agents = len(AGENTS)
    trainer.centralized_collaboration = None
    trainer.args = SimpleNamespace(dpo_beta=beta)
    return module, trainer


def reference_pairs(module, pairs: list[PreferencePair]):
    def row(values: list[int], sentinel: bool) -> torch.Tensor:
        return torch.tensor(values + ([SENTINEL] if sentinel else []), dtype=torch.long)

    return [
        module.PreferencePair(
            prompts=[p.prompts[a] for a in AGENTS],
            winner_completions=[p.chosen[a] for a in AGENTS],
            loser_completions=[p.rejected[a] for a in AGENTS],
            agent_tensors=[
                module.AgentPreferenceTensors(
                    row(p.prompt_ids[a], False),
                    row(p.chosen_ids[a], True),
                    row(p.rejected_ids[a], True),
                )
                for a in AGENTS
            ],
            winner_reward=1.0,
            loser_reward=0.0,
            candidate_reward_mean=0.5,
        )
        for p in pairs
    ]


def test_madpo_loss_and_gradients_equal_the_references_when_reference_free(tmp_path) -> None:
    """At the default beta 0.1, in float32 (both sides score float32 log-softmaxes of the same
    models; batching alone moves a Delta of 24 by ~2e-6, so the Deltas agree to 1e-5 and the
    loss, scaled by beta, to 1e-6)."""
    team = {a: LLMPolicy(*tiny_causal_lm(seed=i)) for i, a in enumerate(AGENTS)}
    args = MADPOConfig(output_dir=str(tmp_path), reference_free=True, dpo_beta=0.1, progress=False)
    ours = MADPOTrainer(EvenStart, team, args)
    pairs = fixed_pairs(ours.policies)
    assert all(SENTINEL not in p.chosen_ids[a] + p.rejected_ids[a] for p in pairs for a in AGENTS)
    module, theirs = reference_madpo(ours.policies, 0.1)
    their_pairs = reference_pairs(module, pairs)
    detached = theirs._detached_agent_deltas(their_pairs)
    deltas = {}
    for agent in AGENTS:
        with ours.policies[agent].mode(train=True):
            deltas[agent] = ours.scorer.deltas(agent, pairs)
    stacked = torch.stack([deltas[a] for a in AGENTS], -1)
    torch.testing.assert_close(stacked.detach(), torch.tensor(detached), atol=1e-5, rtol=0)
    for position, agent in enumerate(AGENTS):
        model = ours.policies[agent].model
        model.zero_grad()
        loss = agent_preference_loss(deltas[agent], stacked.detach(), position, 0.1)
        loss.backward(retain_graph=True)
        our_grads = [p.grad.clone() for p in model.parameters()]
        model.zero_grad()
        reference_loss = theirs._agent_preference_loss(position, their_pairs, detached)
        reference_loss.backward()
        assert loss.item() == pytest.approx(reference_loss.item(), abs=1e-6)
        for ours_grad, p in zip(our_grads, model.parameters(), strict=True):
            torch.testing.assert_close(ours_grad, p.grad, atol=1e-6, rtol=0)
    # The learner's own step logs the same loss as the reference's before its update.
    metrics = ours.dpo_step(pairs)
    assert metrics["loss"] == pytest.approx(reference_loss.item(), abs=1e-6)


def test_the_default_reference_changes_the_loss_and_the_step(tmp_path) -> None:
    """The documented difference: with a frozen reference every pair starts at log 2 and the
    first step's gradient is -beta sigmoid(0) per Delta, without one the loss starts wherever the
    initial policy's Deltas put it."""
    losses = {}
    for free in (False, True):
        team = {a: LLMPolicy(*tiny_causal_lm(seed=i)) for i, a in enumerate(AGENTS)}
        args = MADPOConfig(
            output_dir=str(tmp_path / str(free)), reference_free=free, progress=False
        )
        trainer = MADPOTrainer(EvenStart, team, args)
        losses[free] = trainer.dpo_step(fixed_pairs(trainer.policies))["loss"]
    assert losses[False] == pytest.approx(math.log(2), abs=1e-6)
    assert abs(losses[True] - math.log(2)) > 1e-3


def test_lambda_decay_weights_equal_the_references() -> None:
    trainer = reference_iterative("comparator_reward", 4)
    for lam in (0.0, 0.3, 0.5, 1.0):
        trainer.args.preference_replay_lambda = lam
        assert lambda_decay_weights(4, lam) == pytest.approx(trainer._lambda_decay_weights(4))


def test_a_reward_model_step_equals_the_references() -> None:
    """One Bradley-Terry step on one pair, from the same backbone and head, with the reference's
    AdamW (decay 0.01, no clipping): the texts agree when the agents are named as the reference
    numbers them, and so do the scores, the loss and every weight after the step."""
    import copy

    module = require_module("comlrl.trainers.preference.marlhf", "interop")
    from collabzoo.algos.policies.reward_model import JointRewardModel, joint_text

    model, tokenizer = tiny_causal_lm(seed=4)
    agents = ["Agent 1", "Agent 2"]
    prompts, chosen, rejected = ["p one", "p two"], ["a 1", "b 2"], ["x 9", "y 8"]
    ours = JointRewardModel(copy.deepcopy(model), tokenizer)
    theirs = module.JointRewardModel(copy.deepcopy(model))
    theirs.reward_head.load_state_dict(ours.head.state_dict())
    trainer = object.__new__(module.MARLHFTrainer)
    trainer.reward_model, trainer.reward_tokenizer = theirs, tokenizer
    # AdamW's first step is lr * g / (|g| + eps): at the default eps (1e-8) a gradient element
    # near 0 turns a rounding difference (the texts batched 4 at once here, 2 there) into a step
    # of up to lr, so both sides use eps 1e-3, which keeps the comparison about the gradients.
    trainer.reward_optimizer = torch.optim.AdamW(theirs.parameters(), lr=1e-3, eps=1e-3)
    trainer.reward_device = torch.device("cpu")
    trainer.args = SimpleNamespace(
        reward_train_batch_size=1, reward_num_train_epochs=1, reward_max_length=None
    )
    trainer.verbose, trainer.num_agents = False, 2
    pair = module.PreferencePair(prompts, chosen, rejected, [], 1.0, 0.0, 0.5)
    assert trainer._format_joint_text(prompts, chosen) == joint_text(
        dict(zip(agents, prompts, strict=True)), dict(zip(agents, chosen, strict=True)), agents
    )
    trainer._train_reward_model([pair])
    texts = [
        joint_text(
            dict(zip(agents, prompts, strict=True)), dict(zip(agents, a, strict=True)), agents
        )
        for a in (chosen, rejected)
    ]
    optimizer = torch.optim.AdamW(ours.trainable_parameters(), lr=1e-3, eps=1e-3)
    scores = ours.score_texts(texts)
    bradley_terry_loss(scores[:1], scores[1:]).backward()
    optimizer.step()
    torch.testing.assert_close(ours.head.weight, theirs.reward_head.weight, atol=1e-6, rtol=0)
    for mine, reference in zip(
        ours.backbone.parameters(), theirs.backbone.parameters(), strict=True
    ):
        torch.testing.assert_close(mine, reference, atol=1e-6, rtol=0)

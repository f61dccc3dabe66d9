"""Tests that each fail on one specific plausible bug (a "mutant") and pass on the real code.

Every expectation is worked out by hand in the test on a paper-sized case; none is made by
calling the function under test. The mutant each test kills is named in its docstring.
"""

from __future__ import annotations

import math

import pytest

from tests.optional import require_module

torch = require_module("torch", "train")

import collabzoo  # noqa: E402
from collabzoo.algos import (  # noqa: E402
    IACConfig,
    IACTrainer,
    IPPOConfig,
    IPPOTrainer,
    MAGRPOConfig,
    MAGRPOTrainer,
    MAREINFORCEConfig,
    MAREINFORCETrainer,
)
from collabzoo.algos.learners import actor_critic  # noqa: E402
from collabzoo.algos.learners.actor_critic import ActorCriticLearner  # noqa: E402
from collabzoo.algos.learners.critic_batches import Sample  # noqa: E402
from collabzoo.tasks.code import rewards as code_rules  # noqa: E402
from tests.test_learner_updates import QUIET  # noqa: E402
from tests.test_learners import ScriptedPolicy, Sum, team  # noqa: E402
from tests.tolerance import assert_close_to_scale  # noqa: E402


def scripted_trainer(trainer_class, config):
    """A trainer on `Sum` (reward = left answer + right answer) whose rollouts answer from fixed
    lists: left "1" then "0", right "2" then "0" (the learner's own rollout and transforms)."""
    trainer = trainer_class(Sum, team(("left", "right")), config)
    trainer.rollout.policies = {
        "left": ScriptedPolicy(["1", "0"]),
        "right": ScriptedPolicy(["2", "0"]),
    }
    return trainer


# ----- a. actor-critic advantage normalisation centres --------------------------------------------
def test_actor_critic_advantage_normalisation_subtracts_the_mean() -> None:
    """Mutant: A / std instead of (A - mean) / std. Advantages 1, 2, 6: mean 3, population std
    sqrt((4 + 1 + 9) / 3) = sqrt(14 / 3), so z = (-2, -1, 3) / sqrt(14 / 3)."""
    samples = [Sample([1], [2], advantage, 0.0, 0.0) for advantage in (1.0, 2.0, 6.0)]
    ActorCriticLearner._normalise(samples)
    std = math.sqrt(14 / 3)
    assert [s.advantage for s in samples] == pytest.approx([-2 / std, -1 / std, 3 / std], rel=1e-9)
    assert sum(s.advantage for s in samples) == pytest.approx(0.0, abs=1e-12)


# ----- b. cross mode: each agent's sample index ---------------------------------------------------
@pytest.mark.parametrize(
    ("trainer_class", "config_class", "extra"),
    [
        (MAGRPOTrainer, MAGRPOConfig, {}),
        (MAREINFORCETrainer, MAREINFORCEConfig, {"advantage_mode": "raw"}),
    ],
    ids=["magrpo-mean", "mareinforce-raw"],
)
def test_cross_mode_returns_average_over_each_agents_own_partners(
    trainer_class, config_class, extra, tmp_path
) -> None:
    """Mutant: every agent's returns taken from agent 0's sample index. One turn, K = 2, cross:
    joints (left, right) = (0,0) 1+2=3, (0,1) 1+0=1, (1,0) 0+2=2, (1,1) 0+0=0.
    left's sample 0 took part in (0,0), (0,1): G = (3+1)/2 = 2; sample 1: (2+0)/2 = 1.
    right's sample 0 took part in (0,0), (1,0): G = (3+2)/2 = 2.5; sample 1: (1+0)/2 = 0.5.
    Mean baseline: left (0.5, -0.5), right (1, -1); raw: the returns themselves. (Agent 0's
    index would give right left's numbers; the reference's sum would double every G.)"""
    config = config_class(
        output_dir=str(tmp_path),
        joint_mode="cross",
        num_generations=2,
        num_turns=1,
        advantage_normalization=False,  # z-scoring would map both agents' pairs to (1, -1)
        **extra,
        **QUIET,
    )
    trainer = scripted_trainer(trainer_class, config)
    roots = trainer.rollout.build([0], trainer.args.discount)
    assert [c.reward for c in roots[0].children] == [3.0, 1.0, 2.0, 0.0]
    batch = trainer.training_batch(roots)
    advantages = {agent: [s.advantage for s in items] for agent, items in batch.items()}
    if trainer.args.advantage_mode == "mean":
        assert advantages == {"left": [0.5, -0.5], "right": [1.0, -1.0]}
    else:
        assert advantages == {"left": [2.0, 1.0], "right": [2.5, 0.5]}


# ----- c. the code reward stops after exactly three timed-out tests -------------------------------
SLOW_PROBLEM = code_rules.CodeProblem(
    task_id="slow/0",
    prompt='def ident(n):\n    """Return n."""\n',
    test=(
        "def check(candidate):\n"
        "    assert candidate(1) == 1\n"
        "    assert candidate(2) == 2\n"
        "    assert candidate(3) == 3\n"
        "    assert candidate(0) == 0\n"
        "    assert candidate(-1) == -1\n"
    ),
    entry_point="ident",
)
AUX = "def aux(n):\n    return n"


def sleeps_from(first_slow: int) -> str:
    """An entry point that hangs for inputs >= first_slow and is correct (via aux) otherwise."""
    return (
        "def ident(n):\n"
        "    import time\n"
        f"    if n >= {first_slow}:\n"
        "        time.sleep(60)\n"
        "    return aux(n)"
    )


@pytest.fixture(scope="module")
def sandbox():
    from collabzoo.sandbox import get_sandbox

    with get_sandbox("process", size=2) as pool:
        yield pool


def test_code_reward_skips_the_remaining_tests_after_three_timeouts(sandbox) -> None:
    """Mutant: the reward's default maximum of timed-out tests 3 -> 5 (or 2). Tests 0-2 call
    the entry point with 1, 2, 3; tests 3-4 with 0, -1, which return at once.
    Hanging from 1: tests 0, 1, 2 time out, so tests 3 and 4 are never run and count as failed:
    0.4 aux + 0.6 main + 0.5 syntax = 1.5 (with 5 allowed, 2/5 tests pass and the aux bonuses
    follow: 3.4). Hanging from 2: only two time out, so tests 0, 3 and 4 run and pass:
    1.5 + 3/5 + 0.5 (calls aux) + 1.0 (not a thin wrapper) = 3.6."""
    three, two = code_rules.evaluate_code_batch(
        [(SLOW_PROBLEM, AUX, sleeps_from(1)), (SLOW_PROBLEM, AUX, sleeps_from(2))],
        sandbox,
        timeout=1.0,  # seconds per test: ample for the quick ones on a loaded machine
    )
    assert three.result.passed == (False,) * 5
    assert three.result.timed_out and three.breakdown.metrics["timed_out"] == 1.0
    assert three.breakdown.components["tests"] == 0.0
    assert three.breakdown.total == pytest.approx(1.5)
    assert two.result.passed == (True, False, False, True, True)
    assert two.breakdown.components["tests"] == pytest.approx(3 / 5)
    assert two.breakdown.total == pytest.approx(1.5 + 0.6 + 0.5 + 1.0)


# ----- d. the learner's reward transform: (r + shift) * scale -------------------------------------
@pytest.mark.parametrize("trainer_class", [MAGRPOTrainer, IACTrainer], ids=["magrpo", "iac"])
def test_learner_shifts_then_scales_every_team_reward(trainer_class, tmp_path) -> None:
    """Mutant: r * scale + shift. Aligned K = 2, one turn: raw rewards 1+2 = 3 and 0+0 = 0;
    shift -4, scale 0.5: (3 - 4) * 0.5 = -0.5 and (0 - 4) * 0.5 = -2 (the mutant: -2.5, -4).
    The returns (one turn: R = r) carry the transformed rewards too."""
    config_class = MAGRPOConfig if trainer_class is MAGRPOTrainer else IACConfig
    config = config_class(
        output_dir=str(tmp_path),
        num_generations=2,
        num_turns=1,
        reward_shift=-4.0,
        reward_scale=0.5,
        **QUIET,
    )
    trainer = scripted_trainer(trainer_class, config)
    (root,) = trainer.rollout.build([0], trainer.args.discount)
    assert [c.reward for c in root.children] == [-0.5, -2.0]
    assert [c.ret for c in root.children] == [-0.5, -2.0]


def test_learner_reward_normalisation_uses_running_statistics_of_shaped_rewards(
    tmp_path,
) -> None:
    """reward_normalization on: shaped rewards -0.5 then -2 (as above) standardised with the
    running mean and (n - 1) std seen so far. First: (x - x) / 1 = 0 (one value: std 1).
    Second: mean -1.25, std |(-2) - (-0.5)| / sqrt(2) = 1.5 / sqrt(2), so
    (-2 + 1.25) / (1.5 / sqrt(2)) = -1 / sqrt(2). A per-batch z-score would give (1, -1)."""
    config = MAGRPOConfig(
        output_dir=str(tmp_path),
        num_generations=2,
        num_turns=1,
        reward_shift=-4.0,
        reward_scale=0.5,
        reward_normalization=True,
        **QUIET,
    )
    trainer = scripted_trainer(MAGRPOTrainer, config)
    (root,) = trainer.rollout.build([0], trainer.args.discount)
    assert [c.reward for c in root.children] == pytest.approx([0.0, -1 / math.sqrt(2)], rel=1e-6)
    assert trainer.reward_stats.mean == pytest.approx(-1.25)


# ----- e. writing rewards: word sets are case-insensitive: tests/test_writing_rewards.py ----


# ----- IPPO: the ratio is against pi_old recorded before the update -------------------------------
def test_ippo_second_epoch_ratio_is_against_the_recorded_old_log_probs(
    tmp_path, monkeypatch
) -> None:
    """Mutant: pi_old not recorded (the detached current log-probs used as pi_old, so the ratio
    is 1 in every epoch). Two PPO epochs over one mini-batch: in epoch 1 the policy has not
    moved (ratio 1); in epoch 2 the loss must see pi_old = the log-probs from before the
    update, and the ratio exp(new - old) must differ from 1."""
    torch.manual_seed(0)
    config = IPPOConfig(
        output_dir=str(tmp_path),
        ppo_epochs=2,
        rollout_buffer_size=2,
        num_generations=2,
        max_new_tokens=3,
        temperature=1.0,
        top_p=1.0,
        top_k=None,
        actor_learning_rate=1e-2,
        critic_learning_rate=1e-2,
        advantage_normalization=False,
        **QUIET,
    )
    trainer = IPPOTrainer(lambda: collabzoo.make("tinycoop"), team(), config)
    roots = trainer.rollout.build(trainer.episode_seeds(0), trainer.args.discount)
    samples, critic_samples = trainer.training_batch(roots)
    for items in samples.values():
        for i, sample in enumerate(items):
            sample.advantage = (-1.0) ** i  # a gradient whatever the rewards were

    def scored_now(agent: str, part: list[Sample]) -> torch.Tensor:
        policy = trainer.policies[agent]
        with torch.no_grad(), policy.mode(train=False):
            return policy.score(
                [s.prompt_ids for s in part],
                [s.completion_ids for s in part],
                sampling=trainer.sampling,
            ).log_probs

    before = {agent: scored_now(agent, items) for agent, items in samples.items()}
    seen: list[tuple[str, list[int], torch.Tensor, torch.Tensor, torch.Tensor]] = []
    current: dict[str, object] = {}
    real_actor_loss, real_policy_loss = trainer._actor_loss, actor_critic.clipped_policy_loss

    def actor_loss(agent, part, scale, stats):
        position = {id(s): i for i, s in enumerate(samples[agent])}
        current["agent"], current["rows"] = agent, [position[id(s)] for s in part]
        return real_actor_loss(agent, part, scale, stats)

    def policy_loss(log_probs, old, advantages, mask, clip_range, weights=None):
        rows = current["rows"]
        seen.append((current["agent"], rows, log_probs.detach().clone(), old.clone(), mask))
        return real_policy_loss(log_probs, old, advantages, mask, clip_range, weights)

    monkeypatch.setattr(trainer, "_actor_loss", actor_loss)
    monkeypatch.setattr(actor_critic, "clipped_policy_loss", policy_loss)
    trainer.optimize(samples, critic_samples)

    assert [agent for agent, *_ in seen] == ["alpha", "beta", "alpha", "beta"]
    for epoch, (agent, rows, new, old, mask) in enumerate(seen):
        expected_old = before[agent][rows][:, : mask.size(1)]
        assert_close_to_scale(old[mask], expected_old[mask])
        ratio = torch.exp(new - old)[mask]
        if epoch < 2:  # the first epoch: nothing has moved yet
            assert_close_to_scale(ratio, torch.ones_like(ratio), rel=1e-4)
        else:
            assert (ratio - 1.0).abs().max() > 1e-3, "pi moved: the ratio is no longer 1"
            assert_close_to_scale(ratio, torch.exp(new[mask] - expected_old[mask]))

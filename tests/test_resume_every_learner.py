"""Resume is exact for every learner: 2 updates straight and 1 update + resume + 1 update (under
another global RNG) end with identical weights, optimizer states, counters and reward
statistics (torch.equal, no tolerance). MAGRPO, IPPO and the centralized critic are covered in
test_learners and test_actor_critic; here: IAC (separate critic and value head), MA-REINFORCE,
reward normalisation, evaluations during training, and LoRA teams (adapters on one base).

The env is test_learners' EvenStart paying a dense reward (`FirstCharacters`): short prompts
(fast), and two samples almost never earn the same, so every update of every learner has
advantages to learn from and a resume that lost the RNG, an optimizer, a critic or the reward
statistics shows in the weights (a sparse reward, all zero in an update, would hide it)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import datasets
import pytest

from tests.optional import require_module

torch = require_module("torch", "train")

from collabzoo.algos import (  # noqa: E402
    ATGRPOConfig,
    ATGRPOTrainer,
    IACConfig,
    IACTrainer,
    JointACConfig,
    JointActorConfig,
    JointActorTrainer,
    JointACTrainer,
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
    lora_team,
    tiny_causal_lm,
)
from tests.test_actor_critic import critic_parameters, short_config  # noqa: E402
from tests.test_learners import FROM_SCRATCH, EvenStart, parameters, team  # noqa: E402

UPDATES = 2  # the first run stops (and checkpoints) after 1; the resumed one goes on to 2
AGENTS = ("left", "right")  # EvenStart's


class FirstCharacters(EvenStart):
    """EvenStart paying, every turn, the mean code of the answers' first characters / 256."""

    def step(self, actions):
        observations, rewards, terminations, truncations, infos = super().step(actions)
        reward = sum(ord(actions[a][:1] or "\0") for a in rewards) / (256 * len(rewards))
        return observations, dict.fromkeys(rewards, reward), terminations, truncations, infos


def lora() -> dict:
    """Two agents' LoRA adapters on one tiny base (their start depends on the global RNG: a
    resumed run must take them from the checkpoint)."""
    return lora_team(*tiny_causal_lm(seed=0), AGENTS, rank=2)


def tree(config_class=MAGRPOConfig, **extra):
    """A config maker for a rollout-tree learner trained from scratch, checkpointing each
    update."""
    settings = {**FROM_SCRATCH, "rollout_buffer_size": 2, "num_generations": 2, **extra}
    return lambda path, updates, **more: config_class(
        output_dir=str(path), max_updates=updates, save_steps=1, **settings, **more
    )


def actor_critic(config_class=IACConfig, **extra):
    """A config maker for an actor-critic learner, checkpointing each update."""
    return lambda path, updates, **more: short_config(
        config_class, path, max_updates=updates, save_steps=1, **extra, **more
    )


def straight_and_resumed(trainer_class, config, tmp_path: Path, make_team=None):
    """(UPDATES straight, UPDATES/2 then resumed to UPDATES under a different global RNG)."""
    make_team = make_team or (lambda: team(AGENTS))
    torch.manual_seed(1)
    whole = trainer_class(FirstCharacters, make_team(), config(tmp_path / "whole", UPDATES))
    whole.train()
    torch.manual_seed(1)
    half = trainer_class(FirstCharacters, make_team(), config(tmp_path / "split", UPDATES // 2))
    half.train()
    torch.manual_seed(999)  # the checkpoint must restore the RNGs (and, for LoRA, the adapters)
    resumed = trainer_class(
        FirstCharacters, make_team(), config(tmp_path / "split", UPDATES, resume=True)
    )
    resumed.train()
    assert resumed.update == whole.update == UPDATES
    moved = zip(parameters(half), parameters(resumed), strict=True)
    assert any(not torch.equal(a, b) for a, b in moved), "the resumed half must learn something"
    return whole, resumed


def assert_identical(left: Any, right: Any, where: str = "state") -> None:
    """Nested dicts, lists and tensors equal exactly (torch.equal, no tolerance)."""
    if isinstance(left, torch.Tensor):
        assert isinstance(right, torch.Tensor) and left.dtype == right.dtype, where
        assert torch.equal(left, right), f"{where} differs"
    elif isinstance(left, dict):
        assert isinstance(right, dict) and left.keys() == right.keys(), where
        for key in left:
            assert_identical(left[key], right[key], f"{where}/{key}")
    elif isinstance(left, list | tuple):
        assert isinstance(right, list | tuple) and len(left) == len(right), where
        for i, (a, b) in enumerate(zip(left, right, strict=True)):
            assert_identical(a, b, f"{where}[{i}]")
    else:
        assert left == right, f"{where}: {left!r} != {right!r}"


def assert_same_run(whole, resumed) -> dict:
    """Every weight (trainable or frozen), every critic's, and the whole checkpoint state but
    the config and the RNG: trainable tensors, optimizers, counters, reward statistics."""
    for a, b in zip(parameters(whole), parameters(resumed), strict=True):
        assert torch.equal(a, b)
    if hasattr(whole, "critics"):
        for a, b in zip(critic_parameters(whole), critic_parameters(resumed), strict=True):
            assert torch.equal(a, b)
    left, right = whole.state_dict(), resumed.state_dict()
    for state in (left, right):
        del state["config"], state["rng"]
    assert_identical(left, right)
    assert left["policies"] and left["optimizers"]
    return left


# ----- every learner ------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("trainer_class", "config"),
    [
        (IACTrainer, actor_critic()),
        (IACTrainer, actor_critic(use_separate_critic=False, value_head_hidden_dim=8)),
        (MAREINFORCETrainer, tree(MAREINFORCEConfig, advantage_mode="rloo")),
        (MARLOOTrainer, tree(MARLOOConfig)),
        (MAReMaxTrainer, tree(MAReMaxConfig, advantage_normalization="std")),
        (MAGRPOTrainer, tree(advantage_group="agent")),
        (MAACTrainer, actor_critic(MAACConfig)),
        (ATGRPOTrainer, tree(ATGRPOConfig, ppo_mini_batches=2, filter_low_mean_groups=0.5)),
        (JointActorTrainer, tree(JointActorConfig, joint_format="fixed_width", max_new_tokens=2)),
        (JointACTrainer, actor_critic(JointACConfig, joint_format="fixed_width", max_new_tokens=2)),
    ],
    ids=[
        "iac",
        "iac-value-head",
        "mareinforce",
        "marloo",
        "maremax-std",
        "magrpo-drmas",
        "maac",
        "atgrpo",
        "joint",
        "joint-ac",
    ],
)
def test_resume_ends_with_the_same_state(trainer_class, config, tmp_path) -> None:
    make_team = None  # the joint actor is one policy for the joint agent
    if trainer_class in (JointActorTrainer, JointACTrainer):
        make_team = lambda: LLMPolicy(*tiny_causal_lm(seed=0))  # noqa: E731
    whole, resumed = straight_and_resumed(trainer_class, config, tmp_path, make_team)
    state = assert_same_run(whole, resumed)
    if trainer_class in (IACTrainer, JointACTrainer):  # the critics matched too
        assert state["extra"]["critic_heads"]


# ----- reward normalisation -----------------------------------------------------------------------
@pytest.mark.parametrize(
    ("trainer_class", "config"),
    [
        (MAGRPOTrainer, tree(reward_normalization=True)),
        (IACTrainer, actor_critic(reward_normalization=True)),
    ],
    ids=["magrpo", "iac"],
)
def test_resume_keeps_the_reward_normalisation_statistics(trainer_class, config, tmp_path) -> None:
    whole, resumed = straight_and_resumed(trainer_class, config, tmp_path)
    stats = assert_same_run(whole, resumed)["reward_stats"]
    assert stats["count"] == whole.rollout.env_steps > 0  # one reward per env step
    assert vars(resumed.reward_stats) == vars(whole.reward_stats) == stats


# ----- evaluations during training ----------------------------------------------------------------
def logged(run_dir: Path) -> list[dict]:
    """metrics.jsonl without what depends on the wall clock."""
    clock = {"time", "update_seconds", "joint_samples_per_s"}
    lines = (run_dir / "metrics.jsonl").read_text().splitlines()
    return [{k: v for k, v in json.loads(line).items() if k not in clock} for line in lines]


def test_evaluations_during_training_do_not_change_the_resumed_run(tmp_path) -> None:
    """Evaluations sample, one just before the checkpoint and one after the resume: the
    resumed run must still match the straight one, evaluations included."""
    config = tree(eval_interval=1, eval_num_samples=2)
    whole, resumed = straight_and_resumed(MAGRPOTrainer, config, tmp_path)
    assert_same_run(whole, resumed)
    straight, split = logged(tmp_path / "whole"), logged(tmp_path / "split")
    assert [r["update"] for r in straight if "eval/mean_return" in r] == [1, 2]
    assert split == straight


def test_evaluating_leaves_the_training_trajectory_as_it_was(tmp_path) -> None:
    """Training with an evaluation after every update ends with the weights of training with
    none (evaluation samples from its own seeded stream and restores the global RNG), and two
    evaluations of the same weights see the same samples."""
    config = tree()
    torch.manual_seed(1)
    plain = MAGRPOTrainer(FirstCharacters, team(AGENTS), config(tmp_path / "plain", 3))
    plain.train()
    torch.manual_seed(1)
    evaluated = MAGRPOTrainer(
        FirstCharacters,
        team(AGENTS),
        config(tmp_path / "evaluated", 3, eval_interval=1, eval_num_samples=3),
    )
    evaluated.train()
    assert len([r for r in logged(tmp_path / "evaluated") if "eval/mean_return" in r]) == 3
    for a, b in zip(parameters(plain), parameters(evaluated), strict=True):
        assert torch.equal(a, b)
    state = torch.random.get_rng_state()
    first, second = evaluated.evaluate(4), evaluated.evaluate(4)
    assert first == second and torch.equal(state, torch.random.get_rng_state())
    torch.manual_seed(12345)  # the caller's RNG does not reach the evaluation either
    assert evaluated.evaluate(4) == first


def test_an_evaluation_saves_the_episodes_its_numbers_come_from(tmp_path) -> None:
    """With eval_save_episodes, each evaluation writes its episodes: their returns average to
    the logged eval/mean_return, every turn holds each agent's observation and answer, and a
    second evaluation of the same weights writes the same file. Off by default."""
    config = tree()
    torch.manual_seed(1)
    saving = MAGRPOTrainer(
        FirstCharacters,
        team(AGENTS),
        config(
            tmp_path / "saving", 2, eval_interval=1, eval_num_samples=3, eval_save_episodes=True
        ),
    )
    saving.train()
    evaluations = [r for r in logged(tmp_path / "saving") if "eval/mean_return" in r]
    logged_returns = {r["update"]: r["eval/mean_return"] for r in evaluations}
    files = sorted((tmp_path / "saving" / "evaluations").iterdir())
    assert [f.name for f in files] == ["update-00000001.jsonl", "update-00000002.jsonl"]
    for update, path in enumerate(files, start=1):
        episodes = [json.loads(line) for line in path.read_text().splitlines()]
        assert len(episodes) == 3 and len({e["seed"] for e in episodes}) == 3
        mean = sum(e["return"] for e in episodes) / 3
        assert mean == pytest.approx(logged_returns[update])
        for episode in episodes:
            rewards = [turn["reward"] for turn in episode["turns"]]
            assert rewards and sum(rewards) == pytest.approx(episode["return"])
            for turn in episode["turns"]:
                assert sorted(turn["observations"]) == sorted(turn["answers"]) == sorted(AGENTS)
                assert all(isinstance(text, str) for text in turn["answers"].values())
    # One JSON object per line, so the field's dataset loader reads a file as it stands.
    table = datasets.load_dataset(
        "json", data_files=str(files[-1]), split="train", cache_dir=str(tmp_path / "cache")
    )
    assert list(table["return"]) == pytest.approx([e["return"] for e in episodes])
    assert table[0]["turns"][0]["answers"] == episodes[0]["turns"][0]["answers"]
    saved = files[-1].read_text()
    files[-1].unlink()
    saving.evaluate(3)  # the same weights, the same seeded samples: the same file again
    assert files[-1].read_text() == saved
    torch.manual_seed(1)
    plain = MAGRPOTrainer(
        FirstCharacters, team(AGENTS), config(tmp_path / "plain", 1, eval_interval=1)
    )
    plain.train()
    assert not (tmp_path / "plain" / "evaluations").exists()


# ----- LoRA teams ---------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("trainer_class", "config"),
    [(MAGRPOTrainer, tree()), (IACTrainer, actor_critic())],
    ids=["magrpo", "iac-lora-critics"],
)
def test_a_lora_team_resumes_exactly(trainer_class, config, tmp_path) -> None:
    whole, resumed = straight_and_resumed(trainer_class, config, tmp_path, make_team=lora)
    state = assert_same_run(whole, resumed)
    assert sorted(state["policies"]) == list(AGENTS)
    assert all("lora_" in name for weights in state["policies"].values() for name in weights)
    if trainer_class is IACTrainer:  # each critic is its own adapter on the same base
        assert state["extra"]["critic_backbones"]

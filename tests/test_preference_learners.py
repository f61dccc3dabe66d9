"""The preference learners (MADPO, MARLHF and their online variants) as a user runs them:
exact resume, refused settings, preference files, the online comparator and the reward model.
Their maths against CoMLRL and hand cases: test_preference_parity; learning TinyCoop from the
command line: test_preference_learning."""

from __future__ import annotations

import json
import random

import datasets
import pytest

from tests.optional import require_module

torch = require_module("torch", "train")

from collabzoo.algos import (  # noqa: E402
    LEARNERS,
    LLMPolicy,
    MADPOConfig,
    MADPOIterConfig,
    MADPOIterTrainer,
    MADPOTrainer,
    MARLHFConfig,
    MARLHFIterConfig,
    MARLHFIterTrainer,
    MARLHFTrainer,
    tiny_causal_lm,
)
from collabzoo.algos.learners.preference_data import PreferenceDataError, load_pairs  # noqa: E402
from collabzoo.algos.learners.preference_pairs import PreferencePair  # noqa: E402
from collabzoo.algos.policies.reward_model import JointRewardModel  # noqa: E402
from tests.test_resume_every_learner import (  # noqa: E402
    AGENTS,
    FirstCharacters,
    assert_same_run,
    lora,
    straight_and_resumed,
)

SMALL = {
    "max_new_tokens": 1,
    "temperature": 1.0,
    "top_p": 1.0,
    "top_k": None,
    "agent_learning_rate": 1e-2,
    "tensorboard": False,
    "progress": False,
    "preference_num_candidates": 4,
    "preference_num_items": 2,
    "train_batch_size": 2,
}
"""Byte-level models from scratch, few candidates: each update runs in a second or two."""


def maker(config_class, **extra):
    return lambda path, updates, **more: config_class(
        output_dir=str(path), max_updates=updates, save_steps=1, **{**SMALL, **extra}, **more
    )


def team(seed: int = 0) -> dict[str, LLMPolicy]:
    return {a: LLMPolicy(*tiny_causal_lm(seed=10 * seed + i)) for i, a in enumerate(AGENTS)}


# ----- resume ------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("trainer_class", "config", "make_team"),
    [
        (MADPOTrainer, maker(MADPOConfig), None),
        (MADPOTrainer, maker(MADPOConfig, reference_free=True), lora),
        (MADPOIterTrainer, maker(MADPOIterConfig, comparator_policy="lag"), None),
        (
            MARLHFTrainer,
            maker(MARLHFConfig, rollout_buffer_size=2, num_generations=2, reward_heldout_items=1),
            None,
        ),
        (
            MARLHFIterTrainer,
            maker(MARLHFIterConfig, rollout_buffer_size=2, num_generations=2, num_train_epochs=1),
            lora,
        ),
    ],
    ids=["madpo", "madpo-lora-reference-free", "madpo-iter-lag", "marlhf", "marlhf-iter-lora"],
)
def test_resume_equals_a_straight_run(trainer_class, config, make_team, tmp_path) -> None:
    whole, resumed = straight_and_resumed(trainer_class, config, tmp_path, make_team)
    state = assert_same_run(whole, resumed)
    assert state["extra"]["preference_env_steps"] > 0


def test_a_lora_teams_dpo_reference_is_its_base_not_a_copy(tmp_path) -> None:
    trainer = MADPOTrainer(FirstCharacters, lora(), maker(MADPOConfig)(tmp_path, 1))
    assert trainer.scorer.references == {}  # the base with adapters off: no second model
    full = MADPOTrainer(FirstCharacters, team(), maker(MADPOConfig)(tmp_path / "full", 1))
    assert len(full.scorer.references) == 2


# ----- refused settings --------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("name", "settings", "message"),
    [
        ("madpo", {"num_turns": 2}, "single-turn"),
        ("madpo", {"pair_selection": "all"}, "preference_pairs_per_sample=None"),
        ("madpo", {"pair_selection": "comparator_reward"}, "pair_selection must be one of"),
        ("madpo", {"preference_num_candidates": 1}, "preference_num_candidates"),
        ("madpo", {"dpo_beta": 0.0}, "dpo_beta must be positive"),
        ("madpo-iter", {"comparator_policy": "history"}, "comparator_policy must be one of"),
        ("madpo-iter", {"comparator_lag": 0}, "comparator_lag"),
        ("madpo-iter", {"preference_replay_mode": "lambda_decay"}, "preference_replay_lambda"),
        ("madpo-iter", {"preference_replay_mode": "nearest_k"}, "preference_replay_k"),
        ("madpo-iter", {"preference_data": "pairs.jsonl"}, "offline learners"),
        ("marlhf", {"reward_lora_rank": 0}, "reward_lora_rank"),
        ("marlhf", {"advantage_mode": "median"}, "is the baseline 'mean', but advantage_mode"),
        ("marlhf-iter", {"comparator_generation_mode": "joint"}, "comparator_generation_mode"),
    ],
)
def test_bad_settings_are_refused_with_what_was_expected(name, settings, message) -> None:
    config, trainer = LEARNERS[name]
    with pytest.raises(ValueError, match=message):
        config(**settings)
    args = config()
    for key, value in settings.items():
        setattr(args, key, value)
    with pytest.raises(ValueError, match=message):
        trainer(None, None, args)  # refused before the env or the models are looked at


def test_the_command_line_refuses_a_bad_preference_setting(tmp_path, capsys) -> None:
    from collabzoo.cli import main

    command = ["train", "madpo", "--env", "tinycoop", "--model", "tiny", "--output", str(tmp_path)]
    assert main([*command, "--set", "pair_selection=best"]) == 2
    assert "pair_selection must be one of" in capsys.readouterr().err


def test_a_marlhf_lora_team_needs_a_reward_adapter_rank(tmp_path) -> None:
    args = maker(MARLHFConfig, reward_lora_rank=None)(tmp_path, 1)
    with pytest.raises(ValueError, match="give a rank"):
        MARLHFTrainer(FirstCharacters, lora(), args)


# ----- preference files --------------------------------------------------------------------------
def test_a_pairs_file_trains_madpo_and_bad_files_say_what_is_wrong(tmp_path) -> None:
    rows = [
        {
            "prompt": {"left": "say a", "right": "say b"},
            "chosen": {"left": "a", "right": "b"},
            "rejected": {"left": "x", "right": "y"},
            "chosen_reward": 1.0,
            "rejected_reward": 0.0,
        }
    ] * 3
    good = tmp_path / "pairs.jsonl"
    good.write_text("".join(json.dumps(r) + "\n" for r in rows))
    args = maker(MADPOConfig)(tmp_path / "run", 2, preference_data=str(good))
    trainer = MADPOTrainer(FirstCharacters, team(), args)
    last = trainer.train()
    assert trainer.pairs is not None and len(trainer.pairs) == 3
    assert trainer.pairs[0].chosen_ids["left"] == list(
        trainer.policies["left"].tokenizer("a", add_special_tokens=False)["input_ids"]
    )
    assert last["preference_pairs"] == 3.0 and last["env_steps"] == 0.0
    missing = tmp_path / "missing.jsonl"
    missing.write_text(json.dumps({"prompt": {"left": "p"}, "chosen": {"left": "a"}}) + "\n")
    with pytest.raises(PreferenceDataError, match=r"lacks columns \['rejected'\]"):
        load_pairs(missing, trainer.policies)
    one_agent = tmp_path / "one.jsonl"
    one_agent.write_text(json.dumps({**rows[0], "chosen": {"left": "a"}}) + "\n")
    with pytest.raises(PreferenceDataError, match=r"row 0: 'chosen' has no string for agents"):
        load_pairs(one_agent, trainer.policies)
    with pytest.raises(PreferenceDataError, match="expected a datasets folder"):
        load_pairs(tmp_path / "pairs.csv", trainer.policies)


def test_exported_episodes_become_pairs_of_the_same_prompts(tmp_path) -> None:
    def rows(episode: int, reward: float, answers: tuple[str, str], prompt: str = "p") -> list:
        return [
            {
                "prompt": f"{prompt}-{agent}",
                "completion": answer,
                "agent": agent,
                "turn": 0,
                "reward": reward,
                "episode": episode,
                "team": "t",
                "env": "e",
                "seed": episode,
            }
            for agent, answer in zip(AGENTS, answers, strict=True)
        ]

    data = (
        rows(0, 1.0, ("a", "b"))
        + rows(1, 0.0, ("c", "d"))
        + rows(2, 0.0, ("e", "f"))
        + rows(3, 1.0, ("g", "h"), prompt="other")  # alone with its prompts: no pair
    )
    folder = tmp_path / "episodes"
    datasets.Dataset.from_list(data).save_to_disk(str(folder))
    pairs = load_pairs(folder, team())
    assert [(p.chosen["left"], p.rejected["left"]) for p in pairs] == [("a", "c"), ("a", "e")]
    assert all(p.prompts == {"left": "p-left", "right": "p-right"} for p in pairs)


# ----- the online comparator ---------------------------------------------------------------------
def test_comparator_lag_1_samples_with_the_weights_saved_at_the_end_of_iteration_0(
    tmp_path,
) -> None:
    args = maker(MADPOIterConfig, comparator_policy="lag", comparator_lag=1)(tmp_path, 1)
    trainer = MADPOIterTrainer(FirstCharacters, team(), args)
    initial = {k: v.clone() for k, v in trainer.source._team_state()["left"].items()}
    trainer.train()
    after_first = {k: v.clone() for k, v in trainer.source._team_state()["left"].items()}
    assert any(not torch.equal(initial[k], after_first[k]) for k in initial)
    trainer.args.max_updates = 2
    trainer.train()
    at_one = trainer.source.comparator_state(1)["left"]  # lag 1 at iteration 1: the initial
    assert all(torch.equal(at_one[k], initial[k]) for k in initial)
    trainer.source.remember(2)  # what iteration 2 starts with
    at_two = trainer.source.comparator_state(2)["left"]
    assert all(torch.equal(at_two[k], after_first[k]) for k in after_first)


def test_an_unparsable_centralized_comparator_answer_is_counted_and_skipped(tmp_path) -> None:
    """A byte model writing one token never writes an <agent_i> tag: every comparator answer
    is counted, none is fatal, and no pair is made of them."""
    args = maker(
        MADPOIterConfig, comparator_generation_mode="centralized", comparator_num_candidates=3
    )(tmp_path, 1)
    trainer = MADPOIterTrainer(FirstCharacters, team(), args)
    last = trainer.train()
    assert last["comparator_unparsed"] == 3 * SMALL["preference_num_items"]
    assert last["iter/current_preference_pairs"] == 0.0


def test_replay_draws_from_the_iterations_shards(tmp_path) -> None:
    args = maker(
        MADPOIterConfig,
        preference_replay_mode="all_history",
        preference_replay_sample_size=5,
        preference_num_candidates=6,
    )(tmp_path, 2)
    trainer = MADPOIterTrainer(FirstCharacters, team(), args)
    last = trainer.train()
    assert last["iter/train_preference_pairs"] == 5.0
    files = sorted((tmp_path / "preference_replay").glob("iteration_*.json"))
    assert [f.name for f in files] == ["iteration_0000.json", "iteration_0001.json"]
    assert len(json.loads(files[1].read_text())) == last["iter/current_preference_pairs"]


# ----- the reward model --------------------------------------------------------------------------
def test_the_reward_model_pools_and_scores_as_the_references(tmp_path) -> None:
    module = require_module("comlrl.trainers.preference.marlhf", "interop")
    model, tokenizer = tiny_causal_lm(seed=3)
    ours = JointRewardModel(model, tokenizer)
    theirs = module.JointRewardModel(model)
    theirs.reward_head.load_state_dict(ours.head.state_dict())
    ids = torch.tensor([[5, 6, 7, 0, 0], [0, 0, 5, 6, 7]])
    mask = torch.tensor([[1, 1, 1, 0, 0], [0, 0, 1, 1, 1]])
    with torch.no_grad():
        torch.testing.assert_close(ours(ids, mask), theirs(ids, mask), atol=1e-6, rtol=0)
        hidden = model(input_ids=ids, attention_mask=mask, output_hidden_states=True)
        last = hidden.hidden_states[-1]
        expected = ours.head(torch.stack([last[0, 2], last[1, 4]])).squeeze(-1)
        torch.testing.assert_close(ours(ids, mask), expected)


def test_a_reward_model_depends_only_on_the_backbone_seed_and_pairs(tmp_path) -> None:
    args = maker(MARLHFIterConfig, rollout_buffer_size=2, num_generations=2)(tmp_path, 1)
    trainer = MARLHFIterTrainer(FirstCharacters, team(), args)
    pairs = [
        PreferencePair(
            prompts=dict.fromkeys(AGENTS, "p"),
            chosen=dict.fromkeys(AGENTS, "a"),
            rejected=dict.fromkeys(AGENTS, "z"),
        )
    ] * 3
    random.seed(5)
    torch.manual_seed(5)
    trainer.fit_reward_model(pairs, [], 3)
    first = {k: v.clone() for k, v in trainer.reward_model.trainable_state().items()}
    torch.manual_seed(99)  # the global RNG plays no part
    metrics = trainer.fit_reward_model(pairs, pairs[:1], 3)
    second = trainer.reward_model.trainable_state()
    assert first.keys() == second.keys()
    assert all(torch.equal(first[k], second[k]) for k in first)
    assert metrics["reward_model/heldout_pairs"] == 1.0
    other = trainer.new_reward_model(4).trainable_state()
    assert any(not torch.equal(first[k], other[k]) for k in first)


def test_a_constant_reward_model_gives_zero_advantages(tmp_path) -> None:
    args = maker(MARLHFConfig, rollout_buffer_size=2, num_generations=4)(tmp_path, 1)
    trainer = MARLHFTrainer(FirstCharacters, team(), args)
    trainer.reward_model = trainer.new_reward_model(0)
    with torch.no_grad():
        trainer.reward_model.head.weight.zero_()
        trainer.reward_model.head.bias.fill_(0.7)
    roots = trainer.rollout_update()
    trainer.rescore(roots)
    batch = trainer.training_batch(roots)
    assert all(s.advantage == 0.0 for samples in batch.values() for s in samples)
    assert all(c.reward == pytest.approx(0.7) for r in roots for c in r.children)
    assert {"env_reward"} <= set(roots[0].children[0].metrics)


# ----- frozen and alternating agents --------------------------------------------------------------
@pytest.mark.parametrize(
    ("trainer_class", "config_class"),
    [(MADPOTrainer, MADPOConfig), (MADPOIterTrainer, MADPOIterConfig)],
)
def test_a_frozen_agent_keeps_its_weights_and_its_partner_still_reads_its_deltas(
    trainer_class, config_class, tmp_path
) -> None:
    """trainable_agents={left}: right's weights and AdamW stay untouched over the updates,
    left trains, and every update logs who trained (the schedule every learner follows)."""
    left, right = AGENTS
    trainer = trainer_class(
        FirstCharacters,
        team(),
        config_class(output_dir=str(tmp_path), trainable_agents=[left], **SMALL),
    )
    before = {
        a: [p.detach().clone() for p in trainer.policies[a].trainable_parameters()] for a in AGENTS
    }
    for _ in range(2):
        metrics = trainer.train_step()
        assert metrics[f"trained/{left}"] == 1.0 and metrics[f"trained/{right}"] == 0.0
    moved = {
        a: any(
            not torch.equal(b, p.detach())
            for b, p in zip(before[a], trainer.policies[a].trainable_parameters(), strict=True)
        )
        for a in AGENTS
    }
    assert moved == {left: True, right: False}
    frozen = trainer.groups[trainer.policy_name(trainer.policies[right])]
    assert frozen.optimizer.state_dict()["state"] == {}

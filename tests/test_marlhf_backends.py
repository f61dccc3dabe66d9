"""MARLHF's RL backends by CoMLRL's names (`rl_algorithm`: the tree baselines and the
actor-critic learners "maac" and "iac" trained against the reward model) and MARLHFIter's
ordering of an iteration's candidates by the previous reward model
(`preference_scoring_reward="reward_model"`). The rest of the preference learners:
test_preference_learners, test_preference_parity."""

from __future__ import annotations

import json
from types import SimpleNamespace

import pytest

from tests.optional import require_module

torch = require_module("torch", "train")

import collabzoo  # noqa: E402
from collabzoo.algos import (  # noqa: E402
    LEARNERS,
    LLMPolicy,
    MARLHFConfig,
    MARLHFIterConfig,
    MARLHFIterTrainer,
    MARLHFTrainer,
    tiny_causal_lm,
)
from collabzoo.algos.learners.preference_pairs import select_comparison_pairs  # noqa: E402
from collabzoo.algos.learners.rlhf_actor_critic import actor_critic_config  # noqa: E402
from collabzoo.algos.policies.model_loading import lora_team  # noqa: E402
from collabzoo.algos.policies.reward_model import joint_text  # noqa: E402
from tests.test_preference_learners import SMALL, maker, team  # noqa: E402
from tests.test_resume_every_learner import (  # noqa: E402
    AGENTS,
    FirstCharacters,
    assert_same_run,
    lora,
    straight_and_resumed,
)

TINYCOOP_AGENTS = ("alpha", "beta")


def tinycoop() -> object:
    return collabzoo.make("tinycoop")


def tinycoop_team(seed: int = 0) -> dict[str, LLMPolicy]:
    return {
        a: LLMPolicy(*tiny_causal_lm(seed=10 * seed + i)) for i, a in enumerate(TINYCOOP_AGENTS)
    }


def first_characters_reward(answers: dict[str, str]) -> float:
    """FirstCharacters' team reward of a joint answer, by hand."""
    return sum(ord(answers[a][:1] or "\0") for a in AGENTS) / (256 * len(AGENTS))


# ----- settings ----------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("name", "settings", "message"),
    [
        ("marlhf", {"rl_algorithm": "ppo"}, "rl_algorithm must be one of"),
        ("marlhf", {"advantage_mode": "raw"}, "rl_algorithm='magrpo' is the baseline 'mean'"),
        (
            "marlhf",
            {"rl_algorithm": "maac", "advantage_mode": "raw"},
            "has a critic: it has no advantage_mode",
        ),
        ("marlhf", {"rl_algorithm": "iac", "critic_type": "q"}, "critic_type must be 'v'"),
        ("marlhf", {"rl_algorithm": "maac", "critic_type": "w"}, "critic_type must be one of"),
        (
            "marlhf",
            {"rl_algorithm": "maac", "reference_kl_enabled": True},
            "does not offer reference_kl_enabled=True",
        ),
        ("marlhf", {"rl_algorithm": "iac", "joint_mode": "cross"}, "joint_mode='cross'"),
        (
            "marlhf",
            {"rl_algorithm": "maac", "advantage_normalization": "std"},
            "must be true/'zscore' or false/'none'",
        ),
        (
            "marlhf-iter",
            {"preference_scoring_reward": "model"},
            "preference_scoring_reward must be one of",
        ),
    ],
)
def test_bad_backend_settings_are_refused_with_what_was_expected(name, settings, message) -> None:
    config, trainer = LEARNERS[name]
    with pytest.raises(ValueError, match=message):
        config(**settings)
    args = config()
    for key, value in settings.items():
        setattr(args, key, value)
    with pytest.raises(ValueError, match=message):
        trainer(None, None, args)


def test_rl_algorithm_sets_the_baseline_and_can_be_changed_after_construction() -> None:
    args = MARLHFConfig()
    assert (args.rl_algorithm, args.advantage_mode) == ("magrpo", "mean")
    args.rl_algorithm = "marloo"  # the baseline filled in before is not the user's
    args.validate()
    assert args.advantage_mode == "rloo"
    args.rl_algorithm = "maac"
    args.validate()
    assert args.advantage_mode is None
    assert MARLHFConfig(rl_algorithm="maremax", advantage_mode="max").advantage_mode == "max"


def test_the_offline_marlhf_has_no_candidate_scoring_setting(tmp_path, capsys) -> None:
    """The reference's MARLHFConfig has no preference_scoring_reward (only MARLHFIter's)."""
    from collabzoo.cli import main

    with pytest.raises(TypeError, match="preference_scoring_reward"):
        MARLHFConfig(preference_scoring_reward="reward_model")
    command = ["train", "marlhf", "--env", "tinycoop", "--model", "tiny", "--output", str(tmp_path)]
    assert main([*command, "--set", "preference_scoring_reward=reward_model"]) == 2
    assert "has no field 'preference_scoring_reward'" in capsys.readouterr().err


def test_the_actor_critic_settings_are_the_references(tmp_path) -> None:
    """What MARLHF hands its actor-critic learner, against CoMLRL's own mapping
    (`_build_actor_critic_common_config`, `_build_iac_config`) from the same settings."""
    module = require_module("comlrl.trainers.preference.marlhf", "interop")
    same = {
        "agent_learning_rate": 3e-4,
        "critic_learning_rate": 7e-4,
        "rollout_buffer_size": 3,
        "train_batch_size": 5,
        "num_generations": 2,
        "value_loss_coef": 0.4,
        "value_clip_range": 0.3,
        "max_new_tokens": 7,
        "temperature": 0.9,
        "top_p": 0.8,
        "top_k": 11,
        "discount": 0.7,
        "critic_type": "q",
    }
    theirs_args = module.MARLHFConfig(
        rl_algorithm="iac", reward_model_device=None, num_turns=1, **same
    )
    reference = module.MARLHFTrainer
    theirs = SimpleNamespace(args=theirs_args, num_agents=2)
    theirs._build_actor_critic_common_config = lambda: reference._build_actor_critic_common_config(
        theirs
    )
    common = theirs._build_actor_critic_common_config()
    iac = vars(reference._build_iac_config(theirs))
    renamed = {"agent_learning_rate": "actor_learning_rate", "train_batch_size": "mini_batch_size"}
    for algorithm, expected in (("maac", common), ("iac", iac)):
        settings = dict(same, critic_type="q" if algorithm == "maac" else "v")
        ours = actor_critic_config(MARLHFConfig(rl_algorithm=algorithm, **settings))
        for key in (*same, "advantage_normalization", "use_separate_critic"):
            if key not in expected or (key == "critic_type" and algorithm == "iac"):
                continue
            value = getattr(ours, renamed.get(key, key))
            want = expected[key] if key != "critic_type" else settings["critic_type"]
            assert value == want, (algorithm, key)
    assert not hasattr(actor_critic_config(MARLHFConfig(rl_algorithm="iac")), "critic_type")
    assert actor_critic_config(MARLHFConfig(rl_algorithm="maac")).critic_learning_rate == 5e-6


# ----- scoring an iteration's candidates with the previous reward model --------------------------
def test_an_iterations_candidates_are_ordered_by_the_previous_reward_model(tmp_path) -> None:
    """Iteration 0 has no reward model: its pairs follow the env's reward. Iteration 1 scores
    the current and the comparator candidates with iteration 0's model, raw: its pairs are
    exactly those these scores select, which are not those the env's reward would."""
    args = maker(
        MARLHFIterConfig,
        rollout_buffer_size=2,
        num_generations=2,
        num_train_epochs=1,
        preference_num_candidates=6,
        preference_pairs_per_sample=None,
        pair_selection="all",
        preference_scoring_reward="reward_model",
    )(tmp_path, 2)
    trainer = MARLHFIterTrainer(FirstCharacters, team(), args)
    seen: list[dict] = []
    scores_of = trainer.candidate_scores

    def spy(prompts, answers):
        found = scores_of(prompts, answers)
        model = trainer.reward_model
        mine = None
        if model is not None:  # my own scores, straight from the model now held
            texts = [joint_text(p, a, AGENTS) for p, a in zip(prompts, answers, strict=True)]
            with torch.no_grad():
                mine = model.score_texts(texts).tolist()
        seen.append({"answers": answers, "found": found, "mine": mine, "model": model})
        return found

    trainer.candidate_scores = spy
    first = trainer.train_step()
    assert first["iter/scored_by_reward_model"] == 0.0
    assert all(s["found"] is None and s["model"] is None for s in seen)
    records = json.loads((tmp_path / "preference_replay" / "iteration_0000.json").read_text())
    assert records
    for record in records:
        assert record["chosen_reward"] == pytest.approx(first_characters_reward(record["chosen"]))
        assert record["rejected_reward"] == pytest.approx(
            first_characters_reward(record["rejected"])
        )
    model_of_iteration_0 = trainer.reward_model
    seen.clear()

    second = trainer.train_step()
    assert second["iter/scored_by_reward_model"] == 1.0
    assert seen and all(s["model"] is model_of_iteration_0 for s in seen)
    c = args.preference_num_candidates
    by_model, by_task, current_scores = [], [], []
    for call in seen:
        assert call["found"] == pytest.approx(call["mine"], abs=1e-6)
        answers, scores = call["answers"], call["mine"]
        env = [first_characters_reward(a) for a in answers]
        current_scores += scores[:c]
        for rewards, out in ((scores, by_model), (env, by_task)):
            for (w_side, w), (l_side, l_) in select_comparison_pairs(
                rewards[:c], rewards[c:], "all", None, None
            ):
                w_at = w if w_side == "current" else c + w
                l_at = l_ if l_side == "current" else c + l_
                out.append((answers[w_at], answers[l_at]))
    records = json.loads((tmp_path / "preference_replay" / "iteration_0001.json").read_text())
    made = [(r["chosen"], r["rejected"]) for r in records]
    assert sorted(map(str, made)) == sorted(map(str, by_model))
    assert sorted(map(str, by_model)) != sorted(map(str, by_task))
    assert second["iter/current_reward_mean"] == pytest.approx(
        sum(current_scores) / len(current_scores), abs=1e-6
    )
    assert "iter/candidate_env_reward_mean" in second


def test_task_scoring_never_calls_the_reward_model(tmp_path) -> None:
    args = maker(MARLHFIterConfig, rollout_buffer_size=2, num_generations=2, num_train_epochs=1)(
        tmp_path, 2
    )
    trainer = MARLHFIterTrainer(FirstCharacters, team(), args)
    last = trainer.train()  # the second iteration has iteration 0's model, and leaves it be
    assert trainer.reward_model is not None and last["iter/scored_by_reward_model"] == 0.0
    assert trainer.candidate_scores([{"left": "p", "right": "p"}], [{"left": "a"}]) is None


# ----- the actor-critic backends -----------------------------------------------------------------
@pytest.mark.parametrize("algorithm", ["maac", "iac"])
def test_the_critics_fit_the_reward_models_scores_not_the_envs(algorithm, tmp_path) -> None:
    args = MARLHFConfig(
        output_dir=str(tmp_path),
        rl_algorithm=algorithm,
        rollout_buffer_size=2,
        num_generations=2,
        critic_learning_rate=1e-2,
        **SMALL,
    )
    trainer = MARLHFTrainer(tinycoop, tinycoop_team(), args)
    trainer.reward_model = trainer.new_reward_model(0)  # an untrained, non-constant model
    trainer.start_actor_critic(0)
    child = trainer.actor_critic
    assert child is not None and child.policies["alpha"] is trainer.policies["alpha"]
    roots = child.rollout_update()
    expected, env = [], []
    for root in roots:
        for joint in root.children:
            answers = {
                a: root.samples[a][k].text for a, k in zip(root.agents, joint.joint, strict=True)
            }
            prompts = {a: str(root.observations[a]) for a in root.agents}
            with torch.no_grad():
                expected.append(
                    float(
                        trainer.reward_model.score_texts(
                            [joint_text(prompts, answers, TINYCOOP_AGENTS)]
                        )
                    )
                )
            env.append(joint.reward)
    child.rewards.rescore(roots, child.rollout, args.discount)
    _, critic_samples = child.training_batch(roots)
    for items in critic_samples.values():  # single turn: y = r, the model's score
        targets = [s.target for s in items]
        per_state = len(items) // len(expected) if algorithm == "maac" else 1
        assert targets == pytest.approx([e for e in expected for _ in range(per_state)], abs=1e-5)
    assert expected != pytest.approx(env)
    assert [c.metrics["env_reward"] for r in roots for c in r.children] == env

    before_actor = [p.detach().clone() for p in trainer.policies["alpha"].trainable_parameters()]
    before_heads = [p.detach().clone() for c in child.critics.values() for p in c.head.parameters()]
    metrics = trainer.train_step()  # the reward model is fitted, then one actor-critic update
    assert trainer.actor_critic is child  # offline: one learner throughout
    assert "value_loss" in metrics and "task/env_reward" in metrics
    after_heads = [p.detach() for c in child.critics.values() for p in c.head.parameters()]
    assert any(not torch.equal(a, b) for a, b in zip(before_heads, after_heads, strict=True))
    after_actor = trainer.policies["alpha"].trainable_parameters()
    assert any(
        not torch.equal(a, b.detach()) for a, b in zip(before_actor, after_actor, strict=True)
    )


def test_marlhf_iter_rebuilds_its_critic_from_the_base_every_iteration(tmp_path) -> None:
    """The reference's quirk kept: a new critic (a fresh LoRA adapter on the base: B = 0) and
    new optimizers every iteration; critic_reset_every_iteration=False keeps them."""
    policies = lora_team(*tiny_causal_lm(seed=0), TINYCOOP_AGENTS, rank=2)
    settings = dict(rollout_buffer_size=2, num_generations=2, num_train_epochs=1)
    args = maker(MARLHFIterConfig, rl_algorithm="maac", critic_learning_rate=1e-2, **settings)(
        tmp_path, 1
    )
    trainer = MARLHFIterTrainer(tinycoop, policies, args)

    def critic_b() -> list:
        model = trainer.actor_critic.critics["team"].backbone
        return [p for n, p in model.model.named_parameters() if "lora_B.critic_team" in n]

    trainer.train()
    first = trainer.actor_critic
    assert any(p.abs().sum() > 0 for p in critic_b())  # trained in iteration 0
    trainer.start_actor_critic(1)
    assert trainer.actor_critic is not first
    assert critic_b() and all(p.abs().sum() == 0 for p in critic_b())
    assert all(not g.optimizer.state_dict()["state"] for g in trainer.actor_critic.groups.values())
    trainer.args.critic_reset_every_iteration = False
    kept = trainer.actor_critic
    trainer.start_actor_critic(2)
    assert trainer.actor_critic is kept


def test_the_command_line_trains_marlhf_with_the_centralized_critic(tmp_path) -> None:
    from collabzoo.cli import main

    command = [
        "train", "marlhf", "--env", "tinycoop", "--model", "tiny", "--output", str(tmp_path),
        "--updates", "2", "--eval-episodes", "2",
    ]  # fmt: skip
    sets = [
        "rl_algorithm=maac", "max_new_tokens=1", "progress=false", "tensorboard=false",
        "preference_num_candidates=4", "preference_num_items=2", "rollout_buffer_size=2",
        "num_generations=2", "reward_heldout_items=0",
    ]  # fmt: skip
    assert main([*command, *(x for s in sets for x in ("--set", s))]) == 0
    lines = [json.loads(line) for line in (tmp_path / "metrics.jsonl").read_text().splitlines()]
    trained = [line for line in lines if "value_loss" in line]
    assert len(trained) == 2 and all("task/env_reward" in line for line in trained)


# ----- resume ------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("trainer_class", "config", "make_team", "kept"),
    [
        (
            MARLHFIterTrainer,
            maker(
                MARLHFIterConfig,
                rollout_buffer_size=2,
                num_generations=2,
                num_train_epochs=1,
                preference_scoring_reward="reward_model",
            ),
            None,
            "reward_model",
        ),
        (
            MARLHFTrainer,
            maker(
                MARLHFConfig,
                rl_algorithm="iac",
                rollout_buffer_size=2,
                num_generations=2,
                reward_heldout_items=0,
            ),
            None,
            "actor_critic",
        ),
        (
            MARLHFIterTrainer,
            maker(
                MARLHFIterConfig,
                rl_algorithm="iac",
                rollout_buffer_size=2,
                num_generations=2,
                num_train_epochs=1,
                critic_reset_every_iteration=False,
            ),
            lora,
            "actor_critic",
        ),
        (
            MARLHFIterTrainer,
            maker(
                MARLHFIterConfig,
                rl_algorithm="iac",
                rollout_buffer_size=2,
                num_generations=2,
                num_train_epochs=1,
            ),
            None,
            None,  # rebuilt at the next iteration: nothing of it to keep
        ),
    ],
    ids=[
        "marlhf-iter-reward-model-scoring",
        "marlhf-iac",
        "marlhf-iter-iac-kept-lora",
        "marlhf-iter-iac-rebuilt",
    ],
)
def test_resume_equals_a_straight_run(trainer_class, config, make_team, kept, tmp_path) -> None:
    """What a resumed run must read back (`kept`: the reward model that scores the next
    iteration's candidates, or the actor-critic learner's critics and optimizers)."""
    whole, resumed = straight_and_resumed(trainer_class, config, tmp_path, make_team)
    state = assert_same_run(whole, resumed)
    assert state["extra"]["rl_steps"] > 0
    assert kept is None or kept in state["extra"]
    if kept is None:
        assert "actor_critic" not in state["extra"] and resumed.actor_critic is not None

"""The actor-critic learners (IAC, IPPO, the centralized critic): they learn, every critic kind
trains, resume is exact (critics and their optimizers included), and any ParallelEnv works."""

from __future__ import annotations

import dataclasses
import json
import math
import statistics

import pytest

from tests.optional import require_module

torch = require_module("torch", "train")

import collabzoo  # noqa: E402
from collabzoo.algos import (  # noqa: E402
    CentralCriticConfig,
    CentralCriticTrainer,
    CoLLMCCTrainer,
    IACConfig,
    IACTrainer,
    IPPOConfig,
    IPPOTrainer,
    LLMPolicy,
    lora_team,
    tiny_causal_lm,
)
from collabzoo.algos.rollout.tree import expanded_nodes  # noqa: E402
from tests.conftest import benchmark_module  # noqa: E402
from tests.test_learners import (  # noqa: E402
    LEARNED,
    LEARNING_SEEDS,
    EvenStart,
    learning_run,
    parameters,
    team,
)

FROM_SCRATCH = {  # byte-level models trained from scratch on TinyCoop
    "max_new_tokens": 1,
    "temperature": 1.0,
    "top_p": 1.0,
    "top_k": None,
    "actor_learning_rate": 1e-2,
    "critic_learning_rate": 1e-2,
    "rollout_buffer_size": 8,
    "num_generations": 8,
    "tensorboard": False,
    "progress": False,
    "save_steps": 0,
}


def critic_parameters(trainer) -> list:
    found = {}
    for critic in trainer.critics.values():
        for p in critic.parameters():
            found[id(p)] = p.detach().clone()
    return list(found.values())


# ----- learning -----------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("trainer_class", "config"),
    [
        (IACTrainer, IACConfig(**FROM_SCRATCH)),
        (IPPOTrainer, IPPOConfig(**FROM_SCRATCH, ppo_epochs=2, mini_batch_size=32)),
        (CentralCriticTrainer, CentralCriticConfig(**FROM_SCRATCH)),
    ],
    ids=["iac", "ippo", "cc"],
)
@pytest.mark.slow(seconds=45)
def test_actor_critic_learners_raise_the_team_reward_on_tinycoop(
    trainer_class, config, tmp_path
) -> None:
    """Random byte-level policies win 2-3% of TinyCoop's evaluation episodes (the
    signal-blind convention already wins 50%); after 40 updates each of two seeds must win at
    least LEARNED (test_learners; the measured spread is in its docstring)."""
    config = dataclasses.replace(config, max_updates=40)
    for seed in LEARNING_SEEDS:
        run = learning_run(trainer_class, config, seed, tmp_path / str(seed))
        before, after, trainer, last = run
        assert before <= 0.1, (seed, before)
        assert after >= LEARNED, (seed, before, after)
        assert trainer.rollout.env_steps == 40 * 8 * 8
        assert math.isfinite(last["value_loss"]) and last["skipped"] == 0.0


# ----- critic kinds -------------------------------------------------------------------------------
def short_config(config_class, tmp_path, **extra):
    settings = {**FROM_SCRATCH, "rollout_buffer_size": 2, "num_generations": 2, "max_updates": 2}
    settings.update(extra)
    return config_class(output_dir=str(tmp_path), **settings)


def assert_updates_actors_and_critics(trainer) -> dict:
    actors, critics = parameters(trainer), critic_parameters(trainer)
    last = trainer.train()
    assert any(not torch.equal(a, b) for a, b in zip(actors, parameters(trainer), strict=True))
    assert any(
        not torch.equal(a, b) for a, b in zip(critics, critic_parameters(trainer), strict=True)
    ), "the critics must learn too"
    assert last["skipped"] == 0.0 and math.isfinite(last["value_loss"])
    return last


def test_value_head_on_the_actor_shares_its_backbone(tmp_path) -> None:
    trainer = IACTrainer(
        lambda: collabzoo.make("tinycoop", horizon=2),
        team(),
        short_config(IACConfig, tmp_path, use_separate_critic=False, value_head_hidden_dim=16),
    )
    for agent, critic in trainer.critics.items():
        assert critic.shares_actor and critic.backbone is trainer.policies[agent]
        assert len(critic.parameters()) == 4, "a head with a hidden layer: 2 weights, 2 biases"
    assert_updates_actors_and_critics(trainer)


def test_separate_critics_are_models_of_their_own(tmp_path) -> None:
    trainer = IPPOTrainer(
        lambda: collabzoo.make("tinycoop", horizon=2),
        team(),
        short_config(IPPOConfig, tmp_path, mini_batch_size=3, ppo_epochs=2),
    )
    actor_models = {id(p.model) for p in trainer.distinct}
    assert all(id(c.backbone.model) not in actor_models for c in trainer.critics.values())
    last = assert_updates_actors_and_critics(trainer)
    # 2 episodes x 2 branches x 2 turns = 8 samples per agent: 3 mini-batches, 2 epochs
    assert last["optimizer_steps"] == 6.0


def test_a_lora_team_gets_lora_critics_on_the_same_base(tmp_path) -> None:
    model, tokenizer = tiny_causal_lm(seed=0)
    policies = lora_team(model, tokenizer, ["alpha", "beta"], rank=4)
    trainer = CentralCriticTrainer(
        lambda: collabzoo.make("tinycoop", horizon=2),
        policies,
        short_config(CentralCriticConfig, tmp_path),
    )
    critic = trainer.critics["team"]
    assert critic.backbone.model is policies["alpha"].model, "no second copy of the base"
    assert critic.backbone.adapter == "critic_team"
    assert set(critic.backbone.model.peft_config) == {"alpha", "beta", "critic_team"}
    assert_updates_actors_and_critics(trainer)
    saved = trainer.save(tmp_path / "final")  # the critic's own adapter and head, nothing more
    assert (saved / "critic-team" / "adapter_config.json").is_file()
    assert (saved / "critic-team" / "value_head.pt").is_file()
    assert not [p for p in (saved / "critic-team").iterdir() if p.is_dir()]


def test_centralized_critic_reads_the_joint_state_and_q_reads_the_joint_action(
    tmp_path,
) -> None:
    env = collabzoo.make("tinycoop", horizon=2)
    for critic_type in ("v", "q"):
        trainer = CoLLMCCTrainer(
            lambda: collabzoo.make("tinycoop", horizon=2),
            team(),
            short_config(CentralCriticConfig, tmp_path / critic_type, critic_type=critic_type),
        )
        assert list(trainer.critics) == ["team"]
        roots = trainer.rollout.build(trainer.episode_seeds(0), trainer.args.discount)
        inputs = trainer.critic_inputs(roots)["team"]
        texts = [trainer.critics["team"].backbone.decode(ids) for ids in inputs.values()]
        env.reset(seed=trainer.episode_seeds(0)[0])
        assert env.state() in texts[0], "the critic reads env.state()"
        if critic_type == "q":  # one input per (state, joint action), one per state (V(s))
            nodes = [n for r in roots for n in expanded_nodes(r)]
            actions = [t for key, t in zip(inputs, texts, strict=True) if key[0] != "state"]
            assert len(actions) == sum(len(n.children) for n in nodes)
            assert len(inputs) == len(actions) + len(nodes)
            assert all("[alpha]" in t and "[beta]" in t for t in actions)
        else:
            assert len(inputs) == len(texts) == 2 * (1 + 2)  # per tree: the root and 2 nodes
        assert_updates_actors_and_critics(trainer)


def perfect_values(trainer, roots, value_of_key) -> None:
    """Replace the critic's reads by exact values: `value_of_key(key)` for each input key of
    `critic_inputs` (a scripted critic, so the advantage math is checked on its own)."""
    by_ids = {}
    for key, ids in trainer.critic_inputs(roots)["team"].items():
        by_ids.setdefault(tuple(ids), value_of_key(key))
    trainer._values = lambda critic, inputs: [by_ids[tuple(ids)] for ids in inputs]


class LeftEven(EvenStart):
    """EvenStart paying 1 when the left answer alone starts with an even character."""

    def step(self, actions):
        observations, rewards, terminations, truncations, infos = super().step(actions)
        first = actions["left"][:1]
        reward = 1.0 if first and ord(first) % 2 == 0 else 0.0
        return observations, dict.fromkeys(rewards, reward), terminations, truncations, infos


def test_a_q_critic_advantage_has_an_action_independent_baseline(tmp_path) -> None:
    """A one-turn bandit with rewards 1 and 0 and a perfect Q (Q = r): the rewarded joint
    actions get positive advantages, the others negative ones. The Q critic's own TD error
    r - Q(s, a) would give every action 0."""
    torch.manual_seed(0)
    config = short_config(
        CentralCriticConfig,
        tmp_path,
        critic_type="q",
        num_generations=8,
        num_turns=1,
        advantage_normalization=False,
    )
    trainer = CentralCriticTrainer(LeftEven, team(("left", "right")), config)
    roots = trainer.rollout.build(trainer.episode_seeds(0), trainer.args.discount)
    nodes = {id(node): node for root in roots for node in expanded_nodes(root)}

    def true_value(key):
        if key[0] == "state":
            return statistics.mean(c.reward for c in nodes[key[1]].children)
        return nodes[key[0]].children[key[1]].reward

    perfect_values(trainer, roots, true_value)
    samples, _ = trainer.training_batch(roots)
    rewards = [c.reward for root in roots for c in root.children]
    assert set(rewards) == {0.0, 1.0}, "both outcomes among the sampled joint actions"
    index = 0
    for root in roots:
        mean = statistics.mean(c.reward for c in root.children)
        for child in root.children:
            for agent in ("left", "right"):
                advantage = samples[agent][index].advantage
                assert advantage == pytest.approx(child.reward - mean)
                if child.reward == 1.0 and mean < 1.0:
                    assert advantage > 0
                if child.reward == 0.0 and mean > 0.0:
                    assert advantage < 0
            index += 1


def test_a_q_critic_at_a_one_action_node_subtracts_v_of_the_state(tmp_path) -> None:
    """Below the root the actor-critic rollouts sample one joint action: the baseline there is
    the critic's V(s), read from the state alone (Q 0.7, V 0.2: advantage 0.5)."""
    torch.manual_seed(0)
    config = short_config(
        CentralCriticConfig, tmp_path, critic_type="q", advantage_normalization=False
    )
    trainer = CentralCriticTrainer(EvenStart, team(("left", "right")), config)
    roots = trainer.rollout.build(trainer.episode_seeds(0), trainer.args.discount)
    depth = {id(n): n.depth for root in roots for n in expanded_nodes(root)}

    def scripted(key):
        node = key[1] if key[0] == "state" else key[0]
        if depth[node] == 0:
            return 0.0
        return 0.2 if key[0] == "state" else 0.7

    perfect_values(trainer, roots, scripted)
    samples, critic_samples = trainer.training_batch(roots)
    deeper = [s for s in samples["left"] if s.old_value == pytest.approx(0.7)]
    assert len(deeper) == 2 * 2, "2 episodes x 2 branches, one deeper transition each"
    assert all(s.advantage == pytest.approx(0.5) for s in deeper)
    # the V(s) reads train on the same targets as Q(s, a): two critic samples per transition
    assert len(critic_samples["team"]) == 2 * len(samples["left"])


def test_a_joint_state_over_the_budget_keeps_every_agent(tmp_path) -> None:
    """The centralized critic's joint state is cut per agent, each keeping its newest text;
    every cut is counted in metrics.jsonl's truncated_prompts."""

    class Verbose(EvenStart):
        def reset(self, seed=None, options=None):
            observations, infos = super().reset(seed, options)
            observations["left"] = "LEFT-OLD " + "left history " * 30 + "LEFT-NEW"
            observations["right"] = "right sees little RIGHT-NEW"
            return observations, infos

    policies = {
        a: LLMPolicy(*tiny_causal_lm(seed=i), max_prompt_tokens=200)
        for i, a in enumerate(("left", "right"))
    }
    config = short_config(CentralCriticConfig, tmp_path, max_updates=1)
    trainer = CentralCriticTrainer(Verbose, policies, config)
    roots = trainer.rollout.build(trainer.episode_seeds(0), trainer.args.discount)
    critic = trainer.critics["team"]
    root_inputs = [
        critic.backbone.decode(critic.encode(*trainer._critic_text(r, None, None))) for r in roots
    ]
    for text in root_inputs:
        assert "[left]" in text and "LEFT-NEW" in text and "LEFT-OLD" not in text
        assert "[right] right sees little RIGHT-NEW" in text
    trainer.train()
    records = [json.loads(line) for line in (tmp_path / "metrics.jsonl").read_text().splitlines()]
    assert records[-1]["truncated_prompts"] >= 2, "the left prompts and the joint states"


def test_bad_actor_critic_settings_are_clear_errors() -> None:
    with pytest.raises(ValueError, match="critic_type"):
        CentralCriticConfig(critic_type="w")
    with pytest.raises(ValueError, match="gae_lambda"):
        IPPOConfig(gae_lambda=1.5)
    with pytest.raises(ValueError, match="ppo_epochs"):
        IPPOConfig(ppo_epochs=0)
    with pytest.raises(ValueError, match="mini_batch_size"):
        IACTrainer(EvenStart, team(("left", "right")), IACConfig(mini_batch_size=0))


def test_scoring_mini_batches_in_prompt_order_keeps_the_gradient_and_scores_fewer_tokens(
    tmp_path,
) -> None:
    """`group_by_prompt` only reorders a mini-batch before it is cut into scoring chunks: the
    first optimizer step's gradients match the shuffled order's, while the K branches of a
    first turn share one pass of their prompt, so the loss passes embed fewer token positions."""

    def first_step(group_by_prompt: bool) -> tuple[dict[str, list], int]:
        torch.manual_seed(3)
        model, tokenizer = tiny_causal_lm(seed=0)
        policies = lora_team(model, tokenizer, ["alpha", "beta"], rank=4)
        config = short_config(
            IPPOConfig,
            tmp_path / str(group_by_prompt),
            max_updates=1,
            num_generations=4,
            max_new_tokens=3,
            logprob_batch_size=2,
            ppo_epochs=2,
            group_by_prompt=group_by_prompt,
        )
        trainer = IPPOTrainer(lambda: collabzoo.make("tinycoop", horizon=2), policies, config)
        positions = [0]

        def count(module, inputs, output) -> None:
            positions[0] += output.shape[0] * output.shape[1]

        model.get_input_embeddings().register_forward_hook(count)
        roots = trainer.rollout_update()
        positions[0] = 0
        grads: dict[str, list] = {}
        for name, group in trainer.groups.items():
            step = group.step

            def recorded(*, loss_finite=True, name=name, group=group, step=step):
                grads.setdefault(
                    name,
                    [
                        torch.zeros(0) if p.grad is None else p.grad.clone()
                        for p in group.parameters
                    ],
                )
                return step(loss_finite=loss_finite)

            group.step = recorded
        trainer.learn(roots)
        return grads, positions[0]

    shuffled, shuffled_positions = first_step(False)
    grouped, grouped_positions = first_step(True)
    assert list(grouped) == list(shuffled) and any(n.startswith("critic/") for n in grouped)
    for name in grouped:
        for a, b in zip(grouped[name], shuffled[name], strict=True):
            assert torch.allclose(a, b, rtol=1e-4, atol=1e-7), name
    assert any(g.abs().sum() > 0 for grads in grouped.values() for g in grads)
    assert grouped_positions < shuffled_positions


# ----- resume -------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("trainer_class", "config_class", "extra"),
    [
        (IPPOTrainer, IPPOConfig, {"mini_batch_size": 3}),
        (CentralCriticTrainer, CentralCriticConfig, {}),
    ],
    ids=["ippo", "cc"],
)
def test_actor_critic_resume_ends_with_the_same_actors_and_critics(
    trainer_class, config_class, extra, tmp_path
) -> None:
    def make_env():
        return collabzoo.make("tinycoop", horizon=2)

    def config(path, updates, **more):
        return short_config(config_class, path, max_updates=updates, save_steps=2, **extra, **more)

    torch.manual_seed(1)
    whole = trainer_class(make_env, team(), config(tmp_path / "whole", 4))
    whole.train()
    torch.manual_seed(1)
    trainer_class(make_env, team(), config(tmp_path / "split", 2)).train()
    torch.manual_seed(999)  # a different global RNG: the checkpoint must restore it
    resumed = trainer_class(make_env, team(), config(tmp_path / "split", 4, resume=True))
    resumed.train()
    assert resumed.update == whole.update == 4
    for a, b in zip(parameters(whole), parameters(resumed), strict=True):
        assert torch.equal(a, b)
    for a, b in zip(critic_parameters(whole), critic_parameters(resumed), strict=True):
        assert torch.equal(a, b)
    assert list(whole.groups) == list(resumed.groups)
    assert any(name.startswith("critic/") for name in whole.groups)
    for name, group in whole.groups.items():  # every optimizer, the critics' included
        left = group.optimizer.state_dict()["state"]
        right = resumed.groups[name].optimizer.state_dict()["state"]
        assert left.keys() == right.keys() and left
        for key in left:
            assert torch.equal(left[key]["exp_avg"], right[key]["exp_avg"])


# ----- any ParallelEnv ----------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("trainer_class", "config_class"),
    [
        (IACTrainer, IACConfig),
        (IPPOTrainer, IPPOConfig),
        (CentralCriticTrainer, CentralCriticConfig),
    ],
    ids=["iac", "ippo", "cc"],
)
def test_actor_critic_learners_update_on_a_third_party_env(
    trainer_class, config_class, tmp_path
) -> None:
    """EvenStart (defined in test_learners, registered nowhere, refuses deep copies, has no
    state()): the CC critic falls back to the labelled observations."""
    torch.manual_seed(0)
    trainer = trainer_class(
        EvenStart, team(("left", "right")), short_config(config_class, tmp_path, max_updates=3)
    )
    last = assert_updates_actors_and_critics(trainer)
    assert "task/even" in last
    # two turns, K = 2 branches at the first turn: 2 + 2 steps per episode, 2 episodes
    assert trainer.rollout.env_steps == 3 * 2 * (2 + 2)


# ----- the long-horizon comparison ----------------------------------------------------------------
def long_horizon_benchmark():
    """`benchmarks/long_horizon.py`: the runner this test shares with it."""
    return benchmark_module("long_horizon")


@pytest.mark.slow(seconds=200)
def test_long_horizon_sparse_comparison_at_equal_environment_steps(capsys) -> None:
    """Reports each learner's learning curve (mean over seeds) and final returns; asserts only
    what is robust: every learner learns, and CC is not worse than IAC by more than the seeds'
    noise. Whether CC is the most sample-efficient here is a result to read, not to force."""
    benchmark = long_horizon_benchmark()
    # the eight runs two at a time, each in a process of its own with one torch thread
    curves = benchmark.run_all(
        ["mareinforce", "magrpo", "iac", "cc"], [0, 1], benchmark.BUDGET, benchmark.EVERY, 2
    )
    with capsys.disabled():
        print("\nTinyCoop H=4, sparse reward, eval mean return at env steps:")
        print(benchmark.table(curves, benchmark.EVERY))
    for name, runs in curves.items():
        for run in runs:
            assert run[-1] > run[0] + 0.1, (name, runs)
    iac = [run[-1] for run in curves["iac"]]
    cc = [run[-1] for run in curves["cc"]]
    noise = max(0.1, statistics.pstdev(iac + cc) * 2)
    assert statistics.mean(cc) >= statistics.mean(iac) - noise, curves

"""Frozen and alternating agents (`trainable_agents`, `alternate_every`) and per-agent settings
(sampling, learning rate, LoRA rank), for every learner.

An agent that does not train at an update acts with its current weights, but its samples never
reach a loss or an advantage statistic, and its optimizer does not step (weights and AdamW
moments bit-identical); critics with a backbone of their own train every update. The env is
test_resume_every_learner's dense-reward EvenStart, so every update has advantages to learn
from and a missed freeze shows in the weights."""

from __future__ import annotations

import copy
import json
import math
from typing import Any

import pytest

from tests.optional import require_module

torch = require_module("torch", "train")

from collabzoo.algos import (  # noqa: E402
    ATGRPOConfig,
    ATGRPOTrainer,
    CentralCriticConfig,
    CentralCriticTrainer,
    IACConfig,
    IACTrainer,
    IPPOConfig,
    IPPOTrainer,
    LLMPolicy,
    MAGRPOConfig,
    MAGRPOTrainer,
    MAREINFORCEConfig,
    MAREINFORCETrainer,
    MARLOOConfig,
    MARLOOTrainer,
    lora_team,
    tiny_causal_lm,
)
from collabzoo.algos.objectives import (  # noqa: E402
    STD_FLOOR,
    StepScore,
    group_advantages,
    grouped_step_advantages,
    sample_returns,
)
from collabzoo.algos.rollout.tree import expanded_nodes  # noqa: E402
from tests.test_learners import team  # noqa: E402
from tests.test_resume_every_learner import (  # noqa: E402
    AGENTS,
    FirstCharacters,
    assert_identical,
    assert_same_run,
)

LEFT, RIGHT = AGENTS
BASE = {
    "max_new_tokens": 1,
    "temperature": 1.0,
    "top_p": 1.0,
    "top_k": None,
    "rollout_buffer_size": 2,
    "num_generations": 2,
    "tensorboard": False,
    "progress": False,
    "save_steps": 0,
}
TREE = {**BASE, "agent_learning_rate": 1e-2}
ACTOR_CRITIC = {**BASE, "actor_learning_rate": 1e-2, "critic_learning_rate": 1e-2}
LEARNERS: dict[str, tuple[type, type, dict[str, Any]]] = {
    "magrpo": (MAGRPOTrainer, MAGRPOConfig, TREE),
    "mareinforce": (MAREINFORCETrainer, MAREINFORCEConfig, {**TREE, "advantage_mode": "rloo"}),
    "iac": (IACTrainer, IACConfig, ACTOR_CRITIC),
    "ippo": (IPPOTrainer, IPPOConfig, {**ACTOR_CRITIC, "ppo_epochs": 2, "mini_batch_size": 4}),
    "cc": (CentralCriticTrainer, CentralCriticConfig, ACTOR_CRITIC),
    "marloo": (MARLOOTrainer, MARLOOConfig, TREE),
    "atgrpo": (ATGRPOTrainer, ATGRPOConfig, TREE),
}
TREE_LEARNERS = ("magrpo", "mareinforce")


def make(learner: str, tmp_path, models: Any = None, **settings: Any):
    """A trainer of `learner` ("magrpo-lora": MAGRPO on a LoRA team) on FirstCharacters."""
    name, _, layout = learner.partition("-")
    trainer_class, config_class, base = LEARNERS[name]
    if models is None:
        models = lora_team(*tiny_causal_lm(seed=0), AGENTS, rank=2) if layout else team(AGENTS)
    torch.manual_seed(0)
    config = config_class(output_dir=str(tmp_path), **{**base, **settings})
    return trainer_class(FirstCharacters, models, config)


def weights(trainer, agent: str) -> list:
    return [p.detach().clone() for p in trainer.policies[agent].trainable_parameters()]


def group(trainer, agent: str):
    return trainer.groups[trainer.policy_name(trainer.policies[agent])]


def moments(trainer, agent: str) -> dict:
    """The agent's AdamW state, copied (AdamW updates its tensors in place)."""
    return copy.deepcopy(group(trainer, agent).optimizer.state_dict())


def changed(before: list, after: list) -> bool:
    return any(not torch.equal(a, b.detach()) for a, b in zip(before, after, strict=True))


def critic_groups(trainer) -> dict[str, list]:
    """Each critic update group's parameters (copied): per-agent critics and the team's."""
    return {
        name: [p.detach().clone() for p in g.parameters]
        for name, g in trainer.groups.items()
        if name.startswith("critic/")
    }


# ----- alternation --------------------------------------------------------------------------------
@pytest.mark.parametrize("learner", [*LEARNERS, "magrpo-lora"])
@pytest.mark.slow(seconds=40)
def test_alternate_every_steps_one_agent_at_a_time(learner, tmp_path) -> None:
    """N = 2, alternate_every = 3: updates 0-2 step the first agent only, 3-5 the second; the
    other's weights and AdamW moments stay bit-identical, and every critic steps every update."""
    trainer = make(learner, tmp_path, alternate_every=3)
    base = {  # a LoRA team's base weights (a separate model has none outside its policy)
        name: p.detach().clone()
        for name, p in trainer.distinct[0].model.named_parameters()
        if "lora_" not in name and learner.endswith("lora")
    }
    for update in range(6):
        turn = AGENTS[update // 3]
        before = {a: weights(trainer, a) for a in AGENTS}
        adam = {a: moments(trainer, a) for a in AGENTS}
        critics = critic_groups(trainer)
        metrics = trainer.train_step()
        assert (
            metrics[f"trained/{turn}"] == 1.0
            and sum(metrics[f"trained/{a}"] for a in AGENTS) == 1.0
        )
        for agent in AGENTS:
            params = trainer.policies[agent].trainable_parameters()
            if agent == turn:
                assert changed(before[agent], params), f"update {update}: {agent} must step"
                assert moments(trainer, agent)["state"], "its AdamW has moments now"
            else:
                assert not changed(before[agent], params), f"update {update}: {agent} is frozen"
                assert_identical(moments(trainer, agent), adam[agent], f"{agent}'s AdamW")
                assert f"grad_norm/{trainer.policy_name(trainer.policies[agent])}" not in metrics
        for name, values in critics.items():  # IAC, IPPO: one per agent; CC: the team's
            assert changed(values, trainer.groups[name].parameters), f"{name} steps every update"
    after = dict(trainer.distinct[0].model.named_parameters())
    assert all(torch.equal(before, after[name]) for name, before in base.items())
    assert bool(base) == learner.endswith("lora"), "the adapters trained on a base left as it was"


def test_alternation_cycles_through_the_trainable_agents_only() -> None:
    from collabzoo.algos.learners.trained_agents import AgentSchedule

    agents = ["a", "b", "c"]
    assert [AgentSchedule(agents, None, 2).at(u) for u in range(7)] == [
        ["a"], ["a"], ["b"], ["b"], ["c"], ["c"], ["a"],
    ]  # fmt: skip
    cycled = [AgentSchedule(agents, {"c", "a"}, 1).at(u) for u in range(4)]
    assert cycled == [["a"], ["c"], ["a"], ["c"]]  # in the env's order, "b" never
    assert AgentSchedule(agents, ["c", "a"], None).at(5) == ["a", "c"]
    assert AgentSchedule(agents, None, None).at(0) == agents


# ----- a frozen agent's samples -------------------------------------------------------------------
@pytest.mark.parametrize("learner", list(LEARNERS))
def test_a_frozen_agents_samples_never_reach_a_loss(learner, tmp_path) -> None:
    """trainable_agents={left}: right acts (its completions are in the rollouts) but is never
    scored (no loss, ratio, KL or entropy reads it), never stepped (no AdamW state at all) and
    keeps its weights; left trains; right's own critic (IAC, IPPO) and the team's (CC) train."""
    trainer = make(learner, tmp_path, trainable_agents={LEFT})
    right = trainer.policies[RIGHT]
    scored: list[int] = []
    original = right.score

    def spy(*args: Any, **kwargs: Any):
        scored.append(len(args[0]))
        return original(*args, **kwargs)

    right.score = spy
    acted: list[int] = []
    rollout = trainer.rollout_update

    def rollouts():
        roots = rollout()
        acted.extend(len(n.samples[RIGHT]) for root in roots for n in expanded_nodes(root))
        return roots

    trainer.rollout_update = rollouts
    before = {a: weights(trainer, a) for a in AGENTS}
    critics = critic_groups(trainer)
    for _ in range(2):
        metrics = trainer.train_step()
        assert metrics == {**metrics, f"trained/{LEFT}": 1.0, f"trained/{RIGHT}": 0.0}
    assert sum(acted) > 0, "the frozen agent still acts"
    assert scored == [], "the frozen agent's samples were scored"
    assert not changed(before[RIGHT], right.trainable_parameters())
    assert group(trainer, RIGHT).optimizer.state_dict()["state"] == {}
    assert changed(before[LEFT], trainer.policies[LEFT].trainable_parameters())
    for name, values in critics.items():
        assert changed(values, trainer.groups[name].parameters), f"{name} trains"


@pytest.mark.parametrize("learner", TREE_LEARNERS)
def test_a_tree_learners_group_statistics_are_the_trained_agents_own(learner, tmp_path) -> None:
    """The batch holds left's samples only, with the advantages of left's own K samples at each
    node (its group mean and std), computed here from the tree without right's samples."""
    trainer = make(learner, tmp_path, trainable_agents=[LEFT])
    roots = trainer.rollout_update()
    batch = trainer.training_batch(roots)
    assert set(batch) == {LEFT}
    expected = []
    for root in roots:
        for node in expanded_nodes(root):
            returns = sample_returns(
                [c.joint for c in node.children],
                [c.ret for c in node.children],
                node.agents.index(LEFT),
                node.k,
            )
            args = trainer.args
            expected += group_advantages(
                returns, args.advantage_mode, args.advantage_normalization, std=args.advantage_std
            )
    assert [s.advantage for s in batch[LEFT]] == expected
    assert any(a != 0 for a in expected), "a dense reward leaves advantages to compare"


@pytest.mark.parametrize("group_by", ["agent", "step", "trajectory"])
def test_dr_mas_groups_hold_the_trained_agents_steps_only(group_by, tmp_path) -> None:
    """With a Dr. MAS `advantage_group` the statistics pool steps across the tree: a frozen
    agent's samples are in none of them, so left's advantages are those of its steps alone."""
    trainer = make("magrpo", tmp_path, trainable_agents=[LEFT], advantage_group=group_by)
    roots = trainer.rollout_update()
    batch = trainer.training_batch(roots)
    assert set(batch) == {LEFT}
    for root in roots:
        steps = []
        for node in expanded_nodes(root):
            returns = sample_returns(
                [c.joint for c in node.children],
                [c.ret for c in node.children],
                node.agents.index(LEFT),
                node.k,
            )
            steps += [StepScore((id(node), k), LEFT, g) for k, g in enumerate(returns)]
        expected = grouped_step_advantages(steps, group_by)
        found = trainer.tree_advantages(root)
        assert [a for n in expanded_nodes(root) for a in found[id(n)][LEFT]] == expected
        assert all(set(found[id(n)]) == {LEFT} for n in expanded_nodes(root))


@pytest.mark.parametrize("learner", ["iac", "ippo", "cc"])
def test_an_actor_critic_learners_normalisation_reads_the_trained_agent_only(
    learner, tmp_path
) -> None:
    """With right frozen, left's advantages are z-scored over left's own raw advantages (the
    same rollouts and critic read without normalisation): right's samples are in neither."""
    trainer = make(learner, tmp_path, trainable_agents=[LEFT])
    roots = trainer.rollout_update()
    trainer.args.advantage_normalization = False
    raw, critic_samples = trainer.training_batch(roots)
    trainer.args.advantage_normalization = True
    normalised, _ = trainer.training_batch(roots)
    assert set(raw) == set(normalised) == {LEFT}
    values = [s.advantage for s in raw[LEFT]]
    mean = sum(values) / len(values)
    std = math.sqrt(sum((v - mean) ** 2 for v in values) / len(values))
    assert std > STD_FLOOR
    expected = [(v - mean) / std for v in values]
    assert [s.advantage for s in normalised[LEFT]] == pytest.approx(expected, abs=1e-12)
    if learner != "cc":  # the frozen agent's own critic still gets its samples
        assert critic_samples[RIGHT]


def test_an_agent_sharing_a_trained_model_is_left_out_of_the_batch_but_not_frozen(
    tmp_path,
) -> None:
    """One model for both agents, trainable_agents={left}: a warning says right is not frozen
    (it acts with the weights being trained: Agent Lightning's semantics); right's samples stay
    out of the batch; the shared model trains on left's alone."""
    shared = LLMPolicy(*tiny_causal_lm(seed=0))
    with pytest.warns(UserWarning, match=r"\['right'\] do not train but share their model"):
        trainer = make("magrpo", tmp_path, models=shared, trainable_agents=[LEFT])
    roots = trainer.rollout_update()
    assert set(trainer.training_batch(roots)) == {LEFT}
    before = weights(trainer, LEFT)
    trainer.train_step()
    assert changed(before, shared.trainable_parameters())


def test_a_frozen_group_that_receives_gradients_is_an_error(tmp_path) -> None:
    """A learner that let a frozen agent's sample reach a loss fails the update, loudly."""
    trainer = make("magrpo", tmp_path, trainable_agents=[LEFT])
    learn = trainer.learn

    def leaky(roots):
        metrics = learn(roots)
        sum(p.sum() for p in trainer.policies[RIGHT].trainable_parameters()).backward()
        return metrics

    trainer.learn = leaky
    with pytest.raises(RuntimeError, match="frozen agent's samples reached a loss"):
        trainer.train_step()
    group(trainer, RIGHT).frozen = True
    with pytest.raises(RuntimeError, match="frozen at this update"):
        group(trainer, RIGHT).step()


# ----- resume -------------------------------------------------------------------------------------
@pytest.mark.parametrize("learner", ["magrpo", "cc", "magrpo-lora"])
@pytest.mark.slow(seconds=40)
def test_resume_mid_alternation_equals_a_straight_run(learner, tmp_path) -> None:
    """alternate_every=2: 3 updates straight, or 1 update, a checkpoint, and a resume (under
    another global RNG) through the switch at update 2: the same weights, AdamW moments,
    critics and counters, exactly."""

    def run(path, updates: int, **more):
        trainer = make(learner, path, alternate_every=2, save_steps=1, max_updates=updates, **more)
        trainer.train()
        return trainer

    torch.manual_seed(1)
    whole = run(tmp_path / "whole", 3)
    torch.manual_seed(1)
    run(tmp_path / "split", 1)
    torch.manual_seed(999)
    resumed = run(tmp_path / "split", 3, resume=True)
    assert resumed.update == whole.update == 3
    assert_same_run(whole, resumed)
    trained = [json.loads(line) for line in (tmp_path / "whole" / "metrics.jsonl").open()]
    assert [r[f"trained/{LEFT}"] for r in trained] == [1.0, 1.0, 0.0]


# ----- per-agent settings -------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("learner", "rate"), [("magrpo", "agent_learning_rate"), ("iac", "actor_learning_rate")]
)
def test_a_per_agent_learning_rate_sets_that_agents_step(learner, rate, tmp_path) -> None:
    """AdamW's first step moves each weight by lr * g / (|g| + eps), so the largest move of an
    agent's weights is just under its own learning rate: 1e-2 for left, 1e-4 for right."""
    trainer = make(learner, tmp_path, per_agent={RIGHT: {rate: 1e-4}})
    assert group(trainer, LEFT).optimizer.param_groups[0]["lr"] == 1e-2
    assert group(trainer, RIGHT).optimizer.param_groups[0]["lr"] == 1e-4
    before = {a: weights(trainer, a) for a in AGENTS}
    trainer.train_step()
    for agent, lr in ((LEFT, 1e-2), (RIGHT, 1e-4)):
        after = trainer.policies[agent].trainable_parameters()
        largest = max(
            (b - a.detach()).abs().max().item() for b, a in zip(before[agent], after, strict=True)
        )
        assert 0.9 * lr < largest <= lr * (1 + 1e-3), (agent, largest)


@pytest.mark.parametrize("learner", ["magrpo", "ippo", "magrpo-lora"])
def test_per_agent_sampling_is_what_each_agent_samples_and_is_scored_under(
    learner, tmp_path
) -> None:
    """Right samples at temperature 0.5 with up to 3 tokens, left at 1.0 with 1: every generate
    call holds one agent's rows with that agent's sampling (a LoRA team's shared call splits in
    two), every completion respects its agent's length, and every score uses its agent's."""
    trainer = make(learner, tmp_path, per_agent={RIGHT: {"temperature": 0.5, "max_new_tokens": 3}})
    own = {LEFT: trainer.sampling, RIGHT: trainer.sampling_of(RIGHT)}
    assert own[RIGHT].temperature == 0.5 and own[RIGHT].max_new_tokens == 3
    assert own[LEFT].temperature == 1.0 and own[LEFT].max_new_tokens == 1
    by_policy = {id(p): a for a, p in trainer.policies.items()}
    calls: list[tuple[set[str], Any]] = []
    generate = trainer.rollout.generate

    def spy_generate(row_policies, observations, sampling):
        calls.append(({by_policy[id(p)] for p in row_policies}, sampling))
        return generate(row_policies, observations, sampling)

    trainer.rollout.generate = spy_generate
    scores: list[tuple[str, Any]] = []
    for agent, policy in trainer.policies.items():
        original = policy.score

        def spy_score(*args, _agent=agent, _original=original, **kwargs):
            scores.append((_agent, kwargs["sampling"]))
            return _original(*args, **kwargs)

        policy.score = spy_score
    lengths = {a: [] for a in AGENTS}
    rollout = trainer.rollout_update

    def rollouts():
        roots = rollout()
        for root in roots:
            for node in expanded_nodes(root):
                for agent in AGENTS:
                    lengths[agent] += [len(c.completion_ids) for c in node.samples[agent]]
        return roots

    trainer.rollout_update = rollouts
    trainer.train_step()
    assert calls and all(len(agents) == 1 for agents, _ in calls), calls
    assert all(sampling == own[agents.pop()] for agents, sampling in calls)
    assert {a for a, _ in scores} == set(AGENTS)
    assert all(sampling == own[agent] for agent, sampling in scores)
    assert max(lengths[LEFT]) == 1 and max(lengths[RIGHT]) == 3


def test_lora_team_takes_a_rank_per_agent() -> None:
    adapters = lora_team(*tiny_causal_lm(seed=0), AGENTS, rank={RIGHT: 4})
    model = adapters[LEFT].model
    assert model.peft_config[LEFT].r == 8 and model.peft_config[RIGHT].r == 4
    shapes = {
        a: {tuple(p.shape) for p in adapters[a].trainable_parameters() if p.dim() == 2}
        for a in AGENTS
    }
    assert any(4 in shape for shape in shapes[RIGHT]) and all(4 not in s for s in shapes[LEFT])
    with pytest.raises(ValueError, match="'gamma', not agents of this team; its agents are left"):
        lora_team(*tiny_causal_lm(seed=0), AGENTS, rank={"gamma": 4})
    with pytest.raises(ValueError, match="must be a whole number >= 1, got 0"):
        lora_team(*tiny_causal_lm(seed=0), AGENTS, rank={LEFT: 0})


# ----- refused settings ---------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("settings", "error", "message"),
    [
        ({"alternate_every": 0}, ValueError, "alternate_every must be a whole number"),
        ({"alternate_every": -2}, ValueError, "at least 1, or None, got -2"),
        ({"alternate_every": 1.5}, ValueError, "alternate_every must be a whole number"),
        ({"alternate_every": True}, ValueError, "alternate_every must be a whole number"),
        ({"trainable_agents": []}, ValueError, "trainable_agents is empty"),
        ({"trainable_agents": "left"}, TypeError, "a list \\(or set\\) of agent names"),
        ({"trainable_agents": [1]}, TypeError, "must hold agent names"),
        ({"per_agent": {"left": {"seed": 3}}}, ValueError, "may have its own max_new_tokens"),
        ({"per_agent": {"left": {"temperature": -1.0}}}, ValueError, "per_agent\\['left'\\]"),
        ({"per_agent": {"left": 0.5}}, TypeError, "per_agent must map agent names"),
    ],
)
def test_settings_no_team_can_train_with_are_refused(settings, error, message) -> None:
    with pytest.raises(error, match=message):
        MAGRPOConfig(**settings)


@pytest.mark.parametrize(
    ("models", "settings", "message"),
    [
        (None, {"trainable_agents": ["gamma"]}, "'gamma', which the env does not have; its agents"),
        (None, {"per_agent": {"tester": {"temperature": 0.5}}}, "per_agent names 'tester'"),
        (None, {"trainable_agents": [LEFT], "alternate_every": 2}, "only \\['left'\\] can train"),
        ("shared", {"alternate_every": 2}, "'left' and 'right' share one model"),
        ("shared", {"per_agent": {RIGHT: {"agent_learning_rate": 1e-3}}}, "so one optimizer"),
    ],
)  # fmt: skip
def test_settings_this_team_cannot_train_with_are_refused(models, settings, message, tmp_path):
    shared = LLMPolicy(*tiny_causal_lm(seed=0)) if models == "shared" else None
    with pytest.raises(ValueError, match=message):
        make("magrpo", tmp_path, models=shared, **settings)


def test_the_cli_sets_schedules_and_per_agent_values_and_refuses_bad_ones(tmp_path, capsys):
    """`--set trainable_agents=a,b`, `--set alternate_every=N`, `--set FIELD@AGENT=VALUE` and
    `--lora-rank`: a run that uses them all, and a one-line error for each kind of mistake."""
    from collabzoo.cli import main

    run = tmp_path / "run"
    command = ["train", "magrpo", "--env", "tinycoop", "--model", "tiny", "--output", str(run)]
    quick = ["--set", "rollout_buffer_size=2", "--set", "num_generations=2"]
    quick += ["--set", "progress=false"]
    per_agent = ["--set", "alternate_every=1", "--set", "trainable_agents=alpha,beta"]
    per_agent += ["--set", "temperature@beta=0.5", "--set", "agent_learning_rate@beta=0.001"]
    lora = ["--team", "lora", "--lora-rank", "2,beta=4"]
    assert (
        main([*command, "--updates", "2", *quick, *per_agent, *lora, "--eval-episodes", "0"]) == 0
    )
    records = [json.loads(line) for line in (run / "metrics.jsonl").open()]
    assert [(r["trained/alpha"], r["trained/beta"]) for r in records] == [(1.0, 0.0), (0.0, 1.0)]
    saved = {
        a: json.loads((run / "final" / a / "adapter_config.json").read_text())
        for a in ("alpha", "beta")
    }
    assert (saved["alpha"]["r"], saved["beta"]["r"]) == (2, 4)
    capsys.readouterr()
    refused = [
        (["--set", "temperature@gamma=0.5"], "per_agent names 'gamma'", "agents are alpha, beta"),
        (["--set", "trainable_agents=gamma"], "trainable_agents names 'gamma'", "alpha, beta"),
        (["--set", "seed@alpha=1"], "gives one agent its own value of", "temperature"),
        (["--set", "temperature@alpha=hot"], "temperature is float", "'hot'"),
        (["--set", "alternate_every=0"], "alternate_every must be a whole number", ""),
        (["--lora-rank", "4"], "only with --team lora, not separate", ""),
        (["--team", "lora", "--lora-rank", "gamma=4"], "no agent 'gamma'", "alpha, beta"),
        (["--team", "lora", "--lora-rank", "0"], "--lora-rank takes R", ""),
    ]
    for extra, first, second in refused:
        assert main([*command, *extra]) == 2, extra
        err = capsys.readouterr().err
        assert first in err and second in err, (extra, err)


def test_set_reads_per_agent_values_and_comma_separated_names() -> None:
    """`--set FIELD@AGENT=VALUE` goes into `per_agent` (over a JSON `per_agent`), read by the
    field's type; a list of names may be comma-separated; a field no agent may set is refused
    with the ones it may (MAGRPO's learning rate is `agent_learning_rate`)."""
    from collabzoo.algos import SupervisedConfig
    from collabzoo.cli.config_values import config_settings
    from collabzoo.cli.usage import UsageError

    pairs = [
        "trainable_agents=coder, tester",
        'per_agent={"coder": {"top_k": 5, "top_p": 0.9}}',
        "temperature@coder=0.5",
        "top_k@coder=none",
        "actor_learning_rate@tester=1e-5",
    ]
    assert config_settings(IPPOConfig, pairs, "num_generations=8") == {
        "trainable_agents": ["coder", "tester"],
        "per_agent": {
            "coder": {"top_k": None, "top_p": 0.9, "temperature": 0.5},
            "tester": {"actor_learning_rate": 1e-5},
        },
    }
    with pytest.raises(UsageError, match="agent_learning_rate"):
        config_settings(MAGRPOConfig, ["actor_learning_rate@coder=1e-5"], "x=1")
    with pytest.raises(UsageError, match=r"e\.g\. --set temperature@AGENT=0\.8"):
        config_settings(MAGRPOConfig, ["temperature@=0.5"], "x=1")
    with pytest.raises(UsageError, match="SupervisedConfig has no per-agent fields"):
        config_settings(SupervisedConfig, ["learning_rate@coder=1e-5"], "x=1")


def test_a_value_head_on_a_frozen_actor_is_frozen_with_it(tmp_path) -> None:
    """IAC with the critic a value head on each actor: one model, one update group, so the
    frozen agent's head stays as it is while the trained agent's actor and head both learn."""
    trainer = make(
        "iac", tmp_path, trainable_agents=[LEFT], use_separate_critic=False, value_head_hidden_dim=8
    )
    assert not [name for name in trainer.groups if name.startswith("critic/")]
    heads = {a: [p.detach().clone() for p in trainer.critics[a].head.parameters()] for a in AGENTS}
    before = {a: weights(trainer, a) for a in AGENTS}
    trainer.train_step()
    assert changed(before[LEFT], trainer.policies[LEFT].trainable_parameters())
    assert changed(heads[LEFT], list(trainer.critics[LEFT].head.parameters()))
    assert not changed(before[RIGHT], trainer.policies[RIGHT].trainable_parameters())
    assert not changed(heads[RIGHT], list(trainer.critics[RIGHT].head.parameters()))
    assert group(trainer, RIGHT).optimizer.state_dict()["state"] == {}

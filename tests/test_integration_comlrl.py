"""CoMLRL's own MAGRPO trainer on collabzoo envs through `collabzoo.integrations.comlrl`."""

from __future__ import annotations

import copy
from pathlib import Path

import pytest

from collabzoo import make
from collabzoo.integrations.comlrl import from_env
from tests.conftest import require
from tests.optional import require_module


@pytest.fixture(autouse=True)
def comlrl():
    """Every test here needs CoMLRL: a skip outside CI, a failure under CI=true."""
    return require_module("comlrl", "interop")


def replay(name: str, item: dict, turns: list[tuple[str, str]], **kwargs) -> tuple[dict, float]:
    """Play an item's episode by hand: observations after, and the reward of, the last turn."""
    env = make(name, **kwargs)
    observations, _ = env.reset(
        seed=item["seed"], options={"task": item["task"], "split": item["split"]}
    )
    reward = 0.0
    for joint in turns:
        observations, rewards, *_ = env.step(dict(zip(env.possible_agents, joint, strict=True)))
        reward = next(iter(rewards.values()))
    return observations, reward


def test_items_formatters_rewards_and_transitions_match_the_env() -> None:
    task = from_env("tinycoop", horizon=2, seeds=(0, 1))
    assert task.agents == ["alpha", "beta"] and task.num_turns == 2
    assert len(task.items) == 4 * 2 and len({i["prompt"] for i in task.items}) == 8
    item = next(i for i in task.items if i["task"] == "10")  # signal 1, then 0
    first = [fmt(item) for fmt in task.formatters]
    assert first == list(make("tinycoop", horizon=2).reset(options={"task": "10"})[0].values())
    # Turn 1 (signal 1): alpha odd, beta even wins; the reward is the env's.
    assert (
        task.reward_func(["2", "1", "1"], ["1", "1", "2"], batch_items=[item])
        == [
            replay("tinycoop", item, [(a, b)], horizon=2)[1]
            for a, b in [("2", "1"), ("1", "1"), ("1", "2")]
        ]
        == [0.0, 0.0, 1.0]
    )
    # The transition replays the branch; the next rewards are scored on it (training: by prompt).
    nxt = task.external_transition(
        prompt=item["prompt"],
        agent_completions=["1", "1"],
        num_agents=2,
        response_history_per_agent=[["1"], ["1"]],
    )
    expected, _ = replay("tinycoop", item, [("1", "1")], horizon=2)
    assert nxt == [expected["alpha"], expected["beta"]] and "last=lose" in nxt[0]
    for _ in range(2):  # every reward of that node is scored on the branch
        got = task.reward_func(["1", "2"], ["2", "1"], batch_items=[item], prompts=[nxt[0]])
        assert got == [
            replay("tinycoop", item, [("1", "1"), j], horizon=2)[1]
            for j in [("1", "2"), ("2", "1")]
        ]
    # A new tree on the same item starts from the first turn again.
    assert task.reward_func(["1"], ["2"], batch_items=[item], prompts=[first[0]]) == [1.0]
    # Evaluation passes the first prompt at every turn: the reward after a transition is its node's.
    task.external_transition(
        prompt=item["prompt"],
        agent_completions=["2", "1"],
        num_agents=2,
        response_history_per_agent=[["2"], ["1"]],
    )
    won = replay("tinycoop", item, [("2", "1"), ("2", "1")], horizon=2)[1]
    assert task.reward_func(["2"], ["1"], batch_items=[item], prompts=[first[0]]) == [won] == [1.0]
    assert task.reward_func(["2"], ["1"], batch_items=[item], prompts=[first[0]]) == [0.0]
    assert task.env_steps == {0: 5, 1: 5}


def test_bad_inputs_name_what_was_wrong() -> None:
    task = from_env("tinycoop", horizon=1)
    item = task.items[0]
    with pytest.raises(ValueError, match="batch_items"):
        task.reward_func(["1"], ["2"])
    with pytest.raises(ValueError, match="one list of completions per agent"):
        task.reward_func(["1"], batch_items=[item])
    with pytest.raises(ValueError, match="not the 'prompt' of an item"):
        task.reward_func(["1"], ["2"], batch_items=[{"prompt": "elsewhere"}])
    with pytest.raises(ValueError, match="num_turns to at most the env's horizon"):
        task.external_transition(
            prompt=item["prompt"],
            agent_completions=["1", "2"],
            num_agents=2,
            response_history_per_agent=[["1"], ["2"]],
        )
    with pytest.raises(ValueError, match="seeds must be"):
        from_env("tinycoop", seeds=3)
    with pytest.raises(TypeError, match="accepts"):
        from_env("tinycoop", colour="red")


def test_comlrl_magrpo_updates_tiny_models_on_multi_turn_tinycoop(monkeypatch) -> None:
    torch = require_module("torch", "train")
    monkeypatch.setenv("WANDB_MODE", "disabled")
    from comlrl.trainers.reinforce import MAGRPOConfig, MAGRPOTrainer

    from collabzoo.algos import tiny_causal_lm

    torch.manual_seed(0)
    task = from_env("tinycoop", horizon=2)
    model, tokenizer = tiny_causal_lm(0)
    agents = [model, copy.deepcopy(model)]
    before = [[p.detach().clone() for p in a.parameters()] for a in agents]
    config = MAGRPOConfig(
        num_train_epochs=1,
        num_turns=task.num_turns,
        num_generations=2,
        max_new_tokens=2,
        temperature=1.0,
        top_p=1.0,
        top_k=None,
        agent_learning_rate=1e-2,
        early_termination_threshold=None,
        rollout_buffer_size=2,
        logging_steps=10**9,
        eval_interval=2,
        eval_num_samples=2,
    )
    trainer = MAGRPOTrainer(
        agents=agents,
        tokenizer=tokenizer,
        eval_dataset=task.dataset,
        args=config,
        **task.trainer_kwargs(),
    )
    trainer.train()
    items, gens = len(task.items), config.num_generations
    # Each item: a root of 2 joint samples, each with a child of 2; plus evaluation's episodes.
    evals = 2 * config.eval_num_samples
    assert task.env_steps == {0: items * gens + evals, 1: items * gens * gens + evals}
    for agent, old in zip(agents, before, strict=True):
        assert any(not torch.equal(p, q) for p, q in zip(agent.parameters(), old, strict=True))


def test_humaneval_rewards_come_from_the_sandboxed_tests(shared_data: Path, docker_sandbox) -> None:
    from collabzoo.envs.scripted_teams import code_oracle

    data = str(require(shared_data / "humaneval" / "HumanEval.jsonl.gz", "HumanEval"))
    task = from_env("humaneval", split="eval", tasks=[3], data=data, sandbox=docker_sandbox)
    assert task.agents == ["aux", "main"] and task.num_turns == 2
    (item,) = task.items
    observations = [fmt(item) for fmt in task.formatters]
    oracle = code_oracle(task.env.items("eval"))
    good = [oracle(o) for o in observations]
    rewards = task.reward_func(
        [good[0], "def aux(x):\n    return x"], [good[1], "pass"], batch_items=[item]
    )
    env = make("humaneval", split="eval", data=data, sandbox=docker_sandbox)
    env.reset(seed=item["seed"], options={"task": item["task"]})
    _, step_rewards, _, _, infos = env.step(dict(zip(task.agents, good, strict=True)))
    assert rewards[0] == step_rewards["main"] and infos["main"]["metrics"]["pass"] == 1.0
    assert rewards[1] < rewards[0]

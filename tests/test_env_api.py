"""The PettingZoo contract, seeding, copying, memory and info conventions of every env
(PettingZoo's own test utilities on every env: tests/test_pettingzoo_utilities.py)."""

from __future__ import annotations

import copy
import json
import math
import random
from pathlib import Path

import gymnasium
import pettingzoo
import pytest

import collabzoo
from collabzoo.envs.scripted_teams import scripted_team

GAMES = ["strbuild", "housebuild"]


def random_answer(rng: random.Random, oracle_answer: str) -> str:
    """A messy answer: part of a good one, noise lines, odd characters."""
    lines = oracle_answer.splitlines()
    rng.shuffle(lines)
    noise = ["hello", "/setblock 1 1 ~ stone", "/fill 0 0 0 1 1 1 obsidian", "/kill", "ü😀", ""]
    lines = lines[: rng.randint(0, len(lines))] + rng.choices(noise, k=rng.randint(0, 5))
    rng.shuffle(lines)
    return "\n".join(lines)


def play_episode(env, seed: int, answer_seed: int, options=None):
    """Every observation, reward and info of one episode with seeded messy answers."""
    rng = random.Random(answer_seed)
    game = env.metadata["name"].split("_")[0]
    oracle = scripted_team(game, "oracle")
    obs, infos = env.reset(seed=seed, options=options)
    trace = [(obs, infos)]
    while env.agents:
        good = oracle(obs) if env.turn == 0 else {a: "" for a in env.agents}
        actions = {a: random_answer(rng, good.get(a, "")) for a in env.agents}
        step = env.step(actions)
        obs = step[0]
        trace.append(step)
    return trace


@pytest.mark.parametrize("game", GAMES)
def test_spaces_are_cached_text_spaces_that_accept_any_text(game: str) -> None:
    env = collabzoo.make(game)
    for agent in env.possible_agents:
        space = env.action_space(agent)
        assert isinstance(space, gymnasium.spaces.Text)
        assert space is env.action_space(agent)
        assert env.observation_space(agent) is env.observation_space(agent)
        for text in ["/setblock 0 0 0 stone\n", "", "naïve — “quotes” 中文 😀 \t\x00\udcff"]:
            assert space.contains(text)
        assert not space.contains(b"bytes")
        assert not gymnasium.spaces.Text(100).contains("/setblock 0 0 0 stone")
    obs, _ = env.reset(seed=0)
    assert all(env.observation_space(a).contains(o) for a, o in obs.items())


@pytest.mark.parametrize("game", GAMES)
@pytest.mark.parametrize("seed", [0, 7])
def test_whole_episode_is_deterministic(game: str, seed: int) -> None:
    first = play_episode(collabzoo.make(game), seed, answer_seed=seed)
    second = play_episode(collabzoo.make(game), seed, answer_seed=seed)
    assert len(first) == 1 + collabzoo.make(game).horizon
    assert first == second


@pytest.mark.parametrize("game", GAMES)
def test_seed_picks_the_task_and_options_override_it(game: str) -> None:
    env = collabzoo.make(game)
    tasks = {env.reset(seed=s)[1][env.possible_agents[0]]["task_id"] for s in range(40)}
    assert len(tasks) > 1, "different seeds should reach different tasks"
    assert tasks <= {env._item_id(i) for i in env.items("train")}
    items = env.items("eval")
    last_id = env._item_id(items[-1])
    _, infos = env.reset(seed=3, options={"split": "eval", "task": len(items) - 1})
    assert infos[env.possible_agents[0]]["task_id"] == last_id
    _, infos = env.reset(seed=3, options={"split": "eval", "task": last_id})
    assert infos[env.possible_agents[0]]["task_id"] == last_id
    eval_env = collabzoo.make(game, split="eval")
    assert {eval_env.reset(seed=s)[1][env.possible_agents[0]]["task_id"] for s in range(20)} <= {
        env._item_id(i) for i in items
    }


def test_housebuild_spiders_are_seeded_and_can_be_fixed() -> None:
    env = collabzoo.make("housebuild")
    draws = {tuple(env.reset(seed=s)[1]["first_builder"]["spider_attacks"]) for s in range(30)}
    assert len(draws) > 3 and all(len(d) == 3 and set(d) <= {1, 2, 3} for d in draws)
    obs, infos = env.reset(seed=0, options={"spider_attacks": [3, 3, 3]})
    assert infos["first_builder"]["spider_attacks"] == [3, 3, 3]
    assert "3, 3, 3 damage (9 in all)" in obs["first_builder"]


@pytest.mark.parametrize("game", GAMES)
def test_deep_copy_branches_independently(game: str) -> None:
    env = collabzoo.make(game)
    twin = collabzoo.make(game)
    oracle = scripted_team(game, "oracle")
    obs, _ = env.reset(seed=5)
    twin.reset(seed=5)
    first = oracle(obs)
    env.step(first)
    twin.step(first)
    branch = copy.deepcopy(env)
    assert branch.items() is env.items(), "task data is shared, not copied"
    junk = {a: "nothing useful" for a in branch.agents}
    branch_step = branch.step(junk)
    branch.step(junk)
    assert branch.turn == 3 and env.turn == 1
    assert env.state() == twin.state()
    second = oracle({a: env.observe(a) for a in env.agents})
    original_step = env.step(second)
    assert original_step == twin.step(second)
    assert original_step[1] != branch_step[1], "the oracle branch and the junk branch differ"


@pytest.mark.parametrize("game", GAMES)
def test_team_reward_infos_and_termination(game: str) -> None:
    env = collabzoo.make(game, horizon=2)
    oracle = scripted_team(game, "oracle")
    obs, infos = env.reset(seed=1)
    assert all(info["turn"] == 0 and info["role"] == a for a, info in infos.items())
    for turn in range(2):
        obs, rewards, terms, truncs, infos = env.step(
            oracle(obs) if turn else {a: "prose\n/setblock 0 0 0 stone" for a in env.agents}
        )
        assert len(set(rewards.values())) == 1, "one shared team reward"
        assert all(t == (turn == 1) for t in terms.values()) and not any(truncs.values())
        for agent, info in infos.items():
            assert info["turn"] == turn and info["role"] == agent
            parts = info["reward_components"]
            assert math.isclose(sum(parts.values()), rewards[agent], abs_tol=1e-9)
            assert all(isinstance(v, float) for v in [*parts.values(), *info["metrics"].values()])
            assert set(info["parsed"]) == {"accepted", "rejected"}
        if turn == 0:
            assert infos["first_builder"]["parsed"]["rejected"][0]["line"] == "prose"
    assert env.agents == []


@pytest.mark.parametrize("memory", ["full", "last", "none"])
def test_memory_modes(memory: str) -> None:
    env = collabzoo.make("strbuild", memory=memory)
    obs, _ = env.reset(seed=0)
    role_prompt = obs["first_builder"]
    answers = [{a: f"answer-{t}-{a}" for a in env.agents} for t in range(3)]
    for a in answers:
        obs, *_ = env.step(a)
    seen = obs["first_builder"]
    assert ("=== Turn 1: your answer ===\nanswer-0-first_builder" in seen) == (memory == "full")
    assert ("=== Turn 3: your answer ===\nanswer-2-first_builder" in seen) == (memory != "none")
    assert ("your answer" in seen) == (memory != "none")
    assert (role_prompt in seen) == (memory == "full")
    assert "answer-2-second_builder" not in seen, "agents never see each other's answers"
    assert seen.rstrip().endswith("one per line.")


@pytest.mark.parametrize("game", GAMES)
def test_state_and_render(game: str) -> None:
    env = collabzoo.make(game, render_mode="ansi")
    obs, _ = env.reset(seed=2)
    state = env.state()
    assert all(f"##### {a} #####\n{o}" in state for a, o in obs.items())
    before = env.render()
    env.step(scripted_team(game, "oracle")(obs))
    after = env.render()
    assert isinstance(after, str) and after != before
    assert "1" in after and "2" in after and "score" in after
    with pytest.warns(UserWarning):
        assert collabzoo.make(game).render() is None


@pytest.mark.parametrize("game", GAMES)
def test_split_all_is_train_then_eval_in_order(game: str) -> None:
    env = collabzoo.make(game, split="all")
    ids = {s: [env._item_id(i) for i in env.items(s)] for s in ("train", "eval", "all")}
    assert ids["all"] == ids["train"] + ids["eval"] and len(set(ids["all"])) == len(ids["all"])
    first = env.possible_agents[0]
    played = {env.reset(seed=s)[1][first]["task_id"] for s in range(60)}
    assert played & set(ids["eval"]) and played & set(ids["train"]), "the default split is all"
    _, infos = env.reset(options={"task": len(ids["all"]) - 1})
    assert infos[first]["task_id"] == ids["eval"][-1]
    with pytest.raises(ValueError, match=rf"{ids['eval'][0]!r} is not in split 'train' but in "):
        env.reset(options={"task": ids["eval"][0], "split": "train"})


def test_split_all_of_the_reference_files(
    reference_targets_path: Path, reference_houses_path: Path
) -> None:
    words = collabzoo.make("strbuild", data=str(reference_targets_path)).items("all")
    assert [w.text for w in words] == ["I", "C", "M", "L", "MC", "CM", "LI", "LLM", "ICML", "CLIM"]
    houses = json.loads(reference_houses_path.read_text(encoding="utf-8"))
    env = collabzoo.make("housebuild", data=str(reference_houses_path))
    assert [env._item_id(h) for h in env.items("all")] == [h["task_id"] for h in houses]
    assert len(env.items("train")) == 8 and len(env.items("eval")) == 2


def test_tinycoop_accepts_split_all_with_the_same_items() -> None:
    env = collabzoo.make("tinycoop", horizon=3, split="all")
    assert list(env.items()) == list(env.items("train")) == list(range(8))


def test_pettingzoo_registry_and_short_names() -> None:
    env = pettingzoo.make("parallel", "collabzoo/StrBuild-v0")
    assert type(env).__name__ == "StrBuildEnv"
    assert type(collabzoo.make("collabzoo/HouseBuild-v0")).__name__ == "HouseBuildEnv"
    assert type(collabzoo.make("HouseBuild")).__name__ == "HouseBuildEnv"
    assert collabzoo.pettingzoo_make is collabzoo.make
    assert {"collabzoo/StrBuild-v0", "collabzoo/HouseBuild-v0"} <= set(collabzoo.names())
    with pytest.raises(ValueError, match="strbuild"):
        collabzoo.make("strbiuld")


@pytest.mark.parametrize("game", GAMES)
def test_oracle_beats_naive_in_every_feedback_mode(game: str) -> None:
    from collabzoo.tasks.building.envs.housebuild import FEEDBACK_MODES as HB
    from collabzoo.tasks.building.envs.strbuild import FEEDBACK_MODES as SB

    for mode in {"strbuild": SB, "housebuild": HB}[game]:
        finals = {}
        for kind in ("oracle", "naive"):
            env = collabzoo.make(game, feedback=mode)
            team = scripted_team(game, kind)
            obs, _ = env.reset(seed=4)
            while env.agents:
                obs, rewards, *_ = env.step(team(obs))
            finals[kind] = rewards["first_builder"]
        assert finals["oracle"] == (2.0 if game == "strbuild" else 1.0) == env.max_reward
        assert finals["naive"] < finals["oracle"]

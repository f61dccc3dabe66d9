"""TinyCoop: the parity scoring, the signals, sparse mode, the oracle and the env contract."""

from __future__ import annotations

import copy
import math
import random

import pytest

import collabzoo
from collabzoo.envs.scripted_teams import scripted_team
from collabzoo.envs.text_space import SAMPLE_CHARSET
from collabzoo.tasks.tinycoop.envs import TinyCoopEnv
from collabzoo.tasks.tinycoop.rewards import score_tinycoop, tinycoop_reward

EVEN = ["0", "x", " ", "\n", "😀"]  # ord 48, 120, 32, 10, 128512
ODD = ["1", "a", "A", "é", "中"]  # ord 49, 97, 65, 233, 20013
# (alpha, beta, signal, team wins): the whole truth table, written out by hand.
TRUTH_TABLE = [
    ("0", "0", 0, False),
    ("0", "0", 1, False),
    ("0", "1", 0, True),
    ("0", "1", 1, False),
    ("1", "0", 0, False),
    ("1", "0", 1, True),
    ("1", "1", 0, False),
    ("1", "1", 1, False),
    ("", "0", 0, False),
    ("", "1", 1, False),
    ("0", "", 0, False),
    ("1", "", 1, False),
    ("", "", 0, False),
    ("", "", 1, False),
]


# ----- the scoring ------------------------------------------------------------------------
@pytest.mark.parametrize(("alpha", "beta", "signal", "wins"), TRUTH_TABLE)
def test_score_truth_table(alpha: str, beta: str, signal: int, wins: bool) -> None:
    b = score_tinycoop(alpha, beta, signal)
    assert b.total == (1.0 if wins else 0.0)
    assert b.components == {"win": b.total}
    assert b.metrics["win"] == b.total
    assert b.metrics["alpha_parity"] == (float(alpha == "1") if alpha else -1.0)
    assert b.metrics["beta_parity"] == (float(beta == "1") if beta else -1.0)
    assert b.metrics["has_both"] == float(bool(alpha and beta))
    assert all(isinstance(v, float) for v in b.metrics.values())


@pytest.mark.parametrize("signal", [0, 1])
def test_only_the_first_characters_parity_counts(signal: int) -> None:
    for a in EVEN + ODD:
        for b in EVEN + ODD:
            expected = (a in ODD) == bool(signal) and (b in ODD) != bool(signal)
            assert score_tinycoop(a, b + "xyz", signal).total == float(expected), (a, b)
            # what follows the first character never matters
            assert score_tinycoop(a + "1", b + "0", signal).total == float(expected)
    # nothing is stripped: " 1" starts with an even space
    assert score_tinycoop(" 1", "1", 0).total == 1.0


def test_neither_agent_can_win_alone() -> None:
    """A correct answer still needs the partner's: the partner decides the turn both ways; a
    wrong answer loses whatever the partner does."""
    for signal in (0, 1):
        for mine in ["0", "1", "x", "é"]:
            alpha_right = (mine in ODD) == bool(signal)
            beta_right = (mine in ODD) != bool(signal)
            with_alpha = {score_tinycoop(mine, b, signal).total for b in ("0", "1")}
            with_beta = {score_tinycoop(a, mine, signal).total for a in ("0", "1")}
            assert with_alpha == ({0.0, 1.0} if alpha_right else {0.0})
            assert with_beta == ({0.0, 1.0} if beta_right else {0.0})


@pytest.mark.parametrize("bad", [2, -1, True, "1", 0.5])
def test_score_rejects_bad_signals(bad) -> None:
    with pytest.raises(ValueError, match="signal"):
        score_tinycoop("0", "0", bad)


def test_reward_wrapper_dense_and_sparse() -> None:
    win, loss = score_tinycoop("0", "1", 0), score_tinycoop("0", "0", 1)
    dense = tinycoop_reward(win, 2, 3, 4, sparse=False)
    assert dense.total == 1.0 and dense.components == {"win": 1.0}
    assert dense.metrics["win_rate"] == pytest.approx(2 / 3)
    early = tinycoop_reward(win, 1, 1, 4, sparse=True)
    assert early.total == 0.0 and early.components == {"win_fraction": 0.0}
    assert early.metrics["win"] == 1.0
    last = tinycoop_reward(loss, 3, 4, 4, sparse=True)
    assert last.total == 0.75 and last.components == {"win_fraction": 0.75}
    with pytest.raises(ValueError):
        tinycoop_reward(win, 3, 2, 4, sparse=False)


# ----- the env ----------------------------------------------------------------------------
def play(env: TinyCoopEnv, policy, seed=None, options=None):
    """Run one episode; return (observations seen, rewards, infos) per turn."""
    obs, _ = env.reset(seed=seed, options=options)
    seen, rewards, infos = [obs], [], []
    while env.agents:
        obs, reward, _, _, info = env.step(policy(obs))
        seen.append(obs)
        rewards.append(reward["alpha"])
        infos.append(info)
    return seen, rewards, infos


def test_registered_with_defaults() -> None:
    env = collabzoo.make("collabzoo/TinyCoop-v0")
    assert type(env) is TinyCoopEnv and type(collabzoo.make("tinycoop")) is TinyCoopEnv
    assert env.possible_agents == ["alpha", "beta"]
    assert env.horizon == 1 and env.memory == "none" and env.sparse is False
    assert env.max_reward == 1.0
    with pytest.raises(ValueError, match="sparse"):
        TinyCoopEnv(sparse=1)


@pytest.mark.parametrize(("horizon", "count"), [(1, 2), (4, 16), (6, 64), (9, 64)])
def test_items_are_signal_sequences_in_both_splits(horizon: int, count: int) -> None:
    env = TinyCoopEnv(horizon=horizon)
    assert list(env.items("train")) == list(env.items("eval")) == list(range(count))
    ids = [env._item_id(i) for i in env.items()]
    assert len(set(ids)) == count and all(len(i) == horizon and set(i) <= {"0", "1"} for i in ids)
    if horizon == 4:
        assert env._item_id(6) == "0110" and env._item_id(1) == "1000"


def test_h4_signals_follow_the_item_bits() -> None:
    env = TinyCoopEnv(horizon=4)
    for item in range(16):
        seen, rewards, infos = play(
            env, lambda o: {"alpha": "q", "beta": "x"}, options={"task": item}
        )
        bits = [(item >> t) & 1 for t in range(4)]
        assert infos[0]["alpha"]["task_id"] == "".join(map(str, bits))
        for t, bit in enumerate(bits):
            for agent in ("alpha", "beta"):
                assert f"{agent} r{t + 1}/4 s={bit} " in seen[t][agent]
            # alpha "q" is odd, beta "x" even: a win exactly when the signal is 1
            assert rewards[t] == float(bit == 1)
            assert infos[t]["beta"]["turn"] == t
        assert f"done {bits.count(1)}/4" in seen[-1]["beta"]


def test_seed_picks_the_item_and_task_ids_work() -> None:
    env = TinyCoopEnv(horizon=4)
    ids = {env.reset(seed=s)[1]["alpha"]["task_id"] for s in range(60)}
    assert len(ids) > 8
    assert env.reset(seed=3)[1] == env.reset(seed=3)[1]
    obs, infos = env.reset(seed=0, options={"task": "0110", "split": "eval"})
    assert infos["beta"]["task_id"] == "0110" and obs["beta"] == "tinycoop beta r1/4 s=0 >"


def test_sparse_pays_only_at_the_end() -> None:
    env = TinyCoopEnv(horizon=4, sparse=True)
    env.reset(options={"task": "0110"})
    # signals 0, 1, 1, 0; answers that win, lose, win, win
    rewards, components, wins = [], [], []
    for alpha, beta in [("0", "1"), ("0", "0"), ("1", "0"), ("0", "1")]:
        _, r, _, _, info = env.step({"alpha": alpha, "beta": beta})
        rewards.append(r["alpha"])
        components.append(info["alpha"]["reward_components"])
        wins.append(info["alpha"]["metrics"]["win"])
    assert wins == [1.0, 0.0, 1.0, 1.0]
    assert rewards == [0.0, 0.0, 0.0, 0.75]
    assert all(math.isclose(sum(c.values()), r) for c, r in zip(components, rewards, strict=True))
    dense = TinyCoopEnv(horizon=4)
    _, dense_rewards, _ = play(
        dense, lambda o: {"alpha": "0", "beta": "1"}, options={"task": "0110"}
    )
    assert dense_rewards == [1.0, 0.0, 0.0, 1.0]


@pytest.mark.parametrize("horizon", [1, 4])
@pytest.mark.parametrize("memory", ["none", "last", "full"])
def test_oracle_wins_every_turn_of_every_item(horizon: int, memory: str) -> None:
    env = collabzoo.make("tinycoop", horizon=horizon, memory=memory)
    oracle = scripted_team("tinycoop", "oracle")
    for item in range(2**horizon):
        _, rewards, infos = play(env, oracle, options={"task": item})
        assert rewards == [1.0] * horizon
        assert all(i["alpha"]["metrics"]["win_rate"] == 1.0 for i in infos)
    sparse = collabzoo.make("tinycoop", horizon=horizon, memory=memory, sparse=True)
    _, rewards, _ = play(sparse, oracle, seed=1)
    assert rewards == [0.0] * (horizon - 1) + [1.0]


def test_reward_depends_on_both_answers() -> None:
    env = TinyCoopEnv()
    results = set()
    for beta in ("x", "y"):
        env.reset(options={"task": 1})
        _, rewards, *_ = env.step({"alpha": "k", "beta": beta})
        results.add(rewards["alpha"])
    assert results == {0.0, 1.0}


def test_random_policy_wins_about_a_quarter() -> None:
    rng = random.Random(0)

    def answer() -> str:
        return "".join(rng.choices(SAMPLE_CHARSET, k=rng.randint(1, 8)))

    env = TinyCoopEnv(horizon=4)
    rewards = []
    for seed in range(300):
        _, r, _ = play(env, lambda o: {a: answer() for a in o}, seed=seed)
        rewards += r
    assert 0.18 <= sum(rewards) / len(rewards) <= 0.32


def test_observations_stay_short_without_memory() -> None:
    env = TinyCoopEnv(horizon=4)
    rng = random.Random(1)
    for item in range(16):
        seen, _, _ = play(
            env,
            lambda o: {a: rng.choice(["", "0", "long answer " * 20]) for a in o},
            options={"task": item},
        )
        for obs in seen:
            assert all(len(o) < 80 for o in obs.values()), obs
            assert all("long answer" not in o for o in obs.values())


def test_other_memory_modes_show_the_history() -> None:
    for memory in ("last", "full"):
        env = TinyCoopEnv(horizon=4, memory=memory)
        env.reset(options={"task": "0110"})
        for t in range(3):
            obs, *_ = env.step({"alpha": f"a{t}", "beta": f"b{t}"})
        assert "a2" in obs["alpha"] and "b2" not in obs["alpha"]
        assert ("a0" in obs["alpha"]) == (memory == "full")
        assert obs["alpha"].endswith("alpha r4/4 s=0 last=win >")


def test_parsed_infos_and_render() -> None:
    env = TinyCoopEnv(horizon=2, render_mode="ansi")
    env.reset(options={"task": "10"})
    assert "next signal: s=1" in env.render()
    _, rewards, _, _, infos = env.step({"alpha": "", "beta": "é!"})
    assert rewards["alpha"] == 0.0
    assert infos["alpha"]["parsed"] == {"first_char": "", "parity": None}
    assert infos["beta"]["parsed"] == {"first_char": "é", "parity": 1}
    assert infos["alpha"]["metrics"]["alpha_parity"] == -1.0
    env.step({"alpha": "2", "beta": "5"})
    text = env.render()
    assert "'10'" in text and "after turn 2 of 2" in text
    assert "'é'" in text and "'2'" in text and "'5'" in text
    assert "won 1 of 2" in text and "next signal" not in text


def test_deep_copy_branches_independently() -> None:
    env, twin = TinyCoopEnv(horizon=4), TinyCoopEnv(horizon=4)
    oracle = scripted_team("tinycoop", "oracle")
    obs, _ = env.reset(seed=5)
    twin.reset(seed=5)
    env.step(oracle(obs))
    twin.step(oracle(obs))
    branch = copy.deepcopy(env)
    assert branch.items() is env.items(), "task data is shared, not copied"
    junk = {"alpha": "", "beta": ""}
    branch_step = branch.step(junk)
    branch.step(junk)
    assert branch.turn == 3 and env.turn == 1
    assert env.state() == twin.state()
    second = oracle({a: env.observe(a) for a in env.agents})
    original_step = env.step(second)
    assert original_step == twin.step(second)
    assert original_step[1] == {"alpha": 1.0, "beta": 1.0}
    assert branch_step[1] == {"alpha": 0.0, "beta": 0.0}

"""BridgeBuild and ResourceGathering played through the env itself, against the reference.

tests/test_bridgebuild.py and tests/test_resourcegathering.py replay the conformance sets
(tests/data/{bridgebuild,resourcegathering}_conformance.json: episodes played by the reference's
own transition and reward code, made by benchmarks/{bridgebuild,resourcegathering}_conformance.py
or, for the episodes without `made_by`, outside this repository) through the rules module. Here
every episode of both sets goes through what a learner sees: `collabzoo.make(...)`, `reset` on the
episode's map, then `step` with the episode's answers. So the env's own bookkeeping (turn count,
horizon, early end, reward fan-out to the agents) is checked too, not just the rules.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

import collabzoo
from tests.conftest import require

DATA = Path(__file__).parent / "data"
BRIDGE = json.loads((DATA / "bridgebuild_conformance.json").read_text(encoding="utf-8"))
GATHER = json.loads((DATA / "resourcegathering_conformance.json").read_text(encoding="utf-8"))
TOLERANCE = 1e-6
SHAPING = {"reference": "reference", "wrapper": "wrapper_defaults"}
"""The ResourceGathering set's config names and the env's `shaping` for each."""


def play_until_the_env_ends(
    env: Any, episode: dict[str, Any], task: int, reference: list[tuple[float, bool, bool]]
) -> int:
    """Reset `env` on map `task`, step it with the episode's answers and compare each turn with
    the reference's (team reward, game over, goal reached), up to the env's end. Returns the
    number of turns the env played."""
    _, infos = env.reset(seed=0, options={"task": task, "split": "all"})
    agents = env.possible_agents
    assert all(infos[a]["task_id"] == episode["task_id"] for a in agents)
    for number, (turn, (reward, over, goal)) in enumerate(
        zip(episode["turns"], reference, strict=True), start=1
    ):
        where = f"{episode['task_id']} ({episode.get('kind')}) turn {number}"
        _, rewards, terminations, truncations, _ = env.step(
            dict(zip(agents, turn["answers"], strict=True))
        )
        assert set(rewards) == set(agents), where
        for agent in agents:
            assert abs(rewards[agent] - reward) <= TOLERANCE, (where, agent, rewards, reward)
        ended = not env.agents
        assert ended == over, f"{where}: the env ended {ended}, the reference's game over {over}"
        assert all(terminations.values()) == ended and not any(truncations.values()), where
        if ended:
            assert goal or number == env.horizon, f"{where}: ended early without the goal"
            return number
    raise AssertionError(f"{episode['task_id']}: the reference's game never ended")


@pytest.fixture(scope="module")
def bridge_folder(shared_data: Path) -> Path:
    return require(shared_data / "bridgebuild", "the reference BridgeBuild maps")


@pytest.mark.parametrize("case", range(len(BRIDGE["episodes"])))
def test_bridgebuild_episodes_play_through_the_env_as_in_the_reference(
    case: int, bridge_folder: Path
) -> None:
    """Each turn's team reward (every agent's, the base reward on the CoMLRL path, the shaped
    one on the CoTI path) equals the reference's within 1e-6, and the env ends exactly on the
    turn after which the reference's state says terminated (S and T linked, or the turns ran
    out), with the same linked flag. The reference's turns after its end (its frozen turn: base
    reward 0, CoTI shaping still paid) are not played: the env has no live agents to step."""
    episode = BRIDGE["episodes"][case]
    env = collabzoo.make(
        "bridgebuild",
        data=str(bridge_folder / episode["file"]),
        split="all",
        reward=episode["reward"],
        max_probe=episode["max_probe"],
    )
    coti = episode["reward"] == "coti"
    reference = [
        (
            (turn["coti_metrics"] if coti else turn["metrics"])[0],
            turn["state"]["terminated"],
            turn["state"]["connected"],
        )
        for turn in episode["turns"]
    ]
    played = play_until_the_env_ends(env, episode, episode["index"], reference)
    assert env.game.connected == reference[played - 1][2]
    assert env.game.turn_index == episode["turns"][played - 1]["state"]["turn_index"]


@pytest.mark.parametrize("case", range(len(GATHER["episodes"])))
def test_resourcegathering_episodes_play_through_the_env_as_in_the_reference(case: int) -> None:
    """Each turn's team reward equals the reference's within 1e-6 and the env ends exactly on
    the turn after which the reference's state says terminated: all goals met (the env says
    completed there too), or the fourth turn played. The reference has no guard for a finished
    game and keeps moving, extracting and paying after it (the set records those turns); the
    env ends there, so the comparison stops at its end and only checks that the reference's
    game was over by then."""
    episode = GATHER["episodes"][case]
    env = collabzoo.make(
        "resourcegathering",
        split="all",
        shaping=SHAPING[episode["config"]],
        extraction_limit=episode["extraction_limit"],
    )
    reference = [
        (turn["reward"], turn["next"]["terminated"], turn["next"]["completed"])
        for turn in episode["turns"]
    ]
    played = play_until_the_env_ends(env, episode, episode["task_index"], reference)
    assert env.game.completed == reference[played - 1][2]
    assert env.game.turn == episode["turns"][played - 1]["next"]["turn"]


def test_the_sets_have_episodes_past_the_end_and_both_ways_of_ending() -> None:
    """The env checks above meet what they must: games the reference ends by the goal and by
    the turn limit, on both paths of BridgeBuild and every ResourceGathering config, and turns
    recorded after the reference's end (the ones the env never plays)."""
    bridge = [
        (e["reward"], t["state"]["connected"], t["state"]["turn_index"])
        for e in BRIDGE["episodes"]
        for t in e["turns"]
        if t["state"]["terminated"]
    ]
    for path in ("comlrl", "coti"):
        assert any(r == path and linked and turn <= 4 for r, linked, turn in bridge), path
        assert any(r == path and not linked for r, linked, _ in bridge), path
    ends = {(e["config"], e["extraction_limit"]): [0, 0] for e in GATHER["episodes"]}
    for e in GATHER["episodes"]:
        first = next(t for t in e["turns"] if t["next"]["terminated"])
        ends[(e["config"], e["extraction_limit"])][first["next"]["completed"]] += 1
        assert e["turns"][-1] is not first, "a turn past the reference's end is recorded"
    assert all(by_limit and by_goal for by_limit, by_goal in ends.values()), ends
    for cases, script in ((BRIDGE, "bridgebuild"), (GATHER, "resourcegathering")):
        made = [e.get("made_by", "") for e in cases["episodes"]]
        assert sum(m.startswith(f"benchmarks/{script}_conformance.py seed ") for m in made) >= 60

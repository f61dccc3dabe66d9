"""The numeric view of the building games: spaces, the PettingZoo contract, the scoring path."""

from __future__ import annotations

import numpy as np
import pytest
from pettingzoo.test import parallel_api_test

from collabzoo.tasks.building.envs.housebuild import HouseBuildEnv
from collabzoo.tasks.building.envs.strbuild import StrBuildEnv
from collabzoo.tasks.building.numeric import BuildingGridEnv


@pytest.mark.parametrize("game", [StrBuildEnv, HouseBuildEnv])
def test_numeric_view_passes_the_parallel_api_test(game) -> None:
    env = BuildingGridEnv(game(), steps=6)
    parallel_api_test(env, num_cycles=30)
    assert env.observation_space("first_builder") is env.observation_space("first_builder")
    env.reset(seed=0)
    assert env.state().shape == env.state_space.shape


@pytest.mark.parametrize("game", [StrBuildEnv, HouseBuildEnv])
def test_numeric_view_is_deterministic_under_a_seed(game) -> None:
    def episode(seed: int) -> list:
        env = BuildingGridEnv(game(), steps=5)
        observations, _ = env.reset(seed=seed)
        for agent in env.possible_agents:
            env.action_space(agent).seed(seed)
        trace = [observations["first_builder"].copy()]
        while env.agents:
            actions = {a: env.action_space(a).sample() for a in env.agents}
            observations, rewards, *_ = env.step(actions)
            trace += [observations["second_builder"].copy(), rewards["first_builder"]]
        return trace

    first, again = episode(3), episode(3)
    assert all(np.array_equal(a, b) for a, b in zip(first, again, strict=True))


def test_strbuild_placements_become_setblock_commands_and_score_like_the_text_game() -> None:
    text = StrBuildEnv(targets=["I"], horizon=1)
    view = BuildingGridEnv(StrBuildEnv(targets=["I"]), steps=4)
    view.reset(seed=0)
    text.reset(seed=0)
    target = view.env.item.target
    cells = sorted(target.cells)[:4]
    w = target.width
    placements = {
        "first_builder": [(i % w, i // w, 0, 2) for i in cells[:2]],  # oak_planks
        "second_builder": [(i % w, i // w, 0, 3) for i in cells[2:]] + [(0, 0, 0, 0)],  # no-op
    }
    total = 0.0
    for step in range(4):
        actions = {
            a: np.array(p[step] if step < len(p) else (0, 0, 0, 0)) for a, p in placements.items()
        }
        observations, rewards, terminations, _, infos = view.step(actions)
        total += rewards["first_builder"]
    assert all(terminations.values()) and view.agents == []
    answers = {
        "first_builder": "\n".join(
            f"/setblock {x} {y} 0 oak_planks" for x, y, _, _ in placements["first_builder"]
        ),
        "second_builder": "\n".join(
            f"/setblock {x} {y} 0 white_concrete" for x, y, _, _ in placements["second_builder"][:2]
        ),
    }
    _, text_rewards, *_ = text.step(answers)
    assert total == pytest.approx(text_rewards["first_builder"])  # delta rewards sum to the score
    assert infos["first_builder"]["accepted"] == 2
    grid = observations["first_builder"]
    x, y = cells[0] % w, cells[0] // w
    assert grid[1, x, y, 0] == 1.0  # a target cell
    assert grid[2, x, y, 0] == 1 + view.blocks.index("oak_planks")
    assert grid[3, x, y, 0] == 1.0 and observations["second_builder"][3, x, y, 0] == 2.0


def test_housebuild_choices_cover_kill_and_single_cell_fills() -> None:
    view = BuildingGridEnv(HouseBuildEnv(), steps=2)
    view.reset(seed=0)
    assert view.command("first_builder", [0, 0, 0, 0]) is None
    assert view.command("first_builder", [1, 2, 3, 2]) == "/kill"
    assert view.command("first_builder", [1, 2, 3, 1]) == "/fill 1 2 3 1 2 3 air"
    block = view.palettes["first_builder"][0]
    assert view.command("first_builder", [1, 2, 3, 3]) == f"/fill 1 2 3 1 2 3 {block}"


def test_numeric_view_rejects_bad_input_clearly() -> None:
    with pytest.raises(TypeError, match="StrBuildEnv or a HouseBuildEnv"):
        BuildingGridEnv("strbuild")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="reward must be one of"):
        BuildingGridEnv(StrBuildEnv(), reward="sparse")
    view = BuildingGridEnv(StrBuildEnv(), steps=2)
    view.reset(seed=0)
    with pytest.raises(ValueError, match=r"\(x, y, z, choice\) within"):
        view.step({"first_builder": [99, 0, 0, 1], "second_builder": [0, 0, 0, 0]})
    with pytest.raises(ValueError, match="missing"):
        view.step({"first_builder": [0, 0, 0, 0]})

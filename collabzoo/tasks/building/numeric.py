"""Numeric views of the building games, for classic MARL libraries that want arrays, not text.

`BuildingGridEnv` wraps a `StrBuildEnv` or `HouseBuildEnv` as a ParallelEnv whose observations
are grids (a `Box`), whose actions are single block placements (a `MultiDiscrete`) and whose
`state()` is an array. Every step, each agent places (or clears) one block; the wrapper appends
that placement to the agent's command list and plays the whole list as one turn of the text
game (each turn of the text game is built from scratch), so the scoring is exactly the text
game's. An episode is `steps` placements per agent.

Observation of each agent, float32 of shape (4, X, Y, Z) over the largest build area of the
task list (smaller items are padded):

    0: 1 inside this item's build area, 0 in the padding
    1: the target: 1 where a block is wanted (StrBuild), or the wanted block's code (HouseBuild)
    2: the built world: 0 air, else the block's code (1 + its index in `blocks`)
    3: who placed it: 0 nobody, 1 this agent, 2 its partner

`state()` is the same array with channel 3 holding 1 + the placing agent's index.

Action of each agent: MultiDiscrete([X, Y, Z, K]) = (x, y, z, choice) with choice 0 = do
nothing, 1 = air (clear the cell), then (HouseBuild only) 2 = /kill, then the agent's blocks
in order. A placement outside the item's build area is rejected by the game, like a no-op.

Infos are numbers too: the team `score` of the current build and how many of the agent's
commands the game `accepted` and `rejected` (the text game itself is `.env`).

Reward: with `reward="delta"` (default) the change of the team score, so an episode's return
is the final build's score; with `reward="score"` the score of the current build every step.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any, ClassVar

import numpy as np
from gymnasium import spaces
from pettingzoo import ParallelEnv

from collabzoo.envs.records import ALL
from collabzoo.envs.text_env import check_choice, check_positive_int
from collabzoo.tasks.building.envs.housebuild import HouseBuildEnv
from collabzoo.tasks.building.envs.strbuild import StrBuildEnv
from collabzoo.tasks.building.rewards import housebuild as house_rules
from collabzoo.tasks.building.rewards import strbuild as str_rules

REWARD_MODES = ("delta", "score")
CHANNELS = 4
NOOP, CLEAR, KILL = 0, 1, 2


class BuildingGridEnv(ParallelEnv):
    """A `Box`-observation, `MultiDiscrete`-action view of StrBuild or HouseBuild.

    Args:
        env: the text game to drive (it is copied; the copy plays `steps` turns per episode
            and keeps no text history).
        steps: placements per agent per episode.
        reward: "delta" (score change; the return is the final score) or "score".
    """

    metadata: ClassVar[dict[str, Any]] = {
        "name": "building_grid_v0",
        "render_modes": ["ansi", "human"],
        "is_parallelizable": True,
    }

    def __init__(
        self, env: StrBuildEnv | HouseBuildEnv, *, steps: int = 16, reward: str = "delta"
    ) -> None:
        if not isinstance(env, (StrBuildEnv, HouseBuildEnv)):
            raise TypeError(
                f"BuildingGridEnv wraps a StrBuildEnv or a HouseBuildEnv, got {type(env).__name__}"
            )
        self.steps = check_positive_int("steps", steps)
        self.reward_mode = check_choice("reward", reward, REWARD_MODES)
        self.env = copy.deepcopy(env)
        self.env.horizon = self.steps
        self.env.memory = "none"
        self.house = isinstance(env, HouseBuildEnv)
        self.possible_agents = list(env.possible_agents)
        self.agents: list[str] = []
        self.render_mode = env.render_mode
        items = self.env.items(ALL)
        if self.house:
            self.size = tuple(int(v) for v in np.max([h.size for h in items], axis=0))
            self.blocks = tuple(sorted({b for h in items for b in h.blocks} - {house_rules.AIR}))
            palettes = {a: self.blocks for a in self.possible_agents}
        else:
            width = max(t.target.width for t in items)
            height = max(t.target.height for t in items)
            self.size = (width, height, 1)
            self.blocks = tuple(dict.fromkeys(b for p in self.env.palettes for b in p))
            palettes = dict(zip(self.possible_agents, self.env.palettes, strict=True))
        self.palettes: dict[str, tuple[str, ...]] = {a: tuple(p) for a, p in palettes.items()}
        self._code = {b: i + 1 for i, b in enumerate(self.blocks)}
        self._first_block = 3 if self.house else 2
        shape = (CHANNELS, *self.size)
        high = float(max(len(self.blocks), 2))
        self.observation_spaces = {
            a: spaces.Box(0.0, high, shape, dtype=np.float32) for a in self.possible_agents
        }
        self.state_space = spaces.Box(0.0, high, shape, dtype=np.float32)
        self.action_spaces = {
            a: spaces.MultiDiscrete([*self.size, self._first_block + len(self.palettes[a])])
            for a in self.possible_agents
        }
        self._commands: dict[str, list[str]] = {}
        self._score = 0.0

    def observation_space(self, agent: str) -> spaces.Box:
        return self.observation_spaces[agent]

    def action_space(self, agent: str) -> spaces.MultiDiscrete:
        return self.action_spaces[agent]

    # ----- arrays ---------------------------------------------------------------------------
    def _grids(self) -> np.ndarray:
        """[area, target, built, owner index + 1] over the padded build area."""
        grid = np.zeros((CHANNELS, *self.size), dtype=np.float32)
        item = self.env.item
        outcome = self.env.outcome
        if self.house:
            sx, sy, sz = item.size
            codes = np.array([0] + [self._code[b] for b in item.blocks[1:]], dtype=np.float32)
            grid[0, :sx, :sy, :sz] = 1.0
            grid[1, :sx, :sy, :sz] = codes[item.grid]
            if outcome is not None:
                grid[2, :sx, :sy, :sz] = codes[outcome.world]
                grid[3, :sx, :sy, :sz] = outcome.owner + 1
            return grid
        target = item.target
        w, h = target.width, target.height
        grid[0, :w, :h, 0] = 1.0
        for i in target.cells:
            grid[1, i % w, i // w, 0] = 1.0
        if outcome is not None:
            for i, (block, owner) in enumerate(
                zip(outcome.world.blocks, outcome.world.owners, strict=True)
            ):
                if block != str_rules.AIR:
                    grid[2, i % w, i // w, 0] = self._code[block]
                    grid[3, i % w, i // w, 0] = owner + 1
        return grid

    def _observations(self) -> dict[str, np.ndarray]:
        state = self._grids()
        found = {}
        for index, agent in enumerate(self.possible_agents):
            view = state.copy()
            owner = state[3]
            view[3] = np.where(owner == 0, 0.0, np.where(owner == index + 1, 1.0, 2.0))
            found[agent] = view
        return {a: found[a] for a in self.agents}

    def state(self) -> np.ndarray:
        if self.env.item is None:
            raise RuntimeError("the env has not been reset yet; call reset() first")
        return self._grids()

    # ----- actions --------------------------------------------------------------------------
    def command(self, agent: str, action: Any) -> str | None:
        """The text command an action stands for (None: do nothing)."""
        space = self.action_spaces[agent]
        values = np.asarray(action)
        if values.shape != space.shape or not space.contains(values.astype(space.dtype)):
            raise ValueError(
                f"the action of {agent!r} must be (x, y, z, choice) within {space.nvec.tolist()}, "
                f"got {action!r}"
            )
        x, y, z, choice = (int(v) for v in values)
        if choice == NOOP:
            return None
        if self.house and choice == KILL:
            return "/kill"
        block = (
            house_rules.AIR if choice == CLEAR else self.palettes[agent][choice - self._first_block]
        )
        if self.house:
            return f"/fill {x} {y} {z} {x} {y} {z} {block}"
        return f"/setblock {x} {y} {z} {block}"

    # ----- the PettingZoo contract ----------------------------------------------------------
    def reset(
        self, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[dict[str, np.ndarray], dict[str, dict[str, Any]]]:
        self.env.reset(seed=seed, options=options)
        self.agents = list(self.env.agents)
        self._commands = {a: [] for a in self.agents}
        self._score = 0.0
        infos = {a: {"score": 0.0, "accepted": 0, "rejected": 0} for a in self.agents}
        return self._observations(), infos

    def step(self, actions: Mapping[str, Any]) -> tuple[dict, dict, dict, dict, dict]:
        if not self.agents:
            raise RuntimeError("step() called with no live agents: call reset() first")
        missing = [a for a in self.agents if a not in actions]
        if missing:
            raise ValueError(f"step() needs an action for every live agent; missing {missing}")
        for agent in self.agents:
            command = self.command(agent, actions[agent])
            if command is not None:
                self._commands[agent].append(command)
        answers = {a: "\n".join(self._commands[a]) for a in self.agents}
        _, rewards, terminations, truncations, infos = self.env.step(answers)
        score = float(rewards[self.possible_agents[0]])
        reward = score - self._score if self.reward_mode == "delta" else score
        self._score = score
        live = list(self.agents)
        self.agents = list(self.env.agents)
        observations = self._observations()
        if not self.agents:  # the episode ended: the last grids still go to every agent
            self.agents = live
            observations = self._observations()
            self.agents = []
        return (
            observations,
            dict.fromkeys(live, reward),
            {a: terminations[a] for a in live},
            {a: truncations[a] for a in live},
            {
                a: {
                    "score": score,
                    "accepted": len(infos[a]["parsed"]["accepted"]),
                    "rejected": len(infos[a]["parsed"]["rejected"]),
                }
                for a in live
            },
        )

    def render(self) -> str | None:
        return self.env.render()

    def close(self) -> None:
        self.env.close()

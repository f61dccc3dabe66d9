"""The base of every collabzoo task: a turn-based, simultaneous-move text ParallelEnv.

Each turn every live agent answers its text observation with one whole completion; the team
gets one shared reward; the episode ends for everyone at the horizon. A task subclass supplies
its items, its role prompts and `_play_turn` (score the answers, write the feedback); this base
does the PettingZoo contract, seeding, memory modes, input checks and copying.
"""

from __future__ import annotations

import copy
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar, Generic, TypeVar

import numpy as np
from gymnasium.logger import warn
from gymnasium.utils import seeding
from pettingzoo import ParallelEnv

from collabzoo.envs.records import SPLITS
from collabzoo.envs.text_space import ACTION_MAX_CHARS, OBSERVATION_MAX_CHARS, LLMText
from collabzoo.rewards import RewardBreakdown

Item = TypeVar("Item")
MEMORY_MODES = ("full", "last", "none")
"""How much of its own history an agent sees: every turn, the last one, or only the new prompt."""
RENDER_MODES = ("ansi", "human")
"""With "ansi" `render()` returns the text picture of the episode so far. With "human" every
`reset()`, `step()` and `render()` prints that picture instead and `render()` returns None: a
human mode draws each step without being asked, as in Gymnasium and PettingZoo."""


@dataclass(frozen=True)
class TurnResult:
    """What a task reports for one played turn."""

    breakdown: RewardBreakdown
    parsed: Mapping[str, Mapping[str, Any]]
    """Per agent: what its answer was read into (e.g. accepted / rejected commands)."""
    feedback: Mapping[str, str]
    """Per agent: the task's feedback, the new part of its next observation."""


def check_choice(name: str, value: Any, choices: Sequence[Any]) -> Any:
    if value not in choices:
        raise ValueError(f"{name} must be one of {tuple(choices)}, got {value!r}")
    return value


def check_positive_int(name: str, value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"{name} must be a positive int, got {value!r}")
    return value


class TextCollabEnv(ParallelEnv, Generic[Item]):
    """Base class: subclasses set `metadata`, `roles`, `default_horizon` and the hooks below."""

    metadata: ClassVar[dict[str, Any]] = {
        "name": "collabzoo_text_v0",
        "render_modes": list(RENDER_MODES),
        "is_parallelizable": True,
    }
    roles: ClassVar[tuple[str, ...]] = ()
    default_horizon: ClassVar[int] = 1
    max_reward: ClassVar[float] = math.inf
    """The best team reward one turn can earn (a task constant, shown beside scores)."""
    # Attributes shared, not copied, by copy.deepcopy: immutable task data.
    _shared_on_copy: ClassVar[tuple[str, ...]] = ("_items_by_split",)

    # ----- hooks for subclasses -------------------------------------------------------------
    def _load_items(self, split: str) -> Sequence[Item]:
        raise NotImplementedError

    def _item_id(self, item: Item) -> str:
        raise NotImplementedError

    def _begin_episode(self, item: Item, options: Mapping[str, Any]) -> dict[str, Any]:
        """Draw per-episode randomness from `self.np_random`; return extra reset info."""
        return {}

    def _role_prompt(self, agent: str) -> str:
        raise NotImplementedError

    def _play_turn(self, answers: Mapping[str, str]) -> TurnResult:
        raise NotImplementedError

    def _render_ansi(self) -> str:
        raise NotImplementedError

    # ----- the PettingZoo contract ----------------------------------------------------------
    def __init__(
        self,
        *,
        split: str = "train",
        memory: str = "full",
        horizon: int | None = None,
        render_mode: str | None = None,
    ) -> None:
        self.split = check_choice("split", split, SPLITS)
        self.memory = check_choice("memory", memory, MEMORY_MODES)
        self.horizon = check_positive_int(
            "horizon", self.default_horizon if horizon is None else horizon
        )
        self.render_mode = check_choice(
            "render_mode", render_mode, [None, *self.metadata["render_modes"]]
        )
        self.possible_agents = list(self.roles)
        self.agents: list[str] = []
        self.observation_spaces = {a: LLMText(OBSERVATION_MAX_CHARS) for a in self.roles}
        self.action_spaces = {a: LLMText(ACTION_MAX_CHARS) for a in self.roles}
        self.state_space = LLMText(OBSERVATION_MAX_CHARS)
        self._items_by_split: dict[str, Sequence[Item]] = {}
        self._np_random: np.random.Generator | None = None
        self._np_random_seed: int | None = None
        self.item: Item | None = None
        self.turn = 0
        self._history: dict[str, list[tuple[str, str]]] = {}
        self._prompts: dict[str, str] = {}
        self._observations: dict[str, str] = {}

    def observation_space(self, agent: str) -> LLMText:
        return self.observation_spaces[self._known_agent(agent)]

    def action_space(self, agent: str) -> LLMText:
        return self.action_spaces[self._known_agent(agent)]

    @property
    def np_random(self) -> np.random.Generator:
        if self._np_random is None:  # first use, or the first since reset(seed=...)
            self._np_random, self._np_random_seed = seeding.np_random(self._np_random_seed)
        return self._np_random

    def items(self, split: str | None = None) -> Sequence[Item]:
        """The task items of a split (loaded once, then shared by every copy of the env):
        "train" and "eval" are the reference slices, "all" every item in the dataset's order."""
        split = check_choice("split", self.split if split is None else split, SPLITS)
        if split not in self._items_by_split:
            items = self._load_items(split)
            if not items:
                raise ValueError(f"{type(self).__name__} has no task items in split {split!r}")
            self._items_by_split[split] = items
        return self._items_by_split[split]

    def reset(
        self, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[dict[str, str], dict[str, dict[str, Any]]]:
        if seed is not None:
            # Built on first use: most resets never draw from it, and building one costs more
            # than the rest of a StrBuild reset. The generator is the same either way.
            if not (isinstance(seed, int) and seed >= 0):
                seeding.np_random(seed)  # gymnasium's error for a bad seed, raised here
            self._np_random, self._np_random_seed = None, seed
        options = dict(options or {})
        split = options.get("split", self.split)
        items = self.items(split)
        self.item = items[self._select(items, options.get("task"), split)]
        episode_info = self._begin_episode(self.item, options)
        self.agents = list(self.possible_agents)
        self.turn = 0
        self._history = {a: [] for a in self.agents}
        self._prompts = {a: self._role_prompt(a) for a in self.agents}
        self._observations = dict(self._prompts)
        infos = {
            a: {
                "turn": 0,
                "role": a,
                "task_id": self._item_id(self.item),
                "reward_components": {},
                "metrics": {},
                **episode_info,
            }
            for a in self.agents
        }
        self._show_if_human()
        return dict(self._observations), infos

    def _select(self, items: Sequence[Item], task: Any, split: str | None = None) -> int:
        if task is None:
            return int(self.np_random.integers(len(items)))
        if isinstance(task, (int, np.integer)) and not isinstance(task, bool):
            if not -len(items) <= task < len(items):
                raise ValueError(f"task index {task} out of range: this split has {len(items)}")
            return int(task) % len(items)
        if isinstance(task, str):
            ids = [self._item_id(i) for i in items]
            if task in ids:
                return ids.index(task)
            holder = self._split_holding(task, split)
            if holder is not None:
                raise ValueError(
                    f"task id {task!r} is not in split {split!r} but in split {holder!r}: pass "
                    f"options={{'split': {holder!r}}} to reset (or split={holder!r} to make)"
                )
            shown = ", ".join(ids[:10]) + (", ..." if len(ids) > 10 else "")
            where = "this split" if split is None else f"split {split!r}"
            raise ValueError(
                f"unknown task id {task!r}: no split of {type(self).__name__} holds it; "
                f"{where} has: {shown}"
            )
        raise TypeError(f"options['task'] must be an index or a task id, got {type(task).__name__}")

    def _split_holding(self, task_id: str, asked: str | None) -> str | None:
        """The split other than `asked` that holds `task_id` (a reference split before "all"),
        for the error of an id asked in the wrong split; None when none does (or its items
        cannot be loaded here)."""
        for split in SPLITS:
            if split == asked:
                continue
            try:
                ids = [self._item_id(i) for i in self.items(split)]
            except Exception:  # e.g. the hub is out of reach for that split: no hint
                continue
            if task_id in ids:
                return split
        return None

    def step(
        self, actions: Mapping[str, str]
    ) -> tuple[
        dict[str, str],
        dict[str, float],
        dict[str, bool],
        dict[str, bool],
        dict[str, dict[str, Any]],
    ]:
        self._check_actions(actions)
        answers = {a: actions[a] for a in self.agents}
        result = self._play_turn(answers)
        played = self.turn
        self.turn += 1
        done = self.turn >= self.horizon
        reward = float(result.breakdown.total)
        for agent in self.agents:
            self._history[agent].append((self._prompts[agent], answers[agent]))
            self._prompts[agent] = result.feedback[agent]
            self._observations[agent] = self._compose(agent)
        task_id = self._item_id(self.item)
        infos = {
            a: {
                "turn": played,
                "role": a,
                "task_id": task_id,
                "reward_components": dict(result.breakdown.components),
                "metrics": dict(result.breakdown.metrics),
                "parsed": result.parsed[a],
            }
            for a in self.agents
        }
        observations = {a: self._observations[a] for a in self.agents}
        rewards = dict.fromkeys(self.agents, reward)
        terminations = dict.fromkeys(self.agents, done)
        truncations = dict.fromkeys(self.agents, False)
        if done:
            self.agents = []
        self._show_if_human()
        return observations, rewards, terminations, truncations, infos

    def _check_actions(self, actions: Any) -> None:
        if not self.agents:
            raise RuntimeError(
                "step() called with no live agents: the episode has ended (or reset() was never "
                "called); call reset() to start a new episode"
            )
        if not isinstance(actions, Mapping):
            raise TypeError(
                f"step() takes a dict mapping each live agent to its answer (a str), "
                f"got {type(actions).__name__}"
            )
        missing = [a for a in self.agents if a not in actions]
        unknown = [a for a in actions if a not in self.agents]
        if missing or unknown:
            raise ValueError(
                f"step() needs exactly one action per live agent {self.agents}; "
                f"missing: {missing}, not live or unknown: {unknown}"
            )
        for agent in self.agents:
            if not isinstance(actions[agent], str):
                raise TypeError(
                    f"the action of {agent!r} must be a str (one whole completion), "
                    f"got {type(actions[agent]).__name__}"
                )

    def _compose(self, agent: str) -> str:
        """The agent's observation: its remembered turns, then the newest prompt."""
        past = self._history[agent]
        keep = {"full": len(past), "last": min(1, len(past)), "none": 0}[self.memory]
        first = len(past) - keep
        parts = []
        for t, (prompt, answer) in enumerate(past[first:], start=first + 1):
            parts.append(f"=== Turn {t}: prompt ===\n{prompt}")
            parts.append(f"=== Turn {t}: your answer ===\n{answer}")
        parts.append(f"=== Turn {len(past) + 1}: prompt ===\n{self._prompts[agent]}")
        return "\n\n".join(parts)

    def observe(self, agent: str) -> str:
        """The agent's current observation (the one last returned to it)."""
        self._require_started()
        return self._observations[self._known_agent(agent)]

    def state(self) -> str:
        """The joint view for centralized critics: every agent's observation, labelled."""
        self._require_started()
        return "\n\n".join(
            f"##### {agent} #####\n{self._observations[agent]}" for agent in self.possible_agents
        )

    def render(self) -> str | None:
        if self.render_mode is None:
            warn(
                "render() called without a render_mode; make the env with render_mode='ansi' "
                "(render() returns the picture) or 'human' (it is printed)"
            )
            return None
        self._require_started()
        picture = self._render_ansi()
        if self.render_mode == "human":
            print(picture, flush=True)
            return None
        return picture

    def _show_if_human(self) -> None:
        if self.render_mode == "human":
            self.render()

    def close(self) -> None:
        pass

    def __deepcopy__(self, memo: dict[int, Any]) -> TextCollabEnv[Item]:
        for name in self._shared_on_copy:
            shared = getattr(self, name, None)
            if shared is not None:
                memo[id(shared)] = shared
        clone = type(self).__new__(type(self))
        memo[id(self)] = clone
        for name, value in self.__dict__.items():
            setattr(clone, name, copy.deepcopy(value, memo))
        return clone

    def _known_agent(self, agent: str) -> str:
        if agent not in self.observation_spaces:
            raise KeyError(f"unknown agent {agent!r}; this env's agents are {self.possible_agents}")
        return agent

    def _require_started(self) -> None:
        if self.item is None:
            raise RuntimeError("the env has not been reset yet; call reset() first")

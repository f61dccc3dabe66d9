"""Any collabzoo env as the inputs of CoMLRL's trainers (MAGRPO and its relatives).

CoMLRL does not take an environment: it takes a dataset of task items, one prompt formatter per
agent, a reward function over the agents' completions and, for several turns, an "external
transition" that writes the next prompts. `from_env` builds all four from a ParallelEnv:

    task = from_env("tinycoop", horizon=2)
    trainer = comlrl.trainers.reinforce.MAGRPOTrainer(
        agents=[model_a, model_b], tokenizer=tokenizer, **task.trainer_kwargs(),
        args=MAGRPOConfig(num_turns=task.num_turns, ...))

Each dataset item names one episode: the env reset with its seed and task. The functions replay
that episode on copies of the env (collabzoo envs are deterministic under
`reset(seed=..., options={"task": ..., "split": ...})`), so every reward is the env's own.

CoMLRL's reward function is not told which turn or branch of its rollout tree it scores; only
its external transition sees the history. CoMLRL walks the tree depth first, one node at a time,
so the adapter remembers the branch its transition last produced and scores the next rewards on
it: in training it recognises that node's rewards by their prompt (agent 0's prompt of the
node), in evaluation (where CoMLRL passes the first turn's prompt at every turn) by order. This
needs `joint_mode="aligned"` and CoMLRL's sequential mode (`parallel_training="none"`) when
`num_turns > 1`; single-turn training works in every mode.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from pettingzoo import ParallelEnv

from collabzoo.envs import make

Joint = tuple[str, ...]
MAX_CACHED_STATES = 512


@dataclass
class _State:
    env: ParallelEnv
    observations: dict[str, str]


@dataclass
class _Branch:
    key: str
    history: tuple[Joint, ...]
    first_prompt: str
    matched: bool = False


@dataclass
class ComlrlTask:
    """The dataset, formatters, reward function and external transition of one env.

    `env_steps` counts the env steps the reward function scored, by turn (0-based): a check that
    training really reached every turn.
    """

    env: ParallelEnv
    items: list[dict[str, Any]]
    agents: list[str]
    num_turns: int
    env_steps: dict[int, int] = field(default_factory=dict)
    _by_key: dict[str, dict[str, Any]] = field(default_factory=dict, repr=False)
    _states: dict[tuple[str, tuple[Joint, ...]], _State] = field(default_factory=dict, repr=False)
    _branch: _Branch | None = field(default=None, repr=False)

    def __post_init__(self) -> None:
        self._by_key = {item["prompt"]: item for item in self.items}

    @property
    def num_agents(self) -> int:
        return len(self.agents)

    @property
    def dataset(self) -> Any:
        """The items as a `datasets.Dataset` (what CoMLRL's trainers iterate over)."""
        import datasets

        return datasets.Dataset.from_list(self.items)

    @property
    def formatters(self) -> list[Callable[..., str]]:
        """One formatter per agent: the agent's first observation of the item's episode."""
        return [self._formatter(agent) for agent in self.agents]

    def trainer_kwargs(self) -> dict[str, Any]:
        """Keyword arguments for a CoMLRL trainer: dataset, formatters, reward, transition."""
        return {
            "num_agents": self.num_agents,
            "train_dataset": self.dataset,
            "formatters": self.formatters,
            "reward_func": self.reward_func,
            "external_transition": self.external_transition,
        }

    # ----- replaying episodes ---------------------------------------------------------------
    def _item(self, key: Any) -> dict[str, Any]:
        if key not in self._by_key:
            raise ValueError(f"{key!r} is not the 'prompt' of an item of this task")
        return self._by_key[key]

    def _state(self, item: Mapping[str, Any], history: tuple[Joint, ...]) -> _State:
        cache_key = (item["prompt"], history)
        if cache_key in self._states:
            return self._states[cache_key]
        if not history:
            env = copy.deepcopy(self.env)
            observations, _ = env.reset(
                seed=item["seed"], options={"task": item["task"], "split": item["split"]}
            )
        else:
            env = copy.deepcopy(self._state(item, history[:-1]).env)
            _check_live(env, len(history) - 1, self.num_turns)
            observations = env.step(dict(zip(self.agents, history[-1], strict=True)))[0]
        if len(self._states) >= MAX_CACHED_STATES:
            self._states.clear()
        state = self._states[cache_key] = _State(env, dict(observations))
        return state

    def _formatter(self, agent: str) -> Callable[..., str]:
        def formatter(item: Mapping[str, Any], external_prompts: str | None = None) -> str:
            if external_prompts is not None:
                return external_prompts
            return self._state(self._item(item["prompt"]), ()).observations[agent]

        formatter.__name__ = f"format_{agent}"
        return formatter

    # ----- CoMLRL's callbacks ---------------------------------------------------------------
    def reward_func(
        self,
        *completions: Sequence[str],
        batch_items: Sequence[Mapping[str, Any]] | None = None,
        prompts: Sequence[str] | None = None,
    ) -> list[float]:
        """The env's team reward (the mean over agents) for each joint completion."""
        if len(completions) != self.num_agents:
            raise ValueError(
                f"the reward function takes one list of completions per agent "
                f"({self.num_agents}: {self.agents}), got {len(completions)}"
            )
        if not batch_items:
            raise ValueError("the reward function needs batch_items=[item] to know the episode")
        item = self._item(batch_items[0]["prompt"])
        history = self._history_for(item, prompts)
        state = self._state(item, history)
        _check_live(state.env, len(history), self.num_turns)
        turn = len(history)
        rewards = []
        for joint in zip(*completions, strict=True):
            env = copy.deepcopy(state.env)
            step_rewards = env.step(dict(zip(self.agents, joint, strict=True)))[1]
            rewards.append(sum(step_rewards.values()) / len(step_rewards))
            self.env_steps[turn] = self.env_steps.get(turn, 0) + 1
        return rewards

    def external_transition(
        self,
        prompt: str,
        agent_completions: Sequence[str],
        num_agents: int,
        prompt_history_per_agent: Sequence[Sequence[str]] | None = None,
        response_history_per_agent: Sequence[Sequence[str]] | None = None,
        **_: Any,
    ) -> list[str]:
        """Each agent's next observation after the branch's turns so far."""
        item = self._item(prompt)
        if response_history_per_agent is None:
            raise ValueError("the external transition needs response_history_per_agent")
        if num_agents != self.num_agents or len(response_history_per_agent) != self.num_agents:
            raise ValueError(
                f"this task has {self.num_agents} agents {self.agents}, got num_agents="
                f"{num_agents} and {len(response_history_per_agent)} response histories"
            )
        history = tuple(zip(*response_history_per_agent, strict=True))
        state = self._state(item, history)
        if not state.env.agents:
            raise ValueError(
                f"the episode ended after {len(history)} turns: set CoMLRL's num_turns to at "
                f"most the env's horizon ({self.num_turns})"
            )
        next_prompts = [state.observations[a] for a in self.agents]
        self._branch = _Branch(item["prompt"], history, next_prompts[0])
        return next_prompts

    def _history_for(
        self, item: Mapping[str, Any], prompts: Sequence[str] | None
    ) -> tuple[Joint, ...]:
        branch, self._branch = self._branch, None
        if branch is None or branch.key != item["prompt"]:
            return ()
        prompt = prompts[0] if prompts else None
        if prompt is None:
            raise ValueError(
                "multi-turn rewards need CoMLRL's joint_mode='aligned' (the crossed mode does "
                "not say which prompt a reward belongs to)"
            )
        if prompt == branch.first_prompt:  # training: a node of this branch
            branch.matched = True
            self._branch = branch
            return branch.history
        first_turn = self._state(item, ()).observations[self.agents[0]]
        if not branch.matched and prompt == first_turn:  # evaluation: one reward per node
            return branch.history
        return ()


def _check_live(env: ParallelEnv, turn: int, horizon: int) -> None:
    if not env.agents:
        raise ValueError(
            f"the episode ended before turn {turn + 1}: set CoMLRL's num_turns to at most the "
            f"env's horizon ({horizon})"
        )


def from_env(
    env: str | ParallelEnv,
    *,
    split: str = "train",
    tasks: Iterable[int | str] | None = None,
    seeds: Sequence[int] = (0,),
    **env_kwargs: Any,
) -> ComlrlTask:
    """The CoMLRL inputs of a collabzoo env (a name such as "coophumaneval", or an env made
    already). One item per task of the split and seed; `tasks` picks task ids or indices,
    `env_kwargs` go to `collabzoo.make`."""
    if isinstance(env, str):
        env = make(env, **env_kwargs)
    elif env_kwargs:
        raise TypeError("env_kwargs only apply when env is a name; this env is made already")
    if not isinstance(env, ParallelEnv):
        raise TypeError(f"env must be a collabzoo env name or a ParallelEnv, got {type(env)}")
    if not callable(getattr(env, "items", None)):
        raise TypeError(
            f"{type(env).__name__} has no items(split): from_env needs a collabzoo task env"
        )
    if isinstance(seeds, (int, str)) or not seeds:
        raise ValueError(f"seeds must be a non-empty sequence of ints, got {seeds!r}")
    chosen = range(len(env.items(split))) if tasks is None else list(tasks)
    name = env.metadata.get("name", type(env).__name__)
    items = []
    for task in chosen:
        for seed in seeds:
            _, infos = copy.deepcopy(env).reset(seed=seed, options={"task": task, "split": split})
            task_id = next(iter(infos.values()))["task_id"]
            items.append(
                {
                    "prompt": f"{name} {split} task={task_id} seed={seed}",
                    "task": task_id,
                    "split": split,
                    "seed": int(seed),
                }
            )
    horizon = int(getattr(env, "horizon", 1))
    return ComlrlTask(env=env, items=items, agents=list(env.possible_agents), num_turns=horizon)

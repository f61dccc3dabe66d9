"""A team's ParallelEnv seen by one joint actor: one agent that answers for every role.

`JointActionEnv` wraps any text ParallelEnv. Its one agent, named after the roles joined by "+"
(`alpha+beta`), observes the joint prompt (every live role's observation, or `env.state()`) and
acts with one completion, which `collabzoo.joint_sections` cuts into the roles' answers before
the wrapped env steps. Its reward is the team reward (the mean over the roles that acted); its
info carries the wrapped env's metrics plus `joint_unparsable` (1.0 when no section was found:
every role answered "") and `joint_sections_missing`. Any learner then trains the joint actor
as a one-agent team: MAGRPO on it is CoMLRL's CentralizedMAGRPO.
"""

from __future__ import annotations

import functools
from typing import Any, ClassVar

import gymnasium
from pettingzoo import ParallelEnv

from collabzoo.joint_sections import (
    JOINT_FORMATS,
    fixed_width_prompt,
    parse_joint,
    state_prompt,
    tagged_prompt,
)

JOINT_OBSERVATIONS = ("observations", "state")
TEXT_LIMIT = 1 << 20
"""Length of the wrapper's Text spaces (the wrapped env checks its own)."""


def joint_agent_name(roles: list[str]) -> str:
    """The joint actor's agent name: the roles joined by "+" (a saved team's folder name, so a
    trained joint actor loads as one model for every role)."""
    return "+".join(roles)


class JointActionEnv(ParallelEnv):
    """`env` played by one agent that writes every role's answer (see the module docstring)."""

    metadata: ClassVar[dict[str, Any]] = {"name": "joint_action_v0", "is_parallelizable": True}

    def __init__(
        self,
        env: Any,
        *,
        joint_format: str = "tagged",
        joint_observation: str = "observations",
        section_width: int = 1,
    ) -> None:
        if joint_format not in JOINT_FORMATS:
            raise ValueError(f"joint_format must be one of {JOINT_FORMATS}, got {joint_format!r}")
        if joint_observation not in JOINT_OBSERVATIONS:
            raise ValueError(
                f"joint_observation must be one of {JOINT_OBSERVATIONS}, got {joint_observation!r}"
            )
        if isinstance(section_width, bool) or not isinstance(section_width, int):
            raise TypeError(f"section_width must be an int, got {section_width!r}")
        if section_width < 1:
            raise ValueError(f"section_width must be at least 1, got {section_width}")
        self.env = env
        self.roles = list(env.possible_agents)
        self.joint_format = joint_format
        self.joint_observation = joint_observation
        self.section_width = section_width
        self.possible_agents = [joint_agent_name(self.roles)]
        self.agents: list[str] = []

    @functools.cache  # noqa: B019
    def observation_space(self, agent: str) -> gymnasium.spaces.Space:
        return gymnasium.spaces.Text(TEXT_LIMIT)

    @functools.cache  # noqa: B019
    def action_space(self, agent: str) -> gymnasium.spaces.Space:
        return gymnasium.spaces.Text(TEXT_LIMIT)

    @property
    def name(self) -> str:
        return self.possible_agents[0]

    def prompt(self, observations: dict[str, Any]) -> str:
        """The joint prompt of the live roles' observations (a finished role's is empty)."""
        if self.joint_observation == "state":
            state = self.env.state()
            if not isinstance(state, str):
                raise TypeError(
                    "joint_observation='state' needs an env whose state() is text, got "
                    f"{type(state).__name__}; use joint_observation='observations'"
                )
            return state_prompt(state, len(self.roles))
        texts = []
        for role in self.roles:
            value = observations.get(role, "")
            if not isinstance(value, str):
                raise TypeError(
                    f"a joint actor writes text: role {role!r} observes {type(value).__name__}, "
                    "not text (numeric envs train decentralized policies)"
                )
            texts.append(value)
        if self.joint_format == "fixed_width":
            return fixed_width_prompt(texts, self.section_width)
        return tagged_prompt(texts)

    def reset(self, seed: int | None = None, options: dict | None = None) -> tuple[dict, dict]:
        observations, infos = self.env.reset(seed=seed, options=options)
        self.agents = [self.name] if self.env.agents else []
        return {self.name: self.prompt(dict(observations))}, {self.name: {"roles": infos}}

    def step(self, actions: dict[str, str]) -> tuple[dict, dict, dict, dict, dict]:
        if self.name not in actions:
            raise ValueError(
                f"the joint actor's action is under {self.name!r}, got {sorted(actions)}"
            )
        parse = parse_joint(
            actions[self.name], len(self.roles), self.joint_format, self.section_width
        )
        acting = list(self.env.agents)
        joint = {r: parse.answers[i] for i, r in enumerate(self.roles) if r in acting}
        observations, rewards, terminations, truncations, infos = self.env.step(joint)
        team = sum(float(rewards.get(r, 0.0)) for r in acting) / max(1, len(acting))
        metrics: dict[str, float] = {}
        for info in infos.values():
            found = info.get("metrics") if isinstance(info, dict) else None
            if isinstance(found, dict):
                metrics.update({k: float(v) for k, v in found.items() if _is_number(v)})
                break
        metrics["joint_unparsable"] = float(parse.unparsable)
        metrics["joint_sections_missing"] = float(len(self.roles) - len(parse.found))
        live = [r for r in self.env.agents if not (terminations.get(r) or truncations.get(r))]
        done = not live
        truncated = done and any(truncations.get(r) for r in acting)
        name = self.name
        self.agents = [] if done else [name]
        info = {
            "metrics": metrics,
            "roles": infos,
            "answers": joint,
            "rewards": {r: float(rewards.get(r, 0.0)) for r in acting},
            "rejected": parse.rejected,
        }
        return (
            {name: self.prompt(dict(observations))},
            {name: team},
            {name: done and not truncated},
            {name: truncated},
            {name: info},
        )

    def state(self) -> Any:
        return self.env.state()

    def render(self) -> Any:
        return self.env.render()

    def close(self) -> None:
        self.env.close()


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float))  # bools too, as the rollout tree reads metrics


__all__ = ["JOINT_OBSERVATIONS", "JointActionEnv", "joint_agent_name"]

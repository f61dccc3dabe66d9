"""One model plays the whole task: any collabzoo env as a single-agent Gymnasium env.

Single-agent learners (TRL, any Gymnasium agent) and the `single` benchmark protocol use the
same view. Where the env has the reference single-agent baseline (`single_agent=True`: the code
and writing tasks) the view is that env's one agent. Elsewhere (the building games, TinyCoop)
the observation is every role's observation in one combined prompt, and the action is every
role's answer, each under a `##### role #####` header line. With `role=` the model plays that
one role and `partners` (text-in, text-out callables, e.g. the scripted teams) play the others:
how one agent of a team trains against fixed teammates.

    import gymnasium, collabzoo
    env = gymnasium.make("collabzoo/StrBuild-single-v0")
    observation, info = env.reset(seed=0)
    observation, reward, terminated, truncated, info = env.step(my_llm(observation))
"""

from __future__ import annotations

import inspect
import re
from collections.abc import Callable, Mapping, Sequence
from typing import Any, ClassVar

import gymnasium
from pettingzoo import ParallelEnv

from collabzoo.envs.registry import make, resolve
from collabzoo.envs.text_space import ACTION_MAX_CHARS, OBSERVATION_MAX_CHARS, LLMText

_ROLE_SECTION = re.compile(
    r"^##### Role \d+ of \d+: (?P<role>\S+) #####\n"
    r"(?P<body>.*?)\n##### End of role (?P=role) #####$",
    re.MULTILINE | re.DOTALL,
)


def combined_prompt(observations: Mapping[str, str]) -> str:
    """Every agent's observation in one prompt, for one model that plays every role."""
    roles = list(observations)
    sections = [
        f"##### Role {k} of {len(roles)}: {role} #####\n{observations[role]}\n"
        f"##### End of role {role} #####"
        for k, role in enumerate(roles, start=1)
    ]
    layout = "\n".join(f"##### {role} #####\n({role}'s answer)" for role in roles)
    return (
        f"You play every role of this task yourself: {len(roles)} roles, each with its own "
        "prompt below. Where a prompt mentions a partner or teammate, that is you in another "
        "role.\n\n" + "\n\n".join(sections) + "\n\nAnswer for every role, each answer under "
        "its own header line, in this order and with nothing else:\n" + layout
    )


def split_combined_prompt(prompt: str) -> dict[str, str]:
    """The roles' observations of a combined prompt ({} when it is not one)."""
    return {m.group("role"): m.group("body") for m in _ROLE_SECTION.finditer(prompt)}


def combined_answer(answers: Mapping[str, str]) -> str:
    """Answers in the combined format: a `##### role #####` header line before each."""
    return "\n".join(f"##### {role} #####\n{text}" for role, text in answers.items())


_PROMPT_HEADER = re.compile(r"role \d+ of \d+\s*:\s*(?P<role>\S+)")
_PROMPT_FOOTER = re.compile(r"end of role\s*:?\s*(?P<role>\S+)")


def split_combined_answer(
    text: str, roles: Sequence[str], rejected: list[str] | None = None
) -> tuple[dict[str, str], list[str]]:
    """(each role's answer, the roles whose header was found). A header is a line holding just
    a role's name, in any case, optionally wrapped in `#`, `*`, `:` and spaces (`#####
    first_builder #####`, `**First_Builder:**`), or the prompt's own section header copied back
    (`##### Role 1 of 2: first_builder #####`); a role's answer runs to the next header (or to
    a copied `##### End of role first_builder #####`), blank lines around it dropped. With no
    header at all, the whole text is the first role's answer, as the envs' own single-agent
    modes do without their marker. `rejected`, if given, receives the non-blank lines that
    belong to no role (text before the first header or after an end marker) and the markers."""
    by_name = {role.lower(): role for role in roles}
    answers: dict[str, list[str]] = {}
    current: str | None = None
    outside: list[str] = []
    for line in text.split("\n"):
        name = line.strip().strip("#*: \t").lower()
        copied = _PROMPT_HEADER.fullmatch(name)
        if copied and copied.group("role") in by_name:
            name = copied.group("role")
        footer = _PROMPT_FOOTER.fullmatch(name)
        if name in by_name:
            current = by_name[name]
            answers[current] = []
        elif footer and footer.group("role") in by_name:
            current = None
            outside.append(line)
        elif current is not None:
            answers[current].append(line)
        elif line.strip():
            outside.append(line)
    found = [role for role in roles if role in answers]
    if not found:
        return {role: (text if k == 0 else "") for k, role in enumerate(roles)}, []
    if rejected is not None:
        rejected.extend(outside)
    return {role: "\n".join(answers.get(role, [])).strip("\n") for role in roles}, found


def supports_single_agent(env_class: type) -> bool:
    """Whether the env has the reference one-model baseline (`single_agent=True`)."""
    try:
        return "single_agent" in inspect.signature(env_class).parameters
    except (TypeError, ValueError):
        return False


def single_agent_id(env_id: str) -> str:
    """The Gymnasium id of an env's single-agent view: `collabzoo/StrBuild-single-v0`."""
    name, _, version = env_id.rpartition("-v")
    return f"{name}-single-v{version}"


class SingleAgentView(gymnasium.Env[str, str]):
    """A collabzoo env (a name or a ParallelEnv) played by one agent: every role, or `role`
    with `partners` answering for the other roles.

    The reward is the team reward (the mean of the agents' rewards, which collabzoo envs share);
    `info["roles"]` holds every role's own info and `info["headers_found"]` the roles whose
    header the combined answer had (a missing role answers the empty string).
    """

    metadata: ClassVar[dict[str, Any]] = {"render_modes": ["ansi", "human"]}

    def __init__(
        self,
        env: str | ParallelEnv,
        *,
        role: str | None = None,
        partners: Mapping[str, Callable[[str], str]] | None = None,
        render_mode: str | None = None,
        **env_kwargs: Any,
    ) -> None:
        if isinstance(env, str):
            env_class = resolve(env).load()
            solo = {"single_agent": True} if supports_single_agent(env_class) else {}
            solo = {} if role is not None else solo
            env = make(env, **solo, **env_kwargs, render_mode=render_mode)
        elif env_kwargs:
            raise TypeError("env_kwargs only apply when env is a name; this env is made already")
        if not isinstance(env, ParallelEnv):
            raise TypeError(f"env must be a collabzoo env name or a ParallelEnv, got {type(env)}")
        self.env = env
        self.roles: list[str] = list(env.possible_agents)
        self.partners = dict(partners or {})
        if role is None:
            if self.partners:
                raise ValueError("partners need role=: the role the model plays")
        else:
            if role not in self.roles:
                raise ValueError(f"role must be one of {self.roles}, got {role!r}")
            others = [r for r in self.roles if r != role]
            if sorted(self.partners) != sorted(others) or not all(
                callable(p) for p in self.partners.values()
            ):
                raise ValueError(
                    f"partners must map each other role {others} to a callable (observation "
                    f"-> answer), got {sorted(self.partners)}"
                )
            self.roles = [role]
        self.render_mode = render_mode
        self._last: dict[str, str] = {}
        self.observation_space = LLMText(OBSERVATION_MAX_CHARS)
        self.action_space = LLMText(ACTION_MAX_CHARS)

    def _observe(self, observations: Mapping[str, str]) -> str:
        if len(self.roles) == 1:
            return observations[self.roles[0]]
        return combined_prompt({role: observations[role] for role in self.roles})

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[str, dict[str, Any]]:
        super().reset(seed=seed)
        observations, infos = self.env.reset(seed=seed, options=options)
        self._last = dict(observations)
        first = infos[self.roles[0]]
        return self._observe(observations), {"task_id": first.get("task_id"), "roles": infos}

    def step(self, action: str) -> tuple[str, float, bool, bool, dict[str, Any]]:
        if not isinstance(action, str):
            raise TypeError(f"the action is one whole completion (a str), got {type(action)}")
        if len(self.roles) == 1:
            actions, found = {self.roles[0]: action}, list(self.roles)
            for other, partner in self.partners.items():
                actions[other] = partner(self._last[other])
        else:
            actions, found = split_combined_answer(action, self.roles)
        observations, rewards, terminations, truncations, infos = self.env.step(actions)
        self._last = dict(observations)
        reward = float(sum(rewards.values()) / len(rewards))
        terminated = all(terminations.values())
        truncated = not terminated and any(truncations.values())
        first = infos[self.roles[0]]
        info = {
            "task_id": first.get("task_id"),
            "reward_components": first.get("reward_components", {}),
            "metrics": first.get("metrics", {}),
            "headers_found": found,
            "roles": infos,
        }
        return self._observe(observations), reward, terminated, truncated, info

    def render(self) -> str | None:
        return self.env.render()

    def close(self) -> None:
        self.env.close()

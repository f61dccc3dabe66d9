"""Which agents train at an update, and the settings an agent may have of its own.

With `trainable_agents` T (None: every agent, in the env's order) and `alternate_every` k
(None: no alternation), the agents trained at learner update u (0, 1, ... as `train_step`
counts them, so a resumed run keeps the schedule) are

    trained(u) = T                                 without alternation
    trained(u) = [T[floor(u / k) mod |T|]]         with it (T in the env's agent order)

so with N = 2 agents and k = 3, updates 0-2 train agent 0 and 3-5 agent 1; alternation cycles
through the trainable agents only, the others stay out of every update. MARFT's
`agent_iteration_interval` is the same rule counted in env steps (and, in its token-level
mode, shifted by one agent); here it is counted in updates, which do not depend on the
episodes' lengths.

An agent not trained at an update still acts with its current weights (its rewards are the
team's), but its samples are left out of the batch and out of every advantage statistic, and
its policy's `UpdateGroup` is frozen: no step, so its weights and its AdamW moments stay as
they are. A critic with a backbone of its own (the centralized critic, a separate per-agent
critic) trains every update. Agents that share one policy (one model for several agents) share
its weights: the policy trains when any of its agents does, and an untrained agent on it is only
left out of the batch (Agent Lightning's and verifiers' semantics), which `team_warnings` says.
Alternating between agents that share one policy would never freeze one of them and is refused.

`per_agent` gives an agent its own values of the fields its config lists in `agent_fields`:
the sampling (`max_new_tokens`, `temperature`, `top_p`, `top_k`) and its learning rate.
"""

from __future__ import annotations

import dataclasses
import warnings
from collections.abc import Collection, Mapping, Sequence
from typing import Any

SAMPLING_FIELDS = ("max_new_tokens", "temperature", "top_p", "top_k")
"""The sampling fields every learner lets an agent set for itself (`per_agent`)."""


def check_agent_fields(config: Any) -> None:
    """Refuse `trainable_agents`, `alternate_every` and `per_agent` values no team could
    train with (the agents' names are checked against the env's by `check_team`)."""
    trainable = config.trainable_agents
    if trainable is not None:
        if isinstance(trainable, str) or not isinstance(trainable, Collection):
            raise TypeError(
                f"trainable_agents must be a list (or set) of agent names or None, got "
                f"{trainable!r}"
            )
        if not all(isinstance(agent, str) for agent in trainable):
            raise TypeError(f"trainable_agents must hold agent names, got {list(trainable)!r}")
        if not trainable:
            raise ValueError(
                "trainable_agents is empty: no agent would train; name at least one agent, or "
                "None for every agent (to only evaluate, set max_updates=0)"
            )
    every = config.alternate_every
    if every is not None and (isinstance(every, bool) or not isinstance(every, int) or every < 1):
        raise ValueError(
            f"alternate_every must be a whole number of updates, at least 1, or None, got {every!r}"
        )
    overrides = config.per_agent
    if overrides is None:
        return
    if not isinstance(overrides, Mapping) or not all(
        isinstance(agent, str) and isinstance(values, Mapping)
        for agent, values in overrides.items()
    ):
        raise TypeError(
            'per_agent must map agent names to {field: value}, e.g. {"alpha": '
            f'{{"temperature": 0.8}}}}, got {overrides!r}'
        )
    allowed = type(config).agent_fields
    for agent, values in overrides.items():
        unknown = sorted(set(values) - set(allowed))
        if unknown:
            raise ValueError(
                f"per_agent[{agent!r}] sets {unknown}: an agent may have its own "
                f"{', '.join(allowed)} ({type(config).__name__})"
            )
        try:  # the values pass the same checks as the shared fields they stand for
            dataclasses.replace(config, **values, per_agent=None)
        except (TypeError, ValueError) as error:
            raise ValueError(f"per_agent[{agent!r}]: {error}") from None


def unknown_agents(config: Any, agents: Sequence[str]) -> str | None:
    """The first setting naming an agent the env does not have, as an error message."""
    named = [
        ("trainable_agents", config.trainable_agents or ()),
        ("per_agent", config.per_agent or {}),
    ]
    for field, names in named:
        unknown = sorted(set(names) - set(agents))
        if unknown:
            return (
                f"{field} names {', '.join(map(repr, unknown))}, which the env does not have; "
                f"its agents are {', '.join(agents)}"
            )
    return None


class AgentSchedule:
    """`trained(u)` of the module's docstring, for one team."""

    def __init__(
        self, agents: Sequence[str], trainable: Collection[str] | None, every: int | None
    ) -> None:
        self.trainable = [a for a in agents if trainable is None or a in trainable]
        self.every = every

    def at(self, update: int) -> list[str]:
        """The agents trained at learner update `update`."""
        if self.every is None:
            return list(self.trainable)
        return [self.trainable[(update // self.every) % len(self.trainable)]]


def check_team(config: Any, agents: Sequence[str], policies: Mapping[str, Any]) -> AgentSchedule:
    """The team's schedule, refused where this team cannot follow it; warns of the untrained
    agents that share weights with a trained one (left out of the batch but not frozen)."""
    found = unknown_agents(config, agents)
    if found:
        raise ValueError(found)
    schedule = AgentSchedule(agents, config.trainable_agents, config.alternate_every)
    if config.alternate_every is not None:
        if len(schedule.trainable) < 2:
            raise ValueError(
                f"alternate_every={config.alternate_every} alternates between the trainable "
                f"agents, but only {schedule.trainable} can train: drop alternate_every, or "
                "let more agents train (trainable_agents)"
            )
        for i, agent in enumerate(schedule.trainable):
            for other in schedule.trainable[i + 1 :]:
                if policies[agent] is policies[other]:
                    raise ValueError(
                        f"alternate_every freezes the agents not in turn, but {agent!r} and "
                        f"{other!r} share one model, so training one trains the other: give "
                        "each agent its own model or LoRA adapter (--team separate or lora), or "
                        "train on some agents' samples only with trainable_agents"
                    )
    trained = set(schedule.trainable)
    shared = [
        agent
        for agent in agents
        if agent not in trained and any(policies[t] is policies[agent] for t in trained)
    ]
    if shared:
        warnings.warn(
            f"agents {shared} do not train but share their model with an agent that does: "
            "they are left out of the batch and act with the weights being trained (not "
            "frozen); give them a model or LoRA adapter of their own to freeze them",
            stacklevel=4,
        )
    return schedule


def shared_learning_rate(
    config: Any, policies: Mapping[str, Any], policy: Any, field: str
) -> float:
    """`policy`'s learning rate: config field `field` as its agents have it (`per_agent`).
    Agents sharing one policy share its optimizer, so they must agree."""
    rates = {a: config.agent_value(a, field) for a, p in policies.items() if p is policy}
    if len(set(rates.values())) > 1:
        raise ValueError(
            f"agents {sorted(rates)} share one model, and so one optimizer: their {field} "
            f"cannot differ ({rates}); give each agent its own model or LoRA adapter"
        )
    return next(iter(rates.values()))


__all__ = [
    "SAMPLING_FIELDS",
    "AgentSchedule",
    "check_agent_fields",
    "check_team",
    "shared_learning_rate",
    "unknown_agents",
]

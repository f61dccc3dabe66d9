"""TravelPlanner's scripted teams: the annotated plan split by slot ownership (`oracle`, built
from the env's data: no observation carries the plan) and every owned slot "-" (`naive`)."""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from collabzoo.tasks.travelplanner.rewards import TravelTask
from collabzoo.tasks.travelplanner.rewards.catalog import owned_slots

Policy = Callable[[str], str]
_AGENT = re.compile(r"You are Agent ([01]) ")
_DAYS = re.compile(r"^days=(\d+)$", re.M)
_STATE = re.compile(r"\s*\([^)]*\)")
_DEPARTURE = re.compile(r",\s*Departure Time:.*$", re.S)


def prompt_value(name: str, value: Any) -> str:
    """An annotated value in the form the prompt asks for: a city without its "(State)", a
    transport option without its departure and arrival times."""
    text = "-" if value is None else str(value).strip() or "-"
    if name == "current_city":
        return _STATE.sub("", text).strip()
    if name == "transportation":
        return _DEPARTURE.sub("", text).strip()
    return text


def split_plan(
    plan: Sequence[Mapping[str, Any]], days: int, *, as_prompted: bool = True
) -> tuple[str, str]:
    """Agent 0's and agent 1's answers holding the plan's values of their own slots (strict
    JSON, slots in the plan's order; a day the plan lacks is "-")."""
    rows = {int(r.get("days", r.get("day", 0)) or 0): r for r in plan if r}
    answers = []
    for agent in (0, 1):
        items = []
        for day, name in owned_slots(agent, days):
            raw = rows.get(day, {}).get(name, "-")
            value = prompt_value(name, raw) if as_prompted else str(raw)
            items.append({"day": day, "field": name, "value": value or "-"})
        answers.append(json.dumps({"agent_id": agent, "assignments": items}, ensure_ascii=False))
    return answers[0], answers[1]


def observed_agent(observation: str) -> int:
    found = _AGENT.search(observation)
    if not found:
        raise ValueError("not a TravelPlanner prompt: no 'You are Agent N' line")
    return int(found.group(1))


def observed_days(observation: str) -> int:
    found = _DAYS.search(observation)
    if not found:
        raise ValueError("not a TravelPlanner prompt: no 'days=N' line")
    return int(found.group(1))


def travel_naive(observation: str) -> str:
    """Every owned slot "-": strict and valid, and grounded nowhere."""
    agent, days = observed_agent(observation), observed_days(observation)
    items = [{"day": d, "field": f, "value": "-"} for d, f in owned_slots(agent, days)]
    return json.dumps({"agent_id": agent, "assignments": items})


def travel_oracle(tasks: Iterable[TravelTask]) -> Policy:
    """The annotated plans split by slot ownership, in the prompt's value forms; the query in
    the observation picks the plan."""
    answers: dict[str, tuple[str, str]] = {}
    for task in tasks:
        if task.annotated_plan:
            answers[task.query] = split_plan(task.annotated_plan, task.days)
    if not answers:
        raise ValueError(
            "no scripted oracle for TravelPlanner: its rows have no annotated plans (the "
            "validation and train configs have them, the test config does not)"
        )

    def policy(observation: str) -> str:
        agent = observed_agent(observation)
        for query, pair in answers.items():
            if query in observation:
                return pair[agent]
        raise ValueError("the observation quotes none of the oracle's queries")

    return policy


def env_oracle(env: Any) -> Policy:
    """The oracle of the env it plays, over every query of the env (split "all")."""
    return travel_oracle(env.items("all"))


__all__ = ["env_oracle", "split_plan", "travel_naive", "travel_oracle"]

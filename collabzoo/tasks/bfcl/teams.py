"""BFCL's scripted teams.

`oracle` answers with the possible answers (each argument's first accepted value other than
BFCL's optional marker `""`; an optional argument is left out where it has no other value, where
the function's schema lacks it, or where the reference's true/false/null rewrite would change
it), split between the
agents as the role mode says: the first ceil(n/2) calls to agent_0 and the rest to agent_1 under
`split_by_order` and under the reference's `self_select` (the split the balance term rewards,
which keeps the gold order for the multi-turn reward), odd and even calls under `odd_even`, every
call to both under `same_prompt`. The observation does not hold the answers, so the oracle is
built from the env's rows (`TaskSpec.env_teams`) and finds its row by the schemas and request the
observation quotes. Under `self_select` the two agents' prompts are the same (the reference's), so
of two identical observations the first is answered as agent_0 and the second as agent_1: the
order in which a team asks its agents.

`naive` reads only its observation: each agent calls every listed function once, with no
arguments (names right where a function is wanted, no argument, full overlap).
"""

from __future__ import annotations

import json
import re
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from collabzoo.tasks.bfcl.envs.prompts import (
    OUTPUT_HEADING,
    ROLE_MODES,
    SCHEMAS_HEADING,
    multiturn_prompt,
    native_prompt,
    role_instruction,
)

Policy = Callable[[str], str]
SINGLE_MARK = "You are a single function-calling agent"
_REWRITTEN = re.compile(r"\b(true|false|null)\b", re.I)
"""Words the reference rewrites as Python's inside strings too (case-insensitively; an
optional value written with them is left out, so that the rewrite cannot change it)."""
CATEGORY_MARKS = ("BFCL native category: ", "BFCL multiturn category: ")


def _first(accepted: Any) -> list[Any]:
    """[the first accepted value other than the optional marker], or [] where there is none."""
    values = accepted if isinstance(accepted, list) else [accepted]
    return [_concrete(v) for v in values if v != ""][:1]


def _concrete(value: Any) -> Any:
    """An accepted value as a call writes it: a dict answer (`{key: [accepted]}`) as a dict of
    first accepted values, inside lists too."""
    if isinstance(value, dict):
        return {k: chosen[0] for k, v in value.items() for chosen in [_first(v)] if chosen}
    if isinstance(value, list):
        return [_concrete(v) for v in value]
    return value


def _strings(value: Any) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return [t for k, v in value.items() for t in (*_strings(k), *_strings(v))]
    if isinstance(value, list):
        return [t for v in value for t in _strings(v)]
    return []


def call_source(
    answer: Mapping[str, Mapping[str, Any]], functions: Sequence[Mapping[str, Any]] = ()
) -> str:
    """A possible answer `{name: {parameter: [accepted]}}` as one Python call. An optional
    parameter the function's schema lacks (BFCL's answers have a few) is left out."""
    name, accepted_by_parameter = next(iter(answer.items()))
    schema = next((f for f in functions if f.get("name") == name), None)
    known = (schema or {}).get("parameters", {}).get("properties")
    arguments = []
    for parameter, accepted in (accepted_by_parameter or {}).items():
        optional = isinstance(accepted, list) and "" in accepted
        if known is not None and parameter not in known and optional:
            continue
        chosen = _first(accepted)
        if optional and chosen and any(_REWRITTEN.search(t) for t in _strings(chosen[0])):
            continue  # the reference's true/false/null rewrite would change it
        if chosen:
            arguments.append(f"{parameter}={chosen[0]!r}")
    return f"{name}({', '.join(arguments)})"


def shares(calls: int, mode: str) -> tuple[list[int], list[int]]:
    """Which gold calls (indices) each of the two agents makes under a role mode."""
    if mode not in ROLE_MODES:
        raise ValueError(f"role mode must be one of {ROLE_MODES}, got {mode!r}")
    everything = list(range(calls))
    if mode == "same_prompt":
        return everything, everything
    if mode == "odd_even":
        return everything[0::2], everything[1::2]
    first = (calls + 1) // 2
    return everything[:first], everything[first:]


def _request_key(observation: str) -> str:
    """The category lines, schemas and request the (last) prompt of an observation quotes."""
    start = max(observation.rfind(m) for m in CATEGORY_MARKS)
    end = observation.find(OUTPUT_HEADING, start)
    if start < 0 or end < 0:
        raise ValueError(
            "no BFCL prompt in the observation ('BFCL ... category:' ... 'Output requirements:')"
        )
    return observation[start:end]


def _agent_of(observation: str, mode: str, multiturn: bool) -> int | None:
    """The agent an observation's role text names, None where both agents read the same."""
    if mode in ("odd_even", "split_by_order"):
        for agent in (0, 1):
            if role_instruction(agent, 2, mode, multiturn=multiturn) in observation:
                return agent
        raise ValueError(f"no {mode} role text in the observation")
    return None


def oracle_from_rows(
    rows: Sequence[Mapping[str, Any]], mode: str = "self_select", *, multiturn: bool = False
) -> Policy:
    """The oracle over rows in the hub's form (module docstring)."""
    write = multiturn_prompt if multiturn else native_prompt
    calls: dict[str, list[str]] = {}
    for row in rows:
        key = _request_key(write(row, 0, 2, mode))
        functions = row.get("function", [])
        calls.setdefault(key, [call_source(a, functions) for a in row["ground_truth"]])
    if not calls:
        raise ValueError("the BFCL oracle needs at least one row")
    asked: Counter[str] = Counter()

    def policy(observation: str) -> str:
        key = _request_key(observation)
        if key not in calls:
            raise ValueError("the observation quotes none of the oracle's BFCL rows")
        mine = calls[key]
        if SINGLE_MARK in observation:
            return "\n".join(mine) or "[]"
        agent = _agent_of(observation, mode, multiturn)
        if agent is None:
            agent = asked[key] % 2
            asked[key] += 1
        chosen = [mine[i] for i in shares(len(mine), mode)[agent]]
        return "\n".join(chosen) or "[]"

    return policy


def env_oracle(env: Any) -> Policy:
    """The oracle of the env it plays, over every row of the env (both splits)."""
    rows = [item.record for item in env.items("all")]
    return oracle_from_rows(rows, env.role_mode, multiturn=env.multiturn)


def naive(observation: str) -> str:
    """Every listed function called once with no arguments."""
    start = observation.rfind(SCHEMAS_HEADING)
    if start < 0:
        raise ValueError("no 'Available function schemas:' block in the observation")
    names = []
    for line in observation[start + len(SCHEMAS_HEADING) :].splitlines():
        if not line.strip():
            break
        try:
            names.append(str(json.loads(line)["name"]))
        except (json.JSONDecodeError, KeyError, TypeError):
            continue
    return "\n".join(f"{name}()" for name in names) or "[]"

"""The agents' prompts, word for word the reference's (`native_parallel/formatting.py` and
`multiturn_flat/formatting.py` @178b9dc; tests/test_bfcl.py compares them with the reference's
formatters on the shipped rows), for each role mode."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

ROLE_MODES = ("self_select", "same_prompt", "odd_even", "split_by_order")
"""How the agents divide the calls (`bfcl.role_mode`; the reference's default: self_select)."""

_SELF_SELECT = (
    "Another agent is working on the same {what} in parallel. You do not need to complete "
    "every tool-call intent by yourself, but you should contribute a useful non-empty subset "
    "whenever {needs} tool calls. Choose the intents you are most confident about, avoid trying "
    "to cover everything, and avoid doing nothing unless there is truly no valid tool call for "
    "you to make."
)


def role_instruction(agent: int, agents: int, mode: str, *, multiturn: bool) -> str:
    """What agent `agent` (0-based) of `agents` is asked to do."""
    if mode == "same_prompt":
        if multiturn:
            return (
                "Handle every current-turn tool-call intent you can infer from the provided "
                "dialogue context. Another agent may answer independently; do not mention them."
            )
        return (
            "Handle every tool-call intent you can infer from the user request. Another agent "
            "may answer independently; do not mention them."
        )
    if mode == "self_select":
        if multiturn:
            return _SELF_SELECT.format(what="current turn", needs="this turn needs")
        return _SELF_SELECT.format(what="request", needs="the request needs")
    if mode == "odd_even":
        parity = "odd-numbered" if agent % 2 == 0 else "even-numbered"
        if multiturn:
            return (
                f"Handle the {parity} current-turn tool-call intents, using 1-based ordering "
                "from left to right. Skip intents assigned to the other agent."
            )
        return (
            f"Handle the {parity} tool-call intents in the user's request, using 1-based "
            "ordering from left to right. Skip intents assigned to the other agent."
        )
    if agents != 2:
        what = "current-turn tool-call intents" if multiturn else "ordered tool-call intents"
        return (
            f"You are agent {agent + 1} of {agents}. Split the {what} into contiguous chunks "
            "and handle only your chunk."
        )
    if multiturn:
        if agent == 0:
            return (
                "Handle the first half of the current-turn tool-call intents, in gold-call order "
                "when the request implies an order. If the number of intents is odd, take the "
                "extra middle intent."
            )
        return (
            "Handle the second half of the current-turn tool-call intents, in gold-call order "
            "when the request implies an order. Skip first-half intents."
        )
    if agent == 0:
        return (
            "Handle the first half of the tool-call intents in the user's request, in "
            "user-request order. If the number of intents is odd, take the extra middle intent."
        )
    return (
        "Handle the second half of the tool-call intents in the user's request, in user-request "
        "order. Skip the first-half intents."
    )


def function_docs(functions: Sequence[Mapping[str, Any]]) -> str:
    """One schema per line, keys sorted."""
    return "\n".join(json.dumps(f, ensure_ascii=False, sort_keys=True) for f in functions)


def _turn_line(turn_index: Any) -> str:
    try:
        number = int(turn_index) + 1
        return (
            f"Original multi-turn trajectory turn: {number} "
            f"(zero-based turn_index={int(turn_index)})"
        )
    except (TypeError, ValueError):
        return f"Original multi-turn trajectory turn_index: {turn_index}"


SCHEMAS_HEADING = "Available function schemas:\n"
OUTPUT_HEADING = "\n\nOutput requirements:\n"
EXAMPLE = (
    "Example output format:\n"
    'function_name(arg1="value", arg2=3)\n'
    "another.function_name(flag=True)\n"
)


def native_prompt(
    row: Mapping[str, Any], agent: int, agents: int = 2, mode: str = "self_select"
) -> str:
    """The native parallel prompt of agent `agent` for a row in the hub's form."""
    request = row.get("user_prompt") or row.get("prompt") or ""
    return (
        "You are a decentralized function-calling agent.\n\n"
        f"There are {agents} agents answering independently. You cannot communicate with\n"
        "the other agent and you cannot see their answer. A downstream aggregator will\n"
        "merge the agents' tool calls.\n\n"
        "Your assignment:\n"
        f"{role_instruction(agent, agents, mode, multiturn=False)}\n\n"
        f"BFCL native category: {row.get('official_category', 'unknown')}\n"
        f"Heuristic task type: {row.get('task_type', 'unknown')}\n\n"
        f"{SCHEMAS_HEADING}{function_docs(row.get('function', []))}\n\n"
        f"User request:\n{request}{OUTPUT_HEADING}"
        "- Output only the tool calls assigned to you or selected by you under your assignment.\n"
        "- Use Python-style function-call syntax, one call per line.\n"
        "- Use keyword arguments from the function schemas.\n"
        "- Do not include explanations, markdown, numbering, or reasoning.\n"
        "- If you make no tool call, output exactly: []\n\n"
        f"{EXAMPLE}"
    )


def multiturn_prompt(
    row: Mapping[str, Any], agent: int, agents: int = 2, mode: str = "self_select"
) -> str:
    """The multi-turn flat prompt of agent `agent` for a row in the hub's form."""
    request = row.get("user_prompt") or row.get("prompt") or ""
    return (
        "You are a decentralized function-calling agent for one flattened BFCL multi-turn "
        "step.\n\n"
        f"There are {agents} agents answering independently. You cannot communicate with\n"
        "the other agent and you cannot see their answer. A downstream aggregator will\n"
        "merge the agents' current-turn tool calls.\n\n"
        "Your assignment:\n"
        f"{role_instruction(agent, agents, mode, multiturn=True)}\n\n"
        f"BFCL multiturn category: {row.get('official_category', 'unknown')}\n"
        f"Heuristic task type: {row.get('task_type', 'unknown')}\n"
        f"{_turn_line(row.get('turn_index'))}\n\n"
        f"{SCHEMAS_HEADING}{function_docs(row.get('function', []))}\n\n"
        f"Current flattened dialogue context and user request:\n{request}{OUTPUT_HEADING}"
        "- Output only current-turn tool calls assigned to you or selected by you.\n"
        "- Use Python-style function-call syntax, one call per line.\n"
        "- Preserve the order of the tool calls you emit.\n"
        "- Use keyword arguments from the function schemas.\n"
        "- Do not include explanations, markdown, numbering, or reasoning.\n"
        "- If you make no tool call, output exactly: []\n\n"
        f"{EXAMPLE}"
    )


def single_prompt(row: Mapping[str, Any], *, multiturn: bool) -> str:
    """The reference's single-agent baseline prompt (`baseline/single_agent/eval_single_agent.py`
    of each variant): one agent makes every call."""
    request = row.get("user_prompt") or row.get("prompt") or ""
    metadata = (
        f"BFCL {'multiturn' if multiturn else 'native'} category: "
        f"{row.get('official_category', 'unknown')}\n"
        f"Heuristic task type: {row.get('task_type', 'unknown')}\n"
    )
    if multiturn:
        return (
            "You are a single function-calling agent for one flattened BFCL multi-turn step.\n\n"
            "Handle every current-turn tool-call intent you can infer from the provided\n"
            "dialogue context.\n\n"
            f"{metadata}{_turn_line(row.get('turn_index'))}\n\n"
            f"{SCHEMAS_HEADING}{function_docs(row.get('function', []))}\n\n"
            f"Current flattened dialogue context and user request:\n{request}{OUTPUT_HEADING}"
            "- Output all current-turn tool calls needed to satisfy the request.\n"
            "- Use Python-style function-call syntax, one call per line.\n"
            "- Preserve the order of the tool calls you emit.\n"
            "- Use keyword arguments from the function schemas.\n"
            "- Do not include explanations, markdown, numbering, or reasoning.\n"
            "- If no tool call is needed, output exactly: []\n\n"
            f"{EXAMPLE}"
        )
    return (
        "You are a single function-calling agent.\n\n"
        "Handle every tool-call intent you can infer from the user request.\n\n"
        f"{metadata}\n"
        f"{SCHEMAS_HEADING}{function_docs(row.get('function', []))}\n\n"
        f"User request:\n{request}{OUTPUT_HEADING}"
        "- Output all tool calls needed to satisfy the user request.\n"
        "- Use Python-style function-call syntax, one call per line.\n"
        "- Use keyword arguments from the function schemas.\n"
        "- Do not include explanations, markdown, numbering, or reasoning.\n"
        "- If no tool call is needed, output exactly: []\n\n"
        f"{EXAMPLE}"
    )

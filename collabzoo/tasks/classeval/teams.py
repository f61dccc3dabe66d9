"""ClassEval's scripted teams: the oracle (the benchmark's solution split by the reference's
rule) and a naive team (every assigned method written as its stub with `pass`)."""

from __future__ import annotations

import ast
import re
import textwrap
from collections.abc import Callable, Iterable
from typing import Any

from collabzoo.tasks.classeval.rewards import ClassTask, reading

Policy = Callable[[str], str]
_ROLE = re.compile(r"You are (agent_[01])\b")
_SKELETON = re.compile(r"SKELETON START\n(.*?)\nSKELETON END", re.S)


def _role(observation: str) -> int:
    """0 or 1: the agent named by the first role line of the observation."""
    found = _ROLE.search(observation)
    if found is None:
        raise ValueError("no ClassEval role line ('You are agent_0' or 'You are agent_1')")
    return int(found.group(1)[-1])


def solution_methods(task: ClassTask) -> dict[str, str]:
    """{method to write: its source in the benchmark's solution, from its `def` line (no
    decorators), unindented}."""
    try:
        tree = reading.parse(task.solution)
    except Exception:
        return {}
    lines = task.solution.splitlines()
    node = next(
        (n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == task.class_name), None
    )
    if node is None:
        return {}
    found = {}
    for item in node.body:
        if isinstance(item, ast.FunctionDef) and item.name in task.methods:
            source = "\n".join(lines[item.lineno - 1 : item.end_lineno])
            found[item.name] = textwrap.dedent(source).strip()
    return found


def oracle_answers(task: ClassTask) -> tuple[str, str]:
    """Each agent's answer: its own methods of the solution, as unfenced `def` blocks."""
    methods = solution_methods(task)
    return tuple(  # type: ignore[return-value]
        "\n\n".join(methods[m] for m in task.assigned(agent) if m in methods) for agent in (0, 1)
    )


def classeval_oracle(tasks: Iterable[ClassTask]) -> Policy:
    """A team built from the benchmark's solutions: it finds its task by the skeleton quoted in
    the observation and answers with its own methods of the solution, so it measures the
    reference's rules and the sandbox, not a model. It reaches 6.0 where the solution survives
    the reference's reading and merge (see the family's tests for the tasks where it does
    not: decorated stubs, nested helpers, machine-dependent tests)."""
    answers = {}
    for task in tasks:
        if not task.solution.strip():
            raise ValueError(f"{task.task_id} has no solution: the ClassEval oracle needs one")
        answers[task.shown_skeleton] = oracle_answers(task)
    if not answers:
        raise ValueError("the ClassEval oracle needs at least one task")

    def policy(observation: str) -> str:
        agent = _role(observation)
        for quoted in _SKELETON.findall(observation):
            by_agent = answers.get(quoted.strip()) or answers.get(reading.sanitize(quoted).strip())
            if by_agent is not None:
                return by_agent[agent]
        raise ValueError("the observation quotes none of the oracle's skeletons")

    return policy


def env_oracle(env: Any) -> Policy:
    """The oracle of the env it plays, over every task of the env (the ones in no slice too)."""
    return classeval_oracle(env.items("all"))


def naive(observation: str) -> str:
    """Each assigned method as its skeleton stub with `pass`: every block parses, no test
    that needs real code passes."""
    agent = _role(observation)
    skeletons = _SKELETON.findall(observation)
    if not skeletons:
        raise ValueError("the observation quotes no skeleton")
    task = ClassTask("naive", skeletons[0], "")
    stubs = []
    for method in task.assigned(agent):
        head = re.search(rf"^[ \t]*(def\s+{re.escape(method)}\s*\(.*)$", skeletons[0], re.M)
        if head is not None:
            stubs.append(f"{head.group(1).strip()}\n    pass")
    return "\n\n".join(stubs)

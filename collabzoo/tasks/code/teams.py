"""The code tasks' oracle, built from the dataset's reference solutions (HumanEval has them;
CoopHumanEval and MBPP do not).
"""

from __future__ import annotations

import ast
from collections.abc import Callable, Iterable
from typing import Any

from collabzoo.tasks.code.rewards import CodeProblem, parse_python

Policy = Callable[[str], str]

_CODE_ROLE_LINES = (
    ("aux", "you write a helper function named `aux`"),
    ("main", "Your partner writes a helper function `aux(...)`; you write the function"),
    ("solver", "Solve this coding problem."),
)


def _code_role(observation: str) -> str:
    """aux, main or solver: whichever role line comes first in the observation."""
    found = [(observation.find(line), role) for role, line in _CODE_ROLE_LINES]
    found = [(at, role) for at, role in found if at >= 0]
    if not found:
        raise ValueError("no code-task role line ('you write a helper function named `aux`')")
    return min(found)[1]


def _arguments(function: ast.FunctionDef) -> tuple[str, str]:
    """(the parameter list as written, the call passing each parameter on) of a function."""
    a = function.args
    passed = [p.arg for p in (*a.posonlyargs, *a.args)]
    if a.vararg is not None:
        passed.append(f"*{a.vararg.arg}")
    passed += [f"{p.arg}={p.arg}" for p in a.kwonlyargs]
    if a.kwarg is not None:
        passed.append(f"**{a.kwarg.arg}")
    return ast.unparse(a), ", ".join(passed)


def _oracle_answers(problem: CodeProblem) -> dict[str, str]:
    """The oracle's answer for each role: aux is the reference solution renamed `aux`, main
    hands every argument to it, the solver writes both."""
    tree = parse_python(problem.prompt + problem.solution)
    function = next(
        node
        for node in tree.body
        if isinstance(node, ast.FunctionDef) and node.name == problem.entry_point
    )
    parameters, call = _arguments(function)
    function.name = "aux"
    aux = ast.unparse(function)
    main = f"def {problem.entry_point}({parameters}):\n    return aux({call})"
    return {"aux": aux, "main": main, "solver": f"{aux}\n\n\n{main}"}


def code_oracle(problems: Iterable[CodeProblem]) -> Policy:
    """A team for the code tasks built from the dataset's reference solutions (HumanEval has
    them; CoopHumanEval and MBPP do not). The one scripted policy that reads more than its
    observation: it finds its problem by the statement quoted in the observation and answers
    from the solution it was given, so it measures the scoring and the sandbox, not a model.

    Every test passes (Pass 100%) wherever the reference solution runs in the program the task
    builds (HumanEval/10 calls the prompt's `is_palindrome`, /32 its `poly`, which needs
    prompt_context="definitions"), and main is a thin wrapper around aux by design, so the
    reward is 3.0 of 4.0: the last 1.0 pays for splitting real work between the two functions,
    which no script can do from one reference solution.
    """
    answers: dict[str, dict[str, str]] = {}
    for problem in problems:
        if not problem.solution.strip():
            raise ValueError(
                f"{problem.task_id} has no reference solution: the code oracle needs a dataset "
                "with canonical solutions (HumanEval has them; CoopHumanEval and MBPP do not)"
            )
        answers[problem.prompt.strip()] = _oracle_answers(problem)
    if not answers:
        raise ValueError("the code oracle needs at least one problem")

    def policy(observation: str) -> str:
        role = _code_role(observation)
        for statement, by_role in answers.items():
            if statement in observation:
                return by_role[role]
        raise ValueError("the observation quotes none of the oracle's problems")

    return policy


def env_oracle(env: Any) -> Policy:
    """The oracle of the env it plays: `code_oracle` over every problem of the env, the ones in
    no slice too. Refused, naming the problems, where they have no reference solutions."""
    problems = list(env.items("all"))
    missing = [p.task_id for p in problems if not p.solution.strip()]
    if missing:
        game = str(env.metadata["name"]).rpartition("_v")[0]
        raise ValueError(
            f"no scripted oracle for {game}: its problems have no reference solutions "
            f"({missing[0]} has no reference solution, and {len(missing) - 1} more); "
            "HumanEval's have them"
        )
    return code_oracle(problems)

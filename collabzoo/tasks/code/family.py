"""The code tasks' declaration."""

from __future__ import annotations

from collabzoo.envs.family import Column, Published, TaskColumns, TaskFamily, TaskSpec, poster_rows

ENVS = "collabzoo.tasks.code.envs"
REWARDS = "collabzoo.tasks.code.rewards"
ORACLE = {"oracle": "collabzoo.tasks.code.teams:env_oracle"}
"""The oracle answers from the env's reference solutions, so it is built from the env."""
PASS = (Column("Pass", "pass"),)


def _code_task(name: str, title: str, **declared: object) -> TaskSpec:
    return TaskSpec(
        id=f"collabzoo/{name}-v0",
        entry_point=f"{ENVS}:{name}Env",
        description=(
            f"A helper writer and a main writer solve {name} problems; tests run sandboxed (H=2)."
        ),
        columns=TaskColumns(title, PASS, "Pass"),
        env_teams=ORACLE,
        **declared,  # type: ignore[arg-type]
    )


FAMILY = TaskFamily(
    name="code",
    tasks=(
        _code_task(
            "CoopHumanEval",
            "CoopHumanEval",
            published=Published(
                poster_rows(
                    ("Pass",),
                    "2.5/90/56.3 2.5/88/61.8 2.5/91/62.5 2.3/138/50.0 2.6/177/62.5 "
                    "2.9/191/25.0 2.3/132/74.3 2.5/161/59.1 2.6/166/75.2",
                ),
                "Qwen2.5-Coder-3B + Qwen3-Coder-4B",
                column=2,
            ),
        ),
        _code_task("HumanEval", "HumanEval", reference_solutions=True),
        _code_task("MBPP", "MBPP"),
    ),
    module_paths={
        "collabzoo.envs.code": "collabzoo.tasks.code.envs",
        "collabzoo.rewards.code": REWARDS,
        "collabzoo.rewards.code_reference_reading": f"{REWARDS}.reference_reading",
    },
)

"""ClassEval's declaration."""

from __future__ import annotations

from collabzoo.envs.family import Column, TaskColumns, TaskFamily, TaskSpec

ENVS = "collabzoo.tasks.classeval.envs"
TEAMS = "collabzoo.tasks.classeval.teams"

FAMILY = TaskFamily(
    name="classeval",
    tasks=(
        TaskSpec(
            id="collabzoo/ClassEval-v0",
            entry_point=f"{ENVS}:ClassEvalEnv",
            description=(
                "Two programmers complete a Python class, its methods split by parameter "
                "count; ClassEval's unittest suites run sandboxed (H=2)."
            ),
            columns=TaskColumns(
                "ClassEval",
                (Column("Class pass", "class_pass"), Column("Method pass", "method_pass")),
                "Class pass",
            ),
            teams={"naive": f"{TEAMS}:naive"},
            env_teams={"oracle": f"{TEAMS}:env_oracle"},
            reference_solutions=True,
            sandbox_packages="collabzoo.tasks.classeval.rewards.harness:SANDBOX_PACKAGES",
        ),
    ),
)
"""ClassEval: a class written by two agents, tested in the sandbox (the benchmark's data comes
from the hub or a local copy, and is not shipped with the package)."""

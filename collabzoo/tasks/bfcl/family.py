"""BFCL's declaration."""

from __future__ import annotations

from collabzoo.envs.family import Column, TaskColumns, TaskFamily, TaskSpec

ENVS = "collabzoo.tasks.bfcl.envs"
TEAMS = "collabzoo.tasks.bfcl.teams"
COLUMNS = (Column("AST match", "ast_match"), Column("Exact", "exact_match"))
"""BFCL's own metric (its AST checker on the team's calls) and the reference reward's exact-match
rate (the one its logger and single-agent baseline report)."""
DEMO_METRICS = ("ast_match", "exact_match", "function_f1", "argument_match")

FAMILY = TaskFamily(
    name="bfcl",
    tasks=(
        TaskSpec(
            id="collabzoo/BFCL-v0",
            entry_point=f"{ENVS}:BFCLEnv",
            description=(
                "Two agents each make the function calls they choose for one BFCL v4 parallel "
                "request; their union is matched against the possible answers (H=1)."
            ),
            columns=TaskColumns("BFCL", COLUMNS, "AST match"),
            teams={"naive": f"{TEAMS}:naive"},
            env_teams={"oracle": f"{TEAMS}:env_oracle"},
            reference_solutions=True,
            default_data="OpenMLRL/BFCL-V4-Parallel-Native",
            demo_metrics=DEMO_METRICS,
        ),
        TaskSpec(
            id="collabzoo/BFCLMultiTurn-v0",
            entry_point=f"{ENVS}:BFCLMultiTurnEnv",
            description=(
                "One step of a BFCL v4 multi-turn trajectory: agent_0's calls then agent_1's, "
                "in order, against the step's gold calls (H=1)."
            ),
            columns=TaskColumns("BFCL multi-turn", COLUMNS, "AST match"),
            teams={"naive": f"{TEAMS}:naive"},
            env_teams={"oracle": f"{TEAMS}:env_oracle"},
            reference_solutions=True,
            default_data="OpenMLRL/BFCL-V4-Parallel-Multi-Turn",
            demo_metrics=DEMO_METRICS,
        ),
    ),
)
"""The rows are BFCL v4's (Apache-2.0) as OpenMLRL's hub sets hold them; none ship with the
package (`offline=None`): pass `data=` a local copy, or BFCL's own data folder for the offline
build, labelled as such."""

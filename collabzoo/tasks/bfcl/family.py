"""BFCL's declaration."""

from __future__ import annotations

from collabzoo.envs.family import Column, TaskColumns, TaskFamily, TaskSpec

ENVS = "collabzoo.tasks.bfcl.envs"
TEAMS = "collabzoo.tasks.bfcl.teams"
COLUMNS = (Column("AST match", "ast_match"), Column("Exact", "exact_match"))
"""BFCL's own metric (its AST checker on the team's calls) and the reference reward's exact-match
rate (the one its logger and single-agent baseline report)."""
NATIVE_CATEGORIES = ("parallel", "parallel_multiple", "live_parallel", "live_parallel_multiple")
MULTITURN_STEPS = ("base", "long_context", "miss_func", "miss_param")


def per_category(categories: dict[str, str]) -> tuple[Column, ...]:
    """BFCL's AST match per category, as BFCL reports it: a row's metric `ast_match_<category>`
    exists only on that category's episodes, so each column's mean is over them alone; the
    leaderboard shows the categories a run played."""
    return tuple(
        Column(f"AST {shown}", f"ast_match_{category}", subset=f"{category} rows")
        for shown, category in categories.items()
    )


NATIVE_COLUMNS = COLUMNS + per_category({c: c for c in NATIVE_CATEGORIES})
MULTITURN_COLUMNS = COLUMNS + per_category({s: f"multi_turn_{s}_step" for s in MULTITURN_STEPS})
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
            columns=TaskColumns("BFCL", NATIVE_COLUMNS, "AST match"),
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
            columns=TaskColumns("BFCL multi-turn", MULTITURN_COLUMNS, "AST match"),
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

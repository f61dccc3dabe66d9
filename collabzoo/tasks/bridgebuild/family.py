"""BridgeBuild's declaration."""

from __future__ import annotations

from collabzoo.envs.family import Column, TaskColumns, TaskFamily, TaskSpec

TEAMS = "collabzoo.tasks.bridgebuild.teams"

FAMILY = TaskFamily(
    name="bridgebuild",
    tasks=(
        TaskSpec(
            id="collabzoo/BridgeBuild-v0",
            entry_point="collabzoo.tasks.bridgebuild.envs:BridgeBuildEnv",
            description=(
                "Two workers under fog of war probe hidden pillars, message each other and fill "
                "water to link S to T, shunning fake pillars (H=4)."
            ),
            columns=TaskColumns(
                "BridgeBuild",
                (
                    Column("Connected", "connected"),
                    Column("Gap closed", "gap_reduced"),
                    Column(
                        "Fake hits", "fake_pillar_hits", higher_is_better=False, scale=1, unit=""
                    ),
                    Column("Probes", "probes", higher_is_better=False, scale=1, unit=""),
                    Column(
                        "Msg tokens", "message_tokens", higher_is_better=False, scale=1, unit=""
                    ),
                ),
                "Connected",
            ),
            teams={
                "heuristic": f"{TEAMS}:bridgebuild_heuristic",
                "naive": f"{TEAMS}:bridgebuild_naive",
            },
            env_teams={"oracle": f"{TEAMS}:env_oracle"},
            reference_solutions=True,  # the reference maps carry every pillar's type
            offline={},
            default_data="reference maps",
            demo_metrics=("connected", "gap_reduced", "fake_pillar_hits"),
            picture="collabzoo.tasks.bridgebuild.envs:picture",
        ),
    ),
)

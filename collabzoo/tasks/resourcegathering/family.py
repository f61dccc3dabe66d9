"""ResourceGathering's declaration."""

from __future__ import annotations

from collabzoo.envs.family import Column, TaskColumns, TaskFamily, TaskSpec

ENVS = "collabzoo.tasks.resourcegathering.envs"
TEAMS = "collabzoo.tasks.resourcegathering.teams"

FAMILY = TaskFamily(
    name="resourcegathering",
    tasks=(
        TaskSpec(
            id="collabzoo/ResourceGathering-v0",
            entry_point=f"{ENVS}:ResourceGatheringEnv",
            description=(
                "A wood worker and a stone-and-iron worker gather a team goal under fog of war, "
                "telling each other where the other's resources are (H=4)."
            ),
            columns=TaskColumns(
                "ResourceGathering",
                (
                    Column("Progress", "progress_score"),
                    Column("Completion", "success"),
                    Column(
                        "Wasted",
                        "wasted_extractions_so_far",
                        higher_is_better=False,
                        scale=1.0,
                        unit="",
                    ),
                    Column("Useful facts", "useful_comm_items_so_far", scale=1.0, unit=""),
                ),
                "Progress",
            ),
            teams={
                "oracle": f"{TEAMS}:resourcegathering_oracle",
                "naive": f"{TEAMS}:resourcegathering_naive",
            },
            offline={},
            default_data="reference maps",
            demo_metrics=("progress_score", "success", "wasted_extractions_so_far"),
            picture=f"{ENVS}:map_svg",
        ),
    ),
)

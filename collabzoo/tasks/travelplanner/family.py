"""TravelPlanner's declaration."""

from __future__ import annotations

from collabzoo.envs.family import Column, TaskColumns, TaskFamily, TaskSpec

FAMILY = TaskFamily(
    name="travelplanner",
    tasks=(
        TaskSpec(
            id="collabzoo/TravelPlanner-v0",
            entry_point="collabzoo.tasks.travelplanner.envs:TravelPlannerEnv",
            description=(
                "A logistics agent (city, transport, lodging) and an experience agent (meals, "
                "attractions) fill one itinerary's slots; a fixed merger builds the plan (H=1)."
            ),
            columns=TaskColumns(
                "TravelPlanner",
                (
                    Column("Delivery", "delivery"),
                    Column("Commonsense (micro)", "commonsense_micro"),
                    Column("Commonsense (macro)", "commonsense_macro"),
                    Column("Hard (micro)", "hard_micro"),
                    Column("Hard (macro)", "hard_macro"),
                    Column("Final pass", "final_pass"),
                ),
                plotted="Final pass",
            ),
            teams={"naive": "collabzoo.tasks.travelplanner.teams:travel_naive"},
            env_teams={"oracle": "collabzoo.tasks.travelplanner.teams:env_oracle"},
            reference_solutions=True,
            offline=None,
            default_data="osunlp/TravelPlanner validation (hub)",
            demo_metrics=("final_pass", "commonsense_micro", "hard_micro"),
        ),
    ),
)

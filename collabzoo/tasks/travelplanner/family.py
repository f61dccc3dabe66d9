"""TravelPlanner's declaration."""

from __future__ import annotations

from collabzoo.envs.family import Column, TaskColumns, TaskFamily, TaskSpec

COMMONSENSE = 8
"""The benchmark's commonsense checks per query (`rewards.benchmark.COMMONSENSE`; a test holds
the two equal). Its micro rates are pooled over a split's checks, as `benchmark.pooled_rates`
does: the commonsense rate over 8 per query (a plain mean, every query having 8), the hard one
over each query's `hard_applicable` constraints, which differ by level."""

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
                    Column("Commonsense (micro)", "commonsense_micro", pooled_over=COMMONSENSE),
                    Column("Commonsense (macro)", "commonsense_macro"),
                    Column("Hard (micro)", "hard_micro", pooled_over="hard_applicable"),
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

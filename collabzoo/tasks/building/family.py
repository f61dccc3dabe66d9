"""The building games' declaration."""

from __future__ import annotations

from collabzoo.envs.family import Column, Published, TaskColumns, TaskFamily, TaskSpec, poster_rows

MODELS = "Qwen3-4B-Instruct-2507 + Qwen2.5-3B-Instruct"
TEAMS = "collabzoo.tasks.building.teams"

FAMILY = TaskFamily(
    name="building",
    tasks=(
        TaskSpec(
            id="collabzoo/StrBuild-v0",
            entry_point="collabzoo.tasks.building.envs.strbuild:StrBuildEnv",
            description=(
                "Two builders with disjoint palettes draw a word in blocks, no same-texture "
                "neighbours (H=4)."
            ),
            columns=TaskColumns(
                "StrBuild",
                (
                    Column("Adj", "adjacency", higher_is_better=False, defined_by="touching_pairs"),
                    Column("IoU", "iou"),
                ),
                "IoU",
            ),
            published=Published(
                poster_rows(
                    ("Adj", "IoU"),
                    "10.6/427/0.9/36.6 10.3/411/0.4/46.1 10.3/413/0.4/49.8 9.4/232/15.7/5.9 "
                    "9.8/246/12.9/18.7 10.3/236/16.2/6.5 9.4/226/13.3/50.6 9.3/182/7.6/44.6 "
                    "9.5/239/7.3/68.5",
                ),
                MODELS,
                column=3,
            ),
            teams={"oracle": f"{TEAMS}:strbuild_oracle", "naive": f"{TEAMS}:strbuild_naive"},
            noisy_oracle=True,
            offline={},
            default_data="reference words",
            demo_metrics=("iou", "adjacency", "coverage"),
        ),
        TaskSpec(
            id="collabzoo/HouseBuild-v0",
            entry_point="collabzoo.tasks.building.envs.housebuild:HouseBuildEnv",
            description=(
                "Two builders raise a 3-D house under per-builder block caps while spiders "
                "attack (H=4)."
            ),
            columns=TaskColumns("HouseBuild", (Column("HP", "hp"), Column("IoU", "iou")), "IoU"),
            published=Published(
                poster_rows(
                    ("HP", "IoU"),
                    "22.6/1016/99.6/43.2 22.0/890/100.0/54.6 22.1/904/100.0/55.9 "
                    "19.2/502/21.8/46.1 20.3/488/30.6/41.3 21.0/510/27.6/38.1 "
                    "19.2/446/80.2/50.9 19.4/470/43.8/46.8 19.0/442/86.4/52.7",
                ),
                MODELS,
                column=4,
            ),
            teams={"oracle": f"{TEAMS}:housebuild_oracle", "naive": f"{TEAMS}:housebuild_naive"},
            noisy_oracle=True,
            offline={},
            default_data="generated houses",
            demo_metrics=("iou", "hp", "match"),
        ),
    ),
    module_paths={
        "collabzoo.envs.strbuild": "collabzoo.tasks.building.envs.strbuild",
        "collabzoo.envs.housebuild": "collabzoo.tasks.building.envs.housebuild",
        "collabzoo.envs.building_prompts": "collabzoo.tasks.building.envs.prompts",
        "collabzoo.envs.house_generator": "collabzoo.tasks.building.envs.house_generator",
        "collabzoo.envs.letter_font": "collabzoo.tasks.building.envs.letter_font",
        "collabzoo.envs.numeric": "collabzoo.tasks.building.numeric",
        "collabzoo.rewards.strbuild": "collabzoo.tasks.building.rewards.strbuild",
        "collabzoo.rewards.housebuild": "collabzoo.tasks.building.rewards.housebuild",
    },
)

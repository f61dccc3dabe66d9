"""TinyCoop's declaration."""

from __future__ import annotations

from collabzoo.envs.family import Column, TaskColumns, TaskFamily, TaskSpec

FAMILY = TaskFamily(
    name="tinycoop",
    tasks=(
        TaskSpec(
            id="collabzoo/TinyCoop-v0",
            entry_point="collabzoo.tasks.tinycoop.envs:TinyCoopEnv",
            description=(
                "Two agents win a turn iff alpha's first character has the signal's parity and "
                "beta's not."
            ),
            columns=TaskColumns("TinyCoop", (Column("Win", "win_rate"),), "Win"),
            teams={"oracle": "collabzoo.tasks.tinycoop.teams:tinycoop_oracle"},
            offline={},
            default_data="all signal sequences",
        ),
    ),
    module_paths={
        "collabzoo.envs.tinycoop": "collabzoo.tasks.tinycoop.envs",
        "collabzoo.rewards.tinycoop": "collabzoo.tasks.tinycoop.rewards",
    },
)

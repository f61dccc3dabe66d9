"""The paper's leaderboard columns, per task: Time, Cost and the task's score columns.

Time is wall-clock seconds per episode, Cost is generated tokens per episode (summed over
agents, turns and protocol rounds), and each score column is an env metric of the episode's
LAST turn (the team's final answer) times 100, as the task declares it (`TaskSpec.columns`):
Score = `score` (writing), Pass = `pass` (code), Adj = `adjacency` and IoU = `iou` (StrBuild),
HP = `hp` and IoU = `iou` (HouseBuild). StrBuild's Adj is undefined for a build with no two
touching blocks (an empty wall): the reference's reward counts it as 0, its best value, but the
column leaves such episodes out of its mean and says how many it kept, so an empty wall never
reads as perfect. A column about a subset of episodes (`Column.subset`: BFCL's AST match of
one category, a metric only that category's episodes report) is averaged over that subset
alone, and a table shows only the subsets its runs played. An env that declares no columns gets
one, Reward %: the last turn's team reward over the env's `max_reward`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from collabzoo.envs import declared, families
from collabzoo.envs.family import REWARD, Column, TaskColumns

TIME = "Time"
COST = "Cost"


def board_order() -> list[str]:
    """The declared tasks' short names in the leaderboard's order: the paper's (each family at
    its first task's column in the published table), a family's other tasks beside it, then
    the families the paper does not report, in registration order."""
    ranked = []
    for index, family in enumerate(families()):
        columns = [s.published.column for s in family.tasks if s.published is not None]
        ranked.append(((min(columns) if columns else float("inf"), index), family))
    return [s.short_name for _, family in sorted(ranked, key=lambda r: r[0]) for s in family.tasks]


def tasks() -> dict[str, TaskColumns]:
    """By env short name, in the leaderboard's order: each declared task's columns."""
    return {name: declared(name).columns for name in board_order()}  # type: ignore[union-attr]


def task_columns(short_name: str, title: str | None = None) -> TaskColumns:
    """The columns of a task; an env that declares none gets Reward %."""
    spec = declared(short_name)
    if spec is not None:
        return spec.columns
    return TaskColumns(title or short_name, (REWARD,), REWARD.name)


def score_values(
    columns: Sequence[Column], final_metrics: Mapping[str, Any], reward_fraction: float
) -> dict[str, float]:
    """One episode's value in each score column."""
    values = {}
    for column in columns:
        if column is REWARD:
            values[column.name] = reward_fraction * column.scale
        else:
            values[column.name] = column.value(final_metrics)
    return values


def __getattr__(name: str) -> Any:
    """`TASKS`, the table this module held before the tasks declared their columns."""
    if name == "TASKS":
        return tasks()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = ["COST", "REWARD", "TIME", "Column", "TaskColumns", "score_values", "task_columns"]

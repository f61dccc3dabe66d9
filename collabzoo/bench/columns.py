"""The paper's leaderboard columns, per task: Time, Cost and the task's score columns.

Time is wall-clock seconds per episode, Cost is generated tokens per episode (summed over
agents, turns and protocol rounds), and each score column is an env metric of the episode's
LAST turn (the team's final answer) times 100: Score = `score` (writing), Pass = `pass`
(code), Adj = `adjacency` and IoU = `iou` (StrBuild), HP = `hp` and IoU = `iou` (HouseBuild).
StrBuild's Adj is undefined for a build with no two touching blocks (an empty wall): the
reference's reward counts it as 0, its best value, but the column leaves such episodes out of
its mean and says how many it kept, so an empty wall never reads as perfect.
An env this table does not know gets one column, Reward %: the last turn's team reward over
the env's `max_reward`.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Column:
    """One score column: which metric of the last turn, shown as a percentage."""

    name: str
    metric: str
    higher_is_better: bool = True
    scale: float = 100.0
    defined_by: str | None = None
    """A metric that must be positive for this one to mean anything (e.g. StrBuild's Adj needs
    touching blocks): where it is 0 the episode's value is NaN, left out of the mean, and the
    leaderboard says over how many episodes the column was defined."""

    def value(self, final_metrics: Mapping[str, Any]) -> float:
        if self.defined_by is not None:
            guard = final_metrics.get(self.defined_by)
            if isinstance(guard, (int, float)) and not isinstance(guard, bool) and guard <= 0:
                return math.nan
        raw = final_metrics.get(self.metric)
        if isinstance(raw, bool) or not isinstance(raw, (int, float)):
            return math.nan
        return float(raw) * self.scale


@dataclass(frozen=True)
class TaskColumns:
    """How a task appears on the leaderboard."""

    title: str
    columns: tuple[Column, ...]
    plotted: str
    """The score column drawn against Cost in the plot."""


TIME = "Time"
COST = "Cost"
REWARD = Column("Reward", "_reward_fraction")
"""The fallback column: filled from the reward, not from a metric."""

TASKS: dict[str, TaskColumns] = {
    "tldr": TaskColumns("TLDR", (Column("Score", "score"),), "Score"),
    "arxiv": TaskColumns("arXiv", (Column("Score", "score"),), "Score"),
    "coophumaneval": TaskColumns("CoopHumanEval", (Column("Pass", "pass"),), "Pass"),
    "humaneval": TaskColumns("HumanEval", (Column("Pass", "pass"),), "Pass"),
    "mbpp": TaskColumns("MBPP", (Column("Pass", "pass"),), "Pass"),
    "strbuild": TaskColumns(
        "StrBuild",
        (
            Column("Adj", "adjacency", higher_is_better=False, defined_by="touching_pairs"),
            Column("IoU", "iou"),
        ),
        "IoU",
    ),
    "housebuild": TaskColumns("HouseBuild", (Column("HP", "hp"), Column("IoU", "iou")), "IoU"),
    "tinycoop": TaskColumns("TinyCoop", (Column("Win", "win_rate"),), "Win"),
}
"""By env short name, in the paper's order (then the tasks the paper does not report)."""


def task_columns(short_name: str, title: str | None = None) -> TaskColumns:
    """The columns of a task; unknown envs get Reward %."""
    return TASKS.get(short_name) or TaskColumns(title or short_name, (REWARD,), REWARD.name)


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

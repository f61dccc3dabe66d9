"""What a task family declares, so that the rest of the suite needs no table of tasks.

A family (`collabzoo/tasks/<family>/`) holds its envs, prompts, parsing, pure reward functions,
scripted teams and data loading, and one `TaskFamily` in its `family.py`. The bench, the CLI,
the leaderboard, export, rescore and the docs read a task's columns, published rows, scripted
teams, offline data and demo metrics from its `TaskSpec`, never from a list of task names.

Everything the suite loads from a family is named by a "module:attribute" string, like a
Gymnasium entry point: declaring a family imports nothing of its envs, rewards or teams, and a
family's modules may import this one without a cycle. A family declared in a script or a
notebook may give the objects themselves instead.
"""

from __future__ import annotations

import importlib
import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

Policy = Callable[[str], str]
"""A scripted text policy: observation in, answer out."""


@dataclass(frozen=True)
class Column:
    """One score column of the leaderboard: which metric of the last turn, shown as a
    percentage, and how its episodes combine (a mean over them, or a pooled rate)."""

    name: str
    metric: str
    higher_is_better: bool = True
    scale: float = 100.0
    unit: str = "%"
    """Shown after the name in the header: "%" for a rate (scale 100), "" for a count or a mean
    read as it is (scale 1)."""
    defined_by: str | None = None
    """A metric that must be positive for this one to mean anything (e.g. StrBuild's Adj needs
    touching blocks): where it is 0 the episode's value is NaN, left out of the mean, and the
    leaderboard says over how many episodes the column was defined."""
    subset: str = ""
    """The episodes the metric is about, for a metric only they report (e.g. "parallel rows"
    for BFCL's `ast_match_parallel`): the others have no value, so the mean is over the subset
    alone, never with the others counted as 0; the leaderboard says over how many of the run's
    episodes, and leaves the column out of a table where no row has any."""
    pooled_over: str | float | None = None
    """For a rate of checks (passed / checked in each episode): the episode's number of checks,
    a metric's name (TravelPlanner's `hard_applicable`) or a number every episode shares (its 8
    commonsense checks). The column is then the rate pooled over the run, as a benchmark reports
    a micro rate: all passes over all checks, i.e. the mean of the episodes' rates weighted by
    their checks, not a mean that weighs a query of one check like one of four. An episode with
    no checks (or no such metric) has no rate and is left out."""

    def __post_init__(self) -> None:
        checks = self.pooled_over
        if checks is None or isinstance(checks, str):
            return
        if isinstance(checks, bool) or not isinstance(checks, (int, float)) or not checks > 0:
            raise ValueError(
                f"column {self.name!r}: pooled_over must be a metric's name or a positive "
                f"number of checks per episode, got {checks!r}"
            )

    def weight(self, final_metrics: Mapping[str, Any]) -> float:
        """The episode's weight in the column's mean: its checks for a pooled column (NaN where
        it has none), else 1."""
        if self.pooled_over is None:
            return 1.0
        raw = (
            final_metrics.get(self.pooled_over)
            if isinstance(self.pooled_over, str)
            else self.pooled_over
        )
        if isinstance(raw, bool) or not isinstance(raw, (int, float)):
            return math.nan
        return float(raw) if math.isfinite(raw) and raw > 0 else math.nan

    def value(self, final_metrics: Mapping[str, Any]) -> float:
        if self.defined_by is not None:
            guard = final_metrics.get(self.defined_by)
            if isinstance(guard, (int, float)) and not isinstance(guard, bool) and guard <= 0:
                return math.nan
        raw = final_metrics.get(self.metric)
        if isinstance(raw, bool) or not isinstance(raw, (int, float)):
            return math.nan
        if not math.isfinite(self.weight(final_metrics)):
            return math.nan
        return float(raw) * self.scale


@dataclass(frozen=True)
class TaskColumns:
    """How a task appears on the leaderboard."""

    title: str
    columns: tuple[Column, ...]
    plotted: str
    """The score column drawn against Cost in the plot."""


REWARD = Column("Reward", "_reward_fraction")
"""The column of a task that declares none: the last turn's team reward over `max_reward`."""


# ----- published rows ------------------------------------------------------------------------
POSTER = 'poster of "Learning Decentralized LLM Collaboration with Multi-Agent Actor Critic"'
"""Where the published rows come from (tasks.md, "Published numbers")."""

POSTER_METHODS = {
    "Raw model": "single",
    "GRPO (1 agent)": "trained, 1 agent",
    "AC (1 agent)": "trained, 1 agent",
    "Parallel": "parallel",
    "Pipeline": "pipeline",
    "Discussion": "discussion",
    "MAGRPO": "trained",
    "CoLLM-DC (IAC)": "trained",
    "CoLLM-CC": "trained",
}
"""The poster's methods in its order, each in this suite's protocol names where it is one."""


@dataclass(frozen=True)
class PublishedRow:
    """One published method on one task: Time in seconds and Cost in tokens per episode,
    scores in percent, no intervals."""

    method: str
    time: float
    cost: float
    scores: dict[str, float]

    @property
    def protocol(self) -> str:
        return POSTER_METHODS[self.method]


@dataclass(frozen=True)
class Published:
    """A task's published rows, the models behind them, and the task's column in the source's
    table (the leaderboard shows tasks in that order)."""

    rows: tuple[PublishedRow, ...]
    models: str
    column: int
    source: str = POSTER


def poster_rows(scores: tuple[str, ...], cells: str) -> tuple[PublishedRow, ...]:
    """A task's rows from its column of the poster, one "Time/Cost/score..." cell per method in
    the poster's order, e.g. `poster_rows(("Score",), "5.0/465/30.3 4.1/387/91.7 ...")`."""
    parts = cells.split()
    if len(parts) != len(POSTER_METHODS):
        raise ValueError(f"the poster has {len(POSTER_METHODS)} methods, got {len(parts)} cells")
    rows = []
    for method, cell in zip(POSTER_METHODS, parts, strict=True):
        time, cost, *values = (float(v) for v in cell.split("/"))
        rows.append(PublishedRow(method, time, cost, dict(zip(scores, values, strict=True))))
    return tuple(rows)


# ----- tasks and families --------------------------------------------------------------------
@dataclass(frozen=True)
class TaskSpec:
    """One env of a family and what the suite shows of it.

    `teams` maps a scripted team's kind ("oracle", "naive", "heuristic") to a text policy
    ("module:function", observation in, answer out); `env_teams` to a factory that builds the
    policy from the env it plays (a code task's oracle answers from the dataset's reference
    solutions). `reference_solutions` says whether the env's default data has them, so that
    listings of who plays what are right before any data loads."""

    id: str
    entry_point: str | Callable[..., Any]
    description: str
    columns: TaskColumns
    published: Published | None = None
    teams: Mapping[str, str | Policy] = field(default_factory=dict)
    env_teams: Mapping[str, str | Callable[[Any], Policy]] = field(default_factory=dict)
    reference_solutions: bool = False
    noisy_oracle: bool = False
    """Whether `scripted:noisy` (the oracle with answer lines dropped) plays this task."""
    offline: Mapping[str, Any] | None = None
    """The `make` arguments that play the tasks shipped with the package, offline (`--env
    embedded`, the demo); None where the tasks come only from a dataset."""
    smoke: bool = False
    """A task cheap enough for smoke runs (`collabzoo reproduce --quick`: one turn, its
    `offline` tasks, short answers); the suite picks those tasks from this flag."""
    default_data: str = "default"
    """What the env plays when no `data=` is given, as results files label it."""
    demo_metrics: tuple[str, ...] = ()
    """The metrics `collabzoo demo` shows (a task without them is not in its default set)."""
    picture: str | Callable[[Any], str] | None = None
    """A function of the env that draws its current state as an SVG document: the env card
    draws its example episode with it, turn by turn."""
    sandbox_packages: str | tuple[str, ...] = ()
    """Third-party packages, pinned "name==version", that the task's code imports: the sandbox
    that runs it is made from an image holding them. A tuple, or a "module:attribute" path to
    one (so a declaration stays light)."""

    def packages(self) -> tuple[str, ...]:
        """The pinned packages the task's sandbox needs (`sandbox_packages`, loaded)."""
        return tuple(load(self.sandbox_packages))

    @property
    def short_name(self) -> str:
        return self.id.partition("/")[2].rpartition("-v")[0].lower()


@dataclass(frozen=True)
class TaskFamily:
    """A family's tasks, and the import paths of its modules that users may hold from before
    the family had a folder of its own (old path -> module)."""

    name: str
    tasks: tuple[TaskSpec, ...]
    module_paths: Mapping[str, str] = field(default_factory=dict)


def load(path: Any) -> Any:
    """The object a "module:attribute" string names; anything else is the object itself."""
    if not isinstance(path, str):
        return path
    module, _, attribute = path.partition(":")
    if not module or not attribute:
        raise ValueError(f"expected 'module:attribute', got {path!r}")
    return getattr(importlib.import_module(module), attribute)

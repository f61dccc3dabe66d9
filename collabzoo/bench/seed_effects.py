"""Which trained rows moved which metric: each trained row against the untrained row benched
under the same protocol, over seeds.

A row's value on a seed is its score column's mean over that seed's episodes; over seeds it is
the mean of those values ± their standard deviation (n - 1). The episodes' 95% interval of the
leaderboard says how sure one run's mean is; this says whether training moved the metric by more
than changing the seed does. A difference is called beyond the seeds' spread when it exceeds the
sum of the two rows' standard deviations (their mean ± sd bands do not overlap), which needs at
least two seeds on both sides. With three seeds this is a coarse screen, not a significance
test, and the section says so where it is printed.

Beside it, each effect carries a permutation test over the two rows' episodes pooled across
seeds (`stats.permutation_p`). The seed screen misses what a few seeds cannot show: an
untrained team whose seeds happen to agree has a spread of 0, so any trained row with a small
spread "moves". The episodes' test sees every episode, but treats the seeds' episodes as one
sample, so it does not count how much training itself varies from seed to seed. Read together:
a row that passes both moved; one that passes only one is worth more seeds.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from collabzoo.bench.columns import task_columns
from collabzoo.bench.results import episode_scores, summarize
from collabzoo.bench.stats import permutation_p


@dataclass(frozen=True)
class SeedSpread:
    """One row's per-seed values of one metric."""

    values: tuple[float, ...]

    @property
    def mean(self) -> float:
        return statistics.fmean(self.values) if self.values else math.nan

    @property
    def sd(self) -> float:
        """The sample standard deviation; NaN below two seeds (no spread to compare)."""
        return statistics.stdev(self.values) if len(self.values) > 1 else math.nan

    def cell(self, digits: int = 1) -> str:
        if not self.values:
            return "-"
        sd = "" if math.isnan(self.sd) else f" ± {self.sd:.{digits}f}"
        return f"{self.mean:.{digits}f}{sd} (n={len(self.values)})"


@dataclass(frozen=True)
class Effect:
    """A trained row against its untrained counterpart on one task's metric."""

    task: str
    metric: str
    higher_is_better: bool
    row: str
    baseline: str
    trained: SeedSpread
    untrained: SeedSpread
    trained_episodes: tuple[float, ...] = ()
    untrained_episodes: tuple[float, ...] = ()
    """Every episode's value, all seeds together (for `p_episodes`)."""

    @property
    def difference(self) -> float:
        return self.trained.mean - self.untrained.mean

    @property
    def p_episodes(self) -> float:
        """The permutation test's two-sided p over the pooled episodes; NaN without them."""
        return permutation_p(self.trained_episodes, self.untrained_episodes)

    @property
    def verdict(self) -> str:
        """ "up" / "down" (beyond the spread, in the metric's own direction), "within the seeds'
        spread", or why no call can be made."""
        if not self.trained.values or not self.untrained.values:
            return "not run"
        if len(self.trained.values) < 2 or len(self.untrained.values) < 2:
            return "one seed: no spread"
        if any(math.isnan(v) for v in (self.difference, self.trained.sd, self.untrained.sd)):
            return "undefined"
        if abs(self.difference) <= self.trained.sd + self.untrained.sd:
            return "within the seeds' spread"
        better = (self.difference > 0) == self.higher_is_better
        return "moved: better" if better else "moved: worse"

    def as_dict(self) -> dict[str, Any]:
        return {
            "task": self.task,
            "metric": self.metric,
            "row": self.row,
            "baseline": self.baseline,
            "trained": list(self.trained.values),
            "untrained": list(self.untrained.values),
            "difference": self.difference,
            "verdict": self.verdict,
            "episodes": {
                "trained": list(self.trained_episodes),
                "untrained": list(self.untrained_episodes),
            },
            "p_episodes": self.p_episodes,
        }


def seed_values(documents: Mapping[int, Mapping[str, Any]], metric: str) -> SeedSpread:
    """`metric`'s mean over each seed's episodes (recomputed from the episodes), by seed."""
    values = []
    for _, document in sorted(documents.items()):
        mean = (summarize(document).get(metric) or {}).get("mean")
        if mean is not None and not math.isnan(float(mean)):
            values.append(float(mean))
    return SeedSpread(tuple(values))


def episode_values(documents: Mapping[int, Mapping[str, Any]], metric: str) -> tuple[float, ...]:
    """`metric`'s value on every finished episode of every seed, seeds in order (pooled columns
    give each episode's own rate)."""
    values = []
    for _, document in sorted(documents.items()):
        for episode in document.get("episodes", []):
            value = episode_scores(document, episode).get(metric)
            if value is not None and math.isfinite(float(value)):
                values.append(float(value))
    return tuple(values)


def trained_pairs(rows: Sequence[tuple[str, str, str, bool]]) -> list[tuple[str, str, str]]:
    """(task, trained row, its untrained row) for every trained row of `rows` (the plan's (task,
    row name, bench protocol, trained) in order) that has an untrained row of its task benched
    under the same protocol: the first such row."""
    untrained_by: dict[tuple[str, str], str] = {}
    for task, name, protocol, trained in rows:
        if not trained:
            untrained_by.setdefault((task, protocol), name)
    return [
        (task, name, untrained_by[(task, protocol)])
        for task, name, protocol, trained in rows
        if trained and (task, protocol) in untrained_by
    ]


def effects(
    finished: Mapping[tuple[str, str], Mapping[int, Mapping[str, Any]]],
    rows: Sequence[tuple[str, str, str, bool]],
) -> list[Effect]:
    """Every trained row's effect on every score column of its task.

    `finished`: (task, row name) -> seed -> results document. `rows`: the plan's (task, row
    name, bench protocol, trained) in order; a trained row is compared with the first untrained
    row of its task benched under the same protocol (GRPO as one agent with the Raw model,
    MAGRPO with Parallel). A trained row with no such row (a joint actor's `joint` protocol) is
    left out: there is no untrained team that plays it."""
    found = []
    for task, name, baseline in trained_pairs(rows):
        mine, theirs = finished.get((task, name), {}), finished.get((task, baseline), {})
        for column in task_columns(task).columns:
            found.append(
                Effect(
                    task=task,
                    metric=column.name,
                    higher_is_better=column.higher_is_better,
                    row=name,
                    baseline=baseline,
                    trained=seed_values(mine, column.name),
                    untrained=seed_values(theirs, column.name),
                    trained_episodes=episode_values(mine, column.name),
                    untrained_episodes=episode_values(theirs, column.name),
                )
            )
    return found


def effects_table(found: Sequence[Effect]) -> list[str]:
    """The Markdown table of `effects`, one line per (task, metric, trained row)."""
    lines = [
        "| Task | Metric | Row | Against | Untrained | Trained | Difference | Verdict (seeds) "
        "| p (episodes) |",
        "|---|---|---|---|---:|---:|---:|---|---:|",
    ]
    for effect in found:
        difference = "-" if math.isnan(effect.difference) else f"{effect.difference:+.1f}"
        lines.append(
            f"| {effect.task} | {effect.metric} | {effect.row} | {effect.baseline} | "
            f"{effect.untrained.cell()} | {effect.trained.cell()} | {difference} | "
            f"{effect.verdict} | {p_cell(effect.p_episodes)} |"
        )
    return lines


def p_cell(p: float) -> str:
    """A permutation p as a table shows it ("<0.001" below the test's resolution, "-" for NaN)."""
    if math.isnan(p):
        return "-"
    return "<0.001" if p < 0.001 else f"{p:.3f}"

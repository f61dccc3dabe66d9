"""Which trained rows moved which metric: each trained row against the untrained row benched
under the same protocol, over seeds.

A row's value on a seed is its score column's mean over that seed's episodes; over seeds it is
the mean of those values ± their standard deviation (n - 1). The episodes' 95% interval of the
leaderboard says how sure one run's mean is; this says whether training moved the metric by more
than changing the seed does. A difference is called beyond the seeds' spread when it exceeds the
sum of the two rows' standard deviations (their mean ± sd bands do not overlap), which needs at
least two seeds on both sides. With three seeds this is a coarse screen, not a significance
test, and the section says so where it is printed.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from collabzoo.bench.columns import task_columns
from collabzoo.bench.results import summarize


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

    @property
    def difference(self) -> float:
        return self.trained.mean - self.untrained.mean

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
        }


def seed_values(documents: Mapping[int, Mapping[str, Any]], metric: str) -> SeedSpread:
    """`metric`'s mean over each seed's episodes (recomputed from the episodes), by seed."""
    values = []
    for _, document in sorted(documents.items()):
        mean = (summarize(document).get(metric) or {}).get("mean")
        if mean is not None and not math.isnan(float(mean)):
            values.append(float(mean))
    return SeedSpread(tuple(values))


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
    untrained_by: dict[tuple[str, str], str] = {}
    for task, name, protocol, trained in rows:
        if not trained:
            untrained_by.setdefault((task, protocol), name)
    found = []
    for task, name, protocol, trained in rows:
        baseline = untrained_by.get((task, protocol))
        if not trained or baseline is None:
            continue
        for column in task_columns(task).columns:
            found.append(
                Effect(
                    task=task,
                    metric=column.name,
                    higher_is_better=column.higher_is_better,
                    row=name,
                    baseline=baseline,
                    trained=seed_values(finished.get((task, name), {}), column.name),
                    untrained=seed_values(finished.get((task, baseline), {}), column.name),
                )
            )
    return found


def effects_table(found: Sequence[Effect]) -> list[str]:
    """The Markdown table of `effects`, one line per (task, metric, trained row)."""
    lines = [
        "| Task | Metric | Row | Against | Untrained | Trained | Difference | Verdict |",
        "|---|---|---|---|---:|---:|---:|---|",
    ]
    for effect in found:
        difference = "-" if math.isnan(effect.difference) else f"{effect.difference:+.1f}"
        lines.append(
            f"| {effect.task} | {effect.metric} | {effect.row} | {effect.baseline} | "
            f"{effect.untrained.cell()} | {effect.trained.cell()} | {difference} | "
            f"{effect.verdict} |"
        )
    return lines

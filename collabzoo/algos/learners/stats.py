"""Running statistics a learner keeps between steps: the reward normaliser's moments and the
sampler drift of an update's off-policy weights (what the logs report of them)."""

from __future__ import annotations

import math

from collabzoo.algos.objectives import ImportanceWeights


class RunningStats:
    """Welford running mean and variance (for reward normalisation)."""

    def __init__(self) -> None:
        self.count, self.mean, self.m2 = 0, 0.0, 0.0

    def add(self, value: float) -> None:
        self.count += 1
        delta = value - self.mean
        self.mean += delta / self.count
        self.m2 += delta * (value - self.mean)

    @property
    def std(self) -> float:
        return math.sqrt(self.m2 / (self.count - 1)) if self.count > 1 else 1.0


class DriftLog:
    """Running totals of the sampler drift over one update, reported as metrics."""

    def __init__(self) -> None:
        self.abs_log_ratio = 0.0
        self.capped = 0
        self.tokens = 0

    def add(self, found: ImportanceWeights) -> None:
        self.abs_log_ratio += found.abs_log_ratio
        self.capped += found.capped
        self.tokens += found.tokens

    def metrics(self) -> dict[str, float]:
        """Mean |log pi_train - log pi_sampler| per compared token and the fraction capped;
        nothing when no token was compared (the transformers backend)."""
        if not self.tokens:
            return {}
        return {
            "sampler/mean_abs_log_ratio": self.abs_log_ratio / self.tokens,
            "sampler/capped_fraction": self.capped / self.tokens,
        }


__all__ = ["DriftLog", "RunningStats"]

"""Means with 95% confidence intervals over episodes (Student's t, no SciPy needed).

Every leaderboard cell is the mean of one value per episode with a two-sided 95% t-interval,
mean ± t(0.975, n - 1) · s / sqrt(n). The t-interval rather than the normal approximation
because eval splits are small (2 to 32 episodes), where z = 1.96 would overstate the precision.
For pass/fail columns this is the Wald interval, which collapses to a point at 0% or 100%; one
episode gives no interval at all.

A pooled column (`Column.pooled_over`: a micro rate, passes over checks summed over the run) is
the ratio R = sum(y_i) / sum(d_i) of the episodes' passes y_i and checks d_i. Its interval is the
ratio estimator's linearised (delta-method) one, R ± t(0.975, n - 1) · SE with
SE² = sum((y_i - R d_i)²) / (n (n - 1) mean(d)²): with every d_i equal it is the t-interval
above, so a pooled column of a fixed number of checks reads exactly as a plain mean.

Two rows' episodes are compared by a permutation test (`permutation_p`): the share of random
relabellings of the pooled episodes whose difference of means is at least the observed one. It
assumes nothing about the scores' distribution, which for these tasks is lumpy (a reward's
levels), and it stays defined when one row's episodes are all equal, where a t-test is not.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

CONFIDENCE = 0.95


@dataclass(frozen=True)
class Estimate:
    """A mean over episodes and its 95% interval (NaN bounds when n < 2)."""

    mean: float
    low: float
    high: float
    n: int

    @property
    def half_width(self) -> float:
        return (self.high - self.low) / 2

    def as_dict(self) -> dict[str, float | int | None]:
        def plain(value: float) -> float | None:
            return value if math.isfinite(value) else None

        return {
            "mean": plain(self.mean),
            "ci95": [plain(self.low), plain(self.high)],
            "n": self.n,
        }


def _continued_fraction(a: float, b: float, x: float) -> float:
    """The continued fraction of the regularised incomplete beta function (modified Lentz)."""
    tiny, qab, qap, qam = 1e-300, a + b, a + 1.0, a - 1.0
    c, d = 1.0, 1.0 - qab * x / qap
    d = 1.0 / (d if abs(d) > tiny else tiny)
    result = d
    for m in range(1, 300):
        m2 = 2 * m
        for numerator in (
            m * (b - m) * x / ((qam + m2) * (a + m2)),
            -(a + m) * (qab + m) * x / ((a + m2) * (qap + m2)),
        ):
            d = 1.0 + numerator * d
            d = 1.0 / (d if abs(d) > tiny else tiny)
            c = 1.0 + numerator / c
            c = c if abs(c) > tiny else tiny
            result *= d * c
        if abs(d * c - 1.0) < 1e-15:
            break
    return result


def incomplete_beta(a: float, b: float, x: float) -> float:
    """The regularised incomplete beta function I_x(a, b)."""
    if x <= 0.0:
        return 0.0
    if x >= 1.0:
        return 1.0
    log_front = (
        math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b) + a * math.log(x) + b * math.log1p(-x)
    )
    if x < (a + 1.0) / (a + b + 2.0):
        return math.exp(log_front) * _continued_fraction(a, b, x) / a
    return 1.0 - math.exp(log_front) * _continued_fraction(b, a, 1.0 - x) / b


def t_cdf(t: float, df: int) -> float:
    """P(T <= t) for Student's t with `df` degrees of freedom."""
    tail = 0.5 * incomplete_beta(df / 2.0, 0.5, df / (df + t * t))
    return 1.0 - tail if t > 0 else tail


@functools.cache
def t_quantile(p: float, df: int) -> float:
    """The p-quantile of Student's t (bisection on the CDF; p in (0.5, 1)); cached, as a run's
    progress line recomputes its summary after every episode."""
    if not 0.5 < p < 1.0 or df < 1:
        raise ValueError(f"t_quantile needs 0.5 < p < 1 and df >= 1, got p={p}, df={df}")
    low, high = 0.0, 1.0
    while t_cdf(high, df) < p:
        high *= 2.0
    for _ in range(200):
        middle = (low + high) / 2.0
        if t_cdf(middle, df) < p:
            low = middle
        else:
            high = middle
        if high - low < 1e-12:
            break
    return (low + high) / 2.0


def mean_ci(values: Iterable[float]) -> Estimate:
    """The mean of the finite values and its 95% t-interval."""
    kept = [float(v) for v in values if v is not None and math.isfinite(v)]
    n = len(kept)
    if n == 0:
        return Estimate(math.nan, math.nan, math.nan, 0)
    mean = math.fsum(kept) / n
    if n == 1:
        return Estimate(mean, math.nan, math.nan, 1)
    variance = math.fsum((v - mean) ** 2 for v in kept) / (n - 1)
    half = t_quantile(0.5 + CONFIDENCE / 2, n - 1) * math.sqrt(variance / n)
    return Estimate(mean, mean - half, mean + half, n)


def pooled_ci(rates: Iterable[float], checks: Iterable[float]) -> Estimate:
    """The rate pooled over episodes, sum(rate_i · d_i) / sum(d_i) for episodes of rate_i over
    d_i checks, and its 95% interval (the ratio estimator's, see above). Episodes whose rate or
    checks are not finite, or with no checks, are left out; equal checks give `mean_ci`'s
    numbers exactly."""
    kept = [
        (float(r), float(d))
        for r, d in zip(rates, checks, strict=True)
        if r is not None and d is not None and math.isfinite(r) and math.isfinite(d) and d > 0
    ]
    if len({d for _, d in kept}) <= 1:
        return mean_ci(r for r, _ in kept)
    n = len(kept)
    total = math.fsum(d for _, d in kept)
    pooled = math.fsum(r * d for r, d in kept) / total
    residuals = math.fsum((d * (r - pooled)) ** 2 for r, d in kept)
    error = math.sqrt(residuals / (n * (n - 1))) / (total / n)
    half = t_quantile(0.5 + CONFIDENCE / 2, n - 1) * error
    return Estimate(pooled, pooled - half, pooled + half, n)


PERMUTATIONS = 10_000


def permutation_p(
    first: Sequence[float], second: Sequence[float], rounds: int = PERMUTATIONS, seed: int = 0
) -> float:
    """Two-sided p of mean(first) - mean(second) under random relabelling of the pooled values:
    (hits + 1) / (rounds + 1) over `rounds` seeded relabellings (so never 0, and the same for the
    same inputs). NaN when a side is empty."""
    import numpy as np

    a = np.asarray([float(v) for v in first if math.isfinite(float(v))])
    b = np.asarray([float(v) for v in second if math.isfinite(float(v))])
    if not len(a) or not len(b):
        return math.nan
    observed = abs(a.mean() - b.mean())
    pooled = np.concatenate([a, b])
    shuffled = np.random.default_rng(seed).permuted(np.tile(pooled, (rounds, 1)), axis=1)
    differences = np.abs(shuffled[:, : len(a)].mean(axis=1) - shuffled[:, len(a) :].mean(axis=1))
    hits = int(np.count_nonzero(differences >= observed - 1e-12 * max(1.0, observed)))
    return (hits + 1) / (rounds + 1)

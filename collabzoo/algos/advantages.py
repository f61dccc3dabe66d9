"""Returns and advantages over sibling groups: the math shared by MA-REINFORCE and MAGRPO.

A rollout tree node expanded with K samples per agent has children, one per joint action, each
with its reward r and return R = r + gamma * mean(R of its own children) (R = r at a leaf).
For agent i, sample k's return G_k is the mean R over the joint actions it took part in (one in
aligned mode; K^(N-1) in cross mode, where the reference's SUM would scale advantages by
K^(N-1)). The advantage of sample k subtracts a baseline b over the K siblings:

    raw:  b = 0            mean: b = mean(G)
    rloo: b = mean of the other siblings = (sum(G) - G_k) / (K - 1)
    max:  b = max(G)

and, with normalisation, divides by the siblings' standard deviation: by default the
reference's population std clamped at 1e-6, max(sqrt(mean((G - mean G)^2)), 1e-6); with
std="unbiased" the (K - 1) std + 1e-8 (collabzoo before 0.2: 1.15x smaller advantages at K=4).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

BASELINES = ("raw", "mean", "rloo", "max")
STD_MODES = ("population", "unbiased")
STD_FLOOR = 1e-6
"""The reference's clamp of the population std (a group of equal returns divides by this)."""
UNBIASED_EPS = 1e-8


def discounted_return(reward: float, children_returns: Sequence[float], gamma: float) -> float:
    """R = r + gamma * mean(children's R); a leaf (no children) has R = r."""
    if not children_returns:
        return reward
    return reward + gamma * sum(children_returns) / len(children_returns)


def sample_returns(
    joint_indices: Sequence[Sequence[int]], returns: Sequence[float], agent: int, k: int
) -> list[float]:
    """G_k for agent `agent`: mean R over the children whose joint action used its sample k."""
    totals, counts = [0.0] * k, [0] * k
    for joint, ret in zip(joint_indices, returns, strict=True):
        totals[joint[agent]] += ret
        counts[joint[agent]] += 1
    if 0 in counts:
        raise ValueError("every sample must take part in at least one joint action")
    return [t / c for t, c in zip(totals, counts, strict=True)]


def group_advantages(
    returns: Sequence[float],
    baseline: str = "mean",
    normalize: bool = False,
    *,
    std: str = "population",
) -> list[float]:
    """Advantages of K sibling samples from their returns G (see the module docstring)."""
    if baseline not in BASELINES:
        raise ValueError(f"baseline must be one of {BASELINES}, got {baseline!r}")
    k = len(returns)
    if k == 0:
        return []
    total = sum(returns)
    if baseline == "raw":
        advantages = list(returns)
    elif baseline == "mean":
        advantages = [g - total / k for g in returns]
    elif baseline == "rloo":
        if k < 2:
            raise ValueError("the rloo baseline needs at least 2 samples per group")
        advantages = [(k * g - total) / (k - 1) for g in returns]
    else:
        best = max(returns)
        advantages = [g - best for g in returns]
    if std not in STD_MODES:
        raise ValueError(f"std must be one of {STD_MODES}, got {std!r}")
    if normalize and k > 1:
        mean = total / k
        squares = sum((g - mean) ** 2 for g in returns)
        if std == "population":
            scale = max(math.sqrt(squares / k), STD_FLOOR)
        else:
            scale = math.sqrt(squares / (k - 1)) + UNBIASED_EPS
        advantages = [a / scale for a in advantages]
    return advantages

"""Temporal-difference targets and generalised advantage estimates.

For one trajectory with team rewards r_t, critic values V(s_t) and the value after the last
step (0 when the episode terminated, V(s_T) when it was cut short):

    delta_t = r_t + gamma * V(s_{t+1}) - V(s_t)                  (TD error; TD(0) advantage)
    A_t     = delta_t + gamma * lambda * A_{t+1},  A_T = 0       (GAE(lambda))
    y_t     = A_t + V(s_t)                                       (the critic's target)

lambda = 0 gives IAC's TD(0) advantage and target y_t = r_t + gamma V(s_{t+1}); lambda = 1 gives
the Monte-Carlo return minus the baseline V(s_t). On a rollout tree (K children at a node) the
recursion averages A over the children of s_{t+1}, as MAGRPO's returns average R.
"""

from __future__ import annotations

from collections.abc import Sequence


def td_errors(
    rewards: Sequence[float], values: Sequence[float], last_value: float, gamma: float
) -> list[float]:
    """delta_t for t = 0 .. T-1; `last_value` is V(s_T) (0 for a terminated episode)."""
    if len(rewards) != len(values):
        raise ValueError(f"{len(rewards)} rewards but {len(values)} values: one per step")
    following = [*values[1:], last_value]
    return [r + gamma * v_next - v for r, v, v_next in zip(rewards, values, following, strict=True)]


def gae(deltas: Sequence[float], gamma: float, lam: float) -> list[float]:
    """A_t = delta_t + gamma * lambda * A_{t+1}, computed backwards from A_T = 0."""
    advantages = [0.0] * len(deltas)
    running = 0.0
    for t in reversed(range(len(deltas))):
        running = deltas[t] + gamma * lam * running
        advantages[t] = running
    return advantages


def advantages_and_targets(
    rewards: Sequence[float],
    values: Sequence[float],
    last_value: float,
    gamma: float,
    lam: float,
) -> tuple[list[float], list[float]]:
    """(A_t, y_t = A_t + V(s_t)) of one trajectory."""
    advantages = gae(td_errors(rewards, values, last_value, gamma), gamma, lam)
    return advantages, [a + v for a, v in zip(advantages, values, strict=True)]

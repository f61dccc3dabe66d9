"""Preference pairs: what they hold, how they are chosen among scored candidates, and how the
online variants replay earlier iterations' pairs.

A pair is joint: for every agent its prompt, the winner's and the loser's answer (text and
token ids), and the team rewards that ordered them. Offline (MADPO, MARLHF) the C aligned
candidates of one episode give every ordered pair (w, l) with r_w > r_l (ties dropped), chosen
by `pair_selection`. Online (MADPOIter, MARLHFIter) candidate k of the current policy meets
candidate k of a comparator (index-matched), the higher reward wins.
"""

from __future__ import annotations

import random
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from collabzoo.algos.preference_objectives import lambda_decay_weights

PAIR_SELECTIONS = ("reward_gap", "random", "all")
"""Offline selection: the largest gaps first, a shuffle, or every pair (no limit)."""
ONLINE_PAIR_SELECTIONS = ("comparator_reward", *PAIR_SELECTIONS)
"""Online selection adds the reference's default: the comparator's reward, then the gap."""
REPLAY_MODES = ("current", "nearest_k", "all_history", "lambda_decay")


@dataclass
class PreferencePair:
    """One joint preference: per agent (by name) the prompt, and the chosen and rejected
    answers with their token ids under that agent's policy."""

    prompts: dict[str, str]
    chosen: dict[str, str]
    rejected: dict[str, str]
    prompt_ids: dict[str, list[int]] = field(default_factory=dict)
    chosen_ids: dict[str, list[int]] = field(default_factory=dict)
    rejected_ids: dict[str, list[int]] = field(default_factory=dict)
    chosen_reward: float = 0.0
    rejected_reward: float = 0.0
    candidate_reward_mean: float = 0.0
    """Mean reward of the candidates this pair was drawn from (what the reference logs)."""
    source: str = "rollout"
    """"rollout", "comparator" (the winner is the comparator's) or "data" (a user's file)."""

    def to_record(self) -> dict[str, Any]:
        """Plain lists, dicts, strings and numbers: JSON files and checkpoints."""
        return asdict(self)

    @classmethod
    def from_record(cls, record: Mapping[str, Any]) -> PreferencePair:
        return cls(**dict(record))


def ordered_pairs(rewards: Sequence[float]) -> list[tuple[float, int, int]]:
    """(gap, winner, loser) of every ordered pair with a positive gap, in (winner, loser)
    index order."""
    return [
        (float(rw) - float(rl), w, l_)
        for w, rw in enumerate(rewards)
        for l_, rl in enumerate(rewards)
        if w != l_ and float(rw) - float(rl) > 0
    ]


def select_pair_indices(
    rewards: Sequence[float], mode: str, limit: int | None, rng: random.Random
) -> list[tuple[int, int]]:
    """The (winner, loser) candidate indices kept for training, as the reference keeps them:
    "reward_gap" sorts by the gap, largest first (stable: equal gaps keep index order);
    "random" shuffles; "all" keeps every pair in index order; then the first `limit`."""
    found = ordered_pairs(rewards)
    if mode == "random":
        rng.shuffle(found)
    elif mode == "reward_gap":
        found.sort(key=lambda item: item[0], reverse=True)
    if mode != "all" and limit is not None:
        found = found[:limit]
    return [(w, l_) for _, w, l_ in found]


def select_comparison_pairs(
    current: Sequence[float],
    comparator: Sequence[float],
    mode: str,
    limit: int | None,
    rng: random.Random,
) -> list[tuple[tuple[str, int], tuple[str, int]]]:
    """Index-matched pairs ((side, k) of the winner, of the loser) for k < min(C, C'): the
    higher reward wins, ties are dropped. "comparator_reward" sorts by the comparator's
    reward, then the gap, both descending; "reward_gap" by the gap; "random" shuffles; "all"
    keeps index order and every pair."""
    found = []
    for k in range(min(len(current), len(comparator))):
        gap = float(current[k]) - float(comparator[k])
        if gap == 0:
            continue
        sides = (("current", k), ("comparator", k))
        winner, loser = sides if gap > 0 else sides[::-1]
        found.append((abs(gap), float(comparator[k]), k, winner, loser))
    if mode == "random":
        rng.shuffle(found)
    elif mode == "comparator_reward":
        found.sort(key=lambda item: (item[1], item[0]), reverse=True)
    elif mode == "reward_gap":
        found.sort(key=lambda item: item[0], reverse=True)
    if mode != "all" and limit is not None:
        found = found[:limit]
    return [(winner, loser) for *_, winner, loser in found]


def sample_replay(
    shards: Sequence[Sequence[dict[str, Any]]],
    size: int,
    rng: random.Random,
    weights: Sequence[float] | None = None,
) -> list[dict[str, Any]]:
    """`size` records drawn from iteration shards (oldest first): each draw picks a shard by
    weight (empty shards never), then each shard gives its count without replacement, whole
    shuffled passes first when more are asked than it holds; the result is shuffled."""
    eligible = [(i, s) for i, s in enumerate(shards) if s]
    if size <= 0 or not eligible:
        return []
    chosen_weights = [weights[i] if weights is not None else 1.0 for i, _ in eligible]
    counts = [0] * len(eligible)
    for _ in range(size):
        counts[rng.choices(range(len(eligible)), weights=chosen_weights, k=1)[0]] += 1
    sampled: list[dict[str, Any]] = []
    for (_, shard), count in zip(eligible, counts, strict=True):
        while count >= len(shard) and count > 0:
            whole = list(shard)
            rng.shuffle(whole)
            sampled += whole
            count -= len(shard)
        if count > 0:
            sampled += rng.sample(list(shard), k=count)
    rng.shuffle(sampled)
    return sampled


def replay_selection(
    history: Sequence[Sequence[dict[str, Any]]],
    mode: str,
    rng: random.Random,
    *,
    k: int | None = None,
    lam: float | None = None,
    sample_size: int | None = None,
) -> list[dict[str, Any]]:
    """The records an iteration trains on, from every iteration's shard so far (oldest first,
    the current one last): "current" is the current shard; the others sample `sample_size`
    records (default: the current shard's size, else the newest non-empty shard's) from the
    last k shards ("nearest_k"), all of them ("all_history") or all with lambda-decay weights."""
    current = list(history[-1]) if history else []
    if mode == "current":
        return current
    size = sample_size
    if size is None:
        size = len(current) or next((len(s) for s in reversed(history) if s), 0)
    if mode == "nearest_k":
        return sample_replay(history[-int(k or 1) :], size, rng)
    if mode == "all_history":
        return sample_replay(history, size, rng)
    return sample_replay(history, size, rng, lambda_decay_weights(len(history), float(lam)))


__all__ = [
    "ONLINE_PAIR_SELECTIONS",
    "PAIR_SELECTIONS",
    "REPLAY_MODES",
    "PreferencePair",
    "ordered_pairs",
    "replay_selection",
    "sample_replay",
    "select_comparison_pairs",
    "select_pair_indices",
]

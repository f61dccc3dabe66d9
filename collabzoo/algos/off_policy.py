"""Truncated importance sampling for rollouts sampled by another engine (vLLM).

An engine that samples for the trainer (vLLM) and the trainer that scores the same tokens
(transformers) run different kernels, in different precisions: their log-probabilities of one
token differ a little, more in bf16. The rollout is then slightly off-policy, and each token's
policy-gradient term is weighted by the truncated ratio

    w_t = min(pi_train(a_t | h_t) / pi_sampler(a_t | h_t), C)

(truncated importance sampling, as TRL and verl do with vLLM): pi_train is the trainer's
policy that the update starts from, detached, so w_t reweights the gradient and is never
differentiated. C bounds the variance a rare large ratio would add.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch


@dataclass
class ImportanceWeights:
    """Per-token weights and what the logs report of the drift behind them."""

    weights: torch.Tensor
    """[batch, width]: min(exp(log pi_train - log pi_sampler), cap); 1 at padding and on rows
    without sampler log-probabilities."""
    abs_log_ratio: float
    """Sum of |log pi_train - log pi_sampler| over the compared tokens."""
    capped: int
    """Compared tokens whose ratio exceeded the cap."""
    tokens: int
    """Tokens compared (real tokens of rows the sampler scored)."""


def sampler_log_prob_tensor(
    rows: Sequence[Sequence[float] | None], like: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    """The sampler's per-token log-probabilities as a tensor shaped and placed like `like`
    ([batch, width]), and the mask of the rows that have them (a row without any, such as a
    sample of the transformers backend, is not corrected)."""
    values = torch.zeros(like.shape, dtype=torch.float32)
    present = torch.zeros(like.shape[0], dtype=torch.bool)
    for row, found in enumerate(rows):
        if found is None:
            continue
        if len(found) > like.shape[1]:
            raise ValueError(
                f"the sampler scored {len(found)} tokens of a completion the trainer scores "
                f"with {like.shape[1]}: the two must see the same completion tokens"
            )
        values[row, : len(found)] = torch.tensor(list(found), dtype=torch.float32)
        present[row] = True
    return values.to(like.device), present.to(like.device)


def truncated_importance_weights(
    train_log_probs: torch.Tensor,
    sampler_log_probs: Sequence[Sequence[float] | None],
    mask: torch.Tensor,
    cap: float | None,
) -> ImportanceWeights:
    """w_t = min(exp(log pi_train - log pi_sampler), cap) per token, detached.

    `train_log_probs` [batch, width] is the trainer's log pi of the sampled tokens under the
    sampling distribution (its gradient is not used), `mask` the real tokens, and
    `sampler_log_probs` per row the sampler's log-probabilities of the same tokens, or None.
    `cap=None` reports the drift but weights every token 1."""
    if cap is not None and cap <= 0:
        raise ValueError(f"the importance sampling cap must be positive (or None), got {cap}")
    sampler, present = sampler_log_prob_tensor(sampler_log_probs, train_log_probs)
    compared = mask & present.unsqueeze(-1)
    log_ratio = (train_log_probs.detach().float() - sampler).masked_fill(~compared, 0.0)
    ratio = torch.exp(log_ratio)
    weights = ratio if cap is None else ratio.clamp(max=cap)
    capped = 0 if cap is None else int(((ratio > cap) & compared).sum())
    return ImportanceWeights(
        weights.masked_fill(~compared, 1.0).to(train_log_probs.dtype),
        float(log_ratio.abs().sum()),
        capped,
        int(compared.sum()),
    )


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


__all__ = [
    "DriftLog",
    "ImportanceWeights",
    "sampler_log_prob_tensor",
    "truncated_importance_weights",
]

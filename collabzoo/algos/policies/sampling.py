"""The sampling distribution: what a policy samples from, and what every loss must score.

A policy samples token t from softmax(warp(logits_t)), where `warp` divides by the temperature
and then keeps the top-k tokens and, of those, the smallest top-p nucleus (transformers'
`generate` applies its warpers in this order: temperature, top-k, top-p). Every log-probability
the learners use (the policy gradient, PPO's ratio, the KL, the entropy) must be of that same
distribution; scoring at temperature 1 without truncation makes each gradient off-policy.

    warped = logits / T
    warped[rank_k(warped) > k] = -inf                          (top-k, ties kept)
    sort ascending; c_j = cumsum(softmax(sorted))_j
    warped[c_j <= 1 - p] = -inf, the largest token always kept (top-p)
    log pi(t) = log_softmax(warped)[t]

Nothing else changes the distribution: `LLMPolicy.generate` samples with these settings alone,
not with the extras of a model's `generation_config` (repetition penalty, min-p, typical-p...).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch


@dataclass(frozen=True)
class Sampling:
    """Generation settings (the reference defaults)."""

    max_new_tokens: int = 256
    temperature: float = 0.6
    top_p: float = 0.6
    top_k: int | None = 50
    """None or 0: no top-k cut."""
    do_sample: bool = True
    """False: greedy decoding (a deterministic policy: it has no log-probability to train)."""

    def __post_init__(self) -> None:
        if self.max_new_tokens < 1:
            raise ValueError(f"max_new_tokens must be at least 1, got {self.max_new_tokens}")
        if not self.do_sample:
            return
        if not (self.temperature > 0 and math.isfinite(self.temperature)):
            raise ValueError(f"temperature must be a positive number, got {self.temperature}")
        if not 0 < self.top_p <= 1:
            raise ValueError(f"top_p must be in (0, 1], got {self.top_p}")
        if self.top_k is not None and self.top_k < 0:
            raise ValueError(f"top_k must be None, 0 (no cut) or positive, got {self.top_k}")

    @property
    def truncates(self) -> bool:
        """Whether top-k or top-p removes tokens (else the warp is only the temperature)."""
        return bool(self.top_k) or self.top_p < 1.0


def kept_tokens(scaled: torch.Tensor, sampling: Sampling) -> torch.Tensor | None:
    """The boolean mask [..., V] of tokens that top-k and then top-p keep, computed on the
    temperature-scaled logits (float32), or None when nothing is cut. Not differentiable: the
    kept set is a property of the logits, the probabilities over it are what gradients see.

    With top-k the nucleus is found among the k values `topk` returns already sorted, instead
    of sorting the whole vocabulary (151,936 tokens for Qwen2.5); a tie at the k-th value
    (top-k then keeps more than k) takes the full sort, which is exact in every case."""
    if not sampling.truncates:
        return None
    with torch.no_grad():
        scores = scaled.detach()
        vocab = scores.size(-1)
        if sampling.top_k:
            k = min(sampling.top_k, vocab)
            top_values, top_indices = torch.topk(scores, k, dim=-1)  # descending
            removed = scores < top_values[..., -1:]
            if sampling.top_p >= 1.0:
                return ~removed
            if bool(((~removed).sum(-1) == k).all()):  # no tie at the boundary
                cut = _nucleus_cut(top_values.flip(-1), sampling.top_p).flip(-1)
                return ~(removed | torch.zeros_like(removed).scatter(-1, top_indices, cut))
            scores = scores.masked_fill(removed, -math.inf)
        else:
            removed = torch.zeros(scores.shape, dtype=torch.bool, device=scores.device)
        ascending, order = torch.sort(scores, dim=-1, descending=False)
        cut = _nucleus_cut(ascending, sampling.top_p)
        return ~(removed | torch.zeros_like(cut).scatter(-1, order, cut))


def _nucleus_cut(ascending: torch.Tensor, top_p: float) -> torch.Tensor:
    """Which of these ascending logits top-p removes: those whose cumulative probability,
    counted from the least likely, stays <= 1 - p; the most likely is always kept."""
    cumulative = ascending.softmax(-1).cumsum(-1)
    cut = cumulative <= (1.0 - top_p)
    cut[..., -1] = False
    return cut


def sampling_logits(logits: torch.Tensor, sampling: Sampling | None) -> torch.Tensor:
    """Float32 logits of the sampling distribution, the tokens it cuts at -inf (`sampling=None`:
    the raw distribution at temperature 1)."""
    _, _, warped = _warp(logits, sampling)
    return warped


def _warp(
    logits: torch.Tensor, sampling: Sampling | None
) -> tuple[torch.Tensor, torch.Tensor | None, torch.Tensor]:
    """(logits / T in float32, the kept mask or None, those logits with cut tokens at -inf)."""
    scaled = logits.float()
    if sampling is None:
        return scaled, None, scaled
    if not sampling.do_sample:
        raise ValueError(
            "do_sample=False is greedy decoding: a deterministic policy, whose log-probability "
            "is not defined; score with the sampling settings that generated, or sampling=None"
        )
    if sampling.temperature != 1.0:
        scaled = scaled / sampling.temperature
    kept = kept_tokens(scaled, sampling)
    return scaled, kept, scaled if kept is None else scaled.masked_fill(~kept, -math.inf)


def token_log_probs(
    logits: torch.Tensor,
    targets: torch.Tensor,
    sampling: Sampling | None,
    *,
    entropy: bool = False,
) -> tuple[torch.Tensor, torch.Tensor | None, torch.Tensor | None]:
    """(log pi(target), entropy of pi or None, where the target was outside the kept set or
    None) for logits [..., V] and targets [...], pi being the sampling distribution.

    log pi(t) = z_t - logsumexp(z over the kept set); H = logsumexp - sum_kept(p * z).
    A target outside the kept set is scored as if the set held it too (normaliser
    logaddexp(lse, z_t)), where -inf would poison the loss. Generate only samples kept tokens,
    so on the rollout policy this happens only at a near-tie that the scoring pass (other
    kernels, batching or precision) resolves the other way; after optimizer steps (PPO's later
    epochs) the policy has moved and a sampled token may have left its kept set. `outside`
    counts both. The entropy is the kept set's."""
    scaled, kept, warped = _warp(logits, sampling)
    chosen = scaled.gather(-1, targets.unsqueeze(-1)).squeeze(-1)
    normaliser = warped.logsumexp(-1)
    outside = None
    if kept is not None:
        outside = ~kept.gather(-1, targets.unsqueeze(-1)).squeeze(-1)
        log_probs = chosen - torch.where(outside, torch.logaddexp(normaliser, chosen), normaliser)
    else:
        log_probs = chosen - normaliser
    entropies = None
    if entropy:
        probs = torch.softmax(warped, -1)
        finite = warped if kept is None else warped.masked_fill(~kept, 0.0)
        entropies = normaliser - (probs * finite).sum(-1)
    return log_probs, entropies, outside


__all__ = ["Sampling", "kept_tokens", "sampling_logits", "token_log_probs"]

"""The preference learners' objectives as small pure functions: the multi-agent DPO loss,
the Bradley-Terry loss of a reward model, its pooling, and the replay weights of the online
variants. The learners only gather the numbers these functions take.

Multi-agent DPO (MADPO). A pair holds, per agent j, a winner a^w_j and a loser a^l_j of the same
prompt x_j; with Delta_j = log pi_j(a^w_j | x_j) - log pi_j(a^l_j | x_j) (sums over tokens) and
the same for the frozen reference, the joint loss of the pair is

    L = -log sigmoid(beta * sum_j (Delta_j - Delta^ref_j))

and agent i minimises its share: the others' Delta_j enter detached (sg), so each agent's
gradient is exactly the joint loss's gradient with respect to its own weights,

    L_i = mean_pairs -log sigmoid(beta * (Delta_i + sum_{j != i} sg(Delta_j) - sum_j Delta^ref_j)).

`reference_free` drops the reference terms (CoMLRL's MADPO: a uniform reference).

Bradley-Terry (the reward model of MARLHF): L = mean_pairs -log sigmoid(s(w) - s(l)).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F


def joint_preference_logits(
    deltas: torch.Tensor, reference_deltas: torch.Tensor | None, beta: float
) -> torch.Tensor:
    """z = beta * sum_j (Delta_j - Delta^ref_j) per pair, from [pairs, agents] tensors; the
    reference term is left out when `reference_deltas` is None."""
    margin = deltas if reference_deltas is None else deltas - reference_deltas
    return beta * margin.sum(-1)


def agent_preference_loss(
    own_delta: torch.Tensor,
    deltas: torch.Tensor,
    agent: int,
    beta: float,
    reference_deltas: torch.Tensor | None = None,
) -> torch.Tensor:
    """L_i: agent `agent`'s DPO loss over a batch of pairs. `own_delta` [pairs] carries the
    gradient; `deltas` [pairs, agents] are every agent's Delta, taken detached (the own column
    is replaced by `own_delta`); `reference_deltas` [pairs, agents] or None (reference-free)."""
    others = deltas.detach().sum(-1) - deltas.detach()[:, agent]
    joint = own_delta + others
    if reference_deltas is not None:
        joint = joint - reference_deltas.detach().sum(-1)
    return -F.logsigmoid(beta * joint).mean()


def bradley_terry_loss(winner_scores: torch.Tensor, loser_scores: torch.Tensor) -> torch.Tensor:
    """Mean over pairs of -log sigmoid(s_w - s_l)."""
    return -F.logsigmoid(winner_scores - loser_scores).mean()


def last_real_positions(attention_mask: torch.Tensor) -> torch.Tensor:
    """Per row, the index of the last position whose mask is 1: the highest such index, so
    right and left padding both give the last real token (0 for an all-pad row)."""
    positions = torch.arange(attention_mask.shape[1], device=attention_mask.device)
    return positions.expand_as(attention_mask).masked_fill(attention_mask == 0, 0).max(1).values


def pool_last_real(hidden: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
    """[batch, hidden]: the hidden state at each row's last real position."""
    rows = torch.arange(hidden.shape[0], device=hidden.device)
    return hidden[rows, last_real_positions(attention_mask)]


def zscore(scores: torch.Tensor, eps: float = 1e-8) -> torch.Tensor:
    """(s - mean) / (population std + eps) over a batch: the optional per-batch normalisation
    of reward-model scores (a batch of one, or of equal scores, gives zeros)."""
    if scores.numel() < 2:
        return torch.zeros_like(scores)
    return (scores - scores.mean()) / (scores.std(unbiased=False) + eps)


def lambda_decay_weights(shards: int, lam: float) -> list[float]:
    """Replay weights of `shards` iterations' pair sets, oldest first: w_a proportional to
    (1 - lambda) lambda^a at age a (0 = the newest), normalised; lambda = 1 is uniform and
    lambda = 0 keeps only the newest."""
    if shards < 1:
        return []
    if lam == 1.0:
        return [1.0 / shards] * shards
    newest_first = [(1.0 - lam) * lam**age for age in range(shards)]
    total = sum(newest_first)
    return [w / total for w in reversed(newest_first)]


__all__ = [
    "agent_preference_loss",
    "bradley_terry_loss",
    "joint_preference_logits",
    "lambda_decay_weights",
    "last_real_positions",
    "pool_last_real",
    "zscore",
]

"""The learners' objectives as small pure functions: returns, baselines, advantages, TD and
GAE targets, the off-policy weight, and the clipped policy and value losses. Each docstring gives
its formula; the learners only gather the numbers these functions take.

Monte-Carlo returns and sibling baselines (MA-REINFORCE, MAGRPO). A rollout tree node expanded
with K samples per agent has children, one per joint action, each with its reward r and return
R = r + gamma * mean(R of its own children) (R = r at a leaf). For agent i, sample k's return
G_k is the mean R over the joint actions it took part in (one in aligned mode; K^(N-1) in cross
mode, where the reference's SUM would scale advantages by K^(N-1)). The advantage of sample k
subtracts a baseline b over the K siblings:

    raw:  b = 0            mean: b = mean(G)
    rloo: b = mean of the other siblings = (sum(G) - G_k) / (K - 1)
    max:  b = max(G)

(baseline "none" is "raw" by the name CoMLRL's docs use) and then one of three normalisations:

    none:   A_k                                   (the baselines stay apart)
    std:    A_k / s(G)                            (no re-centring: the baseline keeps its meaning)
    zscore: (A_k - mean(A)) / s(A)                (CoMLRL's; every baseline then gives MAGRPO's A)

where s is by default the reference's population std clamped at 1e-6,
max(sqrt(mean((x - mean x)^2)), 1e-6); with std="unbiased" the (K - 1) std + 1e-8 (collabzoo
before 0.2: 1.15x smaller advantages at K=4). z-scoring removes any per-group constant and any
positive scale, and every baseline is G minus a group constant (rloo: times K/(K-1)), which is
why CoMLRL's MARLOO, MAReMax and MAREINFORCE equal its MAGRPO under their default normalisation.

Grouped standardisation (Dr. MAS, Feng et al. 2026). A sample is one agent step s with a score
r_s, tagged with its trajectory and its agent; the steps of one prompt are standardised in
groups, each with its mean mu and unbiased std sigma (a one-member group: mu = 0, sigma = 1):

    A_s = (r_s - mu_g(s)) / (sigma_g(s) + 1e-6)

    trajectory: one value per trajectory, the mean of its steps' scores, standardised over the
                prompt's trajectories; every step gets its trajectory's (vanilla GRPO)
    agent:      g = the steps of the same agent in any trajectory (Dr. MAS)
    step:       g = every step of every agent (the pooled, step-level ablation)

TD and GAE (IAC, IPPO, CC). For team rewards r_t, critic values V(s_t) and the value after the
last step (0 when the episode terminated):

    delta_t = r_t + gamma * V(s_{t+1}) - V(s_t)                  (TD error; TD(0) advantage)
    A_t     = delta_t + gamma * lambda * A_{t+1},  A_T = 0       (GAE(lambda))
    y_t     = A_t + V(s_t)                                       (the critic's target)

lambda = 0 gives IAC's TD(0) advantage and target y_t = r_t + gamma V(s_{t+1}); lambda = 1 the
Monte-Carlo return minus the baseline V(s_t). On a rollout tree (K children at a node) the
recursion averages A over the children of s_{t+1}, as the Monte-Carlo returns average R
(`branch_estimates`).

Off-policy weight. An engine that samples for the trainer (vLLM) and the trainer that scores
the same tokens (transformers) run different kernels and precisions, so the rollout is slightly
off-policy; each token's policy-gradient term is weighted by the truncated ratio

    w_t = min(pi_train(a_t | h_t) / pi_sampler(a_t | h_t), C)

(truncated importance sampling, as TRL and verl do with vLLM): pi_train is the policy the update
starts from, detached, so w_t reweights the gradient and is never differentiated; C bounds the
variance a rare large ratio would add.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass
from typing import Protocol, TypeVar

import torch

BASELINES = ("raw", "none", "mean", "rloo", "max")
"""A = G - b with b = 0 ("raw"; "none" is the same), the mean, the mean of the others, the max."""
NORMALIZATIONS = ("zscore", "std", "none")
STD_MODES = ("population", "unbiased")
STD_FLOOR = 1e-6
"""The reference's clamp of the population std (a group of equal returns divides by this)."""
UNBIASED_EPS = 1e-8
ADVANTAGE_GROUPS = ("trajectory", "agent", "step")
GROUP_EPS = 1e-6
"""Dr. MAS's (verl's) epsilon added to the group's unbiased std."""


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
    normalize: bool | str = False,
    *,
    std: str = "population",
) -> list[float]:
    """Advantages of K sibling samples from their returns G (see the module docstring).

    `normalize` is one of NORMALIZATIONS; the booleans of earlier versions keep their
    meaning: False is "none", True is "std" (for the mean baseline the same as "zscore")."""
    if baseline not in BASELINES:
        raise ValueError(f"baseline must be one of {BASELINES}, got {baseline!r}")
    mode = normalization_mode(normalize)
    if std not in STD_MODES:
        raise ValueError(f"std must be one of {STD_MODES}, got {std!r}")
    k = len(returns)
    if k == 0:
        return []
    total = sum(returns)
    if baseline in ("raw", "none"):
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
    if mode == "none" or k < 2:
        return advantages
    if mode == "std":
        return [a / _spread(returns, std) for a in advantages]
    centre = sum(advantages) / k
    scale = _spread(advantages, std)
    return [(a - centre) / scale for a in advantages]


def normalization_mode(normalize: bool | str) -> str:
    """The normalisation a setting names: one of NORMALIZATIONS, or an old boolean (True:
    "std", dividing by the group std without re-centring, as collabzoo did; False: "none")."""
    if isinstance(normalize, bool):
        return "std" if normalize else "none"
    if normalize not in NORMALIZATIONS:
        raise ValueError(
            f"advantage normalization must be one of {NORMALIZATIONS} (or a boolean: True is "
            f"'std', False 'none'), got {normalize!r}"
        )
    return normalize


def _spread(values: Sequence[float], std: str) -> float:
    """The group's std: population clamped at 1e-6 (the reference's) or unbiased + 1e-8."""
    k = len(values)
    mean = sum(values) / k
    squares = sum((v - mean) ** 2 for v in values)
    if std == "population":
        return max(math.sqrt(squares / k), STD_FLOOR)
    return math.sqrt(squares / (k - 1)) + UNBIASED_EPS


# ----- grouped standardisation (Dr. MAS) -----------------------------------------------------


@dataclass(frozen=True)
class StepScore:
    """One agent step of one prompt's rollouts, as `grouped_step_advantages` groups it."""

    trajectory: Hashable
    """Which of the prompt's trajectories the step belongs to."""
    agent: Hashable
    """Which agent took it (by id, even where agents share one model, as Dr. MAS groups)."""
    score: float
    """r_s: the trajectory's team outcome (minus any per-step penalty)."""


def standardize_group(
    values: Sequence[float], *, scale: bool = True, epsilon: float = GROUP_EPS
) -> list[float]:
    """(x - mu) / (sigma + epsilon) over one group, sigma the unbiased std; a one-member group
    takes mu = 0, sigma = 1 (verl's GRPO outcome advantage, which Dr. MAS builds on). Without
    `scale` (verl's norm_adv_by_std_in_grpo=False) only the mean is taken off."""
    if len(values) == 0:
        return []
    if len(values) == 1:
        mu, sigma = 0.0, 1.0
    else:
        mu = sum(values) / len(values)
        sigma = math.sqrt(sum((v - mu) ** 2 for v in values) / (len(values) - 1))
    if not scale:
        return [v - mu for v in values]
    return [(v - mu) / (sigma + epsilon) for v in values]


def grouped_step_advantages(
    steps: Sequence[StepScore], group: str = "agent", *, scale: bool = True
) -> list[float]:
    """Each step's advantage, standardised over one prompt's steps in `group` groups: one of
    ADVANTAGE_GROUPS (see the module docstring). "agent" is Dr. MAS's agent-wise
    normalisation (its Eq. 5): per agent its own mean and std, so an agent whose scores are
    rarer or noisier is not scaled by the others' statistics; "trajectory" is the vanilla GRPO
    it is measured against; "step" pools every agent's steps (the missing ablation of Dr. MAS
    issue #81: it counts steps as "agent" does, with the statistics shared)."""
    if group not in ADVANTAGE_GROUPS:
        raise ValueError(f"advantage_group must be one of {ADVANTAGE_GROUPS}, got {group!r}")
    advantages = [0.0] * len(steps)
    if group == "trajectory":
        members: dict[Hashable, list[int]] = {}
        for index, step in enumerate(steps):
            members.setdefault(step.trajectory, []).append(index)
        means = [sum(steps[i].score for i in found) / len(found) for found in members.values()]
        for found, value in zip(
            members.values(), standardize_group(means, scale=scale), strict=True
        ):
            for index in found:
                advantages[index] = value
        return advantages
    groups: dict[Hashable, list[int]] = {}
    for index, step in enumerate(steps):
        groups.setdefault(step.agent if group == "agent" else None, []).append(index)
    for found in groups.values():
        values = standardize_group([steps[i].score for i in found], scale=scale)
        for index, value in zip(found, values, strict=True):
            advantages[index] = value
    return advantages


# ----- TD errors and GAE along one trajectory ------------------------------------------------


def td_error(r: float, v_next: float, v: float, gamma: float) -> float:
    """delta = r + gamma * V(s') - V(s): the one-step TD error, every TD target's building block
    (a trajectory's in `td_errors`, a rollout tree's in `branch_estimates`)."""
    return r + gamma * v_next - v


def gae_step(delta: float, later: float, gamma: float, lam: float) -> float:
    """A_t = delta_t + gamma * lambda * A_{t+1}: one step of the GAE(lambda) recursion, where
    `later` is A_{t+1} (on a tree, the mean over the children of s_{t+1}; 0 after the end)."""
    return delta + gamma * lam * later


def td_errors(
    rewards: Sequence[float], values: Sequence[float], last_value: float, gamma: float
) -> list[float]:
    """delta_t for t = 0 .. T-1; `last_value` is V(s_T) (0 for a terminated episode)."""
    if len(rewards) != len(values):
        raise ValueError(f"{len(rewards)} rewards but {len(values)} values: one per step")
    following = [*values[1:], last_value]
    return [
        td_error(r, v_next, v, gamma)
        for r, v, v_next in zip(rewards, values, following, strict=True)
    ]


def gae(deltas: Sequence[float], gamma: float, lam: float) -> list[float]:
    """A_t = delta_t + gamma * lambda * A_{t+1}, computed backwards from A_T = 0."""
    advantages = [0.0] * len(deltas)
    running = 0.0
    for t in reversed(range(len(deltas))):
        running = gae_step(deltas[t], running, gamma, lam)
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


# ----- the off-policy weight -----------------------------------------------------------------


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


# ----- actor-critic losses and estimates on a rollout tree ---------------------------------


def clipped_policy_loss(
    log_probs: torch.Tensor,
    old_log_probs: torch.Tensor,
    advantages: torch.Tensor,
    mask: torch.Tensor,
    clip_range: float | None,
    weights: torch.Tensor | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """PPO's clipped surrogate with per-token ratios rho_t = exp(log pi - log pi_old), summed
    over each completion's tokens (the macro-action's log-probability is a sum) and averaged
    over completions: -mean_g sum_t w_t min(rho_t A_g, clip(rho_t, 1 - eps, 1 + eps) A_g),
    where w_t is the off-policy weight of a vLLM-sampled token (1 without).
    Without clipping it is -mean_g sum_t w_t rho_t A_g, whose gradient at rho = 1 is the plain
    policy gradient. Returns (loss, fraction of real tokens whose ratio was clipped)."""
    ratio = torch.exp((log_probs - old_log_probs).masked_fill(~mask, 0.0))
    advantage = advantages.unsqueeze(-1)
    surrogate = ratio * advantage
    clipped_fraction = torch.zeros((), device=log_probs.device)
    if clip_range is not None:
        bounded = torch.clamp(ratio, 1.0 - clip_range, 1.0 + clip_range) * advantage
        surrogate = torch.minimum(surrogate, bounded)
        outside = ((ratio - 1.0).abs() > clip_range) & mask
        clipped_fraction = outside.sum() / mask.sum().clamp(min=1)
    if weights is not None:
        surrogate = surrogate * weights
    loss = -(surrogate.masked_fill(~mask, 0.0).sum(-1)).mean()
    return loss, clipped_fraction


def value_loss(
    values: torch.Tensor,
    old_values: torch.Tensor,
    targets: torch.Tensor,
    clip_range: float | None,
) -> torch.Tensor:
    """mean (V - y)^2, or with clipping mean max((V - y)^2, (V_old + clip(V - V_old) - y)^2)."""
    loss = (values - targets) ** 2
    if clip_range is not None:
        clipped = old_values + torch.clamp(values - old_values, -clip_range, clip_range)
        loss = torch.maximum(loss, (clipped - targets) ** 2)
    return loss.mean()


def _mean(values: list[float]) -> float:
    return sum(values) / len(values) if values else 0.0


class Transition(Protocol):
    """A joint action out of a tree state as `branch_estimates` reads it (`rollout.tree.Child`)."""

    @property
    def reward(self) -> float: ...

    @property
    def node(self) -> Branching | None: ...


class Branching(Protocol):
    """A rollout tree's state as `branch_estimates` reads it (`rollout.tree.Node`): a protocol,
    so that these functions need nothing of the rollout, which imports them."""

    @property
    def agents(self) -> Sequence[str]: ...

    @property
    def children(self) -> Sequence[Transition]: ...


StateT = TypeVar("StateT", bound=Branching)


def branch_estimates(
    node: StateT,
    value_of: Callable[[StateT, int], float],
    agent: str | None,
    gamma: float,
    lam: float,
    out: dict[Hashable, tuple[float, float, float]],
    baseline_of: Callable[[StateT], float] | None = None,
) -> list[float]:
    """(A, y, V) of every transition below `node` into `out`, keyed by (id(node), child index);
    returns A of `node`'s own transitions.

    `value_of(node, index)` is the critic's value where a transition starts: V(s) (the same for
    every child) or Q(s, a_index). V after a branch's last turn is 0; where a node has several
    children, the next turn's value and advantage are their means. `agent`: whose branch this
    is (its transitions end where it leaves the game); None for the team.

    With `baseline_of` (a Q critic), A = Q(s, a) - baseline_of(s) and y = r + gamma mean Q(s', .)
    instead of the TD error and the lambda-return."""
    advantages = []
    for index, child in enumerate(node.children):
        value = value_of(node, index)
        nxt = child.node
        if nxt is not None and nxt.children and (agent is None or agent in nxt.agents):
            later = _mean(branch_estimates(nxt, value_of, agent, gamma, lam, out, baseline_of))
            next_value = _mean([value_of(nxt, j) for j in range(len(nxt.children))])
        else:
            later = next_value = 0.0
        delta = td_error(child.reward, next_value, value, gamma)
        if baseline_of is None:
            advantage = gae_step(delta, later, gamma, lam)
            out[(id(node), index)] = (advantage, advantage + value, value)
        else:
            advantage = value - baseline_of(node)
            out[(id(node), index)] = (advantage, delta + value, value)
        advantages.append(advantage)
    return advantages


# ----- AT-GRPO: agent- and turn-wise groups, verl's clipped token-mean loss -------------------

AT_GRPO_EPSILON = 1e-6
"""Added to the unbiased group std (verl's GRPO advantage: norm_adv_by_std_in_grpo)."""


def agent_turn_group_advantages(
    rewards: Sequence[float],
    keys: Sequence[Hashable],
    *,
    normalize: bool = True,
    epsilon: float = AT_GRPO_EPSILON,
) -> list[float]:
    """AT-GRPO's advantages: each sample's reward against the other samples of its group (the
    samples sharing its key, by default (episode, turn, agent)),

        A = (r - mean_group(r)) / (std_u,group(r) + epsilon)     (normalize)
        A = r - mean_group(r)                                    (not normalize)

    with std_u the unbiased (K - 1) std. A group of one sample gets A = 0 (its own mean; the
    PettingLLMs-vendored verl's choice, where upstream verl gives r)."""
    if len(rewards) != len(keys):
        raise ValueError(f"{len(rewards)} rewards for {len(keys)} group keys")
    members: dict[Hashable, list[int]] = {}
    for index, key in enumerate(keys):
        members.setdefault(key, []).append(index)
    advantages = [0.0] * len(rewards)
    for indices in members.values():
        if len(indices) < 2:  # Dr. MAS's one-member rule (mu = 0, sigma = 1) does not apply here
            continue
        values = [float(rewards[i]) for i in indices]
        for i, value in zip(
            indices, standardize_group(values, scale=normalize, epsilon=epsilon), strict=True
        ):
            advantages[i] = value
    return advantages


def low_mean_groups(
    rewards: Sequence[float], keys: Sequence[Hashable], fraction: float
) -> set[Hashable]:
    """The groups to drop before an update: the int(fraction * groups) groups with the lowest
    mean reward (ties broken by first appearance); PettingLLMs' filter_method "mean" (its
    shipped filter_ratio is 0.5), which it applies to each model's batch."""
    if not 0.0 <= fraction < 1.0:
        raise ValueError(f"fraction must be in [0, 1), got {fraction!r}")
    sums: dict[Hashable, list[float]] = {}
    for reward, key in zip(rewards, keys, strict=True):
        sums.setdefault(key, []).append(float(reward))
    order = sorted(sums, key=lambda k: sum(sums[k]) / len(sums[k]))  # stable: first seen first
    return set(order[: int(fraction * len(order))])


def token_mean_clipped_loss(
    log_probs: torch.Tensor,
    old_log_probs: torch.Tensor,
    advantages: torch.Tensor,
    mask: torch.Tensor,
    *,
    clip_low: float = 0.2,
    clip_high: float = 0.2,
    clip_ratio_c: float | None = None,
    tokens: int | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """verl's clipped PPO loss, aggregated as a token mean. Per token,
    rho_t = exp(clamp(log pi - log pi_old, -20, 20)) and

        l_t = max(-A rho_t, -A clip(rho_t, 1 - clip_low, 1 + clip_high))
        l_t = min(l_t, -A * clip_ratio_c)            where A < 0, with a `clip_ratio_c`

    (the dual clip: upstream verl's, which the verl vendored in PettingLLMs comments out);

    the loss is the sum of l_t over real tokens / `tokens` (the mini-batch's real tokens; by default
    these rows'), so chunks of one mini-batch add up to its token mean. At rho = 1 with no
    clipping active it is -sum_g |y_g| A_g / sum_g |y_g|. Returns (loss, the fraction of real
    tokens whose ratio was clipped)."""
    ratio = torch.exp(torch.clamp((log_probs - old_log_probs).masked_fill(~mask, 0.0), -20, 20))
    advantage = advantages.unsqueeze(-1)
    unclipped = -advantage * ratio
    clipped = -advantage * torch.clamp(ratio, 1.0 - clip_low, 1.0 + clip_high)
    per_token = torch.maximum(unclipped, clipped)
    if clip_ratio_c is not None:
        dual = torch.minimum(per_token, -advantage * clip_ratio_c)
        per_token = torch.where(advantage < 0, dual, per_token)
    count = int(mask.sum()) if tokens is None else tokens
    loss = per_token.masked_fill(~mask, 0.0).sum() / max(1, count)
    outside = ((ratio < 1.0 - clip_low) | (ratio > 1.0 + clip_high)) & mask
    return loss, outside.sum() / mask.sum().clamp(min=1)

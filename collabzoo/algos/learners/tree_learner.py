"""The shared trainer of the Monte-Carlo learners (MA-REINFORCE, MAGRPO) on rollout trees.

Per update: grow `rollout_buffer_size` trees (episodes seeded deterministically from the run
seed and the update index, so a resumed run sees the same data order), compute each expanded
node's sibling-group advantages per agent (the baseline `advantage_mode`, `objectives`), and
take one optimizer step on

    loss_i = - mean_g( A_g * sum_t log pi_i(a_g,t | h_g) )  [+ kl_coef * mean_t k3(q_t)]

for each agent i, where pi_i is the distribution the rollout sampled from (temperature, top-k,
top-p). Rollouts sampled by vLLM weight each token's term by min(pi_i / pi_vllm, C)
(`objectives`). Each distinct policy has its own optimizer, gradient clip and skip
(`runtime.update_groups`): a non-finite loss skips that policy's step only and is reported; it never
becomes a constant. The loss pass runs in train mode, the KL reference pass in eval mode. A
learner is this loop with its config's defaults: MAGRPO the group mean, z-scored;
MA-REINFORCE no baseline, MARLOO the leave-one-out and MAReMax the max baseline, unnormalised.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import torch

from collabzoo.algos.learners.config import (
    LearnerConfig,
    require_at_least,
    require_positive,
)
from collabzoo.algos.learners.learner import Learner
from collabzoo.algos.learners.stats import DriftLog
from collabzoo.algos.objectives import (
    ADVANTAGE_GROUPS,
    BASELINES,
    STD_MODES,
    StepScore,
    group_advantages,
    grouped_step_advantages,
    normalization_mode,
    sample_returns,
    truncated_importance_weights,
)
from collabzoo.algos.policies.policy import Policy
from collabzoo.algos.policies.sampling import Sampling
from collabzoo.algos.rollout.tree import JOINT_MODES, Node, expanded_nodes
from collabzoo.algos.runtime.placement import model_device


@dataclass(frozen=True)
class TreeSample:
    """One agent's completion in a tree learner's batch, with its advantage."""

    prompt_ids: Sequence[int]
    completion_ids: Sequence[int]
    advantage: float
    sampler_log_probs: Sequence[float] | None = None
    """The sampling engine's log-probabilities (vLLM rollouts), for the off-policy weight."""


@dataclass
class TreeLearnerConfig(LearnerConfig):
    """Settings of the rollout-tree learners (reference names and defaults)."""

    joint_mode: str = "aligned"
    """'aligned' (K joint actions per node) or 'cross' (K^N)."""
    advantage_mode: str = "mean"
    """The baseline b of A = G - b over a node's K sibling returns: 'raw' or 'none' (0),
    'mean', 'rloo' (the mean of the other siblings) or 'max'."""
    advantage_normalization: bool | str = "zscore"
    """'zscore' (A - mean A) / std A, CoMLRL's (it makes every baseline MAGRPO's); 'std': A /
    std of the group's returns, no re-centring (the baseline keeps its meaning); 'none'. The
    booleans of earlier versions keep their meaning: true is 'std', false 'none'."""
    advantage_group: str = "node"
    """Over what the advantages are standardised: 'node' (each node's K siblings, per agent:
    MAGRPO's), or per episode 'trajectory' (vanilla GRPO), 'agent' (Dr. MAS: an agent's samples
    at every node) or 'step' (all agents' samples pooled); the last three with the mean
    baseline, the unbiased std + 1e-6, and 'zscore' or 'none'."""
    agent_learning_rate: float = 5.0e-6
    """AdamW learning rate of every policy (each has its own optimizer)."""
    advantage_std: str = "population"
    """The group std that normalises advantages: 'population' clamped at 1e-6 (the
    reference's), or 'unbiased' + 1e-8 (collabzoo before 0.2)."""
    reference_kl_enabled: bool = False
    """Add a k3 KL penalty to a frozen reference policy (the LoRA base when there is one)."""
    reference_kl_coef: float = 0.1
    """beta of the KL penalty when `reference_kl_enabled`."""

    agent_fields = (*LearnerConfig.agent_fields, "agent_learning_rate")

    def validate(self) -> None:
        super().validate()
        if self.joint_mode not in JOINT_MODES:
            raise ValueError(f"joint_mode must be one of {JOINT_MODES}, got {self.joint_mode!r}")
        require_positive(self, "agent_learning_rate")
        require_at_least(self, 0, "reference_kl_coef")
        if self.advantage_mode not in BASELINES:
            raise ValueError(
                f"advantage_mode must be one of {BASELINES}, got {self.advantage_mode!r}"
            )
        if self.advantage_std not in STD_MODES:
            raise ValueError(
                f"advantage_std must be one of {STD_MODES}, got {self.advantage_std!r}"
            )
        if self.advantage_mode == "rloo" and self.num_generations < 2:
            raise ValueError(
                "the rloo baseline leaves each sample out of its siblings' mean: it needs "
                f"num_generations of at least 2, got {self.num_generations}"
            )
        normalization = normalization_mode(self.advantage_normalization)
        if self.advantage_group == "node":
            return
        if self.advantage_group not in ADVANTAGE_GROUPS:
            groups = ("node", *ADVANTAGE_GROUPS)
            raise ValueError(
                f"advantage_group must be one of {groups}, got {self.advantage_group!r}"
            )
        if self.advantage_mode != "mean" or normalization == "std":
            raise ValueError(
                f"advantage_group={self.advantage_group!r} standardises with the group mean "
                "(Dr. MAS): it needs advantage_mode='mean' and advantage_normalization 'zscore' "
                f"or 'none', got {self.advantage_mode!r} and {self.advantage_normalization!r}"
            )
        if self.advantage_group == "trajectory" and self.joint_mode != "aligned":
            raise ValueError(
                "advantage_group='trajectory' needs joint_mode='aligned': a crossed node's "
                "sample takes part in K^(N-1) joint actions, not in one trajectory"
            )


class TreeLearner(Learner):
    """Base of the Monte-Carlo learners: what sets one apart is its config."""

    algorithm = "tree"

    def __init__(
        self,
        env: Any,
        models: Any,
        args: TreeLearnerConfig,
        *,
        tokenizer: Any = None,
        eval_env: Any = None,
    ) -> None:
        super().__init__(
            env, models, args, tokenizer=tokenizer, eval_env=eval_env, joint_mode=args.joint_mode
        )
        self.add_policy_groups()
        self.drift = DriftLog()
        """The sampler drift of the current update (vLLM rollouts only)."""
        self.references: dict[int, Any] = {}
        if args.reference_kl_enabled:
            for policy in self.distinct:
                if policy.adapter is None:  # no LoRA base to fall back on: a frozen copy
                    frozen = policy.copy()
                    frozen.model.eval()
                    for p in frozen.model.parameters():
                        p.requires_grad_(False)
                    if policy.compute_dtype is not None:  # frozen: no master weights needed
                        frozen.model.to(policy.compute_dtype)
                    self.references[id(policy)] = frozen

    # ----- rewards and advantages ---------------------------------------------------------------
    def node_advantages(self, node: Node) -> dict[str, list[float]]:
        """Per agent trained at this update, the advantages of its K samples at this node
        (advantage_group 'node'; computed from that agent's own samples only)."""
        joints = [c.joint for c in node.children]
        returns = [c.ret for c in node.children]
        trained = set(self.trained_agents)
        return {
            agent: group_advantages(
                sample_returns(joints, returns, position, node.k),
                self.args.advantage_mode,
                self.args.advantage_normalization,
                std=self.args.advantage_std,
            )
            for position, agent in enumerate(node.agents)
            if agent in trained
        }

    def tree_advantages(self, root: Node) -> dict[int, dict[str, list[float]]]:
        """id(node) -> per agent, the advantages of its K samples at that node.

        With a Dr. MAS `advantage_group` the steps are every agent's samples at every node of
        the episode's tree, each scored by its return G (a sample's trajectory is the joint
        action it took part in, aligned mode), standardised together (`objectives`). Only the
        agents trained at this update take part: a frozen agent's samples are in no group."""
        nodes = expanded_nodes(root)
        if self.args.advantage_group == "node":
            return {id(node): self.node_advantages(node) for node in nodes}
        trained = set(self.trained_agents)
        steps: list[StepScore] = []
        for node in nodes:
            joints = [c.joint for c in node.children]
            returns = [c.ret for c in node.children]
            for position, agent in enumerate(node.agents):
                if agent not in trained:
                    continue
                scores = sample_returns(joints, returns, position, node.k)
                steps += [StepScore((id(node), k), agent, g) for k, g in enumerate(scores)]
        scale = normalization_mode(self.args.advantage_normalization) != "none"
        flat = iter(grouped_step_advantages(steps, self.args.advantage_group, scale=scale))
        return {
            id(node): {
                agent: [next(flat) for _ in range(node.k)]
                for agent in node.agents
                if agent in trained
            }
            for node in nodes
        }

    # ----- one update ---------------------------------------------------------------------------
    def training_batch(self, roots: list[Node]) -> dict[str, list[TreeSample]]:
        """Per agent trained at this update: a `TreeSample` of every sample."""
        batch: dict[str, list[TreeSample]] = {a: [] for a in self.trained_agents}
        for root in roots:
            advantages_at = self.tree_advantages(root)
            for node in expanded_nodes(root):
                for agent, advantages in advantages_at[id(node)].items():
                    for completion, advantage in zip(node.samples[agent], advantages, strict=True):
                        batch[agent].append(
                            TreeSample(
                                completion.prompt_ids,
                                completion.completion_ids,
                                advantage,
                                completion.sampler_log_probs,
                            )
                        )
        return batch

    def _kl(
        self,
        policy: Policy,
        prompts: Any,
        completions: Any,
        log_probs: torch.Tensor,
        mask: torch.Tensor,
        sampling: Sampling | None = None,
    ) -> torch.Tensor:
        """k3 estimator exp(q) - q - 1, q = log p_ref - log p, averaged over real tokens; both
        under the sampling distribution, the reference in eval mode."""
        sampling = sampling or self.sampling
        with torch.no_grad():
            if policy.adapter is not None:
                with policy.reference(), policy.mode(train=False):
                    ref, _ = policy.token_log_probs(prompts, completions, sampling=sampling)
            else:
                reference = self.references[id(policy)]
                model = getattr(reference, "model", None)
                if model is not None and model_device(model) != policy.device:
                    model.to(policy.device)  # the policy was moved after construction
                ref, _ = reference.token_log_probs(prompts, completions, sampling=sampling)
        q = (ref - log_probs).masked_fill(~mask, 0.0)
        per_token = (torch.exp(q) - q - 1.0).masked_fill(~mask, 0.0)
        return per_token.sum() / mask.sum().clamp(min=1)

    def _policy_loss(
        self,
        agent: str,
        samples: Sequence[TreeSample],
        metrics: dict[str, float],
        total: int | None = None,
    ) -> bool:
        """Backpropagate one agent's loss in chunks; False at the first non-finite chunk.

        Samples drawn by another engine (vLLM) weight each token's term by the truncated
        importance ratio w_t = min(pi / pi_sampler, C) of `objectives`, taken at the policy the
        step starts from: -mean_g(A_g sum_t w_t log pi(a_g,t | h_g)). The mean is over `total`
        samples: every rank's in a data-parallel run (see `data_parallel`), else these."""
        policy, sampling = self.policies[agent], self.sampling_of(agent)
        total = total or len(samples)
        chunk = max(1, self.args.logprob_batch_size)
        agent_loss = agent_kl = 0.0
        outside = 0
        for start in range(0, len(samples), chunk):
            part = samples[start : start + chunk]
            prompts = [s.prompt_ids for s in part]
            completions = [s.completion_ids for s in part]
            advantages = torch.tensor([s.advantage for s in part], device=policy.device)
            scored = policy.score(prompts, completions, sampling=sampling)
            outside += scored.outside_kept
            weighted = scored.log_probs
            sampler = [s.sampler_log_probs for s in part]
            if any(found is not None for found in sampler):
                found = truncated_importance_weights(
                    scored.log_probs, sampler, scored.mask, self.args.vllm_importance_sampling_cap
                )
                self.drift.add(found)
                weighted = scored.log_probs * found.weights
            loss = -(advantages * weighted.sum(-1)).sum() / total
            if self.args.reference_kl_enabled:
                kl = self._kl(policy, prompts, completions, scored.log_probs, scored.mask, sampling)
                loss = loss + self.args.reference_kl_coef * kl * len(part) / total
                agent_kl += kl.item() * len(part) / total
            if not torch.isfinite(loss):
                return False
            with torch.profiler.record_function("collabzoo.backward"):
                policy.backward(loss)
            agent_loss += loss.item()
        metrics[f"loss/{agent}"] = agent_loss
        metrics["outside_kept_tokens"] = metrics.get("outside_kept_tokens", 0.0) + outside
        if self.args.reference_kl_enabled:
            metrics[f"kl/{agent}"] = agent_kl
        return True

    def optimize(self, batch: dict[str, Sequence[TreeSample]]) -> dict[str, float]:
        """One step per distinct policy: its agents' losses, its own clip, its own skip;
        none for a policy frozen at this update."""
        metrics: dict[str, float] = {}
        self.drift = DriftLog()
        norms: list[float] = []
        skipped = 0
        counts = [float(len(batch.get(a, []))) for a in self.agents]
        if self.parallel is not None:  # the loss is a mean over every rank's samples
            counts = self.parallel.sum(counts)
        totals = {a: int(n) for a, n in zip(self.agents, counts, strict=True)}
        for policy in self.distinct:
            name = self.policy_name(policy)
            group = self.groups[name]
            if group.frozen:
                continue
            group.zero_grad()
            agents = [a for a in self.agents if self.policies[a] is policy and batch.get(a)]
            with policy.mode(train=True):
                finite = all(
                    self._policy_loss(agent, batch[agent], metrics, totals[agent])
                    for agent in agents
                )
            norm = group.step(loss_finite=finite)
            if norm is None:
                skipped += 1
                metrics[f"skipped/{name}"] = 1.0
                continue
            metrics[f"grad_norm/{name}"] = norm
            norms.append(norm)
        metrics.update(
            loss=sum(v for k, v in metrics.items() if k.startswith("loss/")),
            grad_norm=max(norms, default=0.0),
            skipped=float(skipped),
            skipped_updates=float(self.skipped_updates),
        )
        metrics.update(self.drift.metrics())
        return metrics

    def learn(self, roots: list[Node]) -> dict[str, float]:
        return self.optimize(self.training_batch(roots))

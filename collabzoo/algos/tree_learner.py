"""The shared trainer of the Monte-Carlo learners (MA-REINFORCE, MAGRPO) on rollout trees.

Per update: grow `rollout_buffer_size` trees (episodes seeded deterministically from the run
seed and the update index, so a resumed run sees the same data order), compute each expanded
node's sibling-group advantages per agent, and take one optimizer step on

    loss_i = - mean_g( A_g * sum_t log pi_i(a_g,t | h_g) )  [+ kl_coef * mean_t k3(q_t)]

summed over agents. A learner subclass only chooses the baseline and normalisation. A non-finite
loss skips the update and is reported; it never becomes a constant.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch

from collabzoo.algos.advantages import group_advantages, sample_returns
from collabzoo.algos.learner import Learner, LearnerConfig, adamw
from collabzoo.algos.policy import LLMPolicy
from collabzoo.algos.rollout_tree import Node, expanded_nodes


@dataclass
class TreeLearnerConfig(LearnerConfig):
    """Settings of the rollout-tree learners (reference names and defaults)."""

    joint_mode: str = "aligned"
    """'aligned' (K joint actions per node) or 'cross' (K^N)."""
    agent_learning_rate: float = 5.0e-6
    reference_kl_enabled: bool = False
    """Add a k3 KL penalty to a frozen reference policy (the LoRA base when there is one)."""
    reference_kl_coef: float = 0.1


class TreeLearner(Learner):
    """Base of the Monte-Carlo learners; subclasses set `baseline` (and their config class)."""

    baseline = "mean"
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
        super().__init__(env, models, args, tokenizer=tokenizer, eval_env=eval_env)
        self.optimizer = adamw(self.actor_parameters(), args.agent_learning_rate, args)
        self.references: dict[int, Any] = {}
        if args.reference_kl_enabled:
            for policy in self.distinct:
                if policy.adapter is None:  # no LoRA base to fall back on: a frozen copy
                    frozen = policy.copy()
                    frozen.model.eval()
                    for p in frozen.model.parameters():
                        p.requires_grad_(False)
                    self.references[id(policy)] = frozen

    # ----- rewards and advantages ---------------------------------------------------------------
    def node_advantages(self, node: Node) -> dict[str, list[float]]:
        """Per agent, the advantages of its K samples at this node."""
        joints = [c.joint for c in node.children]
        returns = [c.ret for c in node.children]
        return {
            agent: group_advantages(
                sample_returns(joints, returns, position, node.k),
                self.baseline,
                self.args.advantage_normalization,
            )
            for position, agent in enumerate(node.agents)
        }

    # ----- one update ---------------------------------------------------------------------------
    def training_batch(self, roots: list[Node]) -> dict[str, list[tuple[Any, Any, float]]]:
        """Per agent: (prompt ids, completion ids, advantage) of every sample."""
        batch: dict[str, list[tuple[Any, Any, float]]] = {a: [] for a in self.agents}
        for root in roots:
            for node in expanded_nodes(root):
                for agent, advantages in self.node_advantages(node).items():
                    for completion, advantage in zip(node.samples[agent], advantages, strict=True):
                        batch[agent].append(
                            (completion.prompt_ids, completion.completion_ids, advantage)
                        )
        return batch

    def _kl(
        self,
        policy: LLMPolicy,
        prompts: Any,
        completions: Any,
        log_probs: torch.Tensor,
        mask: torch.Tensor,
    ) -> torch.Tensor:
        """k3 estimator exp(q) - q - 1, q = log p_ref - log p, averaged over real tokens."""
        with torch.no_grad():
            if policy.adapter is not None:
                with policy.reference():
                    ref, _ = policy.token_log_probs(prompts, completions)
            else:
                ref, _ = self.references[id(policy)].token_log_probs(prompts, completions)
        q = (ref - log_probs).masked_fill(~mask, 0.0)
        per_token = (torch.exp(q) - q - 1.0).masked_fill(~mask, 0.0)
        return per_token.sum() / mask.sum().clamp(min=1)

    def optimize(self, batch: dict[str, list[tuple[Any, Any, float]]]) -> dict[str, float]:
        self.optimizer.zero_grad(set_to_none=True)
        metrics: dict[str, float] = {}
        total = 0.0
        chunk = max(1, self.args.logprob_batch_size)
        for agent, samples in batch.items():
            if not samples:
                continue
            policy = self.policies[agent]
            agent_loss = agent_kl = 0.0
            for start in range(0, len(samples), chunk):
                part = samples[start : start + chunk]
                prompts = [s[0] for s in part]
                completions = [s[1] for s in part]
                advantages = torch.tensor([s[2] for s in part], device=policy.device)
                log_probs, mask = policy.token_log_probs(prompts, completions)
                loss = -(advantages * log_probs.sum(-1)).sum() / len(samples)
                if self.args.reference_kl_enabled:
                    kl = self._kl(policy, prompts, completions, log_probs, mask)
                    loss = loss + self.args.reference_kl_coef * kl * len(part) / len(samples)
                    agent_kl += kl.item() * len(part) / len(samples)
                if not torch.isfinite(loss):
                    self.optimizer.zero_grad(set_to_none=True)
                    self.skipped_updates += 1
                    return {
                        "skipped": 1.0,
                        "skipped_updates": float(self.skipped_updates),
                        "nonfinite_agent": float(self.agents.index(agent)),
                    }
                loss.backward()
                agent_loss += loss.item()
            metrics[f"loss/{agent}"] = agent_loss
            if self.args.reference_kl_enabled:
                metrics[f"kl/{agent}"] = agent_kl
            total += agent_loss
        parameters = [p for group in self.optimizer.param_groups for p in group["params"]]
        norm = torch.nn.utils.clip_grad_norm_(parameters, self.args.max_grad_norm)
        if not torch.isfinite(norm):
            self.optimizer.zero_grad(set_to_none=True)
            self.skipped_updates += 1
            return {"skipped": 1.0, "skipped_updates": float(self.skipped_updates)}
        self.optimizer.step()
        metrics.update(loss=total, grad_norm=float(norm), skipped=0.0)
        return metrics

    def learn(self, roots: list[Node]) -> dict[str, float]:
        return self.optimize(self.training_batch(roots))

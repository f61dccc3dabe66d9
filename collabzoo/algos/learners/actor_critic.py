"""The actor-critic learners (IAC, IPPO, the centralized critic CC) on the shared machinery.

Per update:

1. Roll out `rollout_buffer_size` episodes. At the first turn every agent samples K =
   `num_generations` completions (K branches of the episode); at later turns one each. Every
   turn is one generate call per distinct policy across all episodes and agents.
2. Critic values of every visited state, without gradients and in eval mode: V_i(h_i) per
   agent (IAC, IPPO), or one V(s) over `env.state()` (CC; with `critic_type="q"`, Q(s, a) over
   the state and the joint action, and V(s) over the state alone).
3. Advantages and critic targets along every branch (`objectives.branch_estimates`):
       delta_t = r_t + gamma V(s_{t+1}) - V(s_t),   A_t = delta_t + gamma lambda A_{t+1},
       y_t = A_t + V(s_t)
   with lambda = 0 (TD(0)) for IAC and CC and `gae_lambda` for IPPO; V after the last turn is 0.
   A Q critic's advantage is A = Q(s, a) - b(s) with an action-independent baseline: the mean Q
   over the node's sampled joint actions where it has two or more, else V(s) (its own TD error
   r + gamma Q(s', .) - Q(s, a) is zero in expectation for every action); its target is
   y = r + gamma mean Q(s', .), for Q(s, a) and V(s) alike.
   With advantage normalisation, each agent's advantages are z-scored over the update.
4. `epochs` passes over the samples in mini-batches (each scored in prompt order, so a
   state's K branches share its prompt's pass: `group_by_prompt`), one optimizer step per
   mini-batch on
       actor:  -mean_g sum_t min(rho_t A_g, clip(rho_t, 1-eps, 1+eps) A_g)   (IPPO, rho = pi/pi_old)
               -mean_g A_g sum_t log pi(a_g,t | h_g)                          (IAC, CC)
               - entropy_coef * mean_g (mean token entropy of g)
       critic: value_loss_coef * mean_g (V(h_g) - y_g)^2, or with value clipping
               value_loss_coef * mean_g max((V - y)^2, (V_old + clip(V - V_old, +-c) - y)^2).
   pi is the distribution the rollout sampled from (temperature, top-k, top-p); loss passes run
   in train mode. A rollout sampled by vLLM weights each token's actor term by
   min(pi_old / pi_vllm, C) (`objectives`). CC's critic sees each transition once per pass
   (not once per agent).

Each distinct actor and each critic with a backbone of its own is an `UpdateGroup` with its own
AdamW, gradient clip and skip; a value head on an actor's backbone belongs to that actor's group
(one model, one update). A non-finite loss skips its group's step only and is counted in
`skipped_updates`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from collabzoo.algos.learners.config import (
    ActorCriticRule,
    LearnerConfig,
    require_at_least,
    require_positive,
    update_group,
)
from collabzoo.algos.learners.critic_batches import CriticBatches, CriticSample, Sample
from collabzoo.algos.learners.learner import Learner
from collabzoo.algos.learners.stats import DriftLog
from collabzoo.algos.objectives import clipped_policy_loss, truncated_importance_weights, value_loss
from collabzoo.algos.policies.critics import Critic
from collabzoo.algos.policies.policy import Policy
from collabzoo.algos.rollout.tree import Node
from collabzoo.algos.runtime.update_groups import UpdateGroup


@dataclass
class ActorCriticConfig(LearnerConfig):
    """Settings the actor-critic learners share (reference names and defaults)."""

    rollout_buffer_size: int = 8
    num_generations: int = 1
    """K samples per agent at the first turn, each the start of its own branch; later turns
    sample one per agent."""
    actor_learning_rate: float = 5.0e-6
    """AdamW learning rate of every actor."""
    critic_learning_rate: float = 5.0e-6
    """AdamW learning rate of every critic (its head, and its backbone when it has one)."""
    mini_batch_size: int | None = None
    """Samples per agent per optimizer step (per rank under torchrun); None: all of an
    update's samples at once."""
    value_loss_coef: float = 0.6
    """c: weight of the critic's squared error in its loss."""
    value_clip_range: float | None = 0.2
    """Clip the critic's new value to old +- this in its loss (IPPO; IAC with a shared head)."""
    entropy_coef: float = 0.0
    """beta: weight of the entropy bonus in the actor loss (0: no entropy gradient is computed)."""
    use_separate_critic: bool = True
    """A critic with its own backbone (see `policies.critics`); False: a value head on the actor."""
    critic_devices: dict[str, str] | None = None
    """Per-critic devices (by agent, or "team" for the centralized critic); a critic runs on
    its actor's device otherwise."""
    critic_model_name_or_path: str | None = None
    """The separate critics' model; None: a LoRA adapter on a LoRA actor's base, else a copy
    of the actor's model."""
    value_head_hidden_dim: int | None = None
    """Hidden layer of a value head on the actor's backbone (None: linear head)."""
    critic_value_head_hidden_dim: int | None = None
    """Hidden layer of a separate critic's value head (None: linear head)."""
    group_by_prompt: bool = True
    """Score each mini-batch in prompt order: the K first-turn branches of a state share one
    forward pass of its prompt (actor) or one value (critic) within a `logprob_batch_size`
    chunk, and prompts of like length pad together. The same gradient as the shuffled order
    (False), in fewer token positions."""

    agent_fields = (*LearnerConfig.agent_fields, "actor_learning_rate")

    def validate(self) -> None:
        super().validate()
        require_positive(self, "actor_learning_rate", "critic_learning_rate")
        require_positive(self, "value_clip_range", optional=True)
        require_at_least(self, 0, "value_loss_coef", "entropy_coef")
        hidden = ("mini_batch_size", "value_head_hidden_dim", "critic_value_head_hidden_dim")
        require_at_least(self, 1, *hidden, optional=True)

    def rule(self) -> ActorCriticRule:
        """What this learner's update does differently (see `ActorCriticRule`)."""
        return ActorCriticRule()


def _mean(values: list[float]) -> float:
    return sum(values) / len(values) if values else 0.0


def _prompt_order(sample: Sample | CriticSample) -> tuple[int, list[int]]:
    """Sorts samples of one prompt next to each other, shorter prompts first."""
    ids = sample.prompt_ids if isinstance(sample, Sample) else sample.ids
    return len(ids), ids


class ActorCriticLearner(CriticBatches, Learner):
    """Base of IAC, IPPO and CC: what sets one apart is its config's `rule()`."""

    algorithm = "actor_critic"

    def __init__(
        self,
        env: Any,
        models: Any,
        args: ActorCriticConfig,
        *,
        critics: Any = None,
        tokenizer: Any = None,
        eval_env: Any = None,
    ) -> None:
        self.rule = args.rule()
        super().__init__(
            env,
            models,
            args,
            tokenizer=tokenizer,
            eval_env=eval_env,
            root_generations=args.num_generations,
            deeper_generations=1,
            record_state=self.rule.centralized,
        )
        self.drift = DriftLog()
        """The sampler drift of the current update (vLLM rollouts only)."""
        self.critics = self._build_critics(critics)
        self._place_critics()
        for critic in self.critics.values():
            if not critic.shares_actor:
                self.prepare_policy(critic.backbone)
        self._build_groups()

    def _build_groups(self) -> None:
        """One group per distinct actor (with the value heads on its backbone, at the critic
        learning rate) and one per critic with a backbone of its own."""
        args = self.args
        for policy in self.distinct:
            name = self.policy_name(policy)
            heads = [
                p
                for c in self.critics.values()
                if c.shares_actor and c.backbone is policy
                for p in c.head.parameters()
            ]
            rate = self.learning_rate(policy, "actor_learning_rate")
            parameters: list[dict[str, Any]] = [
                {"params": policy.trainable_parameters(), "lr": rate}
            ]
            if heads:
                parameters.append({"params": heads, "lr": args.critic_learning_rate})
            self.groups[name] = update_group(name, parameters, rate, args)
        by_backbone: dict[int, list[str]] = {}
        for critic_name, critic in self.critics.items():
            if not critic.shares_actor:
                by_backbone.setdefault(id(critic.backbone), []).append(critic_name)
        self._critic_groups: dict[str, str] = {}
        for names in by_backbone.values():  # critics on one backbone: one model, one update
            name = "critic/" + "+".join(names)
            parameters = {id(p): p for n in names for p in self.critics[n].parameters()}
            self.groups[name] = update_group(
                name, list(parameters.values()), args.critic_learning_rate, args
            )
            self._critic_groups.update(dict.fromkeys(names, name))

    def group_of(self, kind: str, name: str) -> UpdateGroup:
        """The group an actor's loss ("actor", agent) or a critic's ("critic", name) updates."""
        if kind == "actor":
            return self.groups[self.policy_name(self.policies[name])]
        return self.groups[self._critic_groups[name]]

    def prompt_encoders(self) -> list[Policy]:
        return [*self.distinct, *(c.backbone for c in self.critics.values())]

    def _value_clip(self, critic: Critic) -> float | None:
        if self.rule.clip_every_value or critic.shares_actor:
            return self.args.value_clip_range
        return None

    # ----- the update ---------------------------------------------------------------------------
    def _batches(self, count: int) -> list[list[int]]:
        """A shuffled order of `count` samples cut into mini-batches."""
        order = torch.randperm(count).tolist() if count else []
        size = self.args.mini_batch_size or max(1, count)
        return [order[i : i + size] for i in range(0, count, size)]

    @torch.no_grad()
    def _record_old_log_probs(self, samples: dict[str, list[Sample]]) -> None:
        chunk = max(1, self.args.logprob_batch_size)
        for agent, agent_samples in samples.items():
            policy = self.policies[agent]
            for start in range(0, len(agent_samples), chunk):
                part = agent_samples[start : start + chunk]
                with policy.mode(train=False):
                    scored = policy.score(
                        [s.prompt_ids for s in part],
                        [s.completion_ids for s in part],
                        sampling=self.sampling_of(agent),
                    )
                for s, row, mask in zip(part, scored.log_probs, scored.mask, strict=True):
                    s.old_log_probs = row[mask].tolist()

    def _actor_loss(self, agent: str, part: list[Sample], scale: float, stats: dict) -> Any:
        policy, critic = self.policies[agent], self.critics.get(agent)
        shared_head = critic is not None and critic.shares_actor
        scored = policy.score(
            [s.prompt_ids for s in part],
            [s.completion_ids for s in part],
            sampling=self.sampling_of(agent),
            entropy=True if self.args.entropy_coef else "log",  # no graph for a logged value
            prompt_hidden=shared_head,
        )
        stats.setdefault("outside_kept_tokens", []).append(float(scored.outside_kept))
        device = scored.log_probs.device
        advantages = torch.tensor([s.advantage for s in part], device=device)
        old = scored.log_probs.detach()  # one pass, one step: pi_old is the current policy
        if self.rule.ratio and any(s.old_log_probs is not None for s in part):
            old = old.clone()
            for row, s in enumerate(part):
                if s.old_log_probs is not None:
                    old[row] = 0.0
                    old[row, : len(s.old_log_probs)] = torch.tensor(s.old_log_probs)
        weights = None  # vLLM rollouts: w_t = min(pi_old / pi_sampler, C) per token
        if any(s.sampler_log_probs is not None for s in part):
            found = truncated_importance_weights(
                old,
                [s.sampler_log_probs for s in part],
                scored.mask,
                self.args.vllm_importance_sampling_cap,
            )
            self.drift.add(found)
            weights = found.weights
        if self.rule.ratio:
            policy_loss, clipped = clipped_policy_loss(
                scored.log_probs, old, advantages, scored.mask, self.rule.clip_range, weights
            )
            stats.setdefault("clip_fraction", []).append(clipped.item())
        else:
            weighted = scored.log_probs if weights is None else scored.log_probs * weights
            policy_loss = -(advantages * weighted.sum(-1)).mean()
        tokens = scored.mask.sum(-1).clamp(min=1)
        entropy = (scored.entropy.sum(-1) / tokens).mean()
        loss = policy_loss - self.args.entropy_coef * entropy
        stats.setdefault(f"policy_loss/{agent}", []).append(policy_loss.item())
        stats.setdefault("entropy", []).append(entropy.item())
        if shared_head:
            assert critic is not None and scored.prompt_hidden is not None
            predicted = critic.value_of(scored.prompt_hidden)
            critic_loss = value_loss(
                predicted,
                torch.tensor([s.old_value for s in part], device=device),
                torch.tensor([s.target for s in part], device=device),
                self._value_clip(critic),
            )
            loss = loss + self.args.value_loss_coef * critic_loss
            stats.setdefault("value_loss", []).append(critic_loss.item())
        return loss * scale

    def _critic_loss(self, name: str, part: list[CriticSample], scale: float, stats: dict) -> Any:
        critic = self.critics[name]
        predicted = critic.values([s.ids for s in part])
        device = predicted.device
        loss = value_loss(
            predicted,
            torch.tensor([s.old_value for s in part], device=device),
            torch.tensor([s.target for s in part], device=device),
            self._value_clip(critic),
        )
        stats.setdefault("value_loss", []).append(loss.item())
        return self.args.value_loss_coef * loss * scale

    def optimize(
        self, samples: dict[str, list[Sample]], critic_samples: dict[str, list[CriticSample]]
    ) -> dict[str, float]:
        """`epochs` passes in mini-batches; at each step every group backpropagates its own
        losses (in train mode) and steps, clips or skips on its own."""
        chunk = max(1, self.args.logprob_batch_size)
        lists: dict[tuple[str, str], list[Any]] = {("actor", a): s for a, s in samples.items()}
        own = {n: s for n, s in critic_samples.items() if n in self._critic_groups}
        lists.update({("critic", n): s for n, s in own.items()})  # critics with a backbone
        keys = list(lists)  # the same keys, in the same order, on every data-parallel rank
        if self.rule.ratio:
            batches_per_pass = max(len(self._batches(len(s))) for s in samples.values())
            if self.rule.epochs > 1 or batches_per_pass > 1:
                self._record_old_log_probs(samples)
        stats: dict[str, list[float]] = {}
        self.drift = DriftLog()
        skipped = steps = 0
        for group in self.groups.values():  # every step below frees its group's gradients
            group.zero_grad()
        for _ in range(self.rule.epochs):
            batches = {key: self._batches(len(items)) for key, items in lists.items()}
            count = max((len(b) for b in batches.values()), default=0)
            if self.parallel is not None:  # every rank takes the same number of steps
                count = int(self.parallel.maximum([count])[0])
            for step in range(count):
                # each loss is a mean over the step's mini-batch: every rank's part of it
                sizes = [len(batches[k][step]) if step < len(batches[k]) else 0 for k in keys]
                if self.parallel is not None:
                    sizes = [int(n) for n in self.parallel.sum(sizes)]
                size_of = dict(zip(keys, sizes, strict=True))
                failed: set[str] = set()
                touched = {self.group_of(*key).name for key in keys if size_of[key]}
                for (kind, name), items in lists.items():
                    group = self.group_of(kind, name)
                    if step >= len(batches[(kind, name)]) or group.name in failed:
                        continue
                    batch = [items[i] for i in batches[(kind, name)][step]]
                    if self.args.group_by_prompt:  # a loss over a mini-batch ignores its order
                        batch.sort(key=_prompt_order)
                    model = self.policies[name] if kind == "actor" else self.critics[name].backbone
                    with model.mode(train=True):
                        for start in range(0, len(batch), chunk):
                            part = batch[start : start + chunk]
                            scale = len(part) / size_of[(kind, name)]
                            if kind == "actor":
                                loss = self._actor_loss(name, part, scale, stats)
                            else:
                                loss = self._critic_loss(name, part, scale, stats)
                            if not torch.isfinite(loss):
                                failed.add(group.name)
                                break
                            with torch.profiler.record_function("collabzoo.backward"):
                                model.backward(loss)
                stepped = False
                for name, group in self.groups.items():
                    if name not in touched:
                        continue
                    norm = group.step(loss_finite=name not in failed)
                    if norm is None:
                        skipped += 1
                        continue
                    stepped = True
                    stats.setdefault(f"grad_norm/{name}", []).append(norm)
                steps += stepped
        metrics = {name: _mean(values) for name, values in stats.items()}
        metrics["loss"] = sum(v for k, v in metrics.items() if k.startswith("policy_loss/"))
        metrics["grad_norm"] = max(
            (v for k, v in metrics.items() if k.startswith("grad_norm/")), default=0.0
        )
        metrics["outside_kept_tokens"] = sum(stats.get("outside_kept_tokens", []))
        olds = [s.old_value for items in critic_samples.values() for s in items] or [
            s.old_value for items in samples.values() for s in items
        ]
        metrics.update(
            mean_value=_mean(olds),
            optimizer_steps=float(steps),
            skipped=float(skipped),
            skipped_updates=float(self.skipped_updates),
        )
        metrics.update(self.drift.metrics())
        return metrics

    def learn(self, roots: list[Node]) -> dict[str, float]:
        return self.optimize(*self.training_batch(roots))

    # ----- state --------------------------------------------------------------------------------
    def _own_backbones(self) -> dict[str, Policy]:
        """Critics whose backbone is not an actor: their name -> backbone (a model of their
        own, or a LoRA adapter of their own on the actors' base)."""
        return {n: c.backbone for n, c in self.critics.items() if not c.shares_actor}

    def extra_state(self) -> dict[str, Any]:
        return {
            "critic_heads": {name: c.head.state_dict() for name, c in self.critics.items()},
            "critic_backbones": {n: b.trainable_state() for n, b in self._own_backbones().items()},
        }

    def load_extra_state(self, state: Mapping[str, Any]) -> None:
        for name, weights in state["critic_heads"].items():
            self.critics[name].head.load_state_dict(weights)
        for name, backbone in self._own_backbones().items():
            backbone.load_trainable_state(state["critic_backbones"][name])

    def save(self, path: str | Path) -> Path:
        """The policies (as the base class saves them) and, per critic, its value head's
        weights and, when its backbone is not an actor, what trains of it (its own model, or
        its own LoRA adapter) in from_pretrained format."""
        path = super().save(path)
        own = self._own_backbones()
        for name, critic in self.critics.items():
            folder = path / f"critic-{name}"
            folder.mkdir(parents=True, exist_ok=True)
            torch.save(critic.head.state_dict(), folder / "value_head.pt")
            if name in own:
                critic.backbone.save(folder)
        return path

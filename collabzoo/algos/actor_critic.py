"""The actor-critic learners (IAC, IPPO, the centralized critic CC) on the shared machinery.

Per update:

1. Roll out `rollout_buffer_size` episodes. At the first turn every agent samples K =
   `num_generations` completions (K branches of the episode); at later turns one each. Every
   turn is one generate call per distinct policy across all episodes and agents.
2. Critic values of every visited state, without gradients: V_i(h_i) per agent (IAC, IPPO), or
   one V(s) over `env.state()` (CC; Q(s, a) over the state and the joint action with
   `critic_type="q"`).
3. Advantages and critic targets along every branch (`gae`):
       delta_t = r_t + gamma V(s_{t+1}) - V(s_t),   A_t = delta_t + gamma lambda A_{t+1},
       y_t = A_t + V(s_t)
   with lambda = 0 (TD(0)) for IAC and CC and `gae_lambda` for IPPO; V after the last turn is 0.
   With advantage normalisation, each agent's advantages are z-scored over the update.
4. `epochs` passes over the samples in mini-batches, one optimizer step per mini-batch on
       actor:  -mean_g sum_t min(rho_t A_g, clip(rho_t, 1-eps, 1+eps) A_g)   (IPPO, rho = pi/pi_old)
               -mean_g A_g sum_t log pi(a_g,t | h_g)                          (IAC, CC)
               - entropy_coef * mean_g (mean token entropy of g)
       critic: value_loss_coef * mean_g (V(h_g) - y_g)^2, or with value clipping
               value_loss_coef * mean_g max((V - y)^2, (V_old + clip(V - V_old, +-c) - y)^2).
   CC's critic sees each transition once per pass (not once per agent).

A non-finite loss skips that optimizer step and is counted in `skipped_updates`.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Hashable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from collabzoo.algos.critics import Critic, build_critic
from collabzoo.algos.learner import Learner, LearnerConfig, adamw
from collabzoo.algos.rollout_tree import Child, Node, expanded_nodes

TEAM = "team"
"""The name of the centralized critic."""
CRITIC_TYPES = ("v", "q")


@dataclass
class ActorCriticConfig(LearnerConfig):
    """Settings the actor-critic learners share (reference names and defaults)."""

    rollout_buffer_size: int = 8
    num_generations: int = 1
    """K samples per agent at the first turn, each the start of its own branch; later turns
    sample one per agent."""
    actor_learning_rate: float = 5.0e-6
    critic_learning_rate: float = 5.0e-6
    mini_batch_size: int | None = None
    """Samples per agent per optimizer step; None: all of an update's samples at once."""
    value_loss_coef: float = 0.6
    value_clip_range: float | None = 0.2
    """Clip the critic's new value to old +- this in its loss (IPPO; IAC with a shared head)."""
    entropy_coef: float = 0.0
    use_separate_critic: bool = True
    """A critic with its own backbone (see `critics`); False: a value head on the actor."""
    critic_model_name_or_path: str | None = None
    """The separate critics' model; None: a LoRA adapter on a LoRA actor's base, else a copy
    of the actor's model."""
    value_head_hidden_dim: int | None = None
    """Hidden layer of a value head on the actor's backbone (None: linear head)."""
    critic_value_head_hidden_dim: int | None = None
    """Hidden layer of a separate critic's value head (None: linear head)."""


@dataclass
class Sample:
    """One agent's completion at one transition, with what its losses need."""

    prompt_ids: list[int]
    completion_ids: list[int]
    advantage: float
    target: float
    old_value: float
    old_log_probs: list[float] | None = field(default=None, repr=False)


@dataclass
class CriticSample:
    ids: list[int]
    target: float
    old_value: float


def clipped_policy_loss(
    log_probs: torch.Tensor,
    old_log_probs: torch.Tensor,
    advantages: torch.Tensor,
    mask: torch.Tensor,
    clip_range: float | None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """PPO's clipped surrogate with per-token ratios rho_t = exp(log pi - log pi_old), summed
    over each completion's tokens (the macro-action's log-probability is a sum) and averaged
    over completions: -mean_g sum_t min(rho_t A_g, clip(rho_t, 1 - eps, 1 + eps) A_g).
    Without clipping it is -mean_g sum_t rho_t A_g, whose gradient at rho = 1 is the plain
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


def branch_estimates(
    node: Node,
    value_of: Callable[[Node, int], float],
    agent: str | None,
    gamma: float,
    lam: float,
    out: dict[Hashable, tuple[float, float, float]],
) -> list[float]:
    """(A, y, V) of every transition below `node` into `out`, keyed by (id(node), child index);
    returns A of `node`'s own transitions.

    `value_of(node, index)` is the critic's value where a transition starts: V(s) (the same for
    every child) or Q(s, a_index). V after a branch's last turn is 0; where a node has several
    children, the next turn's value and advantage are their means. `agent`: whose branch this
    is (its transitions end where it leaves the game); None for the team."""
    advantages = []
    for index, child in enumerate(node.children):
        value = value_of(node, index)
        nxt = child.node
        if nxt is not None and nxt.children and (agent is None or agent in nxt.agents):
            later = _mean(branch_estimates(nxt, value_of, agent, gamma, lam, out))
            next_value = _mean([value_of(nxt, j) for j in range(len(nxt.children))])
        else:
            later = next_value = 0.0
        delta = child.reward + gamma * next_value - value
        advantage = delta + gamma * lam * later
        out[(id(node), index)] = (advantage, advantage + value, value)
        advantages.append(advantage)
    return advantages


class ActorCriticLearner(Learner):
    """Base of IAC, IPPO and CC; subclasses set the class attributes and `epochs`."""

    algorithm = "actor_critic"
    centralized = False
    """One critic over env.state() for the team (CC) instead of one per agent."""
    uses_ratio = False
    """Importance ratios against the rollout policy, clipped by `clip_range` (IPPO)."""
    always_clip_values = False
    """Clip value losses for every critic kind (IPPO), not only for heads on the actor (IAC)."""

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
        if args.num_generations < 1:
            raise ValueError(f"num_generations must be at least 1, got {args.num_generations}")
        if args.mini_batch_size is not None and args.mini_batch_size < 1:
            raise ValueError(f"mini_batch_size must be at least 1, got {args.mini_batch_size}")
        super().__init__(
            env,
            models,
            args,
            tokenizer=tokenizer,
            eval_env=eval_env,
            root_generations=args.num_generations,
            deeper_generations=1,
            record_state=self.centralized,
        )
        self.critics = self._build_critics(critics)
        self.optimizer = adamw(self.actor_parameters(), args.actor_learning_rate, args)
        critic_parameters = {id(p): p for c in self.critics.values() for p in c.parameters()}
        self.critic_optimizer = adamw(
            list(critic_parameters.values()), args.critic_learning_rate, args
        )

    # ----- configuration ------------------------------------------------------------------------
    @property
    def epochs(self) -> int:
        return 1

    @property
    def gae_lambda(self) -> float:
        return 0.0

    @property
    def clip_range(self) -> float | None:
        return None

    def _value_clip(self, critic: Critic) -> float | None:
        if self.always_clip_values or critic.shares_actor:
            return self.args.value_clip_range
        return None

    def _build_critics(self, given: Any) -> dict[str, Critic]:
        args = self.args
        if self.centralized:
            backbone = given if given is not None else args.critic_model_name_or_path
            first = self.policies[self.agents[0]]
            critic = build_critic(
                first,
                TEAM,
                separate=True,
                head_hidden_dim=args.critic_value_head_hidden_dim,
                backbone=backbone,
            )
            return {TEAM: critic}
        critics = {}
        for agent in self.agents:
            backbone = given.get(agent) if isinstance(given, Mapping) else given
            if backbone is None and args.use_separate_critic:
                backbone = args.critic_model_name_or_path
            separate = args.use_separate_critic or backbone is not None
            critics[agent] = build_critic(
                self.policies[agent],
                agent,
                separate=separate,
                head_hidden_dim=(
                    args.critic_value_head_hidden_dim if separate else args.value_head_hidden_dim
                ),
                backbone=backbone,
            )
        return critics

    # ----- values and advantages ----------------------------------------------------------------
    def _critic_text(self, node: Node, child: Child | None, agent: str | None) -> str:
        if not self.centralized:
            assert agent is not None
            return node.observations[agent]
        state = node.state if node.state is not None else ""
        if child is None:
            return state
        actions = "\n\n".join(
            f"[{a}] {node.samples[a][k].text}"
            for a, k in zip(node.agents, child.joint, strict=True)
        )
        return f"{state}\n\nJoint action:\n{actions}"

    def _critic_ids(
        self, critic: Critic, node: Node, child: Child | None, agent: str | None
    ) -> list[int]:
        if critic.shares_actor and agent is not None:
            return node.samples[agent][0].prompt_ids  # the actor's own encoding of h
        return critic.encode(self._critic_text(node, child, agent))

    @torch.no_grad()
    def _values(self, critic: Critic, inputs: list[list[int]]) -> list[float]:
        chunk = max(1, self.args.logprob_batch_size)
        values: list[float] = []
        for start in range(0, len(inputs), chunk):
            values += critic.values(inputs[start : start + chunk]).tolist()
        return values

    def _q_critic(self) -> bool:
        return self.centralized and getattr(self.args, "critic_type", "v") == "q"

    def critic_inputs(self, roots: list[Node]) -> dict[str, dict[Hashable, list[int]]]:
        """Per critic: the token ids of every state it values (or state-action, for Q)."""
        inputs: dict[str, dict[Hashable, list[int]]] = {name: {} for name in self.critics}
        for root in roots:
            for node in expanded_nodes(root):
                if self.centralized:
                    critic = self.critics[TEAM]
                    if self._q_critic():
                        for index, child in enumerate(node.children):
                            key = (id(node), index)
                            inputs[TEAM][key] = self._critic_ids(critic, node, child, None)
                    else:
                        inputs[TEAM][id(node)] = self._critic_ids(critic, node, None, None)
                    continue
                for agent in node.agents:
                    critic = self.critics[agent]
                    inputs[agent][id(node)] = self._critic_ids(critic, node, None, agent)
        return inputs

    def training_batch(
        self, roots: list[Node]
    ) -> tuple[dict[str, list[Sample]], dict[str, list[CriticSample]]]:
        """Per agent: its samples; per separate critic: its own samples (its inputs and
        targets), so a critic trains once per transition it values."""
        inputs = self.critic_inputs(roots)
        values: dict[str, dict[Hashable, float]] = {}
        for name, keyed in inputs.items():
            found = self._values(self.critics[name], list(keyed.values()))
            values[name] = dict(zip(list(keyed), found, strict=True))

        def value_function(name: str):
            table = values[name]
            if self._q_critic():
                return lambda node, index: table[(id(node), index)]
            return lambda node, index: table[id(node)]

        estimates: dict[str, dict[Hashable, tuple]] = {}
        for name in self.critics:
            found: dict[Hashable, tuple] = {}
            agent = None if self.centralized else name
            for root in roots:
                if root.children and (agent is None or agent in root.agents):
                    branch_estimates(
                        root,
                        value_function(name),
                        agent,
                        self.args.discount,
                        self.gae_lambda,
                        found,
                    )
            estimates[name] = found

        samples: dict[str, list[Sample]] = {a: [] for a in self.agents}
        critic_samples: dict[str, list[CriticSample]] = {n: [] for n in self.critics}
        for root in roots:
            for node in expanded_nodes(root):
                for index, child in enumerate(node.children):
                    if self.centralized:
                        advantage, target, old = estimates[TEAM][(id(node), index)]
                        key = (id(node), index) if self._q_critic() else id(node)
                        critic_samples[TEAM].append(CriticSample(inputs[TEAM][key], target, old))
                    for position, agent in enumerate(node.agents):
                        if not self.centralized:
                            advantage, target, old = estimates[agent][(id(node), index)]
                        completion = node.samples[agent][child.joint[position]]
                        sample = Sample(
                            completion.prompt_ids,
                            completion.completion_ids,
                            advantage,
                            target,
                            old,
                        )
                        samples[agent].append(sample)
                        critic = None if self.centralized else self.critics[agent]
                        if critic is not None and not critic.shares_actor:
                            critic_ids = inputs[agent][id(node)]
                            critic_samples[agent].append(CriticSample(critic_ids, target, old))
        if self.args.advantage_normalization:
            for agent_samples in samples.values():
                self._normalise(agent_samples)
        return samples, critic_samples

    @staticmethod
    def _normalise(samples: list[Sample]) -> None:
        if len(samples) < 2:
            return
        mean = _mean([s.advantage for s in samples])
        std = math.sqrt(_mean([(s.advantage - mean) ** 2 for s in samples]))
        for s in samples:
            s.advantage = (s.advantage - mean) / (std + 1e-8)

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
                scored = policy.score(
                    [s.prompt_ids for s in part], [s.completion_ids for s in part]
                )
                for s, row, mask in zip(part, scored.log_probs, scored.mask, strict=True):
                    s.old_log_probs = row[mask].tolist()

    def _actor_loss(self, agent: str, part: list[Sample], scale: float, stats: dict) -> Any:
        policy, critic = self.policies[agent], self.critics.get(agent)
        shared_head = critic is not None and critic.shares_actor
        scored = policy.score(
            [s.prompt_ids for s in part],
            [s.completion_ids for s in part],
            entropy=True,
            prompt_hidden=shared_head,
        )
        device = scored.log_probs.device
        advantages = torch.tensor([s.advantage for s in part], device=device)
        if self.uses_ratio:
            old = torch.zeros_like(scored.log_probs)
            for row, s in enumerate(part):
                if s.old_log_probs is None:  # one pass, one step: pi_old is the current policy
                    old[row] = scored.log_probs[row].detach()
                else:
                    old[row, : len(s.old_log_probs)] = torch.tensor(s.old_log_probs)
            policy_loss, clipped = clipped_policy_loss(
                scored.log_probs, old, advantages, scored.mask, self.clip_range
            )
            stats.setdefault("clip_fraction", []).append(clipped.item())
        else:
            policy_loss = -(advantages * scored.log_probs.sum(-1)).mean()
        tokens = scored.mask.sum(-1).clamp(min=1)
        entropy = (scored.entropy.sum(-1) / tokens).mean()
        loss = policy_loss - self.args.entropy_coef * entropy
        stats.setdefault(f"policy_loss/{agent}", []).append(policy_loss.item())
        stats.setdefault("entropy", []).append(entropy.item())
        if shared_head:
            assert critic is not None and scored.prompt_hidden is not None
            predicted = critic.head(scored.prompt_hidden)
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

    def _backward(self, loss: Any) -> bool:
        if not torch.isfinite(loss):
            return False
        loss.backward()
        return True

    def optimize(
        self, samples: dict[str, list[Sample]], critic_samples: dict[str, list[CriticSample]]
    ) -> dict[str, float]:
        chunk = max(1, self.args.logprob_batch_size)
        lists: dict[tuple[str, str], list[Any]] = {("actor", a): s for a, s in samples.items()}
        lists.update({("critic", n): s for n, s in critic_samples.items() if s})
        if self.uses_ratio:
            batches_per_pass = max(len(self._batches(len(s))) for s in samples.values())
            if self.epochs > 1 or batches_per_pass > 1:
                self._record_old_log_probs(samples)
        actor_parameters = [p for g in self.optimizer.param_groups for p in g["params"]]
        critic_parameters = [p for g in self.critic_optimizer.param_groups for p in g["params"]]
        stats: dict[str, list[float]] = {}
        skipped = steps = 0
        for _ in range(self.epochs):
            batches = {key: self._batches(len(items)) for key, items in lists.items()}
            for step in range(max((len(b) for b in batches.values()), default=0)):
                self.optimizer.zero_grad(set_to_none=True)
                self.critic_optimizer.zero_grad(set_to_none=True)
                finite = True
                for (kind, name), items in lists.items():
                    if step >= len(batches[(kind, name)]) or not finite:
                        continue
                    batch = [items[i] for i in batches[(kind, name)][step]]
                    for start in range(0, len(batch), chunk):
                        part = batch[start : start + chunk]
                        scale = len(part) / len(batch)
                        if kind == "actor":
                            loss = self._actor_loss(name, part, scale, stats)
                        else:
                            loss = self._critic_loss(name, part, scale, stats)
                        finite = self._backward(loss)
                        if not finite:
                            break
                actor_norm = torch.nn.utils.clip_grad_norm_(
                    actor_parameters, self.args.max_grad_norm
                )
                critic_norm = torch.nn.utils.clip_grad_norm_(
                    critic_parameters, self.args.max_grad_norm
                )
                if not (finite and torch.isfinite(actor_norm) and torch.isfinite(critic_norm)):
                    self.optimizer.zero_grad(set_to_none=True)
                    self.critic_optimizer.zero_grad(set_to_none=True)
                    skipped += 1
                    continue
                self.optimizer.step()
                self.critic_optimizer.step()
                steps += 1
                stats.setdefault("grad_norm", []).append(float(actor_norm))
                stats.setdefault("critic_grad_norm", []).append(float(critic_norm))
        self.skipped_updates += skipped
        metrics = {name: _mean(values) for name, values in stats.items()}
        metrics["loss"] = sum(v for k, v in metrics.items() if k.startswith("policy_loss/"))
        olds = [s.old_value for items in critic_samples.values() for s in items] or [
            s.old_value for items in samples.values() for s in items
        ]
        metrics.update(
            mean_value=_mean(olds),
            optimizer_steps=float(steps),
            skipped=float(skipped),
            skipped_updates=float(self.skipped_updates),
        )
        return metrics

    def learn(self, roots: list[Node]) -> dict[str, float]:
        return self.optimize(*self.training_batch(roots))

    # ----- state --------------------------------------------------------------------------------
    def _own_critic_models(self) -> list[Any]:
        """Critic backbones that are models of their own (not an actor's model)."""
        actor_models = {id(p.model) for p in self.distinct}
        models = {
            id(c.backbone.model): c.backbone.model
            for c in self.critics.values()
            if id(c.backbone.model) not in actor_models
        }
        return list(models.values())

    def extra_state(self) -> dict[str, Any]:
        return {
            "critic_heads": {name: c.head.state_dict() for name, c in self.critics.items()},
            "critic_models": [m.state_dict() for m in self._own_critic_models()],
            "critic_optimizer": self.critic_optimizer.state_dict(),
        }

    def load_extra_state(self, state: Mapping[str, Any]) -> None:
        for name, weights in state["critic_heads"].items():
            self.critics[name].head.load_state_dict(weights)
        for model, weights in zip(self._own_critic_models(), state["critic_models"], strict=True):
            model.load_state_dict(weights)
        self.critic_optimizer.load_state_dict(state["critic_optimizer"])

    def save(self, path: str | Path) -> Path:
        """The policies (as the base class saves them) and each critic: its head's weights and,
        when it has a model of its own, that model in save_pretrained format."""
        path = super().save(path)
        own = {id(m) for m in self._own_critic_models()}
        for name, critic in self.critics.items():
            folder = path / f"critic-{name}"
            folder.mkdir(parents=True, exist_ok=True)
            torch.save(critic.head.state_dict(), folder / "value_head.pt")
            if id(critic.backbone.model) in own:
                critic.backbone.save(folder)
        return path

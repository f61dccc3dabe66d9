"""The loop of the agent- and turn-grouped learners (AT-GRPO; see `atgrpo` for the rule).

Per update: one width-one beam per episode (`rollout.beam`), every agent's K samples of every
turn grouped by (episode, turn, agent) on the agent's own reward and normalised
(`objectives.agent_turn_group_advantages`), optionally the lowest-mean groups dropped, then per
distinct policy `ppo_mini_batches` clipped steps on the token mean of its mini-batch
(`objectives.token_mean_clipped_loss`), the old log-probabilities taken before the first.
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from dataclasses import dataclass
from typing import Any

import torch

from collabzoo.algos.learners.config import (
    LearnerConfig,
    require_at_least,
    require_positive,
)
from collabzoo.algos.learners.learner import Learner
from collabzoo.algos.objectives import (
    AT_GRPO_EPSILON,
    agent_turn_group_advantages,
    low_mean_groups,
    token_mean_clipped_loss,
)
from collabzoo.algos.policies.policy import Policy
from collabzoo.algos.rollout.beam import BeamRollout, continued, tree_generations
from collabzoo.algos.rollout.tree import Node

GROUP_PARTS = ("episode", "turn", "agent")


@dataclass(frozen=True)
class AgentTurnSample:
    """One agent's completion at one turn of one episode, its own reward and advantage."""

    agent: str
    key: Hashable
    reward: float
    prompt_ids: Sequence[int]
    completion_ids: Sequence[int]
    advantage: float = 0.0


@dataclass
class AgentTurnConfig(LearnerConfig):
    """Settings of the agent- and turn-grouped learners; defaults from PettingLLMs'
    paper-era AT-GRPO configs where they exist."""

    num_generations: int = 8
    """K: joint actions sampled per turn from one state (train_sample_num)."""
    num_turns: int | None = 5
    """Turns per episode at most (max_turns); None: until the env ends the episode."""
    discount: float = 1.0
    """gamma (1 in the reference); AT-GRPO learns from immediate rewards, so only the logged
    returns read it."""
    temperature: float = 1.0
    """Sampling temperature (the reference's training rollouts)."""
    top_p: float = 0.9
    """Nucleus sampling (the reference's training rollouts)."""
    top_k: int | None = 20
    """Top-k cut (the reference's training rollouts)."""
    weight_decay: float = 0.01
    """AdamW's decoupled weight decay (verl's actor default)."""
    agent_learning_rate: float = 1.0e-6
    """AdamW learning rate of every policy (each has its own optimizer)."""
    group_by: str = "episode,turn,agent"
    """What a sample's group shares, comma-separated parts of episode, turn and agent; the
    reference's key is (problem, turn, role)."""
    greedy_continue: bool = True
    """Continue each episode from the branch of the highest team reward (the reference's
    if_greedy); False: from branch 0."""
    ppo_clip: bool = True
    """verl's clipped PPO (the reference); False: the token mean of -A log pi."""
    clip_range_low: float = 0.2
    """PPO's lower clip: the ratio is clipped at 1 - this."""
    clip_range_high: float = 0.2
    """PPO's upper clip: the ratio is clipped at 1 + this."""
    clip_ratio_c: float | None = None
    """The dual clip: for A < 0 a token's loss is at most -A * this (upstream verl's 3.0);
    None: no dual clip, as the verl vendored in PettingLLMs (it comments the dual clip out)."""
    ppo_mini_batches: int = 1
    """Optimizer steps per update per policy, on shuffled mini-batches of its samples (the
    reference's 32 problems per step in mini-batches of 16 take two)."""
    filter_low_mean_groups: float = 0.0
    """Drop this fraction of each policy's groups, those of lowest mean reward, before the
    update (0.5 matches every shipped PettingLLMs config)."""
    advantage_epsilon: float = AT_GRPO_EPSILON
    """Added to the unbiased group std that normalises advantages."""

    def group_parts(self) -> tuple[str, ...]:
        """`group_by` as a tuple of parts, in the order given."""
        return tuple(part.strip() for part in str(self.group_by).split(","))

    def validate(self) -> None:
        super().validate()
        parts = self.group_parts()
        if not parts or any(p not in GROUP_PARTS for p in parts) or len(set(parts)) != len(parts):
            raise ValueError(
                f"group_by must name distinct parts of {', '.join(GROUP_PARTS)}, separated by "
                f"commas (the reference's: 'episode,turn,agent'), got {self.group_by!r}"
            )
        if self.num_generations < 2:
            raise ValueError(
                f"AT-GRPO compares K samples of one state: num_generations must be at least 2, "
                f"got {self.num_generations}"
            )
        require_positive(self, "agent_learning_rate", "advantage_epsilon")
        for name in ("clip_range_low", "clip_range_high"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 < value < 1:
                raise ValueError(f"{name} must be in (0, 1), got {value!r}")
        require_at_least(self, 1, "ppo_mini_batches")
        value = self.clip_ratio_c
        if value is not None and (
            isinstance(value, bool) or not isinstance(value, (int, float)) or not value > 1
        ):
            raise ValueError(f"clip_ratio_c (the dual clip) must be above 1 or None, got {value!r}")
        value = self.filter_low_mean_groups
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 <= value < 1:
            raise ValueError(
                f"filter_low_mean_groups must be in [0, 1) (0.5 drops the lower half, as the "
                f"reference's configs), got {value!r}"
            )
        if self.reward_normalization:
            raise ValueError(
                "AT-GRPO normalises each group's rewards itself; reward_normalization (running "
                "statistics) is not supported: leave it False (reward_shift / reward_scale work)"
            )
        if self.generation_backend == "vllm":
            raise ValueError(
                "AT-GRPO samples with the policies' own generate (hf or hf-compiled); its loss "
                "has no vLLM off-policy correction yet"
            )


class AgentTurnLearner(Learner):
    """The loop of AT-GRPO: beam rollouts, (episode, turn, agent) groups, clipped steps."""

    algorithm = "agent_turn"

    def __init__(
        self,
        env: Any,
        models: Any,
        args: AgentTurnConfig,
        *,
        tokenizer: Any = None,
        eval_env: Any = None,
    ) -> None:
        if not isinstance(args, AgentTurnConfig):
            raise TypeError(f"AT-GRPO takes an ATGRPOConfig, got {type(args).__name__}")
        super().__init__(env, models, args, tokenizer=tokenizer, eval_env=eval_env)
        if self.parallel is not None:
            raise ValueError("AT-GRPO runs in one process (no torchrun data parallelism yet)")
        tree = self.rollout
        self.rollout = BeamRollout(
            tree.env_factory,
            tree.policies,
            tree.sampling,
            num_generations=tree.k,
            max_depth=tree.max_depth,
            early_termination_threshold=tree.threshold,
            reward_transform=tree.reward_transform,
            executor=tree.executor,
            generate=tree.generate,
            remote=tree.remote,
            greedy_continue=args.greedy_continue,
            agent_reward_transform=self._transform_reward,
        )
        for policy in self.distinct:
            self.policy_sampling(policy)  # agents sharing a model must share its sampling
        self.add_policy_groups()

    def policy_sampling(self, policy: Policy) -> Any:
        """The distribution `policy`'s samples were drawn from: its agents' sampling, which
        must agree (one policy's batch mixes its agents' samples and scores them at once)."""
        found = {a: self.sampling_of(a) for a, p in self.policies.items() if p is policy}
        if len(set(map(repr, found.values()))) > 1:
            raise ValueError(
                f"agents {sorted(found)} share one model, so AT-GRPO scores their samples under "
                "one distribution: their per-agent sampling cannot differ; give each agent its "
                "own model or LoRA adapter"
            )
        return next(iter(found.values()))

    # ----- groups and advantages ----------------------------------------------------------------
    def group_key(self, episode: int, turn: int, agent: str) -> Hashable:
        parts = {"episode": episode, "turn": turn, "agent": agent}
        return tuple(parts[p] for p in self.args.group_parts())

    def training_batch(self, roots: list[Node]) -> tuple[list[AgentTurnSample], dict[str, float]]:
        """Every trained agent's samples of every turn with their advantages, and the group
        counts (a frozen agent's samples are in no group, so in no statistic)."""
        trained = set(self.trained_agents)
        samples: list[AgentTurnSample] = []
        for episode, root in enumerate(roots):
            node, turn = root, 0
            while node is not None and node.children:
                for position, agent in enumerate(node.agents):
                    if agent not in trained:
                        continue
                    key = self.group_key(episode, turn, agent)
                    for child in node.children:
                        completion = node.samples[agent][child.joint[position]]
                        samples.append(
                            AgentTurnSample(
                                agent,
                                key,
                                child.agent_rewards[agent],
                                completion.prompt_ids,
                                completion.completion_ids,
                            )
                        )
                node, turn = continued(node), turn + 1
        groups = len({s.key for s in samples})
        dropped: set[tuple[str, Hashable]] = set()  # (policy, group): each policy's batch alone,
        for policy in self.distinct:  # as the reference filters each model's batch
            name = self.policy_name(policy)
            mine = [s for s in samples if self.policies[s.agent] is policy]
            found = low_mean_groups(
                [s.reward for s in mine], [s.key for s in mine], self.args.filter_low_mean_groups
            )
            dropped |= {(name, key) for key in found}
        owner = {agent: self.policy_name(p) for agent, p in self.policies.items()}
        kept = [s for s in samples if (owner[s.agent], s.key) not in dropped]
        advantages = agent_turn_group_advantages(
            [s.reward for s in kept],
            [s.key for s in kept],
            normalize=self.args.advantage_normalization,
            epsilon=self.args.advantage_epsilon,
        )
        batch = [
            AgentTurnSample(s.agent, s.key, s.reward, s.prompt_ids, s.completion_ids, a)
            for s, a in zip(kept, advantages, strict=True)
        ]
        return batch, {"groups": float(groups), "groups_dropped": float(len(dropped))}

    # ----- the update ---------------------------------------------------------------------------
    def _old_log_probs(self, policy: Policy, samples: Sequence[AgentTurnSample]) -> list[Any]:
        """log pi_old of every sample's tokens, before the first step (eval mode, no grad)."""
        found: list[Any] = []
        chunk = max(1, self.args.logprob_batch_size)
        with torch.no_grad(), policy.mode(train=False):
            for start in range(0, len(samples), chunk):
                part = samples[start : start + chunk]
                scored = policy.score(
                    [s.prompt_ids for s in part],
                    [s.completion_ids for s in part],
                    sampling=self.policy_sampling(policy),
                )
                found += [row.detach() for row in scored.log_probs]
        return found

    def _mini_batch_loss(
        self, policy: Policy, part: Sequence[tuple[AgentTurnSample, Any]]
    ) -> tuple[float, float, bool]:
        """Backpropagate one mini-batch's token-mean loss in chunks: (loss, clip fraction,
        whether every chunk was finite)."""
        tokens = sum(len(s.completion_ids) for s, _ in part)
        chunk = max(1, self.args.logprob_batch_size)
        total = clipped = 0.0
        for start in range(0, len(part), chunk):
            rows = part[start : start + chunk]
            scored = policy.score(
                [s.prompt_ids for s, _ in rows],
                [s.completion_ids for s, _ in rows],
                sampling=self.policy_sampling(policy),
            )
            advantages = torch.tensor([s.advantage for s, _ in rows], device=policy.device)
            if self.args.ppo_clip:
                width = scored.log_probs.shape[-1]
                old = torch.zeros_like(scored.log_probs)
                for i, (_, row) in enumerate(rows):
                    old[i, : min(width, row.shape[-1])] = row[:width]
                loss, fraction = token_mean_clipped_loss(
                    scored.log_probs,
                    old,
                    advantages,
                    scored.mask,
                    clip_low=self.args.clip_range_low,
                    clip_high=self.args.clip_range_high,
                    clip_ratio_c=self.args.clip_ratio_c,
                    tokens=tokens,
                )
                clipped += float(fraction) * int(scored.mask.sum()) / max(1, tokens)
            else:
                weighted = -(advantages.unsqueeze(-1) * scored.log_probs)
                loss = weighted.masked_fill(~scored.mask, 0.0).sum() / max(1, tokens)
            if not torch.isfinite(loss):
                return total, clipped, False
            policy.backward(loss)
            total += loss.item()
        return total, clipped, True

    def optimize(self, batch: Sequence[AgentTurnSample]) -> dict[str, float]:
        """Per distinct policy: the samples of the agents it plays, shuffled into
        `ppo_mini_batches` mini-batches, one clipped step each."""
        metrics: dict[str, float] = {}
        norms: list[float] = []
        skipped = 0
        for policy in self.distinct:
            name = self.policy_name(policy)
            mine = [s for s in batch if self.policies[s.agent] is policy]
            if not mine:
                continue
            old = self._old_log_probs(policy, mine) if self.args.ppo_clip else [None] * len(mine)
            order = torch.randperm(len(mine)).tolist()
            count = min(self.args.ppo_mini_batches, len(mine))
            losses, fractions = [], []
            for m in range(count):
                part = [(mine[i], old[i]) for i in order[m::count]]
                group = self.groups[name]
                group.zero_grad()
                with policy.mode(train=True):
                    loss, fraction, finite = self._mini_batch_loss(policy, part)
                norm = group.step(loss_finite=finite)
                if norm is None:
                    skipped += 1
                    metrics[f"skipped/{name}"] = metrics.get(f"skipped/{name}", 0.0) + 1.0
                    continue
                norms.append(norm)
                losses.append(loss)
                fractions.append(fraction)
            metrics[f"loss/{name}"] = sum(losses) / max(1, len(losses))
            if self.args.ppo_clip:
                metrics[f"clip_fraction/{name}"] = sum(fractions) / max(1, len(fractions))
        metrics.update(
            loss=sum(v for k, v in metrics.items() if k.startswith("loss/")),
            grad_norm=max(norms, default=0.0),
            skipped=float(skipped),
            skipped_updates=float(self.skipped_updates),
        )
        return metrics

    def learn(self, roots: list[Node]) -> dict[str, float]:
        batch, counts = self.training_batch(roots)
        metrics = self.optimize(batch)
        metrics.update(counts)
        metrics["generations"] = float(tree_generations(roots))
        rewards = [s.reward for s in batch]
        metrics["mean_agent_reward"] = sum(rewards) / max(1, len(rewards))
        return metrics


__all__ = ["GROUP_PARTS", "AgentTurnConfig", "AgentTurnLearner", "AgentTurnSample"]

"""The loop of MADPO and MADPOIter: multi-agent DPO on joint preference pairs.

Offline (MADPO): the first update samples the pair set once (C aligned candidates per episode
for `preference_num_items` episodes, scored by the env's reward, see `preference_rollouts`) or
reads it from `preference_data`; every update is then one optimizer step per distinct policy on
the next `train_batch_size` pairs of the set, reshuffled every epoch by a seeded order (so a
resumed run takes the same batches). Online (MADPOIter): every update is one iteration, pairs
of the current policy against a comparator, replayed, then `num_train_epochs` passes.

The loss is `preference_objectives.agent_preference_loss`: standard DPO against a frozen
reference (the initial policy: a LoRA team's base with its adapter disabled, else a frozen
copy), or reference-free with `reference_free=True` (CoMLRL's). Log-probabilities are the raw
model's (temperature 1), as DPO's and the reference's. A non-finite loss skips that policy's
step and is counted (the reference replaces it by the constant 0.1).
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from typing import Any

import torch

from collabzoo.algos.learners.learner import Learner
from collabzoo.algos.learners.preference_pairs import PreferencePair
from collabzoo.algos.learners.preference_rollouts import OnlinePairs, pair_seeds, sampled_pairs
from collabzoo.algos.policies.policy import Policy
from collabzoo.algos.preference_objectives import agent_preference_loss, joint_preference_logits
from collabzoo.algos.runtime.placement import model_device


def frozen_copy(policy: Policy) -> Policy:
    """A frozen copy of a policy with a model of its own (the DPO reference of a full model)."""
    frozen = policy.copy()
    frozen.model.eval()
    for parameter in frozen.model.parameters():
        parameter.requires_grad_(False)
    if policy.compute_dtype is not None:
        frozen.model.to(policy.compute_dtype)
    return frozen


def epoch_order(count: int, seed: int, epoch: int) -> list[int]:
    """The pair order of one epoch: a shuffle seeded by the run seed and the epoch only."""
    order = list(range(count))
    random.Random(seed * 1_000_003 + epoch).shuffle(order)
    return order


class PairScorer:
    """Per agent, Delta = log pi(chosen) - log pi(rejected) of a batch of pairs, with the
    gradient (the policy) or without (the frozen reference)."""

    def __init__(self, learner: Learner, reference_free: bool) -> None:
        self.learner = learner
        self.references: dict[int, Policy] = {}
        if not reference_free:
            for policy in learner.distinct:
                if policy.adapter is None:
                    self.references[id(policy)] = frozen_copy(policy)
        self.reference_free = reference_free

    def deltas(
        self, agent: str, pairs: Sequence[PreferencePair], reference: bool = False
    ) -> torch.Tensor:
        """[pairs] log-probability gaps of `agent` (the reference's with `reference`)."""
        policy = self.learner.policies[agent]
        prompts = [p.prompt_ids[agent] for p in pairs] * 2
        answers = [p.chosen_ids[agent] for p in pairs] + [p.rejected_ids[agent] for p in pairs]
        chunk = max(1, self.learner.args.logprob_batch_size)
        sums = []
        scorer = policy
        if reference and policy.adapter is None:
            scorer = self.references[id(policy)]
            model = scorer.model
            if model_device(model) != policy.device:
                model.to(policy.device)
        for start in range(0, len(prompts), chunk):
            rows = range(start, min(len(prompts), start + chunk))
            nonempty = [i for i in rows if len(answers[i]) > 0]
            part = torch.zeros(len(rows), device=policy.device)
            if nonempty:
                chosen = [prompts[i] for i in nonempty], [answers[i] for i in nonempty]
                if reference and policy.adapter is not None:
                    with policy.reference():
                        scored = policy.score(*chosen)
                else:
                    scored = scorer.score(*chosen)
                sequence = scored.log_probs.sum(-1)
                index = torch.tensor([i - start for i in nonempty], device=policy.device)
                part = part.to(sequence.dtype).index_put((index,), sequence)
            sums.append(part)
        both = torch.cat(sums)
        return both[: len(pairs)] - both[len(pairs) :]

    @torch.no_grad()
    def reference_deltas(self, pairs: Sequence[PreferencePair]) -> torch.Tensor | None:
        """[pairs, agents] reference gaps (eval mode), or None when reference-free."""
        if self.reference_free:
            return None
        columns = []
        for agent in self.learner.agents:
            with self.learner.policies[agent].mode(train=False):
                columns.append(self.deltas(agent, pairs, reference=True))
        return torch.stack(columns, -1)


class DPOLearner(Learner):
    """MADPO's and MADPOIter's trainer: what sets one apart is its config."""

    algorithm = "dpo"

    def __init__(
        self,
        env: Any,
        models: Any,
        args: Any,
        *,
        tokenizer: Any = None,
        eval_env: Any = None,
        comparator: Any = None,
    ) -> None:
        super().__init__(env, models, args, tokenizer=tokenizer, eval_env=eval_env)
        self.add_policy_groups()
        self.scorer = PairScorer(self, args.reference_free)
        self.online = hasattr(args, "comparator_policy")
        self.pairs: list[PreferencePair] | None = None
        """The offline pair set, once made (kept in checkpoints)."""
        self.preference_env_steps = 0
        self.source = OnlinePairs(self, comparator) if self.online else None

    # ----- pairs ---------------------------------------------------------------------------------
    def offline_pairs(self) -> list[PreferencePair]:
        if self.args.preference_data is not None:
            from collabzoo.algos.learners.preference_data import load_pairs

            return load_pairs(
                self.args.preference_data, self.policies, self.args.preference_pairs_per_sample
            )
        rng = random.Random(self.args.seed)
        seeds = pair_seeds(self.args.seed, 0, self.args.preference_num_items)
        pairs = sampled_pairs(self, seeds, rng)
        if not pairs:
            raise ValueError(
                f"no preference pair: every candidate of the {len(seeds)} episodes earned the "
                "same reward; sample more candidates (preference_num_candidates), more episodes "
                "(preference_num_items) or at a higher temperature"
            )
        return pairs

    def batch_at(self, update: int) -> tuple[list[PreferencePair], int]:
        """The pairs of offline update `update`, and its epoch."""
        assert self.pairs is not None
        size = self.args.train_batch_size
        per_epoch = -(-len(self.pairs) // size)
        epoch, position = divmod(update, per_epoch)
        order = epoch_order(len(self.pairs), self.args.seed, epoch)
        return [self.pairs[i] for i in order[position * size : (position + 1) * size]], epoch

    # ----- the loss ----------------------------------------------------------------------------
    def dpo_step(self, batch: Sequence[PreferencePair]) -> dict[str, float]:
        """One optimizer step per distinct policy on a batch of pairs."""
        beta = self.args.dpo_beta
        reference = self.scorer.reference_deltas(batch)
        own: dict[str, torch.Tensor] = {}
        for agent in self.agents:
            with self.policies[agent].mode(train=True):
                own[agent] = self.scorer.deltas(agent, batch)
        device = own[self.agents[0]].device
        detached = torch.stack([own[a].detach().to(device) for a in self.agents], -1)
        if reference is not None:
            reference = reference.to(device)
        logits = joint_preference_logits(detached, reference, beta)
        metrics: dict[str, float] = {
            "loss": float(-torch.nn.functional.logsigmoid(logits).mean()),
            "dpo/margin": float(logits.mean()),
            "dpo/accuracy": float((logits > 0).float().mean()),
            "dpo/pairs": float(len(batch)),
        }
        skipped = 0
        norms = []
        for policy in self.distinct:
            name = self.policy_name(policy)
            group = self.groups[name]
            if group.frozen:  # not trained at this update: its deltas stay in the joint
                continue  # logits as constants, as every other agent's do
            group.zero_grad()
            losses = []
            for position, agent in enumerate(self.agents):
                if self.policies[agent] is not policy:
                    continue
                ref = None if reference is None else reference.to(own[agent].device)
                loss = agent_preference_loss(
                    own[agent], detached.to(own[agent].device), position, beta, ref
                )
                metrics[f"loss/{agent}"] = float(loss.detach())
                losses.append(loss)
            total = torch.stack(losses).sum()
            finite = bool(torch.isfinite(total))
            if finite:
                # Every agent was scored above: on a LoRA team the last one's adapter is active
                policy.backward(total)
            norm = group.step(loss_finite=finite)
            if norm is None:
                skipped += 1
                metrics[f"skipped/{name}"] = 1.0
                continue
            metrics[f"grad_norm/{name}"] = norm
            norms.append(norm)
        metrics.update(
            grad_norm=max(norms, default=0.0),
            skipped=float(skipped),
            skipped_updates=float(self.skipped_updates),
        )
        return metrics

    # ----- one update --------------------------------------------------------------------------
    def train_step(self) -> dict[str, float]:
        trained = self.apply_schedule()  # frozen and alternating agents, as every learner
        if self.online:
            metrics = self.iteration_step()
        else:
            if self.pairs is None:
                self.pairs = self.offline_pairs()
            batch, epoch = self.batch_at(self.update)
            metrics = self.dpo_step(batch)
            metrics["epoch"] = float(epoch)
            rewards = [p.candidate_reward_mean for p in batch]
            metrics["mean_return"] = sum(rewards) / len(rewards)
            metrics["preference_pairs"] = float(len(self.pairs))
        for group in self.groups.values():
            group.check_frozen()
        if self.args.trainable_agents is not None or self.args.alternate_every is not None:
            metrics.update({f"trained/{a}": float(a in trained) for a in self.agents})
        self.weights_changed()
        self.update += 1
        metrics["env_steps"] = float(self.preference_env_steps)
        return metrics

    def iteration_step(self) -> dict[str, float]:
        """One online iteration: its pairs (after replay), then the DPO passes over them."""
        assert self.source is not None
        rng = random.Random(self.args.seed * 1_000_003 + self.update)
        pairs, metrics = self.source.iteration_pairs(self.update, rng)
        steps: list[dict[str, float]] = []
        size = self.args.train_batch_size
        for _ in range(self.args.num_train_epochs):
            rng.shuffle(pairs)
            for start in range(0, len(pairs), size):
                steps.append(self.dpo_step(pairs[start : start + size]))
        for key in ("loss", "dpo/margin", "dpo/accuracy", "grad_norm"):
            values = [s[key] for s in steps if key in s]
            if values:
                metrics[key] = sum(values) / len(values)
        metrics["skipped_updates"] = float(self.skipped_updates)
        metrics["optimizer_steps"] = float(len(steps))
        metrics["mean_return"] = metrics["iter/current_reward_mean"]
        return metrics

    # ----- state ---------------------------------------------------------------------------------
    def extra_state(self) -> dict[str, Any]:
        state: dict[str, Any] = {"preference_env_steps": self.preference_env_steps}
        if self.pairs is not None:
            state["pairs"] = [p.to_record() for p in self.pairs]
        if self.source is not None:
            state["online"] = self.source.state()
        return state

    def load_extra_state(self, state: Any) -> None:
        self.preference_env_steps = state.get("preference_env_steps", 0)
        if "pairs" in state:
            self.pairs = [PreferencePair.from_record(r) for r in state["pairs"]]
        if self.source is not None and "online" in state:
            self.source.load_state(state["online"])


__all__ = ["DPOLearner", "PairScorer", "epoch_order", "frozen_copy"]

"""The loop of MARLHF and MARLHFIter: a joint reward model learned from preference pairs, then
RL against it with the backend `rl_algorithm`: the rollout-tree learner (MAGRPO's
group-normalised advantage by default, MA-REINFORCE's other baselines), or an actor-critic
learner built on the team ("maac", "iac"; `rlhf_actor_critic`). Both read the reward model
through one part, `RewardModelRewards`.

Offline (MARLHF): the first update samples the pairs (as MADPO does) and pairs of
`reward_heldout_items` other episodes, trains the reward model for `reward_num_train_epochs`
epochs (Bradley-Terry) and logs its accuracy on both; from then on every update is a tree
learner's update whose rewards are the frozen model's scores of each joint answer (the env's own
reward is logged as `task/env_reward`; evaluation always plays the env's reward). Online
(MARLHFIter): every update is one iteration: pairs against the comparator, a reward model
re-initialised from the pretrained backbone (its adapter and head seeded by the run seed and the
iteration only), trained on them, then `num_train_epochs` RL updates against it. With
`preference_scoring_reward="reward_model"` an iteration's candidates are ordered by the last
reward model trained (the env's reward until there is one). An actor-critic backend is built
at the first RL update and, online, again every iteration (`critic_reset_every_iteration`).
"""

from __future__ import annotations

import copy
import random
import time
from collections.abc import Sequence
from typing import Any

import torch

from collabzoo.algos.learners.actor_critic import ActorCriticLearner
from collabzoo.algos.learners.config import update_group
from collabzoo.algos.learners.preference_pairs import PreferencePair
from collabzoo.algos.learners.preference_rollouts import (
    HELDOUT_SEED_OFFSET,
    OnlinePairs,
    pair_seeds,
    sampled_pairs,
)
from collabzoo.algos.learners.reward_model_rewards import RewardModelRewards
from collabzoo.algos.learners.rlhf_actor_critic import (
    ACTOR_CRITIC_BACKENDS,
    build_actor_critic,
    discard_actor_critic,
)
from collabzoo.algos.learners.tree_learner import TreeLearner
from collabzoo.algos.policies.reward_model import JointRewardModel, joint_text
from collabzoo.algos.preference_objectives import bradley_terry_loss
from collabzoo.algos.rollout.tree import Node
from collabzoo.algos.runtime.update_groups import groups_state, load_groups_state

REWARD_ADAPTER = "joint_reward"
"""The reward model's LoRA adapter on a LoRA team's shared base."""


def pair_texts(pair: PreferencePair, agents: Sequence[str]) -> tuple[str, str]:
    return joint_text(pair.prompts, pair.chosen, agents), joint_text(
        pair.prompts, pair.rejected, agents
    )


class RewardModelLearner(TreeLearner):
    """MARLHF's and MARLHFIter's trainer: what sets one apart is its config."""

    algorithm = "rlhf"

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
        self.online = hasattr(args, "comparator_policy")
        self.preference_env_steps = 0
        self.rl_steps = 0
        self.reward_model: JointRewardModel | None = None
        self.reward_metrics: dict[str, float] = {}
        first = self.policies[self.agents[0]]
        if getattr(first, "tokenizer", None) is None:
            raise ValueError("MARLHF's reward model reads text: the team must be LLM policies")
        self.shared_base = first.adapter is not None and args.reward_lora_rank is not None
        self.reward_base: Any = None
        """A frozen copy of the first agent's initial model (a team of full models)."""
        if first.adapter is not None and args.reward_lora_rank is None:
            raise ValueError(
                "reward_lora_rank=None trains a reward model backbone in full, on a copy of a "
                "full model: a LoRA team's reward model is an adapter on its base (give a rank)"
            )
        if not self.shared_base:
            self.reward_base = copy.deepcopy(first.model)
            for parameter in self.reward_base.parameters():
                parameter.requires_grad_(False)
        self.source = OnlinePairs(self, comparator) if self.online else None
        self.rewards = RewardModelRewards(
            lambda: self.reward_model,
            self.agents,
            chunk=args.logprob_batch_size,
            normalize=args.reward_model_normalization,
        )
        """The reward model's scores: the RL phase's rewards (either backend) and, with
        preference_scoring_reward="reward_model", the order of an iteration's candidates."""
        self.actor_critic: ActorCriticLearner | None = None
        """The RL phase's actor-critic learner ("maac", "iac"), on this team's policies."""

    # ----- the reward model ----------------------------------------------------------------------
    def new_reward_model(self, round_: int) -> JointRewardModel:
        """A reward model at its start: the pretrained backbone, a fresh adapter (or a fresh
        copy) and a fresh head, seeded by the run seed and `round_` only."""
        args = self.args
        first = self.policies[self.agents[0]]
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(args.seed * 1_000_003 + 7919 * round_ + 1)
            adapter = None
            if args.reward_lora_rank is None:
                backbone = copy.deepcopy(self.reward_base)
                for parameter in backbone.parameters():
                    parameter.requires_grad_(True)
            else:
                backbone = self._reward_adapter(first.model if self.shared_base else None)
                adapter = REWARD_ADAPTER
            model = JointRewardModel(
                backbone,
                first.tokenizer,
                adapter=adapter,
                freeze_backbone=args.reward_freeze_backbone,
                max_length=args.reward_max_length,
            )
        model.to(first.device)
        return model

    def _reward_adapter(self, shared: Any) -> Any:
        """A fresh LoRA adapter for the reward model: on the team's base, or on the frozen
        copy of the first agent's initial model (wrapped by peft once)."""
        from peft import LoraConfig, PeftModel, get_peft_model

        config = LoraConfig(
            r=self.args.reward_lora_rank,
            lora_alpha=2 * self.args.reward_lora_rank,
            target_modules="all-linear",
            task_type="CAUSAL_LM",
        )
        model = shared if shared is not None else self.reward_base
        if isinstance(model, PeftModel):
            if REWARD_ADAPTER in model.peft_config:
                model.delete_adapter(REWARD_ADAPTER)
            model.add_adapter(REWARD_ADAPTER, config)
        else:
            model = self.reward_base = get_peft_model(model, config, adapter_name=REWARD_ADAPTER)
        model.set_adapter(REWARD_ADAPTER)  # its weights trainable (an agent's active() undoes it)
        return model

    def fit_reward_model(
        self, pairs: Sequence[PreferencePair], heldout: Sequence[PreferencePair], round_: int
    ) -> dict[str, float]:
        """Bradley-Terry epochs over `pairs` (a seeded shuffle per epoch); returns the last
        epoch's loss and accuracy, and the accuracy on `heldout`."""
        args = self.args
        model = self.reward_model = self.new_reward_model(round_)
        group = update_group(
            "reward_model", model.trainable_parameters(), args.reward_learning_rate, args
        )
        rng = random.Random(args.seed * 1_000_003 + round_)
        losses: list[float] = []
        right = 0
        model.train()
        for _ in range(args.reward_num_train_epochs):
            order = list(range(len(pairs)))
            rng.shuffle(order)
            losses, right = [], 0
            for start in range(0, len(order), args.reward_train_batch_size):
                batch = [pairs[i] for i in order[start : start + args.reward_train_batch_size]]
                texts = [pair_texts(p, self.agents) for p in batch]
                scores = model.score_texts([w for w, _ in texts] + [l_ for _, l_ in texts])
                winners, losers = scores[: len(batch)], scores[len(batch) :]
                loss = bradley_terry_loss(winners, losers)
                group.zero_grad()
                finite = bool(torch.isfinite(loss))
                if finite:
                    model.backward(loss)
                group.step(loss_finite=finite)
                losses.append(float(loss.detach()))
                right += int((winners > losers).sum())
        model.eval()
        metrics = {
            "reward_model/loss": sum(losses) / max(1, len(losses)),
            "reward_model/train_accuracy": right / max(1, len(pairs)),
            "reward_model/train_pairs": float(len(pairs)),
            "reward_model/skipped": float(group.skipped),
        }
        if heldout:
            metrics["reward_model/heldout_accuracy"] = self.pair_accuracy(heldout)
            metrics["reward_model/heldout_pairs"] = float(len(heldout))
        return metrics

    @torch.no_grad()
    def pair_accuracy(self, pairs: Sequence[PreferencePair]) -> float:
        assert self.reward_model is not None
        texts = [pair_texts(p, self.agents) for p in pairs]
        right = 0
        chunk = max(1, self.args.logprob_batch_size)
        for start in range(0, len(texts), chunk):
            part = texts[start : start + chunk]
            scores = self.reward_model.score_texts([w for w, _ in part] + [l_ for _, l_ in part])
            right += int((scores[: len(part)] > scores[len(part) :]).sum())
        return right / len(pairs)

    def rescore(self, roots: list[Node]) -> None:
        """Every child's reward becomes the reward model's score of its joint answer (the env's
        kept as the metric `env_reward`), then the returns are recomputed."""
        self.rewards.rescore(roots, self.rollout, self.args.discount)

    def candidate_scores(
        self, prompts: Sequence[dict[str, str]], answers: Sequence[dict[str, str]]
    ) -> list[float] | None:
        """The scores that order an iteration's candidates into pairs: the last reward model's
        (raw) with preference_scoring_reward="reward_model" once one is trained, else None (the
        env's reward)."""
        if getattr(self.args, "preference_scoring_reward", "task") != "reward_model":
            return None
        if self.reward_model is None:
            return None
        return self.rewards.scores(prompts, answers)

    # ----- one update --------------------------------------------------------------------------
    def episode_seeds(self, update: int) -> list[int]:
        return super().episode_seeds(self.rl_steps)

    def rl_update(self) -> dict[str, float]:
        """One RL update whose rewards are the reward model's: the tree learner's, or the
        actor-critic learner's."""
        if self.args.rl_algorithm in ACTOR_CRITIC_BACKENDS:
            return self.actor_critic_update()
        started = time.perf_counter()
        roots = self.rollout_update()
        self.rescore(roots)
        metrics = self.learn(roots)
        self.weights_changed()
        self.rl_steps += 1
        metrics.update(self.rollout_metrics(roots, started))
        return metrics

    # ----- the actor-critic backends --------------------------------------------------------------
    def start_actor_critic(self, round_: int) -> None:
        """Build the actor-critic learner of RL round `round_` (new critics, new optimizers),
        unless one is kept: offline the first is kept throughout, online it is rebuilt every
        iteration as the reference does (unless critic_reset_every_iteration=False)."""
        keep = not self.online or not self.args.critic_reset_every_iteration
        if self.actor_critic is not None:
            if keep:
                return
            discard_actor_critic(self.actor_critic)
        self.actor_critic = build_actor_critic(
            self.args,
            self.env_factory,
            self.policies,
            self.rewards,
            seed=self.args.seed * 1_000_003 + 7919 * round_ + 2,
        )

    def actor_critic_update(self) -> dict[str, float]:
        """One update of the actor-critic learner (its rollout, rescored, its critics' and
        actors' steps), on this run's counters."""
        if self.actor_critic is None:
            self.start_actor_critic(self.update)
        child = self.actor_critic
        assert child is not None
        child.update, child.rl_step = self.update, self.rl_steps  # type: ignore[attr-defined]
        child.rollout.env_steps = child._env_steps_counted = self.rollout.env_steps
        child.samples_seen, child._truncations_logged = self.samples_seen, self._truncations_logged
        metrics = child.train_step()
        self.rollout.env_steps = self._env_steps_counted = child.rollout.env_steps
        self.samples_seen, self._truncations_logged = child.samples_seen, child._truncations_logged
        self.rl_steps += 1
        return metrics

    def close(self) -> None:
        if self.actor_critic is not None:
            self.actor_critic.close()
        super().close()

    def train_step(self) -> dict[str, float]:
        if self.online:
            metrics = self.iteration_step()
        else:
            if self.reward_model is None:
                rng = random.Random(self.args.seed)
                count = self.args.preference_num_items
                if self.args.preference_data is not None:
                    from collabzoo.algos.learners.preference_data import load_pairs

                    pairs = load_pairs(
                        self.args.preference_data,
                        self.policies,
                        self.args.preference_pairs_per_sample,
                    )
                else:
                    pairs = sampled_pairs(self, pair_seeds(self.args.seed, 0, count), rng)
                heldout_seeds = pair_seeds(
                    self.args.seed, 0, self.args.reward_heldout_items, HELDOUT_SEED_OFFSET
                )
                heldout = sampled_pairs(self, heldout_seeds, rng) if heldout_seeds else []
                if not pairs:
                    raise ValueError(
                        "no preference pair to train the reward model on: every candidate "
                        "earned the same reward; sample more candidates or episodes"
                    )
                self.reward_metrics = self.fit_reward_model(pairs, heldout, 0)
            metrics = self.rl_update()
            metrics.update(self.reward_metrics)
        self.update += 1
        metrics["preference_env_steps"] = float(self.preference_env_steps)
        return metrics

    def iteration_step(self) -> dict[str, float]:
        assert self.source is not None
        rng = random.Random(self.args.seed * 1_000_003 + self.update)
        pairs, metrics = self.source.iteration_pairs(self.update, rng)
        if pairs:
            metrics.update(self.fit_reward_model(pairs, [], self.update))
            if self.args.rl_algorithm in ACTOR_CRITIC_BACKENDS:
                self.start_actor_critic(self.update)
        steps = [self.rl_update() for _ in range(self.args.num_train_epochs)] if pairs else []
        for key in {k for s in steps for k in s}:
            values = [s[key] for s in steps if key in s]
            metrics[key] = sum(values) / len(values)
        return metrics

    # ----- state ---------------------------------------------------------------------------------
    def extra_state(self) -> dict[str, Any]:
        state: dict[str, Any] = {
            "preference_env_steps": self.preference_env_steps,
            "rl_steps": self.rl_steps,
            "reward_metrics": dict(self.reward_metrics),
        }
        scoring = getattr(self.args, "preference_scoring_reward", "task") == "reward_model"
        if self.reward_model is not None and (not self.online or scoring):
            state["reward_model"] = self.reward_model.trainable_state()  # still to be read
        if self.source is not None:
            state["online"] = self.source.state()
        child = self.actor_critic
        if child is not None and (not self.online or not self.args.critic_reset_every_iteration):
            state["actor_critic"] = {  # kept across updates (rebuilt ones need nothing)
                "optimizers": groups_state(child.groups),
                "critics": child.extra_state(),
            }
        return state

    def load_extra_state(self, state: Any) -> None:
        self.preference_env_steps = state.get("preference_env_steps", 0)
        self.rl_steps = state.get("rl_steps", 0)
        self.reward_metrics = dict(state.get("reward_metrics", {}))
        if "reward_model" in state:
            self.reward_model = self.new_reward_model(0)
            self.reward_model.load_trainable_state(state["reward_model"])
            self.reward_model.eval()
        if self.source is not None and "online" in state:
            self.source.load_state(state["online"])
        if "actor_critic" in state:
            self.start_actor_critic(0 if not self.online else self.update - 1)
            assert self.actor_critic is not None
            load_groups_state(self.actor_critic.groups, state["actor_critic"]["optimizers"])
            self.actor_critic.load_extra_state(state["actor_critic"]["critics"])


__all__ = ["REWARD_ADAPTER", "RewardModelLearner", "pair_texts"]

"""MARLHF's RL backends by CoMLRL's names (`rl_algorithm`), and the actor-critic ones: the
centralized critic ("maac", CoMLRL's MAAC, the paper's CoLLM-CC) and IAC ("iac") trained against
the reward model.

"magrpo", "mareinforce", "maremax" and "marloo" are the rollout-tree learner with the baseline
`advantage_mode` "mean", "raw", "max" and "rloo". "maac" and "iac" build an actor-critic learner
on the team's own policies (as the reference builds a child trainer) whose `learn` first replaces
every joint answer's reward with the reward model's score (`RewardModelRewards`, the part the
tree backend calls too): its critics fit those scores and its actors follow their TD errors.
The settings carry over as the reference's do (`actor_critic_config`).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

import torch

from collabzoo.algos.learners.actor_critic import ActorCriticLearner
from collabzoo.algos.learners.central_critic import CentralCriticConfig, CentralCriticTrainer
from collabzoo.algos.learners.iac import IACConfig, IACTrainer
from collabzoo.algos.learners.reward_model_rewards import RewardModelRewards
from collabzoo.algos.objectives import normalization_mode
from collabzoo.algos.policies.llm import LLMPolicy
from collabzoo.algos.policies.policy import Policy
from collabzoo.algos.rollout.tree import Node

TREE_BASELINES = {"magrpo": "mean", "mareinforce": "raw", "maremax": "max", "marloo": "rloo"}
"""The rollout-tree backends and the baseline (`advantage_mode`) each one is."""
ACTOR_CRITIC_BACKENDS = ("maac", "iac")
RL_ALGORITHMS = (*TREE_BASELINES, *ACTOR_CRITIC_BACKENDS)


class RewardModelActorCritic:
    """What an actor-critic learner adds in MARLHF's RL phase: its rollouts' rewards are the
    reward model's scores before advantages and critic targets are computed, and its episodes
    are those of the run's RL update `rl_step` (set by MARLHF's learner before each update)."""

    rewards: RewardModelRewards
    rl_step: int = 0

    def episode_seeds(self, update: int) -> list[int]:
        return super().episode_seeds(self.rl_step)  # type: ignore[misc]

    def learn(self, roots: list[Node]) -> dict[str, float]:
        learner: Any = self
        self.rewards.rescore(roots, learner.rollout, learner.args.discount)
        return super().learn(roots)  # type: ignore[misc]


class RewardModelCentralCritic(RewardModelActorCritic, CentralCriticTrainer):
    """MARLHF's "maac" backend: CoLLM-CC against the reward model."""

    algorithm = "marlhf-maac"


class RewardModelIAC(RewardModelActorCritic, IACTrainer):
    """MARLHF's "iac" backend: IAC against the reward model."""

    algorithm = "marlhf-iac"


def check_backend(name: str, advantage_mode: str | None, args: Any) -> None:
    """Refuse an unknown backend `name`, a baseline `advantage_mode` (as the user gave it, or
    None) that contradicts it, and tree-only settings of `args` with an actor-critic backend,
    saying what was expected."""
    if name not in RL_ALGORITHMS:
        raise ValueError(f"rl_algorithm must be one of {RL_ALGORITHMS}, got {name!r}")
    implied = TREE_BASELINES.get(name)
    if advantage_mode is not None and advantage_mode != implied:
        said = (
            f"is the baseline {implied!r}" if implied else "has a critic: it has no advantage_mode"
        )
        raise ValueError(
            f"rl_algorithm={name!r} {said}, but advantage_mode={advantage_mode!r}: set "
            f"only rl_algorithm (one of {RL_ALGORITHMS}; the baselines: {TREE_BASELINES})"
        )
    if implied is not None:
        return
    allowed = {
        "joint_mode": ("aligned",),
        "advantage_group": ("node",),
        "reference_kl_enabled": (False,),
        "generation_backend": ("hf", "hf-compiled"),
        "env_executor": ("threads",),
    }
    for field, expected in allowed.items():
        value = getattr(args, field)
        if value not in expected:
            raise ValueError(
                f"rl_algorithm={name!r} trains collabzoo's actor-critic learner, which does not "
                f"offer {field}={value!r} here; expected one of {expected}"
            )
    if args.advantage_normalization == "std":
        raise ValueError(
            f"rl_algorithm={name!r} z-scores each agent's advantages over the update or not at "
            "all: advantage_normalization must be true/'zscore' or false/'none', got 'std'"
        )
    if name == "iac" and args.critic_type != "v":
        raise ValueError(
            f"rl_algorithm='iac' values each agent's history, V(h_i): critic_type must be 'v', "
            f"got {args.critic_type!r} (a Q critic is the centralized one, rl_algorithm='maac')"
        )


def _z_scored(setting: bool | str) -> bool:
    """The actor-critic learner's z-scoring from a tree setting (true, as the reference's)."""
    return setting if isinstance(setting, bool) else normalization_mode(setting) != "none"


def actor_critic_config(args: Any) -> CentralCriticConfig | IACConfig:
    """The actor-critic learner's settings from MARLHF's, as the reference maps them: the
    agents' learning rate for the actors, `critic_learning_rate` or else the agents' for the
    critics, `train_batch_size` samples per agent per step, the sampling, buffer, generations,
    discount and advantage z-scoring as given; every other shared field as it is."""
    kind = CentralCriticConfig if args.rl_algorithm == "maac" else IACConfig
    names = {f.name for f in dataclasses.fields(kind)}
    shared = {k: v for k, v in dataclasses.asdict(args).items() if k in names}
    per_agent = {
        agent: {
            ("actor_learning_rate" if k == "agent_learning_rate" else k): v
            for k, v in values.items()
        }
        for agent, values in (args.per_agent or {}).items()
    }
    shared.update(
        output_dir=f"{args.output_dir}/actor_critic",
        device=None,  # the team is placed already; each critic goes where its actor runs
        dtype="auto",  # and in the dtype it has (the actors' float32 masters stay as they are)
        actor_learning_rate=args.agent_learning_rate,
        critic_learning_rate=args.critic_learning_rate or args.agent_learning_rate,
        mini_batch_size=args.train_batch_size,
        advantage_normalization=_z_scored(args.advantage_normalization),
        per_agent=per_agent or None,
        max_updates=0,
        resume=False,
        eval_interval=0,
    )
    if kind is IACConfig:
        shared.pop("critic_type", None)
    return kind(**shared)


def build_actor_critic(
    args: Any,
    env: Any,
    policies: Mapping[str, Policy],
    rewards: RewardModelRewards,
    *,
    critics: Any = None,
    seed: int,
) -> ActorCriticLearner:
    """A new actor-critic learner on `policies` (the same objects: its actor steps train the
    team) with new critics and optimizers, built under torch's RNG seeded with `seed` and
    leaving the caller's RNG where it was."""
    config = actor_critic_config(args)
    kind = RewardModelCentralCritic if args.rl_algorithm == "maac" else RewardModelIAC
    compute = {id(p): p.compute_dtype for p in policies.values()}
    cuda = list(range(torch.cuda.device_count())) if torch.cuda.is_available() else []
    with torch.random.fork_rng(devices=cuda):
        config.seed = seed  # the learner seeds torch's RNG with it (its critics' heads)
        learner = kind(env, dict(policies), config, critics=critics)
    config.seed = args.seed  # its episodes are the run's
    for policy in policies.values():  # as the outer learner prepared them
        policy.compute_dtype = compute[id(policy)]
    learner.rewards = rewards
    return learner


def discard_actor_critic(learner: ActorCriticLearner) -> None:
    """Free an actor-critic learner that a new one replaces: its env threads, and the LoRA
    adapters its critics kept on the actors' base (a new critic must start from the base)."""
    learner.close()
    for critic in learner.critics.values():
        backbone = critic.backbone
        if critic.shares_actor or not isinstance(backbone, LLMPolicy):
            continue
        adapter = backbone.adapter
        model = backbone.model
        on_actor = any(p.model is model for p in learner.distinct)
        if on_actor and adapter is not None and adapter in getattr(model, "peft_config", {}):
            model.delete_adapter(adapter)


__all__ = [
    "ACTOR_CRITIC_BACKENDS",
    "RL_ALGORITHMS",
    "TREE_BASELINES",
    "RewardModelCentralCritic",
    "RewardModelIAC",
    "actor_critic_config",
    "build_actor_critic",
    "check_backend",
    "discard_actor_critic",
]

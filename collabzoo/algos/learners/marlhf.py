"""MARLHF and MARLHFIter: a joint reward model learned from preference pairs, then RL against
it with the backend `rl_algorithm` (the rollout-tree learner, MAGRPO by default, or an
actor-critic learner), evaluated with the task's own reward.

Reward model: s(x, a) = w . h_last + b on the agents' backbone (a LoRA adapter), trained with
the Bradley-Terry loss -log sigmoid(s(x, a^w) - s(x, a^l)); RL: every joint answer's reward is
s(x, a) (raw, or z-scored per update with `reward_model_normalization`). See `rlhf_learner`
and `rlhf_actor_critic`.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass

from collabzoo.algos.learners.config import require_at_least, require_positive
from collabzoo.algos.learners.critic_batches import CRITIC_TYPES
from collabzoo.algos.learners.preference_config import OnlinePreferenceConfig, PreferenceConfig
from collabzoo.algos.learners.rlhf_actor_critic import TREE_BASELINES, check_backend
from collabzoo.algos.learners.rlhf_learner import RewardModelLearner
from collabzoo.algos.learners.tree_learner import TreeLearnerConfig

PREFERENCE_SCORINGS = ("task", "reward_model")


@dataclass
class MARLHFConfig(PreferenceConfig, TreeLearnerConfig):
    """MARLHF settings (CoMLRL's names and defaults where they exist; `max_updates` counts RL
    updates, where the reference runs num_train_epochs passes over its dataset)."""

    output_dir: str = "runs/marlhf"
    rl_algorithm: str = "magrpo"
    """The RL backend: "magrpo", "mareinforce", "maremax", "marloo" (the rollout-tree learner
    with the baseline "mean", "raw", "max", "rloo") or "maac", "iac" (the centralized critic,
    IAC: an actor-critic learner on the team, see `rlhf_actor_critic`)."""
    advantage_mode: str | None = None
    """Set by `rl_algorithm` (a tree backend's baseline); a value it does not imply is refused."""
    advantage_normalization: bool | str = "zscore"
    """As the tree learners' (CoMLRL's z-scoring: with it every tree backend's loss is MAGRPO's,
    as in the reference); "std" keeps each baseline's meaning. Said here because the preference
    settings' base would otherwise give the older default, true ("std")."""
    critic_learning_rate: float | None = None
    """maac/iac: AdamW learning rate of the critics; None: `agent_learning_rate`."""
    critic_type: str = "v"
    """maac: "v" (V(s)) or "q" (Q(s, a)); iac values V(h_i) only."""
    use_separate_critic: bool = True
    """iac: a critic with its own backbone; False: a value head on the actor."""
    critic_model_name_or_path: str | None = None
    """maac/iac: the critics' model (the reference's critic_model_name); None: a LoRA adapter
    on a LoRA team's base, else a copy of the actor's model."""
    value_loss_coef: float = 0.6
    """maac/iac: weight of the critic's squared error."""
    value_clip_range: float | None = 0.2
    """iac with a value head on the actor: clip the new value to old +- this."""
    value_head_hidden_dim: int | None = None
    """iac with a value head on the actor: its hidden layer (None: linear)."""
    critic_value_head_hidden_dim: int | None = None
    """maac/iac: a separate critic's value head's hidden layer (None: linear)."""
    reward_learning_rate: float = 1e-5
    """AdamW learning rate of the reward model's adapter (or backbone) and head."""
    reward_num_train_epochs: int = 1
    """Bradley-Terry passes over the pairs."""
    reward_train_batch_size: int = 1
    """Pairs per reward-model step."""
    reward_max_length: int | None = None
    """Tokens of a joint text the reward model reads at most; None: all."""
    reward_freeze_backbone: bool = False
    """Train the head only."""
    reward_lora_rank: int | None = 8
    """The rank of the reward model's LoRA adapter on the agents' base (no second copy for a
    LoRA team); None: train a full copy of the first agent's model (the reference's way)."""
    reward_model_normalization: bool = False
    """z-score the reward model's scores over each update's joint answers (off: raw, as the
    reference)."""
    reward_heldout_items: int = 4
    """Episodes whose pairs are held out to measure the reward model's pair accuracy (extra
    episodes: the training pairs are the reference's); 0: none."""

    def validate(self) -> None:
        given = self.advantage_mode
        if given is not None and given == getattr(self, "_implied_advantage_mode", None):
            given = None  # filled in by an earlier check, not said by the user
        check_backend(self.rl_algorithm, given, self)
        implied = TREE_BASELINES.get(self.rl_algorithm)
        self.advantage_mode = self._implied_advantage_mode = implied
        if implied is not None:
            super().validate()
        else:  # no baseline: the shared settings are checked with a neutral one
            neutral = copy.copy(self)
            neutral.advantage_mode = "mean"
            super(MARLHFConfig, neutral).validate()
        if self.critic_type not in CRITIC_TYPES:
            raise ValueError(f"critic_type must be one of {CRITIC_TYPES}, got {self.critic_type!r}")
        require_positive(self, "critic_learning_rate", "value_clip_range", optional=True)
        require_at_least(self, 0, "value_loss_coef")
        hidden = ("value_head_hidden_dim", "critic_value_head_hidden_dim")
        require_at_least(self, 1, *hidden, optional=True)
        require_positive(self, "reward_learning_rate")
        require_at_least(self, 1, "reward_num_train_epochs", "reward_train_batch_size")
        require_at_least(self, 1, "reward_max_length", "reward_lora_rank", optional=True)
        require_at_least(self, 0, "reward_heldout_items")


@dataclass
class MARLHFIterConfig(OnlinePreferenceConfig, MARLHFConfig):
    """MARLHFIter settings: one update is one iteration; the reward model is re-initialised
    from the pretrained backbone every iteration."""

    output_dir: str = "runs/marlhf-iter"
    num_train_epochs: int = 2
    """RL updates per iteration against the iteration's reward model."""
    reward_num_train_epochs: int = 2
    reward_heldout_items: int = 0
    advantage_normalization: bool | str = "zscore"
    """As MARLHF's (the online settings' base would otherwise give the older true)."""
    preference_scoring_reward: str = "task"
    """What orders an iteration's current and comparator candidates into pairs: "task" (the
    env's reward) or "reward_model" (the raw scores of the last reward model trained, from the
    second iteration on; the first, with none yet, uses the env's)."""
    critic_reset_every_iteration: bool = True
    """maac/iac: a new critic (from its model, a new head) and new optimizers every iteration,
    as the reference builds them; False: keep them across iterations."""

    def validate(self) -> None:
        super().validate()
        if self.preference_scoring_reward not in PREFERENCE_SCORINGS:
            raise ValueError(
                f"preference_scoring_reward must be one of {PREFERENCE_SCORINGS}, "
                f"got {self.preference_scoring_reward!r}"
            )


class MARLHFTrainer(RewardModelLearner):
    """`MARLHFTrainer(env=..., models=..., args=MARLHFConfig(...)).train()`."""

    algorithm = "marlhf"

    def __init__(self, env, models, args: MARLHFConfig | None = None, **kwargs) -> None:
        super().__init__(env, models, args or MARLHFConfig(), **kwargs)


class MARLHFIterTrainer(RewardModelLearner):
    """`MARLHFIterTrainer(env=..., models=..., args=MARLHFIterConfig(...)).train()`."""

    algorithm = "marlhf-iter"

    def __init__(self, env, models, args: MARLHFIterConfig | None = None, **kwargs) -> None:
        super().__init__(env, models, args or MARLHFIterConfig(), **kwargs)

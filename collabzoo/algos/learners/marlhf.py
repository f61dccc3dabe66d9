"""MARLHF and MARLHFIter: a joint reward model learned from preference pairs, then RL against
it with the rollout-tree learner (MAGRPO by default), evaluated with the task's own reward.

Reward model: s(x, a) = w . h_last + b on the agents' backbone (a LoRA adapter), trained with
the Bradley-Terry loss -log sigmoid(s(x, a^w) - s(x, a^l)); RL: every joint answer's reward is
s(x, a) (raw, or z-scored per update with `reward_model_normalization`). See `rlhf_learner`.
"""

from __future__ import annotations

from dataclasses import dataclass

from collabzoo.algos.learners.config import require_at_least, require_positive
from collabzoo.algos.learners.preference_config import OnlinePreferenceConfig, PreferenceConfig
from collabzoo.algos.learners.rlhf_learner import RewardModelLearner
from collabzoo.algos.learners.tree_learner import TreeLearnerConfig


@dataclass
class MARLHFConfig(PreferenceConfig, TreeLearnerConfig):
    """MARLHF settings (CoMLRL's names and defaults where they exist; `max_updates` counts RL
    updates, where the reference runs num_train_epochs passes over its dataset)."""

    output_dir: str = "runs/marlhf"
    advantage_mode: str = "mean"
    """The RL backend's baseline: "mean" is MAGRPO (the reference's default rl_algorithm),
    "raw", "rloo" and "max" its MAREINFORCE, MARLOO and MAReMax."""
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
        super().validate()
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

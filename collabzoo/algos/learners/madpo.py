"""MADPO and MADPOIter: multi-agent DPO on joint preference pairs, offline and online.

Each agent i minimises -log sigmoid(beta (Delta_i + sum_{j != i} sg(Delta_j) - sum_j
Delta^ref_j)) over pairs of aligned joint candidates ordered by the team reward, so every agent
follows the joint DPO loss's gradient. See `dpo_learner` for the loop, `preference_objectives`
for the maths and `preference_rollouts` for the pairs.
"""

from __future__ import annotations

from dataclasses import dataclass

from collabzoo.algos.learners.dpo_learner import DPOLearner
from collabzoo.algos.learners.preference_config import OnlinePreferenceConfig, PreferenceConfig


@dataclass
class MADPOConfig(PreferenceConfig):
    """MADPO settings (CoMLRL's names and defaults; `max_updates` counts optimizer steps,
    where the reference counts `num_train_epochs` over its pair set)."""

    output_dir: str = "runs/madpo"
    reference_free: bool = False
    """True: no reference terms (CoMLRL's MADPO, a uniform reference); False: standard DPO
    against the initial policy (a LoRA team's base, else a frozen copy)."""


@dataclass
class MADPOIterConfig(OnlinePreferenceConfig, MADPOConfig):
    """MADPOIter settings: one update is one iteration (CoMLRL's num_iterations, 6)."""

    output_dir: str = "runs/madpo-iter"


class MADPOTrainer(DPOLearner):
    """`MADPOTrainer(env=..., models=..., args=MADPOConfig(...)).train()`."""

    algorithm = "madpo"

    def __init__(self, env, models, args: MADPOConfig | None = None, **kwargs) -> None:
        super().__init__(env, models, args or MADPOConfig(), **kwargs)


class MADPOIterTrainer(DPOLearner):
    """`MADPOIterTrainer(env=..., models=..., args=MADPOIterConfig(...)).train()`; pass
    `comparator=` (models, as `models=`) for comparator_policy="model" against another team."""

    algorithm = "madpo-iter"

    def __init__(self, env, models, args: MADPOIterConfig | None = None, **kwargs) -> None:
        super().__init__(env, models, args or MADPOIterConfig(), **kwargs)

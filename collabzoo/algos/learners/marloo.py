"""MARLOO: MA-REINFORCE with the leave-one-out baseline, CoMLRL's name for it.

An agent's sample k at a tree node gets A_k = G_k - mean of its K - 1 siblings' returns
= (K G_k - sum G) / (K - 1), i.e. K / (K - 1) times the mean-baseline advantage: an unbiased
baseline (it does not use the sample's own return). Unnormalised by default; with
advantage_normalization='zscore' (CoMLRL's default) the K / (K - 1) and the baseline both cancel
and MARLOO is exactly MAGRPO.
"""

from __future__ import annotations

from dataclasses import dataclass

from collabzoo.algos.learners.reinforce import MAREINFORCEConfig, MAREINFORCETrainer


@dataclass
class MARLOOConfig(MAREINFORCEConfig):
    """MARLOO settings: MA-REINFORCE's, with the leave-one-out baseline fixed."""

    output_dir: str = "runs/marloo"
    advantage_mode: str = "rloo"
    """The leave-one-out baseline: the mean of the other K - 1 siblings' returns."""
    advantage_normalization: bool | str = "none"
    """Unnormalised ('zscore', CoMLRL's default, makes MARLOO equal to MAGRPO; 'std' keeps the
    baseline and divides by the group std)."""

    def validate(self) -> None:
        super().validate()
        if self.advantage_mode != "rloo":
            raise ValueError(
                f"MARLOO's baseline is rloo, got advantage_mode={self.advantage_mode!r}: the "
                "other baselines are MA-REINFORCE's (collabzoo train mareinforce --set "
                "advantage_mode=...) or MAReMax's (max)"
            )


class MARLOOTrainer(MAREINFORCETrainer):
    """`MARLOOTrainer(env=..., models=..., args=MARLOOConfig(...)).train()`."""

    algorithm = "marloo"

    def __init__(self, env, models, args: MARLOOConfig | None = None, **kwargs) -> None:
        super().__init__(env, models, args or MARLOOConfig(), **kwargs)

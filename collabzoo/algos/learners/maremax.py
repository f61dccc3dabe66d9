"""MAReMax: MA-REINFORCE with the group-max baseline, CoMLRL's name for it.

An agent's sample k at a tree node gets A_k = G_k - max(G): every advantage is at most 0 and the
best sibling's is 0, so the update only pushes probability away from the worse samples. Not
ReMax (Li et al. 2023), whose baseline is the reward of a greedy response: CoMLRL's MAReMax
takes the sampled group's maximum, and so does this one. Unnormalised by default; with
advantage_normalization='zscore' (CoMLRL's default) the baseline cancels and MAReMax is exactly
MAGRPO.
"""

from __future__ import annotations

from dataclasses import dataclass

from collabzoo.algos.learners.reinforce import MAREINFORCEConfig, MAREINFORCETrainer


@dataclass
class MAReMaxConfig(MAREINFORCEConfig):
    """MAReMax settings: MA-REINFORCE's, with the max baseline fixed."""

    output_dir: str = "runs/maremax"
    advantage_mode: str = "max"
    """The group-max baseline: the best sibling's return."""
    advantage_normalization: bool | str = "none"
    """Unnormalised ('zscore', CoMLRL's default, makes MAReMax equal to MAGRPO; 'std' keeps the
    baseline and divides by the group std)."""

    def validate(self) -> None:
        super().validate()
        if self.advantage_mode != "max":
            raise ValueError(
                f"MAReMax's baseline is max, got advantage_mode={self.advantage_mode!r}: the "
                "other baselines are MA-REINFORCE's (collabzoo train mareinforce --set "
                "advantage_mode=...) or MARLOO's (rloo)"
            )


class MAReMaxTrainer(MAREINFORCETrainer):
    """`MAReMaxTrainer(env=..., models=..., args=MAReMaxConfig(...)).train()`."""

    algorithm = "maremax"

    def __init__(self, env, models, args: MAReMaxConfig | None = None, **kwargs) -> None:
        super().__init__(env, models, args or MAReMaxConfig(), **kwargs)

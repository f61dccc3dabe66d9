"""MAGRPO: multi-agent GRPO, i.e. MA-REINFORCE with a group-mean baseline on a rollout tree.

At each tree node every agent samples K completions; joint actions are aligned (K children) or
crossed (K^N); returns flow bottom-up, R = r + gamma * mean(children's R); an agent's sample k
gets A_k = (G_k - mean(G)) / std(G), and the loss is -mean(A * sum_t log pi) per agent. No ratio,
no clipping; a KL penalty to a frozen reference only when asked. See `tree_learner` for the loop.

As in CoMLRL, the other baselines are settings (`advantage_mode`); with the default z-score
normalisation they all give these same advantages (see `objectives`).
"""

from __future__ import annotations

from dataclasses import dataclass

from collabzoo.algos.learners.tree_learner import TreeLearner, TreeLearnerConfig


@dataclass
class MAGRPOConfig(TreeLearnerConfig):
    """MAGRPO settings; the fields and defaults follow the reference (CoMLRL) where they exist."""

    output_dir: str = "runs/magrpo"
    advantage_mode: str = "mean"
    """MAGRPO's baseline is the group mean."""
    advantage_normalization: bool | str = "zscore"
    """The reference's z-score over each node's K siblings."""


class MAGRPOTrainer(TreeLearner):
    """`MAGRPOTrainer(env=..., models=..., args=MAGRPOConfig(...)).train()`."""

    algorithm = "magrpo"

    def __init__(self, env, models, args: MAGRPOConfig | None = None, **kwargs) -> None:
        super().__init__(env, models, args or MAGRPOConfig(), **kwargs)

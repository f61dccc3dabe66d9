"""MA-REINFORCE: the Monte-Carlo policy gradient for a team, with a choice of baseline.

grad J(theta_i) = E[ rho * grad log pi_i(a_i | h_i) * (G - b) ] with rho = 1 (on-policy),
G the Monte-Carlo return of the joint trajectory and b one of: raw (0), mean (of the K sibling
returns), rloo (mean of the OTHER siblings) or max (of the siblings). Unbiased and high
variance; the samples come from the same rollout trees as MAGRPO's.
"""

from __future__ import annotations

from dataclasses import dataclass

from collabzoo.algos.learners.tree_learner import TreeLearner, TreeLearnerConfig


@dataclass
class MAREINFORCEConfig(TreeLearnerConfig):
    """MA-REINFORCE settings."""

    output_dir: str = "runs/mareinforce"
    advantage_normalization: bool | str = "none"
    """Unnormalised: the baseline alone shapes the advantage ('zscore' makes any baseline
    MAGRPO's)."""


class MAREINFORCETrainer(TreeLearner):
    """`MAREINFORCETrainer(env=..., models=..., args=MAREINFORCEConfig(...)).train()`."""

    algorithm = "mareinforce"

    def __init__(self, env, models, args: MAREINFORCEConfig | None = None, **kwargs) -> None:
        super().__init__(env, models, args or MAREINFORCEConfig(), **kwargs)

"""IPPO: independent PPO, per-agent critics with GAE(lambda) and clipped importance ratios.

    A_{i,t} = sum_l (gamma lambda)^l delta_{i,t+l},   rho_t = pi_i(a_t | h) / pi_i,old(a_t | h)
    L = -E[ sum_t min(rho_t A, clip(rho_t, 1 - eps, 1 + eps) A) ] - beta H + c (V - y)^2

over `ppo_epochs` passes in mini-batches, with the value loss clipped around the old value.
With ppo_epochs=1, one mini-batch and clip_range=None it reduces to the reference's "on-policy
IPPO" (no ratio, no clipping). See `actor_critic` for the loop.
"""

from __future__ import annotations

from dataclasses import dataclass

from collabzoo.algos.learners.actor_critic import ActorCriticConfig, ActorCriticLearner
from collabzoo.algos.learners.config import ActorCriticRule


@dataclass
class IPPOConfig(ActorCriticConfig):
    """IPPO settings (reference names where they exist, PPO's usual defaults otherwise)."""

    output_dir: str = "runs/ippo"
    ppo_epochs: int = 4
    """Passes over each update's samples."""
    clip_range: float | None = 0.2
    """eps of the ratio clipping; None: no clipping."""
    gae_lambda: float = 0.95
    """lambda of GAE: 0 gives TD(0) advantages, 1 Monte-Carlo returns minus V."""

    def validate(self) -> None:
        super().validate()
        if self.ppo_epochs < 1:
            raise ValueError(f"ppo_epochs must be at least 1, got {self.ppo_epochs}")
        if not 0.0 <= self.gae_lambda <= 1.0:
            raise ValueError(f"gae_lambda must be in [0, 1], got {self.gae_lambda}")
        if self.clip_range is not None and self.clip_range <= 0:
            raise ValueError(f"clip_range must be positive or None, got {self.clip_range}")

    def rule(self) -> ActorCriticRule:
        """GAE(lambda) advantages, clipped ratios, every value loss clipped."""
        return ActorCriticRule(
            epochs=self.ppo_epochs,
            gae_lambda=self.gae_lambda,
            ratio=True,
            clip_range=self.clip_range,
            clip_every_value=True,
        )


class IPPOTrainer(ActorCriticLearner):
    """`IPPOTrainer(env=..., models=..., args=IPPOConfig(...)).train()`."""

    algorithm = "ippo"

    def __init__(self, env, models, args: IPPOConfig | None = None, **kwargs) -> None:
        super().__init__(env, models, args or IPPOConfig(), **kwargs)

"""IAC: independent actor-critic (the paper's CoLLM-DC).

Each agent has an actor and its own critic V_i(h_i); the other agents are part of its
environment. Advantage and critic target are TD(0):

    delta_{i,t} = r_t + gamma V_i(h_{i,t+1}) - V_i(h_{i,t})
    y_{i,t} = r_t + gamma V_i(h_{i,t+1})
    J(theta_i) = E[ log pi_i(a_{i,t} | h_{i,t}) delta_{i,t} + beta H(pi_i) ]

The critic is a separate model or a value head on the actor (`use_separate_critic`); a head on
the actor has its value loss clipped around the old value. See `actor_critic` for the loop.
"""

from __future__ import annotations

from dataclasses import dataclass

from collabzoo.algos.learners.actor_critic import ActorCriticConfig, ActorCriticLearner
from collabzoo.algos.learners.config import ActorCriticRule


@dataclass
class IACConfig(ActorCriticConfig):
    """IAC settings; the fields and defaults follow the reference (CoMLRL) where they exist."""

    output_dir: str = "runs/iac"
    ac_epochs: int = 1
    """Passes over each update's samples."""

    def validate(self) -> None:
        super().validate()
        if self.ac_epochs < 1:
            raise ValueError(f"ac_epochs must be at least 1, got {self.ac_epochs}")

    def rule(self) -> ActorCriticRule:
        """TD(0) advantages, a critic per agent, no ratio."""
        return ActorCriticRule(epochs=self.ac_epochs)


class IACTrainer(ActorCriticLearner):
    """`IACTrainer(env=..., models=..., args=IACConfig(...)).train()`."""

    algorithm = "iac"

    def __init__(self, env, models, args: IACConfig | None = None, **kwargs) -> None:
        super().__init__(env, models, args or IACConfig(), **kwargs)

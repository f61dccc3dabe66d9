"""The centralized critic (the paper's CoLLM-CC): decentralized actors, one critic of the team.

One critic V_phi(s_t) reads the joint view `env.state()` (every agent's observation); every
agent's actor uses the same TD error

    delta_t = r_t + gamma V_phi(s_{t+1}) - V_phi(s_t),
    grad J(theta_i) = E[ sum_t grad log pi_i(a_{i,t} | h_{i,t}) delta_t ],

and the critic minimises (r_t + gamma V_phi(s_{t+1}) - V_phi(s_t))^2, seeing each transition
once per pass (the reference steps it once per agent on duplicated samples). With
`critic_type="q"` it reads the state and the joint action, Q(s_t, a_t), and bootstraps from the
mean Q over the next turn's sampled joint actions. Execution stays decentralized: only training
uses the critic. See `actor_critic` for the loop.
"""

from __future__ import annotations

from dataclasses import dataclass

from collabzoo.algos.learners.actor_critic import ActorCriticConfig, ActorCriticLearner
from collabzoo.algos.learners.config import ActorCriticRule
from collabzoo.algos.learners.critic_batches import CRITIC_TYPES


@dataclass
class CentralCriticConfig(ActorCriticConfig):
    """CoLLM-CC settings; the critic always has a backbone of its own (`critic_model_name_or_path`,
    a LoRA adapter on a LoRA team's base, or a copy of the first agent's model)."""

    output_dir: str = "runs/cc"
    critic_type: str = "v"
    """'v': V(s) over env.state(); 'q': Q(s, a) over the state and the joint action."""
    ac_epochs: int = 1
    """Passes over each update's samples."""

    def validate(self) -> None:
        super().validate()
        if self.critic_type not in CRITIC_TYPES:
            raise ValueError(f"critic_type must be one of {CRITIC_TYPES}, got {self.critic_type!r}")
        if self.ac_epochs < 1:
            raise ValueError(f"ac_epochs must be at least 1, got {self.ac_epochs}")

    def rule(self) -> ActorCriticRule:
        """TD(0) advantages from one team critic, V(s) or Q(s, a), no ratio."""
        return ActorCriticRule(epochs=self.ac_epochs, team_critic=self.critic_type)


class CentralCriticTrainer(ActorCriticLearner):
    """`CentralCriticTrainer(env=..., models=..., args=CentralCriticConfig(...)).train()`."""

    algorithm = "cc"

    def __init__(self, env, models, args: CentralCriticConfig | None = None, **kwargs) -> None:
        super().__init__(env, models, args or CentralCriticConfig(), **kwargs)


CoLLMCCTrainer = CentralCriticTrainer
"""The paper's name for the same trainer."""
CoLLMCCConfig = CentralCriticConfig
MAACTrainer = CentralCriticTrainer
"""CoMLRL's name for the same trainer (its MAAC is the paper's CoLLM-CC; `collabzoo train maac`)."""
MAACConfig = CentralCriticConfig

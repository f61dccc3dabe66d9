"""AT-GRPO (PettingLLMs; Zhao et al., arXiv 2510.11062): agent- and turn-wise grouped GRPO.

Per update, each episode e is played turn by turn as a beam of width one (`rollout.beam`): at
turn t every agent i samples K completions from the same state, the K aligned joint actions step
K copies of the env, and each sample earns agent i's own reward r^k_{e,t,i} from the env's reward
dict (no return, no bootstrapping). The best branch by team reward continues. Samples are
grouped by (episode, turn, agent) (`group_by`) and

    A^k_{e,t,i} = (r^k_{e,t,i} - mean_k r_{e,t,i}) / (std_u,k r_{e,t,i} + 1e-6)

(`objectives.agent_turn_group_advantages`). Each distinct policy (role-specific models, or one
shared by every role, whose batch mixes roles while the groups stay per role) takes one step
per mini-batch on verl's clipped PPO loss (dual clip optional), as a token mean over the mini-batch
(`objectives.token_mean_clipped_loss`), the old log-probabilities taken before its first step;
with `ppo_clip=False`, the token mean of -A log pi. Optionally the groups of lowest mean reward
are dropped first (`filter_low_mean_groups`; the reference's configs drop half).
"""

from __future__ import annotations

from dataclasses import dataclass

from collabzoo.algos.learners.agent_turn import AgentTurnConfig, AgentTurnLearner


@dataclass
class ATGRPOConfig(AgentTurnConfig):
    """AT-GRPO's settings; defaults from PettingLLMs' paper-era configs where they exist."""

    output_dir: str = "runs/atgrpo"


class ATGRPOTrainer(AgentTurnLearner):
    """`ATGRPOTrainer(env=..., models=..., args=ATGRPOConfig(...)).train()`; `models` one
    policy for every agent (shared) or one per agent (role-specific)."""

    algorithm = "atgrpo"

    def __init__(self, env, models, args: ATGRPOConfig | None = None, **kwargs) -> None:
        super().__init__(env, models, args or ATGRPOConfig(), **kwargs)


__all__ = ["ATGRPOConfig", "ATGRPOTrainer"]

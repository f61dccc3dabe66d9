"""TorchRL on collabzoo's numeric views: `PettingZooWrapper` and MAPPO / IPPO modules.

`torchrl_env` wraps any ParallelEnv with numeric spaces (e.g. `BuildingGridEnv`) in TorchRL's
`PettingZooWrapper`, every agent in one group ("agents") so one network serves the team.
`mappo_modules` builds the actor and critic of TorchRL's multi-agent PPO recipe over it:
`MultiAgentMLP`s on the flattened observation, a factored categorical over a `MultiDiscrete`
(or `Discrete`) action, and a critic that is centralised (MAPPO) or per agent (IPPO).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import torch
from tensordict.nn import TensorDictModule, TensorDictSequential
from torch import distributions as D
from torchrl.envs import PettingZooWrapper
from torchrl.envs.utils import MarlGroupMapType
from torchrl.modules import MultiAgentMLP, ProbabilisticActor, ValueOperator

GROUP = "agents"


class FactoredCategorical(D.Distribution):
    """Independent categoricals, one per action component: logits [..., sum(sizes)] give
    actions [..., len(sizes)]; log-probabilities and entropies add over components."""

    arg_constraints: dict[str, Any] = {}  # noqa: RUF012 (torch's class attribute)
    has_rsample = False

    def __init__(self, logits: torch.Tensor, sizes: Sequence[int]) -> None:
        self.sizes = [int(n) for n in sizes]
        if logits.shape[-1] != sum(self.sizes):
            raise ValueError(
                f"logits end in {logits.shape[-1]} values, the action sizes {self.sizes} need "
                f"{sum(self.sizes)}"
            )
        self.parts = [D.Categorical(logits=p) for p in logits.split(self.sizes, dim=-1)]
        super().__init__(logits.shape[:-1], torch.Size([len(self.sizes)]), validate_args=False)

    def sample(self, sample_shape: torch.Size = torch.Size()) -> torch.Tensor:  # noqa: B008
        return torch.stack([p.sample(sample_shape) for p in self.parts], dim=-1)

    def log_prob(self, value: torch.Tensor) -> torch.Tensor:
        value = value.long()
        return sum(p.log_prob(value[..., i]) for i, p in enumerate(self.parts))

    def entropy(self) -> torch.Tensor:
        return sum(p.entropy() for p in self.parts)

    @property
    def mode(self) -> torch.Tensor:
        return torch.stack([p.probs.argmax(-1) for p in self.parts], dim=-1)

    @property
    def deterministic_sample(self) -> torch.Tensor:
        return self.mode


def torchrl_env(env: Any, *, return_state: bool = True, **kwargs: Any) -> PettingZooWrapper:
    """`PettingZooWrapper` over a numeric ParallelEnv, all agents in the group "agents"."""
    if not hasattr(env, "possible_agents") or not hasattr(env, "step"):
        raise TypeError(f"torchrl_env wraps a PettingZoo ParallelEnv, got {type(env).__name__}")
    kwargs.setdefault("group_map", MarlGroupMapType.ALL_IN_ONE_GROUP)
    return PettingZooWrapper(env=env, return_state=return_state, **kwargs)


def _flatten(n_agents: int, shape: torch.Size) -> TensorDictModule:
    dims = len(shape) - 1  # the agent dimension is first

    def flat(observation: torch.Tensor) -> torch.Tensor:
        return observation.flatten(-dims) if dims > 1 else observation

    return TensorDictModule(flat, in_keys=[(GROUP, "observation")], out_keys=[(GROUP, "flat")])


def mappo_modules(
    env: PettingZooWrapper,
    *,
    centralised: bool = True,
    share_parameters: bool = True,
    hidden: int = 64,
    depth: int = 2,
) -> tuple[ProbabilisticActor, TensorDictSequential]:
    """(actor, critic) for TorchRL's `ClipPPOLoss`: MAPPO with `centralised=True` (the critic
    reads every agent's observation), IPPO with False."""
    if GROUP not in env.group_map:
        raise ValueError(f"the env needs one agent group named {GROUP!r}; use torchrl_env(...)")
    n_agents = len(env.group_map[GROUP])
    observation_shape = env.observation_spec[GROUP, "observation"].shape
    inputs = math.prod(observation_shape[1:])
    action_spec = env.full_action_spec[GROUP, "action"]
    nvec = getattr(action_spec, "nvec", None)
    if nvec is not None:
        sizes = [int(n) for n in torch.as_tensor(nvec).reshape(n_agents, -1)[0]]
    elif hasattr(action_spec, "n"):
        sizes = [int(action_spec.n)]
    else:
        raise TypeError(f"mappo_modules needs discrete actions, got {type(action_spec).__name__}")
    flatten = _flatten(n_agents, observation_shape)
    policy_net = TensorDictModule(
        MultiAgentMLP(
            n_agent_inputs=inputs,
            n_agent_outputs=sum(sizes),
            n_agents=n_agents,
            centralized=False,
            share_params=share_parameters,
            depth=depth,
            num_cells=hidden,
            activation_class=torch.nn.Tanh,
        ),
        in_keys=[(GROUP, "flat")],
        out_keys=[(GROUP, "logits")],
    )
    actor = ProbabilisticActor(
        module=TensorDictSequential(flatten, policy_net),
        spec=env.full_action_spec[GROUP, "action"],
        in_keys=[(GROUP, "logits")],
        out_keys=[(GROUP, "action")],
        distribution_class=FactoredCategorical if nvec is not None else D.Categorical,
        distribution_kwargs={"sizes": sizes} if nvec is not None else {},
        return_log_prob=True,
        log_prob_key=(GROUP, "sample_log_prob"),
    )
    value_net = ValueOperator(
        MultiAgentMLP(
            n_agent_inputs=inputs,
            n_agent_outputs=1,
            n_agents=n_agents,
            centralized=centralised,
            share_params=share_parameters,
            depth=depth,
            num_cells=hidden,
            activation_class=torch.nn.Tanh,
        ),
        in_keys=[(GROUP, "flat")],
        out_keys=[(GROUP, "state_value")],
    )
    return actor, TensorDictSequential(flatten, value_net)


def mappo_loss(
    env: PettingZooWrapper,
    actor: ProbabilisticActor,
    critic: TensorDictSequential,
    *,
    gamma: float = 0.99,
    lmbda: float = 0.95,
    clip_epsilon: float = 0.2,
    entropy_coeff: float = 0.01,
) -> Any:
    """TorchRL's `ClipPPOLoss` with the group's keys set and a GAE value estimator; feed it
    batches passed through `with_agent_done` first."""
    from torchrl.objectives import ClipPPOLoss, ValueEstimators

    loss = ClipPPOLoss(
        actor_network=actor,
        critic_network=critic,
        clip_epsilon=clip_epsilon,
        entropy_coeff=entropy_coeff,
        normalize_advantage=False,
    )
    loss.set_keys(
        reward=env.reward_key,
        action=env.action_key,
        sample_log_prob=(GROUP, "sample_log_prob"),
        value=(GROUP, "state_value"),
        done=(GROUP, "done"),
        terminated=(GROUP, "terminated"),
    )
    loss.make_value_estimator(ValueEstimators.GAE, gamma=gamma, lmbda=lmbda)
    return loss


def with_agent_done(batch: Any) -> Any:
    """Copy the env-level done flags to every agent (shape of the agents' rewards), as GAE on
    per-agent rewards needs them."""
    shape = batch.get(("next", GROUP, "reward")).shape
    for key in ("done", "terminated"):
        batch.set(("next", GROUP, key), batch.get(("next", key)).unsqueeze(-1).expand(shape))
    return batch

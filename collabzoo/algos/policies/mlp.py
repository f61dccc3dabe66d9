"""A small MLP policy for numeric spaces, behind the interface the learners use (`Policy`).

The learners only ever see a policy through `generate`, `score`, `prompt_states` and
`encode_prompt`, so an MLP fits by reading the LLM policy's vocabulary loosely:

- a "prompt" is the flattened observation, a tuple of floats (`encode_prompt`);
- a "completion" is the action: one "token" per action dimension (one for `Discrete`, one per
  component for `MultiDiscrete`), and `Completion.text` carries the env action itself, which
  the rollout hands to `env.step` unchanged;
- the last hidden layer is the "prompt state" a value head reads.

So rollout trees, advantages, GAE, PPO's clipped ratios, critics (a head on the actor's hidden
layer, or a separate MLP of the same shape) and checkpoints all work unchanged. Actions are
categorical per dimension (independent components for `MultiDiscrete`); `Box` actions are not
supported. Observations may be any space gymnasium can flatten (`Box`, `Discrete`, `Dict`, ...).
"""

from __future__ import annotations

import copy
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch
from gymnasium import spaces
from torch import nn

from collabzoo.algos.policies.policy import Completion, TorchPolicy
from collabzoo.algos.policies.sampling import Sampling, sampling_logits, token_log_probs
from collabzoo.algos.policies.scoring import Scored


class MLP(nn.Module):
    """obs -> [Linear -> tanh] * layers -> one logit vector per action component."""

    def __init__(self, input_dim: int, action_sizes: Sequence[int], hidden: Sequence[int]) -> None:
        super().__init__()
        if not hidden:
            raise ValueError("an MLP policy needs at least one hidden layer (the critic reads it)")
        self.input_dim = int(input_dim)
        self.action_sizes = [int(n) for n in action_sizes]
        self.hidden = [int(h) for h in hidden]
        layers: list[nn.Module] = []
        width = self.input_dim
        for size in self.hidden:
            layers += [nn.Linear(width, size), nn.Tanh()]
            width = size
        self.body = nn.Sequential(*layers)
        self.logits = nn.Linear(width, sum(self.action_sizes))
        nn.init.normal_(self.logits.weight, std=0.01)  # near-uniform first policy
        nn.init.zeros_(self.logits.bias)

    def forward(self, observations: torch.Tensor) -> tuple[torch.Tensor, list[torch.Tensor]]:
        """(hidden features [B, H], logits per action component [B, n_d])."""
        features = self.body(observations)
        return features, list(self.logits(features).split(self.action_sizes, dim=-1))

    def config(self) -> dict[str, Any]:
        return {
            "input_dim": self.input_dim,
            "action_sizes": self.action_sizes,
            "hidden": self.hidden,
        }


def _action_sizes(space: Any) -> list[int]:
    if isinstance(space, spaces.Discrete):
        return [int(space.n)]
    if isinstance(space, spaces.MultiDiscrete) and space.nvec.ndim == 1:
        return [int(n) for n in space.nvec]
    raise TypeError(
        "MLPPolicy needs a Discrete or 1-D MultiDiscrete action space, got "
        f"{space!r} (Box actions are not supported)"
    )


class MLPPolicy(TorchPolicy):
    """A categorical MLP policy for one agent's (observation_space, action_space).

    Args:
        observation_space: any space `gymnasium.spaces.flatten` handles.
        action_space: `Discrete(n)` or `MultiDiscrete(nvec)` (1-D); a `start` offset is kept.
        hidden: widths of the tanh hidden layers.
        seed: initialises the weights without touching torch's global generator.
    """

    def __init__(
        self,
        observation_space: Any,
        action_space: Any,
        *,
        hidden: Sequence[int] = (64, 64),
        seed: int = 0,
    ) -> None:
        self.observation_space = observation_space
        self.action_space = action_space
        sizes = _action_sizes(action_space)
        self._multi = isinstance(action_space, spaces.MultiDiscrete)
        self._start = np.asarray(action_space.start, dtype=np.int64)
        dim = spaces.flatdim(observation_space)
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(seed)
            model = MLP(dim, sizes, hidden)
        super().__init__(model)

    @property
    def hidden_size(self) -> int:
        return self.model.hidden[-1]

    def copy(self) -> MLPPolicy:
        clone = copy.copy(self)
        clone.model = copy.deepcopy(self.model)
        return clone

    def save(self, folder: str | Path) -> None:
        folder = Path(folder)
        folder.mkdir(parents=True, exist_ok=True)
        torch.save(self.model.state_dict(), folder / "mlp.pt")
        (folder / "mlp_config.json").write_text(json.dumps(self.model.config()))

    # ----- observations and actions -------------------------------------------------------------
    def encode_prompt(self, observation: Any, *, parts: Sequence[str] = ()) -> list[float]:
        """The flattened observation as floats (what `score` and the critics read); `parts`
        (text budgets) do not apply."""
        if isinstance(observation, str):
            raise TypeError(
                "MLPPolicy reads numeric observations (a point of its observation space), got "
                f"text {observation[:60]!r}; use an LLMPolicy for text environments"
            )
        try:
            flat = spaces.flatten(self.observation_space, observation)
        except Exception as error:
            raise ValueError(
                f"observation does not fit this policy's space {self.observation_space!r}: {error}"
            ) from error
        flat = np.asarray(flat, dtype=np.float32).reshape(-1)
        if flat.size != self.model.input_dim:
            raise ValueError(
                f"observation flattens to {flat.size} numbers, this policy expects "
                f"{self.model.input_dim} (space {self.observation_space!r})"
            )
        return flat.tolist()

    def _inputs(self, prompts: Sequence[Sequence[float]]) -> torch.Tensor:
        return torch.tensor(np.asarray(prompts, dtype=np.float32), device=self.device)

    def _action(self, indices: list[int]) -> Any:
        if self._multi:
            return np.asarray(indices, dtype=np.int64) + self._start
        return int(indices[0] + int(self._start))

    @torch.no_grad()
    def generate(self, prompts: Sequence[Any], sampling: Sampling) -> list[Completion]:
        """One action per observation: each component sampled from the same distribution an LLM
        token would be (temperature, top-k, top-p; `score` with these settings reproduces it),
        or the most likely one with `do_sample=False`."""
        if not prompts:
            return []
        encoded = [self.encode_prompt(o) for o in prompts]
        with self.mode(train=False):
            _, logits = self.model(self._inputs(encoded))
        chosen = []
        for part in logits:
            if sampling.do_sample:
                warped = sampling_logits(part, sampling)
                chosen.append(torch.distributions.Categorical(logits=warped).sample())
            else:
                chosen.append(part.argmax(-1))
        picks = torch.stack(chosen, dim=-1).tolist()
        return [
            Completion(self._action(row), ids, row)  # type: ignore[arg-type]
            for ids, row in zip(encoded, picks, strict=True)
        ]

    def score(
        self,
        prompts: Sequence[Sequence[float]],
        completions: Sequence[Sequence[int]],
        *,
        sampling: Sampling | None = None,
        entropy: bool | str = False,
        prompt_hidden: bool = False,
    ) -> Scored:
        """log pi of each action component [B, D] (mask all true), entropies, hidden features;
        with `sampling`, of the distribution `generate` sampled from. Any true `entropy`
        ("log" included) gives entropies with gradients."""
        if len(prompts) != len(completions):
            raise ValueError(
                f"{len(prompts)} observations but {len(completions)} actions: one each expected"
            )
        features, logits = self.model(self._inputs(prompts))
        actions = torch.tensor([list(c) for c in completions], device=self.device)
        if actions.shape != (len(prompts), len(logits)):
            raise ValueError(
                f"each action needs {len(logits)} component(s), got shape {tuple(actions.shape)}"
            )
        log_probs, entropies, outside = [], [], 0
        for d, part in enumerate(logits):
            chosen, spread, cut = token_log_probs(
                part, actions[:, d], sampling, entropy=bool(entropy)
            )
            log_probs.append(chosen)
            if spread is not None:
                entropies.append(spread)
            outside += int(cut.sum()) if cut is not None else 0
        mask = torch.ones(actions.shape, dtype=torch.bool, device=self.device)
        return Scored(
            torch.stack(log_probs, -1),
            mask,
            torch.stack(entropies, -1) if entropy else None,
            features if prompt_hidden else None,
            outside,
        )

    def prompt_states(self, prompts: Sequence[Sequence[float]]) -> torch.Tensor:
        if not prompts:
            raise ValueError("prompt_states needs a non-empty list of observations")
        features, _ = self.model(self._inputs(prompts))
        return features


def mlp_team(
    env: Any, *, hidden: Sequence[int] = (64, 64), shared: bool = False, seed: int = 0
) -> dict[str, MLPPolicy]:
    """One MLPPolicy per agent of a ParallelEnv (or one shared by all when `shared`, which
    needs every agent to have the same spaces)."""
    agents = list(env.possible_agents)
    if shared:
        first = agents[0]
        odd = [
            a
            for a in agents
            if env.observation_space(a) != env.observation_space(first)
            or env.action_space(a) != env.action_space(first)
        ]
        if odd:
            raise ValueError(f"shared=True needs identical spaces; {odd} differ from {first!r}")
        policy = MLPPolicy(
            env.observation_space(first), env.action_space(first), hidden=hidden, seed=seed
        )
        return dict.fromkeys(agents, policy)
    return {
        a: MLPPolicy(env.observation_space(a), env.action_space(a), hidden=hidden, seed=seed + i)
        for i, a in enumerate(agents)
    }

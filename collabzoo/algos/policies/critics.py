"""Critics for the actor-critic learners: a value head over an LLM backbone's last prompt token.

V(h) is read at the LAST PROMPT token of a prompt-only forward pass (learners.md). The backbone
is one of:

- the actor's own model (`use_separate_critic=False`): the head shares the actor's features and
  its value loss trains the actor's weights too (least memory);
- a LoRA adapter of its own on the actor's base model, when the actor is a LoRA adapter (a
  separate critic for about the memory of the adapter);
- a model of its own: `critic_model_name_or_path`, a model given to the trainer, or else a copy
  of the actor's model.

An `MLPPolicy` actor plays the same part: its last hidden layer is the state the head reads.
"""

from __future__ import annotations

import copy
from collections.abc import Sequence
from typing import Any

import torch
from torch import nn

from collabzoo.algos.policies.head_scoring import rows
from collabzoo.algos.policies.llm import LLMPolicy
from collabzoo.algos.policies.policy import Policy


class ValueHead(nn.Module):
    """hidden -> [Linear(hidden_dim) -> tanh] -> Linear(1): a scalar value per state."""

    def __init__(self, input_dim: int, hidden_dim: int | None = None) -> None:
        super().__init__()
        layers: list[nn.Module] = []
        if hidden_dim:
            layers += [nn.Linear(input_dim, hidden_dim), nn.Tanh()]
            input_dim = hidden_dim
        layers.append(nn.Linear(input_dim, 1))
        self.net = nn.Sequential(*layers)
        for module in self.net:
            if isinstance(module, nn.Linear):  # small weights: values start near 0
                nn.init.normal_(module.weight, std=0.02)
                nn.init.zeros_(module.bias)

    def forward(self, hidden: torch.Tensor) -> torch.Tensor:
        return self.net(hidden.float()).squeeze(-1)


class Critic:
    """A value head on a backbone policy; `shares_actor` when the backbone is an actor's."""

    def __init__(self, backbone: Policy, head: ValueHead, *, shares_actor: bool) -> None:
        self.backbone = backbone
        self.head = head.to(backbone.device)
        self.shares_actor = shares_actor

    def encode(self, text: Any, parts: Sequence[str] = ()) -> list[int]:
        """The backbone's encoding of what the critic reads; `parts` share the prompt budget
        (see `Policy.encode_prompt`)."""
        return self.backbone.encode_prompt(text, parts=parts)

    def follow_backbone(self) -> None:
        """Put the head where the backbone runs (a backbone moved after construction takes
        its head along at the next read; the optimizer state follows in `UpdateGroup.step`)."""
        weight = next(self.head.parameters(), None) if isinstance(self.head, nn.Module) else None
        if weight is not None and weight.device != self.backbone.device:
            self.head.to(self.backbone.device)

    def value_of(self, hidden: torch.Tensor) -> torch.Tensor:
        """V of backbone states [batch, hidden] (an actor's own pass, for a shared head)."""
        self.follow_backbone()
        return self.head(hidden)

    def values(self, prompts: Sequence[Sequence[int]]) -> torch.Tensor:
        """V of each prompt (token ids of this critic's tokenizer), one forward pass over the
        distinct ones: the K branches of an episode's first turn are one state, valued (and, in
        the critic loss, backpropagated) once instead of K times; a repeated state's gradient
        is the sum over its rows, as before."""
        distinct: dict[tuple[Any, ...], int] = {}
        index = [distinct.setdefault(tuple(p), len(distinct)) for p in prompts]
        with torch.profiler.record_function("collabzoo.values"):
            if len(distinct) == len(prompts):
                return self.value_of(self.backbone.prompt_states(prompts))
            found = self.value_of(self.backbone.prompt_states([list(p) for p in distinct]))
            return rows(found, torch.tensor(index, device=found.device))

    def parameters(self) -> list[nn.Parameter]:
        """What the critic optimizer steps: the head, plus the backbone unless it is an
        actor's (an actor's weights are stepped by the actor optimizer)."""
        own = list(self.head.parameters())
        if not self.shares_actor:
            own += self.backbone.trainable_parameters()
        return own


def build_critic(
    actor: Policy,
    name: str,
    *,
    separate: bool,
    head_hidden_dim: int | None,
    backbone: Any = None,
) -> Critic:
    """A critic for `actor` (see the module docstring for the choice of backbone). `backbone`:
    an explicit model for it (a policy, a (model, tokenizer) pair or a model name)."""
    from collabzoo.algos.policies.model_loading import as_policy

    if backbone is not None:
        policy = as_policy(backbone)
        shares = policy is actor
    elif not separate:
        policy, shares = actor, True
    elif isinstance(actor, LLMPolicy) and actor.adapter is not None:
        # a LoRA actor: the critic is one more adapter on its base
        model = actor.model
        adapter = f"critic_{name}"
        if adapter not in model.peft_config:
            model.add_adapter(adapter, copy.deepcopy(model.peft_config[actor.adapter]))
        policy, shares = actor.alike(model, adapter), False
    else:
        policy, shares = actor.copy(), False
    head = ValueHead(policy.hidden_size, head_hidden_dim)
    return Critic(policy, head, shares_actor=shares)

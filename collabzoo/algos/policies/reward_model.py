"""The joint reward model of MARLHF: a score s(x, a_1..a_N) of a whole team's answers, learned
from preference pairs (Bradley-Terry) and then standing in for the task reward in RL.

A causal-LM backbone reads one text holding every agent's prompt and answer (by agent name,
`joint_text`), right-padded; the last layer's state at the last real token
(`preference_objectives.pool_last_real`, which also handles left padding) goes through a
`Linear(hidden, 1)` head with a bias. The backbone is trained through a LoRA adapter on the
agents' base (`adapter`), or in full on a copy; the head and the adapter are float32 masters,
the frozen base keeps its own precision (computed under autocast)."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

import torch
from torch import nn

from collabzoo.algos.preference_objectives import pool_last_real

HEADER = "Joint multi-agent response"


def joint_text(
    prompts: Mapping[str, str], answers: Mapping[str, str], agents: Sequence[str]
) -> str:
    """What the reward model reads: the header, then each agent's prompt and answer, by name
    (the reference numbers them "Agent 1", "Agent 2", ...)."""
    parts = [HEADER]
    for agent in agents:
        parts.append(f"{agent} prompt:\n{prompts.get(agent, '')}")
        parts.append(f"{agent} response:\n{answers.get(agent, '')}")
    return "\n\n".join(parts)


def hidden_width(backbone: Any) -> int:
    config = getattr(backbone, "config", None)
    for name in ("hidden_size", "n_embd", "d_model"):
        value = getattr(config, name, None)
        if isinstance(value, int):
            return value
    raise ValueError("cannot tell the reward model backbone's hidden size from its config")


class JointRewardModel(nn.Module):
    """s(text) = w . h_last(text) + b on a causal-LM backbone (see the module)."""

    def __init__(
        self,
        backbone: Any,
        tokenizer: Any,
        *,
        adapter: str | None = None,
        freeze_backbone: bool = False,
        max_length: int | None = None,
    ) -> None:
        super().__init__()
        self.backbone = backbone
        self.tokenizer = tokenizer
        self.adapter = adapter
        """The LoRA adapter this model trains on a shared base, or None (a backbone of its own)."""
        self.max_length = max_length
        device = next(backbone.parameters()).device
        self.head = nn.Linear(hidden_width(backbone), 1).to(device=device, dtype=torch.float32)
        pad = tokenizer.pad_token_id
        self.pad_id = tokenizer.eos_token_id if pad is None else pad
        if self.pad_id is None:
            raise ValueError("the reward model's tokenizer has neither a pad nor an eos token")
        if freeze_backbone:
            for parameter in self.backbone_parameters():
                parameter.requires_grad_(False)
        for parameter in self.trainable_parameters():
            if parameter.is_floating_point() and parameter.dtype != torch.float32:
                parameter.data = parameter.data.float()

    # ----- what trains ---------------------------------------------------------------------------
    def backbone_parameters(self) -> list[nn.Parameter]:
        if self.adapter is None:
            return list(self.backbone.parameters())
        marker = f".{self.adapter}."
        return [p for n, p in self.backbone.named_parameters() if marker in n]

    def trainable_parameters(self) -> list[nn.Parameter]:
        """The head and the adapter (or the whole backbone), unless frozen."""
        return [
            *self.head.parameters(),
            *(p for p in self.backbone_parameters() if p.requires_grad),
        ]

    def trainable_state(self) -> dict[str, torch.Tensor]:
        own = {id(p) for p in self.trainable_parameters()}
        return {n: p.detach() for n, p in self.named_parameters() if id(p) in own}

    def load_trainable_state(self, state: Mapping[str, torch.Tensor]) -> None:
        own = self.trainable_state()
        if set(own) != set(state):
            raise ValueError("the saved reward model does not match this one's trainable weights")
        with torch.no_grad():
            for name, value in state.items():
                own[name].copy_(value)

    def backward(self, loss: torch.Tensor) -> None:
        """`loss.backward()` with the reward adapter active, as `Policy.backward` (on a shared
        base another adapter's activation would drop this one's gradient)."""
        with self.active():
            loss.backward()

    @contextlib.contextmanager
    def active(self) -> Iterator[None]:
        """The reward adapter active on a shared base (the agents' own come back with theirs)."""
        if self.adapter is not None:
            self.backbone.set_adapter(self.adapter)
        yield

    # ----- scores --------------------------------------------------------------------------------
    def encode(self, texts: Sequence[str]) -> tuple[torch.Tensor, torch.Tensor]:
        """Right-padded ids and attention mask (truncated to `max_length` tokens, if set)."""
        rows = [
            list(self.tokenizer(t, add_special_tokens=True)["input_ids"])[: self.max_length]
            for t in texts
        ]
        width = max([1, *(len(r) for r in rows)])
        ids = torch.full((len(rows), width), self.pad_id, dtype=torch.long)
        mask = torch.zeros((len(rows), width), dtype=torch.long)
        for i, row in enumerate(rows):
            ids[i, : len(row)] = torch.tensor(row, dtype=torch.long)
            mask[i, : len(row)] = 1
        device = self.head.weight.device
        return ids.to(device), mask.to(device)

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
        """[batch] scores of already encoded rows (any padding side)."""
        dtype = next(self.backbone.parameters()).dtype
        lower = dtype in (torch.bfloat16, torch.float16)
        autocast = (
            torch.autocast(device_type=input_ids.device.type, dtype=dtype)
            if lower
            else contextlib.nullcontext()
        )
        with self.active(), autocast:
            outputs = self.backbone(
                input_ids=input_ids,
                attention_mask=attention_mask,
                output_hidden_states=True,
                use_cache=False,
            )
        pooled = pool_last_real(outputs.hidden_states[-1], attention_mask)
        return self.head(pooled.float()).squeeze(-1)

    def score_texts(self, texts: Sequence[str]) -> torch.Tensor:
        return self(*self.encode(texts))


__all__ = ["HEADER", "JointRewardModel", "joint_text"]

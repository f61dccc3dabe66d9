"""What the learners ask of a policy (`Policy`), and the torch code every policy shares
(`TorchPolicy`).

The learners, critics, rollouts and checkpoints see a policy only through `Policy`: an
`LLMPolicy` (a causal LM on text) and an `MLPPolicy` (an MLP on numeric spaces) both satisfy
it, each on `TorchPolicy`. What a learner needs of one kind only (an LLM's chat template, its
tokenizer, peft's adapters) it asks of an `LLMPolicy` by name.
"""

from __future__ import annotations

import abc
import contextlib
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

import torch

from collabzoo.algos.policies.sampling import Sampling
from collabzoo.algos.policies.scoring import Scored


@dataclass
class Completion:
    """One sampled answer: its text and the token ids the loss needs."""

    text: str
    prompt_ids: list[int]
    completion_ids: list[int] = field(repr=False)
    sampler_log_probs: list[float] | None = field(default=None, repr=False)
    """Log-probabilities of the completion tokens under the distribution an external engine
    (vLLM) sampled them from, for the learners' off-policy correction; None when the policy
    sampled them itself."""


@runtime_checkable
class Policy(Protocol):
    """Everything the learners, critics, rollouts and checkpoints use of a policy."""

    model: torch.nn.Module
    """The weights: placement moves them, critics on an actor share them, a frozen copy's are the
    KL reference."""
    adapter: str | None
    """The LoRA adapter this policy is on a model shared with others (rollouts sample a LoRA
    team in one call; the KL reference and a separate critic come from its base), or None."""
    compute_dtype: torch.dtype | None
    """Autocast dtype of the forward passes: reset when the learner casts the models, and the
    dtype a frozen KL reference is cast to."""
    truncated_prompts: int
    """Prompts cut to fit so far: the learners log the count per update."""

    @property
    def device(self) -> torch.device:
        """Where the weights run: the learners put advantages, critics and references there."""
        ...

    @property
    def hidden_size(self) -> int:
        """Width of `prompt_states`: the input of a critic's value head."""
        ...

    def encode_prompt(self, observation: Any, *, parts: Sequence[str] = ()) -> list[Any]:
        """An observation as the model's input: how a critic reads the state it values."""
        ...

    def generate(self, prompts: Sequence[Any], sampling: Sampling) -> list[Completion]:
        """One sampled action per observation: the rollouts' actions."""
        ...

    def score(
        self,
        prompts: Sequence[Sequence[Any]],
        completions: Sequence[Sequence[int]],
        *,
        sampling: Sampling | None = None,
        entropy: bool | str = False,
        prompt_hidden: bool = False,
    ) -> Scored:
        """Log-probabilities (entropies, prompt states) of sampled actions: every actor loss."""
        ...

    def prompt_states(self, prompts: Sequence[Sequence[Any]]) -> torch.Tensor:
        """The state a value head reads: a critic's values."""
        ...

    def token_log_probs(
        self,
        prompts: Sequence[Sequence[Any]],
        completions: Sequence[Sequence[int]],
        *,
        sampling: Sampling | None = None,
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Log-probabilities and mask without entropies: the KL reference's."""
        ...

    def mode(self, *, train: bool) -> contextlib.AbstractContextManager[None]:
        """Train mode for loss passes, eval mode for old log-probabilities and critic values."""
        ...

    def reference(self) -> contextlib.AbstractContextManager[None]:
        """The adapter's frozen base (a LoRA policy's KL reference); an error without one."""
        ...

    def backward(self, loss: torch.Tensor) -> None:
        """Backpropagate a loss of this policy's outputs: the learners call this, never
        `loss.backward()`, so a LoRA team's gradients cannot depend on which adapter is active."""
        ...

    def copy(self) -> Policy:
        """The same policy on a deep copy of its weights: a separate critic, a frozen reference."""
        ...

    def trainable_parameters(self) -> list[torch.nn.Parameter]:
        """What the policy's optimizer steps."""
        ...

    def trainable_state(self) -> dict[str, torch.Tensor]:
        """What a checkpoint holds of the policy."""
        ...

    def load_trainable_state(self, state: dict[str, torch.Tensor]) -> None:
        """Put back a checkpoint's `trainable_state` on resume."""
        ...

    def keep_float32_masters(self) -> int:
        """Float32 trainable weights before training (low-precision steps round away)."""
        ...

    def save(self, folder: str | Path) -> None:
        """The trained policy in its own format: what `Learner.save` writes per policy."""
        ...


class TorchPolicy(abc.ABC):
    """A policy on a torch module: what the kinds of policy share (training state, modes,
    precision, log-probabilities from `score`). A subclass supplies the model's reading and
    writing: `encode_prompt`, `generate`, `score`, `prompt_states`, `hidden_size`, `copy`,
    `save` (see `Policy`)."""

    def __init__(
        self,
        model: Any,
        *,
        adapter: str | None = None,
        compute_dtype: torch.dtype | None = None,
    ) -> None:
        self.model = model
        self.adapter = adapter
        self.compute_dtype = compute_dtype
        """Autocast dtype of every forward pass (None: the weights' own dtype)."""
        self.truncated_prompts = 0
        """Prompts cut to fit so far (learners log it per update)."""

    # ----- what a kind of policy supplies -------------------------------------------------------
    @property
    @abc.abstractmethod
    def hidden_size(self) -> int:
        """Width of the state `prompt_states` returns (what a value head reads)."""

    @abc.abstractmethod
    def encode_prompt(self, observation: Any, *, parts: Sequence[str] = ()) -> list[Any]:
        """An observation as the model's input (see `Policy.encode_prompt`)."""

    @abc.abstractmethod
    def generate(self, prompts: Sequence[Any], sampling: Sampling) -> list[Completion]:
        """One sampled action per observation (see `Policy.generate`)."""

    @abc.abstractmethod
    def score(
        self,
        prompts: Sequence[Sequence[Any]],
        completions: Sequence[Sequence[int]],
        *,
        sampling: Sampling | None = None,
        entropy: bool | str = False,
        prompt_hidden: bool = False,
    ) -> Scored:
        """Log-probabilities of sampled actions (see `Policy.score`)."""

    @abc.abstractmethod
    def prompt_states(self, prompts: Sequence[Sequence[Any]]) -> torch.Tensor:
        """The state a value head reads (see `Policy.prompt_states`)."""

    @abc.abstractmethod
    def copy(self) -> TorchPolicy:
        """The same policy on a deep copy of the model."""

    @abc.abstractmethod
    def save(self, folder: str | Path) -> None:
        """The trained policy in its own format."""

    # ----- shared -------------------------------------------------------------------------------
    @property
    def device(self) -> torch.device:
        return next(self.model.parameters()).device

    def trainable_parameters(self) -> list[torch.nn.Parameter]:
        with self.active():
            return [p for p in self.model.parameters() if p.requires_grad]

    def trainable_state(self) -> dict[str, torch.Tensor]:
        """The weights training changes, by parameter name: a LoRA policy's own adapter only
        (not the frozen base, not the other agents' adapters); a full model's every weight."""
        own = {id(p) for p in self.trainable_parameters()}
        return {n: p.detach() for n, p in self.model.named_parameters() if id(p) in own}

    def load_trainable_state(self, state: dict[str, torch.Tensor]) -> None:
        """Put back what `trainable_state` returned (exactly those names, else ValueError)."""
        own = self.trainable_state()
        missing, unexpected = sorted(set(own) - set(state)), sorted(set(state) - set(own))
        if missing or unexpected:
            raise ValueError(
                "the saved weights do not match this policy's trainable weights: "
                f"missing {missing[:5]} ({len(missing)}), unexpected {unexpected[:5]} "
                f"({len(unexpected)}); was the checkpoint made with the same team?"
            )
        with torch.no_grad():
            for name, value in state.items():
                own[name].copy_(value)

    def keep_float32_masters(self) -> int:
        """Make the trainable weights float32 (AdamW steps of lr 5e-6 round away in bf16) and,
        if the model was in a lower precision, compute in that precision under autocast, as TRL
        and accelerate train. Frozen weights (a LoRA base) stay as they are. Returns how many
        parameters were converted."""
        floating = [p for p in self.model.parameters() if p.is_floating_point()]
        if self.compute_dtype is None and floating:
            dtypes = [p.dtype for p in floating]
            common = max(set(dtypes), key=dtypes.count)
            if common != torch.float32:
                self.compute_dtype = common
        converted = 0
        for parameter in self.trainable_parameters():
            if parameter.is_floating_point() and parameter.dtype != torch.float32:
                parameter.data = parameter.data.float()
                converted += 1
        return converted

    def backward(self, loss: torch.Tensor) -> None:
        """`loss.backward()` with this policy's weights active. On a LoRA team's shared base,
        activating another agent's adapter after this loss's forward (peft's `set_adapter`)
        turns this adapter's `requires_grad` off, and autograd then silently drops its gradient;
        under gradient checkpointing the backward's recomputed forward would also run through
        whichever adapter is active. Active again, both are this policy's."""
        with self.active():
            loss.backward()

    # ----- contexts -------------------------------------------------------------------------------
    @contextlib.contextmanager
    def active(self) -> Iterator[None]:
        """Make this policy's weights the model's active ones (a LoRA policy's adapter; a no-op
        for a model of its own)."""
        yield

    @contextlib.contextmanager
    def reference(self) -> Iterator[None]:
        """The frozen base policy: the model with its LoRA adapter disabled (this one has none)."""
        raise ValueError(
            f"this {type(self).__name__} has no LoRA base; a KL reference is a frozen copy"
        )
        yield  # pragma: no cover

    @contextlib.contextmanager
    def mode(self, *, train: bool) -> Iterator[None]:
        """Train mode (dropout, LoRA dropout included, on) for loss passes, eval mode for
        sampling, old log-probabilities and critic reads; the previous mode comes back after."""
        was_training = self.model.training
        self.model.train(train)
        try:
            yield
        finally:
            self.model.train(was_training)

    def compute(self) -> contextlib.AbstractContextManager[Any]:
        """Autocast to `compute_dtype` (a no-op without one, or at float32)."""
        if self.compute_dtype is None or self.compute_dtype == torch.float32:
            return contextlib.nullcontext()
        return torch.autocast(device_type=self.device.type, dtype=self.compute_dtype)

    # ----- log-probabilities --------------------------------------------------------------------
    def token_log_probs(
        self,
        prompts: Sequence[Sequence[Any]],
        completions: Sequence[Sequence[int]],
        *,
        sampling: Sampling | None = None,
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Log-probabilities of each completion token, [batch, max completion length], and the
        mask of real (non-padding) completion tokens."""
        scored = self.score(prompts, completions, sampling=sampling)
        return scored.log_probs, scored.mask

    def sequence_log_probs(
        self,
        prompts: Sequence[Sequence[Any]],
        completions: Sequence[Sequence[int]],
        *,
        sampling: Sampling | None = None,
    ) -> torch.Tensor:
        """Sum of completion-token log-probabilities per sequence (the macro-action's)."""
        log_probs, _ = self.token_log_probs(prompts, completions, sampling=sampling)
        return log_probs.sum(-1)


__all__ = ["Completion", "Policy", "TorchPolicy"]

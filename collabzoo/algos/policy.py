"""An LLM policy: batched sampling and batched log-probabilities of whole completions.

One `generate` call samples every prompt of a batch (left padding). Scoring runs each unique
prompt once and every completion on that prompt's cache (the K samples of a rollout-tree node
share their prompt), with positions as at generation. Padding is masked out of every loss; each
completion token, the last one included, is scored; prompt tokens are not. With a peft model,
`adapter` names the LoRA adapter this policy uses.
"""

from __future__ import annotations

import contextlib
import copy
import functools
import inspect
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch


@dataclass(frozen=True)
class Sampling:
    """Generation settings (the reference defaults)."""

    max_new_tokens: int = 256
    temperature: float = 0.6
    top_p: float = 0.6
    top_k: int | None = 50
    do_sample: bool = True


@dataclass
class Scored:
    """What a scoring pass returns, per completion token ([batch, width]) and per row."""

    log_probs: torch.Tensor
    """log pi(token | prompt, earlier tokens); 0 at padding."""
    mask: torch.Tensor
    """True at real completion tokens."""
    entropy: torch.Tensor | None = None
    """Entropy of pi at each completion token (when asked); 0 at padding."""
    prompt_hidden: torch.Tensor | None = None
    """[batch, hidden]: the last layer's state at the prompt's last token (when asked)."""


@dataclass
class Completion:
    """One sampled answer: its text and the token ids the loss needs."""

    text: str
    prompt_ids: list[int]
    completion_ids: list[int] = field(repr=False)


class LLMPolicy:
    """A Hugging Face causal LM + tokenizer (+ optional LoRA adapter name) used as a policy."""

    def __init__(
        self,
        model: Any,
        tokenizer: Any,
        *,
        adapter: str | None = None,
        max_prompt_tokens: int = 1024,
        share_prompts: bool = True,
    ) -> None:
        self.model = model
        self.tokenizer = tokenizer
        self.adapter = adapter
        self.max_prompt_tokens = max_prompt_tokens
        self.share_prompts = share_prompts
        """Score the samples of one prompt on one shared prompt pass (see `score`)."""
        self.pad_id = tokenizer.pad_token_id
        if self.pad_id is None:
            self.pad_id = tokenizer.eos_token_id
        self.eos_id = tokenizer.eos_token_id
        if self.pad_id is None:
            raise ValueError("the tokenizer has neither a pad token nor an eos token")

    @property
    def device(self) -> torch.device:
        return next(self.model.parameters()).device

    @property
    def hidden_size(self) -> int:
        """Width of the state `prompt_states` returns (what a value head reads)."""
        config = getattr(self.model, "config", None)
        size = getattr(config, "hidden_size", None)
        if isinstance(size, int):
            return size
        return int(self.model.get_input_embeddings().embedding_dim)

    def copy(self) -> LLMPolicy:
        """The same policy on a deep copy of the model (a separate critic, a frozen reference)."""
        return LLMPolicy(
            copy.deepcopy(self.model),
            self.tokenizer,
            max_prompt_tokens=self.max_prompt_tokens,
            share_prompts=self.share_prompts,
        )

    def save(self, folder: str | Path) -> None:
        """The model and tokenizer in save_pretrained format."""
        self.model.save_pretrained(folder)
        self.tokenizer.save_pretrained(folder)

    def trainable_parameters(self) -> list[torch.nn.Parameter]:
        with self.active():
            return [p for p in self.model.parameters() if p.requires_grad]

    @contextlib.contextmanager
    def active(self) -> Iterator[None]:
        """Make this policy's adapter the active one (no-op without adapters)."""
        if self.adapter is not None:
            self.model.set_adapter(self.adapter)
        yield

    @contextlib.contextmanager
    def reference(self) -> Iterator[None]:
        """The frozen base policy: the model with its LoRA adapter disabled."""
        if self.adapter is None:
            raise ValueError("a reference policy by disabling the adapter needs a LoRA adapter")
        with self.model.disable_adapter():
            yield

    # ----- tokens -------------------------------------------------------------------------------
    def encode_prompt(self, text: str) -> list[int]:
        """Token ids of a prompt: the chat template when the tokenizer has one, else raw text;
        the last `max_prompt_tokens` are kept (the newest part of an observation matters most)."""
        tok = self.tokenizer
        if getattr(tok, "chat_template", None):
            ids = tok.apply_chat_template(
                [{"role": "user", "content": text}], add_generation_prompt=True, tokenize=True
            )
            if isinstance(ids, dict) or hasattr(ids, "input_ids"):
                ids = ids["input_ids"]
        else:
            ids = tok(text, add_special_tokens=False)["input_ids"]
        ids = list(ids)[-self.max_prompt_tokens :]
        return ids or [self.pad_id]

    def decode(self, completion_ids: Sequence[int]) -> str:
        return self.tokenizer.decode(list(completion_ids), skip_special_tokens=True)

    # ----- sampling -----------------------------------------------------------------------------
    @torch.no_grad()
    def generate(self, prompts: Sequence[str], sampling: Sampling) -> list[Completion]:
        """Sample one completion per prompt, all prompts in one `generate` call."""
        if not prompts:
            return []
        encoded = [self.encode_prompt(p) for p in prompts]
        width = max(len(ids) for ids in encoded)
        input_ids = torch.full((len(encoded), width), self.pad_id, dtype=torch.long)
        attention = torch.zeros_like(input_ids)
        for row, ids in enumerate(encoded):  # left padding: every prompt ends at the same column
            input_ids[row, width - len(ids) :] = torch.tensor(ids)
            attention[row, width - len(ids) :] = 1
        options: dict[str, Any] = {
            "max_new_tokens": sampling.max_new_tokens,
            "do_sample": sampling.do_sample,
            "pad_token_id": self.pad_id,
            "eos_token_id": self.eos_id,
        }
        if sampling.do_sample:
            options.update(
                temperature=sampling.temperature,
                top_p=sampling.top_p,
                top_k=sampling.top_k if sampling.top_k else 0,
            )
        was_training = self.model.training
        self.model.eval()
        try:
            with self.active():
                output = self.model.generate(
                    input_ids=input_ids.to(self.device),
                    attention_mask=attention.to(self.device),
                    **options,
                )
        finally:
            self.model.train(was_training)
        completions = []
        for ids, row in zip(encoded, output[:, width:].tolist(), strict=True):
            if self.eos_id is not None and self.eos_id in row:
                row = row[: row.index(self.eos_id) + 1]  # the eos token is part of the action
            elif self.pad_id in row and self.pad_id != self.eos_id:
                row = row[: row.index(self.pad_id)]
            completions.append(Completion(self.decode(row), ids, row))
        return completions

    # ----- scoring ------------------------------------------------------------------------------
    def score(
        self,
        prompts: Sequence[Sequence[int]],
        completions: Sequence[Sequence[int]],
        *,
        entropy: bool = False,
        prompt_hidden: bool = False,
    ) -> Scored:
        """Log-probabilities (and optionally entropies) of every completion token, and optionally
        the last hidden state at each prompt's last token (where a value head reads V(h)).

        Samples of one prompt share its forward pass: the unique prompts run once (left padded),
        their key/value cache is gathered row by row, and the completions run on top of it, so
        K samples of a prompt cost one prompt plus K completions instead of K of each. Gradients
        flow through the shared cache as through K separate copies.
        """
        if len(prompts) != len(completions):
            raise ValueError(
                f"{len(prompts)} prompts but {len(completions)} completions: one each expected"
            )
        if any(len(p) == 0 for p in prompts):
            raise ValueError("every prompt needs at least one token (encode_prompt never is empty)")
        groups: dict[tuple[int, ...], int] = {}
        row_group = [groups.setdefault(tuple(p), len(groups)) for p in prompts]
        if self.share_prompts and len(groups) < len(prompts):
            unique = list(groups)
            scored = self._score_shared(unique, row_group, completions, entropy, prompt_hidden)
            if scored is not None:
                return scored
        return self._score_joint(prompts, completions, entropy, prompt_hidden)

    def _completion_batch(
        self, completions: Sequence[Sequence[int]]
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Right-padded completion ids [batch, width >= 1] and the mask of real tokens."""
        width = max(1, max(len(c) for c in completions))
        ids = torch.full((len(completions), width), self.pad_id, dtype=torch.long)
        mask = torch.zeros((len(completions), width), dtype=torch.bool)
        for row, c in enumerate(completions):
            if c:
                ids[row, : len(c)] = torch.tensor(list(c))
                mask[row, : len(c)] = True
        return ids, mask

    def _score_joint(
        self,
        prompts: Sequence[Sequence[int]],
        completions: Sequence[Sequence[int]],
        entropy: bool,
        prompt_hidden: bool,
    ) -> Scored:
        """Each prompt + completion as one right-padded row (positions as at generation)."""
        batch = len(prompts)
        targets, mask = self._completion_batch(completions)
        width = max(len(p) + len(c) for p, c in zip(prompts, completions, strict=True))
        input_ids = torch.full((batch, width), self.pad_id, dtype=torch.long)
        attention = torch.zeros((batch, width), dtype=torch.long)
        # gather index: logits at position t predict token t + 1
        positions = torch.zeros(targets.shape, dtype=torch.long)
        for row, (p, c) in enumerate(zip(prompts, completions, strict=True)):
            sequence = list(p) + list(c)
            input_ids[row, : len(sequence)] = torch.tensor(sequence)
            attention[row, : len(sequence)] = 1
            positions[row] = torch.arange(len(p) - 1, len(p) - 1 + targets.size(1)).clamp(
                max=width - 1
            )
        device = self.device
        with self.active():
            output = self.model(
                input_ids=input_ids.to(device),
                attention_mask=attention.to(device),
                output_hidden_states=prompt_hidden,
            )
        logits = output.logits
        index = positions.to(device).unsqueeze(-1).expand(-1, -1, logits.size(-1))
        picked = logits.gather(1, index)
        hidden = None
        if prompt_hidden:
            last = torch.tensor([len(p) - 1 for p in prompts], device=device)
            hidden = output.hidden_states[-1][torch.arange(batch, device=device), last]
        return self._scored(picked, targets.to(device), mask.to(device), entropy, hidden)

    def _score_shared(
        self,
        unique: list[tuple[int, ...]],
        row_group: list[int],
        completions: Sequence[Sequence[int]],
        entropy: bool,
        prompt_hidden: bool,
    ) -> Scored | None:
        """Unique prompts once, completions on their gathered cache; None if the model's cache
        cannot be gathered (the caller then scores each row whole)."""
        device = self.device
        index = torch.tensor(row_group, device=device)
        targets, mask = self._completion_batch(completions)
        targets, mask = targets.to(device), mask.to(device)
        with self.active():
            first, prompt_mask = self._prompt_pass(unique, hidden=prompt_hidden, logits=True)
            cache = first.past_key_values
            if cache is None or not hasattr(cache, "batch_select_indices"):
                return None
            cache.batch_select_indices(index)  # one cache row per completion (differentiable)
            lengths = prompt_mask.sum(-1)[index]
            positions = lengths.unsqueeze(-1) + torch.arange(targets.size(1), device=device)
            rest = self.model(
                input_ids=targets,
                attention_mask=torch.cat([prompt_mask[index], mask.long()], dim=1),
                position_ids=positions,
                past_key_values=cache,
            )
        # token 0 is predicted at the prompt's last position, token j at completion token j - 1
        first_logits = first.logits[:, -1][index].unsqueeze(1)
        picked = torch.cat([first_logits, rest.logits[:, :-1]], dim=1)
        hidden = first.hidden_states[-1][:, -1][index] if prompt_hidden else None
        return self._scored(picked, targets, mask, entropy, hidden)

    def _prompt_pass(
        self, prompts: Sequence[Sequence[int]], *, hidden: bool, logits: bool
    ) -> tuple[Any, torch.Tensor]:
        """One forward pass over left-padded prompts (every prompt ends at the last column,
        positions count from each prompt's first real token); returns the model output (with
        its cache) and the attention mask. Call inside `active()`."""
        device = self.device
        width = max(len(p) for p in prompts)
        ids = torch.full((len(prompts), width), self.pad_id, dtype=torch.long)
        attention = torch.zeros((len(prompts), width), dtype=torch.long)
        for row, p in enumerate(prompts):
            ids[row, width - len(p) :] = torch.tensor(list(p))
            attention[row, width - len(p) :] = 1
        positions = (attention.cumsum(-1) - 1).clamp(min=0)
        options: dict[str, Any] = {"use_cache": logits, "output_hidden_states": hidden}
        if self._keeps_logits:
            options["logits_to_keep"] = 1
        attention = attention.to(device)
        output = self.model(
            input_ids=ids.to(device),
            attention_mask=attention,
            position_ids=positions.to(device),
            **options,
        )
        return output, attention

    def prompt_states(self, prompts: Sequence[Sequence[int]]) -> torch.Tensor:
        """[batch, hidden]: the last layer's state at each prompt's last token (what a value
        head reads as V(h)), from one prompt-only forward pass."""
        if not prompts or any(len(p) == 0 for p in prompts):
            raise ValueError("prompt_states needs a non-empty list of non-empty prompts")
        with self.active():
            output, _ = self._prompt_pass(prompts, hidden=True, logits=False)
        return output.hidden_states[-1][:, -1]

    @staticmethod
    def _scored(
        picked: torch.Tensor,
        targets: torch.Tensor,
        mask: torch.Tensor,
        entropy: bool,
        hidden: torch.Tensor | None,
    ) -> Scored:
        """log pi(token) = logit - logsumexp(logits); H = logsumexp - sum(p * logits)."""
        picked = picked.float()
        normaliser = picked.logsumexp(-1)
        log_probs = picked.gather(-1, targets.unsqueeze(-1)).squeeze(-1) - normaliser
        entropies = None
        if entropy:
            probs = torch.softmax(picked, -1)
            entropies = (normaliser - (probs * picked).sum(-1)).masked_fill(~mask, 0.0)
        return Scored(log_probs.masked_fill(~mask, 0.0), mask, entropies, hidden)

    @functools.cached_property
    def _keeps_logits(self) -> bool:
        """Whether the model's forward takes `logits_to_keep` (most HF causal LMs do)."""
        try:
            return "logits_to_keep" in inspect.signature(self.model.forward).parameters
        except (TypeError, ValueError):
            return False

    def token_log_probs(
        self, prompts: Sequence[Sequence[int]], completions: Sequence[Sequence[int]]
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Log-probabilities of each completion token, [batch, max completion length], and the
        mask of real (non-padding) completion tokens."""
        scored = self.score(prompts, completions)
        return scored.log_probs, scored.mask

    def sequence_log_probs(
        self, prompts: Sequence[Sequence[int]], completions: Sequence[Sequence[int]]
    ) -> torch.Tensor:
        """Sum of completion-token log-probabilities per sequence (the macro-action's)."""
        log_probs, _ = self.token_log_probs(prompts, completions)
        return log_probs.sum(-1)

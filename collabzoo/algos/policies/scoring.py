"""How an `LLMPolicy` scores completions: log-probabilities (and entropies) of every completion
token under the distribution it sampled from, and the prompt's last hidden state a value head
reads. The unique prompts run once and the K samples of each on its cache; the LM head runs
only where a completion token is scored, in checkpointed chunks (`head_scoring`). A mixin of
`LLMPolicy`, apart from its sampling so that each reads on its own."""

from __future__ import annotations

import contextlib
import functools
import inspect
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import torch

from collabzoo.algos.policies.head_scoring import (
    body_and_head,
    cache_keyword,
    checkpoint_with_cache,
    chunk_tokens,
    head_token_log_probs,
    output_cache,
    prefix_cache,
    replay_safe_cache,
    rows,
)
from collabzoo.algos.policies.sampling import Sampling, token_log_probs


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
    outside_kept: int = 0
    """Scored tokens that this pass's top-k / top-p would have cut (see
    `sampling.token_log_probs`): kept, and counted here so drift is visible."""


class PolicyScoring:
    """The scoring half of `LLMPolicy` (see its module); the rest of what it reads is the
    policy's own (`TorchPolicy`'s `active`, `compute` and `device`)."""

    model: Any
    pad_id: int
    share_prompts: bool
    logit_chunk_tokens: int | None
    device: torch.device
    active: Callable[[], contextlib.AbstractContextManager[None]]
    compute: Callable[[], contextlib.AbstractContextManager[Any]]

    # ----- scoring ------------------------------------------------------------------------------
    def score(
        self,
        prompts: Sequence[Sequence[int]],
        completions: Sequence[Sequence[int]],
        *,
        sampling: Sampling | None = None,
        entropy: bool | str = False,
        prompt_hidden: bool = False,
    ) -> Scored:
        """Log-probabilities (and optionally entropies) of every completion token, and optionally
        the last hidden state at each prompt's last token (where a value head reads V(h)).
        `entropy`: True for entropies with gradients, "log" for entropies to report only (no
        gradient, no graph kept), False for none.

        With `sampling`, the log-probabilities and entropies are those of the distribution
        `generate(prompts, sampling)` sampled from (see `sampling.sampling_logits`); without
        it, of the raw model at temperature 1.

        Samples of one prompt share its forward pass: the unique prompts run once (left padded),
        their key/value cache is gathered row by row, and the completions run on top of it, so
        K samples of a prompt cost one prompt plus K completions instead of K of each. Gradients
        flow through the shared cache as through K separate copies.
        """
        with torch.profiler.record_function("collabzoo.score"):
            if len(prompts) != len(completions):
                raise ValueError(
                    f"{len(prompts)} prompts but {len(completions)} completions: one each expected"
                )
            if any(len(p) == 0 for p in prompts):
                raise ValueError(
                    "every prompt needs at least one token (encode_prompt never is empty)"
                )
            groups: dict[tuple[int, ...], int] = {}
            row_group = [groups.setdefault(tuple(p), len(groups)) for p in prompts]
            parts = self.body_and_head()
            shared = self.share_prompts and len(groups) < len(prompts)
            if parts is not None:
                body, head = parts
                if shared:
                    scored = self._lean_shared(
                        body, head, list(groups), row_group, completions, sampling, entropy
                    )
                    if scored is not None:
                        return scored
                return self._lean_joint(body, head, prompts, completions, sampling, entropy)
            if shared:
                scored = self._score_shared(
                    list(groups), row_group, completions, sampling, entropy, prompt_hidden
                )
                if scored is not None:
                    return scored
            return self._score_joint(prompts, completions, sampling, entropy, prompt_hidden)

    def body_and_head(self) -> tuple[Any, Any] | None:
        """The model's transformer and LM head when scoring can run them apart: the head then
        runs only at completion tokens, in checkpointed chunks (see `head_scoring`). None where
        the logits are not head(body(x)) (soft-capped or scaled logits, sliding-window layers,
        prompt-learning adapters, a model that is not a Hugging Face causal LM): such a model
        is scored through its `forward`, with logits at every position."""
        return body_and_head(self.model)

    def _lean_scored(
        self,
        head: Any,
        hidden: torch.Tensor,
        targets: torch.Tensor,
        mask: torch.Tensor,
        sampling: Sampling | None,
        entropy: bool | str,
        prompt_hidden: torch.Tensor,
    ) -> Scored:
        """`Scored` from the hidden states [batch, width, hidden] that predict each completion
        token: the head runs on the real tokens only, in checkpointed chunks."""
        chunk = chunk_tokens(int(head.weight.shape[0]), self.logit_chunk_tokens)
        log_probs, spread, outside = head_token_log_probs(
            head, hidden[mask], targets[mask], sampling, entropy=entropy, chunk=chunk
        )
        zeros = torch.zeros(mask.shape, dtype=log_probs.dtype, device=mask.device)
        entropies = None if spread is None else zeros.masked_scatter(mask, spread)
        count = int(outside.sum()) if outside is not None else 0
        return Scored(zeros.masked_scatter(mask, log_probs), mask, entropies, prompt_hidden, count)

    def _lean_joint(
        self,
        body: Any,
        head: Any,
        prompts: Sequence[Sequence[int]],
        completions: Sequence[Sequence[int]],
        sampling: Sampling | None,
        entropy: bool | str,
    ) -> Scored:
        """Each prompt + completion as one right-padded row through the transformer; the head
        only at the positions that predict a completion token."""
        input_ids, attention, positions, targets, mask = self._joint_rows(prompts, completions)
        device = self.device
        with self.active(), self.compute():
            states = body(
                input_ids=input_ids.to(device),
                attention_mask=attention.to(device),
                use_cache=False,
            ).last_hidden_state
            index = positions.to(device).unsqueeze(-1).expand(-1, -1, states.size(-1))
            last = torch.tensor([len(p) - 1 for p in prompts], device=device)
            prompt_states = states[torch.arange(len(prompts), device=device), last]
            return self._lean_scored(
                head,
                states.gather(1, index),
                targets.to(device),
                mask.to(device),
                sampling,
                entropy,
                prompt_states,
            )

    def _lean_shared(
        self,
        body: Any,
        head: Any,
        unique: list[tuple[int, ...]],
        row_group: list[int],
        completions: Sequence[Sequence[int]],
        sampling: Sampling | None,
        entropy: bool | str,
    ) -> Scored | None:
        """Unique prompts once through the transformer, completions on their key/value states
        (a `replay_safe_cache`, so gradient checkpointing keeps this layout); None where the
        layers checkpoint re-entrantly (the caller scores whole rows)."""
        device = self.device
        index = torch.tensor(row_group, device=device)
        targets, mask = self._completion_batch(completions)
        targets, mask = targets.to(device), mask.to(device)
        ids, prompt_mask, prompt_positions = self._left_padded(unique)
        prompt_mask = prompt_mask.to(device)
        cache = replay_safe_cache()
        with self.active(), self.compute(), checkpoint_with_cache(body) as cache_kept:
            if not cache_kept:
                return None
            first = body(
                input_ids=ids.to(device),
                attention_mask=prompt_mask,
                position_ids=prompt_positions.to(device),
                use_cache=False,  # the cache is ours: transformers makes none
                **{cache_keyword(body): cache},
            ).last_hidden_state
            positions = prompt_mask.sum(-1)[index].unsqueeze(-1)
            positions = positions + torch.arange(targets.size(1), device=device)
            rest = body(
                input_ids=targets,
                attention_mask=torch.cat([prompt_mask[index], mask.long()], dim=1),
                position_ids=positions,
                use_cache=False,
                **{cache_keyword(body): prefix_cache(cache, index)},  # a prompt row each
            ).last_hidden_state
            # token 0 is predicted at the prompt's last position, token j at completion j - 1
            prompt_states = rows(first[:, -1], index)
            predicting = torch.cat([prompt_states.unsqueeze(1), rest[:, :-1]], dim=1)
            return self._lean_scored(
                head, predicting, targets, mask, sampling, entropy, prompt_states
            )

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

    def _joint_rows(
        self, prompts: Sequence[Sequence[int]], completions: Sequence[Sequence[int]]
    ) -> tuple[torch.Tensor, ...]:
        """Right-padded prompt + completion rows: (ids, attention mask, the position whose
        output predicts each completion token, the completion ids, their mask)."""
        targets, mask = self._completion_batch(completions)
        width = max(len(p) + len(c) for p, c in zip(prompts, completions, strict=True))
        input_ids = torch.full((len(prompts), width), self.pad_id, dtype=torch.long)
        attention = torch.zeros((len(prompts), width), dtype=torch.long)
        positions = torch.zeros(targets.shape, dtype=torch.long)
        for row, (p, c) in enumerate(zip(prompts, completions, strict=True)):
            sequence = list(p) + list(c)
            input_ids[row, : len(sequence)] = torch.tensor(sequence)
            attention[row, : len(sequence)] = 1
            # the output at position t predicts token t + 1
            positions[row] = torch.arange(len(p) - 1, len(p) - 1 + targets.size(1)).clamp(
                max=width - 1
            )
        return input_ids, attention, positions, targets, mask

    def _left_padded(
        self, prompts: Sequence[Sequence[int]]
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """Left-padded prompts (every prompt ends at the last column): ids, attention mask, and
        positions counted from each prompt's first real token."""
        width = max(len(p) for p in prompts)
        ids = torch.full((len(prompts), width), self.pad_id, dtype=torch.long)
        attention = torch.zeros((len(prompts), width), dtype=torch.long)
        for row, p in enumerate(prompts):
            ids[row, width - len(p) :] = torch.tensor(list(p))
            attention[row, width - len(p) :] = 1
        return ids, attention, (attention.cumsum(-1) - 1).clamp(min=0)

    def _score_joint(
        self,
        prompts: Sequence[Sequence[int]],
        completions: Sequence[Sequence[int]],
        sampling: Sampling | None,
        entropy: bool | str,
        prompt_hidden: bool,
    ) -> Scored:
        """Each prompt + completion as one right-padded row (positions as at generation)."""
        batch = len(prompts)
        input_ids, attention, positions, targets, mask = self._joint_rows(prompts, completions)
        device = self.device
        with self.active(), self.compute():
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
        return self._scored(picked, targets.to(device), mask.to(device), sampling, entropy, hidden)

    def _score_shared(
        self,
        unique: list[tuple[int, ...]],
        row_group: list[int],
        completions: Sequence[Sequence[int]],
        sampling: Sampling | None,
        entropy: bool | str,
        prompt_hidden: bool,
    ) -> Scored | None:
        """Unique prompts once, completions on their gathered cache; None if the model's cache
        cannot be gathered (the caller then scores each row whole)."""
        device = self.device
        index = torch.tensor(row_group, device=device)
        targets, mask = self._completion_batch(completions)
        targets, mask = targets.to(device), mask.to(device)
        with self.active(), self.compute():
            first, prompt_mask = self._prompt_pass(unique, hidden=prompt_hidden, logits=True)
            cache = output_cache(first)
            layers = getattr(cache, "layers", None)
            if not layers or not all(
                isinstance(getattr(x, "keys", None), torch.Tensor) for x in layers
            ):
                return None  # not a cache of key/value tensors: each row is scored whole
            for layer in layers:  # one row per completion, gathered in a fixed order
                layer.keys, layer.values = rows(layer.keys, index), rows(layer.values, index)
            lengths = prompt_mask.sum(-1)[index]
            positions = lengths.unsqueeze(-1) + torch.arange(targets.size(1), device=device)
            rest = self.model(
                input_ids=targets,
                attention_mask=torch.cat([prompt_mask[index], mask.long()], dim=1),
                position_ids=positions,
                **{cache_keyword(self.model): cache},
            )
        # token 0 is predicted at the prompt's last position, token j at completion token j - 1
        first_logits = rows(first.logits[:, -1], index).unsqueeze(1)
        picked = torch.cat([first_logits, rest.logits[:, :-1]], dim=1)
        hidden = rows(first.hidden_states[-1][:, -1], index) if prompt_hidden else None
        return self._scored(picked, targets, mask, sampling, entropy, hidden)

    def _prompt_pass(
        self, prompts: Sequence[Sequence[int]], *, hidden: bool, logits: bool
    ) -> tuple[Any, torch.Tensor]:
        """One forward pass over left-padded prompts (every prompt ends at the last column,
        positions count from each prompt's first real token); returns the model output (with
        its cache) and the attention mask. Call inside `active()`."""
        device = self.device
        ids, attention, positions = self._left_padded(prompts)
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
        parts = self.body_and_head()
        with self.active(), self.compute():
            if parts is not None:  # the transformer alone: no logits at all
                ids, attention, positions = self._left_padded(prompts)
                device = self.device
                return parts[0](
                    input_ids=ids.to(device),
                    attention_mask=attention.to(device),
                    position_ids=positions.to(device),
                    use_cache=False,
                ).last_hidden_state[:, -1]
            output, _ = self._prompt_pass(prompts, hidden=True, logits=False)
        return output.hidden_states[-1][:, -1]

    @staticmethod
    def _scored(
        picked: torch.Tensor,
        targets: torch.Tensor,
        mask: torch.Tensor,
        sampling: Sampling | None,
        entropy: bool | str,
        hidden: torch.Tensor | None,
    ) -> Scored:
        """Log-probabilities (and entropies) of the completion tokens under the sampling
        distribution (see `sampling.token_log_probs`), zero at padding."""
        log_probs, entropies, outside = token_log_probs(
            picked, targets, sampling, entropy=bool(entropy)
        )
        if entropy == "log" and entropies is not None:
            entropies = entropies.detach()  # for the logs: its graph is dropped here
        if entropies is not None:
            entropies = entropies.masked_fill(~mask, 0.0)
        count = int((outside & mask).sum()) if outside is not None else 0
        return Scored(log_probs.masked_fill(~mask, 0.0), mask, entropies, hidden, count)

    @functools.cached_property
    def _keeps_logits(self) -> bool:
        """Whether the model's forward takes `logits_to_keep` (most HF causal LMs do)."""
        try:
            return "logits_to_keep" in inspect.signature(self.model.forward).parameters
        except (TypeError, ValueError):
            return False

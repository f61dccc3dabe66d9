"""Memory-lean scoring: the LM head only where a completion token is scored, in chunks.

A causal LM's forward computes logits [batch, positions, V] at every position; with Qwen2.5's
151,936-token vocabulary one bf16 tensor of 16 x 256 completion tokens is 1.16 GiB, and the
float32 log-softmax, its softmax for the entropy and their gradients take several more. Scoring
needs the logits only at the positions that predict a completion token, and needs them only
one chunk at a time:

    h = body(ids)                          the transformer, no head: [batch, positions, hidden]
    h_c = h[positions predicting a completion token]               [tokens, hidden]
    for each chunk of h_c:  log pi(t) = token_log_probs(head(chunk), t, sampling)

Each chunk runs under activation checkpointing, so backward recomputes its logits instead of
keeping them: the live tensors peak at about one chunk's float32 logits and their temporaries,
whatever the batch. On the CPU the resident set follows them only while glibc maps a chunk
temporary its heap has no room for on its own (`mmap_threshold`: its dynamic threshold grew the
heap for them instead, by gigabytes over a pass, many times the live tensors). A peft LoRA
model is scored the same way: its base model's body and head carry the active adapter's layers,
while `PeftModel.forward` would compute logits at every position.

The shared-prompt layout runs each unique prompt once and its completions on its key/value
states. `replay_safe_layer` makes that cache safe to use under gradient checkpointing: a layer
that runs twice (forward, then the recompute in backward) writes the same states both times.
"""

from __future__ import annotations

import contextlib
import functools
import inspect
from collections.abc import Callable, Iterator
from typing import Any

import torch
from torch.utils.checkpoint import checkpoint

from collabzoo.algos.policies.mmap_threshold import chunk_scope, chunk_threshold, held
from collabzoo.algos.policies.sampling import Sampling, token_log_probs

LOGIT_CHUNK_ELEMENTS = 2**23
"""Logits per chunk (tokens x vocabulary): 8M, 32 MiB in float32 (55 tokens of Qwen2.5's
vocabulary, 4,096 of a byte model's); the chunk's float32 temporaries bound the peak."""

UNSUPPORTED_CONFIG = ("final_logit_softcapping", "logit_scale", "logits_scaling")
"""Config fields of models whose logits are more than `lm_head(h)`: scored through `forward`."""


def body_and_head(model: Any) -> tuple[Any, Any] | None:
    """(the transformer that returns hidden states, the LM head) of a Hugging Face causal LM or a
    peft LoRA model on one, or None where logits are not simply head(body(x)) (prompt-learning
    adapters, logit soft-capping or scaling, sliding-window or non-attention layers)."""
    peft_config = getattr(model, "peft_config", None)
    if isinstance(peft_config, dict):
        if any(getattr(c, "is_prompt_learning", False) for c in peft_config.values()):
            return None
        model = model.get_base_model()
    get_decoder = getattr(model, "get_decoder", None)
    get_head = getattr(model, "get_output_embeddings", None)
    if not callable(get_decoder) or not callable(get_head):
        return None
    config = getattr(model, "config", None)
    if any(getattr(config, name, None) not in (None, 1, 1.0) for name in UNSUPPORTED_CONFIG):
        return None
    if not full_attention_only(config):
        return None
    try:
        body, head = get_decoder(), get_head()
    except (AttributeError, NotImplementedError, ValueError):
        return None
    if body is None or body is model or not isinstance(head, torch.nn.Module):
        return None
    return body, head


def full_attention_only(config: Any) -> bool:
    """Whether every layer attends to the whole past (no sliding window, no recurrent layer):
    what a gathered or replay-safe key/value cache assumes."""
    layer_types = getattr(config, "layer_types", None) or ["full_attention"]
    return all(kind == "full_attention" for kind in layer_types)


def chunk_tokens(vocab: int, chunk: int | None = None) -> int:
    """Tokens per head chunk: `chunk` if given, else `LOGIT_CHUNK_ELEMENTS` // vocabulary."""
    if chunk is not None:
        if chunk < 1:
            raise ValueError(f"logit_chunk_tokens must be at least 1, got {chunk}")
        return chunk
    return max(1, LOGIT_CHUNK_ELEMENTS // max(1, vocab))


def head_token_log_probs(
    head: Callable[[torch.Tensor], torch.Tensor],
    hidden: torch.Tensor,
    targets: torch.Tensor,
    sampling: Sampling | None,
    *,
    entropy: bool | str = False,
    chunk: int,
) -> tuple[torch.Tensor, torch.Tensor | None, torch.Tensor | None]:
    """`token_log_probs` of `targets` [tokens] under head(hidden) [tokens, V], one chunk of
    tokens at a time (see the module docstring). `entropy`: True for an entropy with gradients,
    "log" for one without (for metrics; no graph kept), False for none.

    With gradients on, each chunk is checkpointed: only its hidden rows are kept, and backward
    recomputes its logits. On the CPU, while a chunk runs (forward, and its part of backward:
    `mmap_threshold.chunk_scope`), glibc maps a [chunk, V] temporary its heap has no room for
    apart instead of growing the heap, so freed chunks leave no resident heap behind."""
    want_grad = torch.is_grad_enabled() and (
        hidden.requires_grad or any(p.requires_grad for p in _parameters(head))
    )

    def run(rows: torch.Tensor, chosen: torch.Tensor) -> tuple[torch.Tensor, ...]:
        logits = head(rows)
        log_probs, spread, outside = token_log_probs(
            logits, chosen, sampling, entropy=bool(entropy)
        )
        if entropy == "log" and spread is not None:
            spread = spread.detach()  # for the logs: its graph is dropped here
        empty = torch.empty(0, device=rows.device)
        return (
            log_probs,
            empty if spread is None else spread,
            empty if outside is None else outside,
        )

    vocab = getattr(getattr(head, "weight", None), "shape", (0,))[0]
    threshold = chunk_threshold(chunk, vocab) if hidden.device.type == "cpu" and vocab else None
    parts: list[tuple[torch.Tensor, ...]] = []
    for start in range(0, hidden.size(0), chunk):
        rows, chosen = hidden[start : start + chunk], targets[start : start + chunk]
        if want_grad:
            parts.append(
                chunk_scope(
                    threshold, rows, lambda r, c=chosen: checkpoint(run, r, c, use_reentrant=False)
                )
            )
        else:
            with held(threshold):
                parts.append(run(rows, chosen))
    if not parts:
        empty = hidden.new_zeros(0, dtype=torch.float32)
        return empty, (empty if entropy else None), None
    log_probs = torch.cat([p[0] for p in parts])
    spread = torch.cat([p[1] for p in parts]) if entropy else None
    outside = torch.cat([p[2] for p in parts]) if parts[0][2].numel() else None
    return log_probs, spread, outside


def _parameters(module: Any) -> Iterator[torch.nn.Parameter]:
    return module.parameters() if isinstance(module, torch.nn.Module) else iter(())


def cache_keyword(model: Any) -> str:
    """The keyword a transformers model takes its key/value cache by: `cache` in current
    transformers, `past_key_values` in releases before it (deprecated there, removed in 5.40)."""
    unwrap = getattr(model, "get_base_model", None)  # a peft wrapper passes keywords through
    target = unwrap() if callable(unwrap) else model
    try:
        parameters = inspect.signature(target.forward).parameters
    except (TypeError, ValueError):
        return "past_key_values"
    return "cache" if "cache" in parameters else "past_key_values"


def output_cache(output: Any) -> Any:
    """The key/value cache a forward pass returned, under either release's field name."""
    found = getattr(output, "cache", None)
    return found if found is not None else getattr(output, "past_key_values", None)


@functools.cache
def replay_safe_layer() -> type:
    """The class of a key/value cache layer whose `update` gives the same states however often
    it runs (made on first use: transformers is imported only when an LLM is scored).

    transformers' `DynamicLayer` appends on every call, so a checkpointed attention layer that
    runs again in backward would append its states a second time. Without a prefix this layer
    stores the states of the one pass it serves (replacing, not appending): the prompt pass.
    With a prefix (rows of a prompt pass's states, one per completion) it returns prefix + new
    states and stores nothing: the completion pass. Each pass has its own cache object, so a
    pass recomputed in backward finds its layers as its forward left them."""
    from transformers.cache_utils import DynamicLayer

    class ReplaySafeLayer(DynamicLayer):
        def __init__(self, prefix: tuple[torch.Tensor, torch.Tensor] | None = None) -> None:
            super().__init__()
            self.prefix = prefix
            if prefix is not None:
                self.lazy_initialization(*prefix)
                self.keys, self.values = prefix

        def update(
            self, key_states: torch.Tensor, value_states: torch.Tensor, *args: Any, **kwargs: Any
        ) -> tuple[torch.Tensor, torch.Tensor]:
            if self.prefix is None:
                if not self.is_initialized:
                    self.lazy_initialization(key_states, value_states)
                self.keys, self.values = key_states, value_states
                return key_states, value_states
            keys = torch.cat([self.prefix[0], key_states], dim=-2)
            values = torch.cat([self.prefix[1], value_states], dim=-2)
            return keys, values

    return ReplaySafeLayer


def replay_safe_cache() -> Any:
    """An empty transformers `Cache` for a prompt pass: `replay_safe_layer()` layers."""
    from transformers.cache_utils import Cache

    return Cache(layer_class_to_replicate=replay_safe_layer())


def prefix_cache(prompt_cache: Any, index: torch.Tensor) -> Any:
    """A `Cache` for the completion pass: the prompt pass's rows `index` (one per completion,
    gathered differentiably) as the fixed prefix of every layer."""
    from transformers.cache_utils import Cache

    layer = replay_safe_layer()
    return Cache(
        layers=[layer((rows(c.keys, index), rows(c.values, index))) for c in prompt_cache.layers]
    )


def rows(tensor: torch.Tensor, index: torch.Tensor) -> torch.Tensor:
    """tensor[index] along the first dimension, with a backward that sums the gradients of a
    repeated row in a fixed order. Indexing with `[index]` does not on a multi-threaded CPU: its
    backward adds the K samples' gradients of one prompt with atomic adds in whatever order the
    threads reach them, so two identical updates (or a run and its resume) drift apart in the
    last bits. `index_select`'s backward (`index_add_`) goes index by index."""
    return tensor.index_select(0, index)


@contextlib.contextmanager
def checkpoint_with_cache(body: Any) -> Iterator[bool]:
    """Let checkpointed decoder layers keep a `ReplaySafeLayer` cache (transformers drops the
    cache of a checkpointed layer, since its own cache would be written twice). Yields False,
    changing nothing, when the layers checkpoint re-entrantly: there the prompt's states would
    leave the checkpoint without a graph, so the caller scores whole rows instead."""
    layers = [m for m in body.modules() if getattr(m, "gradient_checkpointing", False)]
    if not layers:
        yield True
        return
    if any(_reentrant(m) for m in layers):
        yield False
        return
    saved = [m.__dict__.get("_can_checkpoint_with_cache") for m in layers]
    for module in layers:
        module._can_checkpoint_with_cache = True
    try:
        yield True
    finally:
        for module, value in zip(layers, saved, strict=True):
            if value is None:
                del module._can_checkpoint_with_cache
            else:
                module._can_checkpoint_with_cache = value


def _reentrant(module: Any) -> bool:
    function = getattr(module, "_gradient_checkpointing_func", None)
    keywords = getattr(function, "keywords", None) or {}
    return bool(keywords.get("use_reentrant", True))


__all__ = [
    "LOGIT_CHUNK_ELEMENTS",
    "body_and_head",
    "checkpoint_with_cache",
    "chunk_tokens",
    "full_attention_only",
    "head_token_log_probs",
    "prefix_cache",
    "replay_safe_cache",
]

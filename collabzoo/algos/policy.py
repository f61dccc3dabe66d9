"""An LLM policy: batched sampling and batched log-probabilities of whole completions.

One `generate` call samples every prompt of a batch (left padding, at most
`generation_batch_size` rows), after one prefill per distinct prompt. Scoring runs each unique
prompt once and every completion on that prompt's cache (the K samples of a rollout-tree node
share their prompt), with positions as at generation; the LM head runs only where a completion
token is scored, in checkpointed chunks (`head_scoring`). Padding is masked out of every loss;
each completion token, the last one included, is scored; prompt tokens are not. With a peft
model, `adapter` names the LoRA adapter this policy uses.

What a learner can rely on:

- `score(..., sampling=s)` gives the log-probabilities of the distribution `generate(..., s)`
  sampled from (temperature, top-k, top-p; see `sampling`); the model's `generation_config`
  extras (repetition penalty, min-p, ...) are switched off while sampling, so nothing else
  shapes that distribution (`keep_generation_config=True` keeps them, for evaluation only).
- A completion ends at the first of the model's stop tokens (every id of its
  `generation_config.eos_token_id` and the tokenizer's eos), and that token is part of it.
- With `compute_dtype` (bf16 for a model loaded in bf16, once `keep_float32_masters` made its
  trainable weights float32), every forward pass runs under autocast in that dtype.
- `mode(train=...)`: loss passes run in train mode (dropout on), sampling in eval mode.
"""

from __future__ import annotations

import contextlib
import copy
import functools
import inspect
import shutil
import tempfile
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from collabzoo.algos.head_scoring import (
    body_and_head,
    cache_keyword,
    checkpoint_with_cache,
    chunk_tokens,
    full_attention_only,
    head_token_log_probs,
    output_cache,
    prefix_cache,
    replay_safe_cache,
)
from collabzoo.algos.prompt_budget import TRUNCATION_MARK, share_budget, split_parts
from collabzoo.algos.sampling import Sampling, token_log_probs

FIT_ATTEMPTS = 8
"""Re-tokenising a cut text can shift its length by a token or two: tries before giving up."""


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


def _id_list(value: Any) -> list[int]:
    if value is None:
        return []
    if isinstance(value, int):
        return [value]
    return [int(v) for v in value]


def stop_token_ids(model: Any, tokenizer: Any) -> list[int]:
    """Every token that ends a completion: the ids of the model's `generation_config`
    (Qwen instruct models stop on both <|im_end|> and <|endoftext|>), then the tokenizer's."""
    config = getattr(model, "generation_config", None)
    found = _id_list(getattr(config, "eos_token_id", None))
    found += _id_list(getattr(tokenizer, "eos_token_id", None))
    return list(dict.fromkeys(found))


def generation_model(model: Any) -> Any:
    """The transformers model under a peft wrapper (whose `generation_config` generate reads)."""
    base = getattr(model, "get_base_model", None)
    return base() if callable(base) else model


def encode_rows(policies: Sequence[LLMPolicy], prompts: Sequence[str]) -> list[list[int]]:
    """Row i's prompt encoded by policy i (each agent's own chat template and budget), every
    distinct (policy, prompt) once."""
    if len(policies) != len(prompts):
        raise ValueError(f"{len(policies)} policies for {len(prompts)} prompts: one each expected")
    encoded: dict[tuple[int, str], list[int]] = {}
    for policy, prompt in zip(policies, prompts, strict=True):
        if (id(policy), prompt) not in encoded:
            encoded[id(policy), prompt] = policy.encode_prompt(prompt)
    return [encoded[id(p), prompt] for p, prompt in zip(policies, prompts, strict=True)]


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
        chat_template_kwargs: dict[str, Any] | None = None,
        compute_dtype: torch.dtype | None = None,
        keep_generation_config: bool = False,
        lean_scoring: bool = True,
        logit_chunk_tokens: int | None = None,
        generation_batch_size: int | None = None,
    ) -> None:
        self.model = model
        self.tokenizer = tokenizer
        self.adapter = adapter
        self.max_prompt_tokens = max_prompt_tokens
        self.share_prompts = share_prompts
        """Score the samples of one prompt on one shared prompt pass (see `score`)."""
        self.chat_template_kwargs = dict(chat_template_kwargs or {})
        """Extra options of the chat template (`{"enable_thinking": False}` for Qwen3)."""
        self.compute_dtype = compute_dtype
        """Autocast dtype of every forward pass (None: the weights' own dtype)."""
        self.keep_generation_config = keep_generation_config
        """Sample with the extras of the model's `generation_config` (a repetition penalty,
        min-p, ...) as `generate` applies them by default, the way hub models are evaluated.
        `score` does not reproduce them, so the learners switch this off."""
        self.lean_scoring = lean_scoring
        """Score through the transformer and the LM head apart, the head only at completion
        tokens and in checkpointed chunks (see `head_scoring`); False: through `forward`, with
        logits at every position (the way before; kept to measure against)."""
        self.logit_chunk_tokens = logit_chunk_tokens
        """Tokens per LM-head chunk when scoring; None: `LOGIT_CHUNK_ELEMENTS` // vocabulary."""
        self.generation_batch_size = generation_batch_size
        """Rows per `generate` call at most (a multi-turn tree grows as K^depth); None: all."""
        self.stop_ids = stop_token_ids(model, tokenizer)
        self.eos_id = self.stop_ids[0] if self.stop_ids else None
        self.pad_id = tokenizer.pad_token_id
        if self.pad_id is None:
            self.pad_id = self.eos_id
        if self.pad_id is None:
            raise ValueError("the tokenizer has neither a pad token nor an eos token")
        self.truncated_prompts = 0
        """Prompts cut to fit `max_prompt_tokens` so far (learners log it per update)."""

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
        return self.alike(copy.deepcopy(self.model))

    def alike(self, model: Any, adapter: str | None = None) -> LLMPolicy:
        """A policy with this one's tokenizer and settings on `model` (and `adapter`)."""
        return LLMPolicy(
            model,
            self.tokenizer,
            adapter=adapter,
            max_prompt_tokens=self.max_prompt_tokens,
            share_prompts=self.share_prompts,
            chat_template_kwargs=self.chat_template_kwargs,
            compute_dtype=self.compute_dtype,
            keep_generation_config=self.keep_generation_config,
            lean_scoring=self.lean_scoring,
            logit_chunk_tokens=self.logit_chunk_tokens,
            generation_batch_size=self.generation_batch_size,
        )

    # ----- what training changes ------------------------------------------------------------------
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

    def enable_gradient_checkpointing(self) -> None:
        """Recompute each layer's activations in backward instead of keeping them, checkpointed
        non-reentrantly: the shared-prompt scoring needs the prompt's key/value states to keep
        their graph (see `head_scoring.checkpoint_with_cache`)."""
        model = generation_model(self.model)
        options = {"use_reentrant": False}
        if hasattr(model, "activation_checkpointing_enable"):  # the name since transformers 5.2x
            model.activation_checkpointing_enable(activation_checkpointing_kwargs=options)
        else:
            model.gradient_checkpointing_enable(gradient_checkpointing_kwargs=options)

    def save(self, folder: str | Path) -> None:
        """The tokenizer and what this policy trains, loadable with `from_pretrained`: a LoRA
        policy writes its own adapter only (peft's format, naming its base model); a full model
        writes itself."""
        self.save_weights(folder)
        self.tokenizer.save_pretrained(folder)

    def save_weights(self, folder: str | Path) -> None:
        """What `save` writes but the tokenizer: the adapter or the whole model."""
        folder = Path(folder)
        folder.mkdir(parents=True, exist_ok=True)
        if self.adapter is None:
            self.model.save_pretrained(folder)
        else:  # peft writes a named adapter into a subfolder of that name: lift it up
            with tempfile.TemporaryDirectory(dir=folder) as staging:
                self.model.save_pretrained(staging, selected_adapters=[self.adapter])
                written = Path(staging) / self.adapter
                if not written.is_dir():
                    written = Path(staging)
                for item in written.iterdir():
                    if item.is_file():
                        shutil.move(str(item), folder / item.name)

    # ----- contexts -------------------------------------------------------------------------------
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

    # ----- tokens -------------------------------------------------------------------------------
    def _template_ids(self, text: str) -> list[int]:
        """The chat template around `text` when the tokenizer has one, else the raw text."""
        tok = self.tokenizer
        if getattr(tok, "chat_template", None):
            ids = tok.apply_chat_template(
                [{"role": "user", "content": text}],
                add_generation_prompt=True,
                tokenize=True,
                **self.chat_template_kwargs,
            )
            if isinstance(ids, dict) or hasattr(ids, "input_ids"):
                ids = ids["input_ids"]
            return list(ids)
        return list(tok(text, add_special_tokens=False)["input_ids"])

    def _text_ids(self, text: str) -> list[int]:
        return list(self.tokenizer(text, add_special_tokens=False)["input_ids"])

    def encode_prompt(self, text: str, *, parts: Sequence[str] = ()) -> list[int]:
        """Token ids of a prompt: the chat template (if any) around `text`, at most
        `max_prompt_tokens` of them.

        A longer text is cut inside the template: it keeps its most recent tokens behind
        `TRUNCATION_MARK`. `parts` (substrings of `text`, in order: the agents' observations of
        a joint state) share the budget instead, each cut on its own, so none is dropped whole;
        the text between them is kept. Each cut counts in `truncated_prompts`."""
        ids = self._template_ids(text)
        if len(ids) <= self.max_prompt_tokens:
            return ids or [self.pad_id]
        pieces = split_parts(text, parts)
        skeleton = "".join(TRUNCATION_MARK if shrink else piece for piece, shrink in pieces)
        budget = self.max_prompt_tokens - len(self._template_ids(skeleton))
        if budget < 0:
            raise ValueError(
                f"max_prompt_tokens={self.max_prompt_tokens} cannot hold even the chat template "
                f"and the fixed text of this prompt ({self.max_prompt_tokens - budget} tokens): "
                "raise max_prompt_tokens"
            )
        shrinkable = [self._text_ids(piece) for piece, shrink in pieces if shrink]
        allowance = share_budget([len(t) for t in shrinkable], budget)
        for _ in range(FIT_ATTEMPTS):
            fitted, index = [], 0
            for piece, shrink in pieces:
                if not shrink:
                    fitted.append(piece)
                    continue
                tokens, keep = shrinkable[index], allowance[index]
                index += 1
                if keep >= len(tokens):
                    fitted.append(piece)
                else:
                    tail = self.tokenizer.decode(tokens[len(tokens) - keep :]) if keep else ""
                    fitted.append(TRUNCATION_MARK + tail)
            ids = self._template_ids("".join(fitted))
            excess = len(ids) - self.max_prompt_tokens
            if excess <= 0:
                self.truncated_prompts += 1
                return ids
            largest = max(range(len(allowance)), key=lambda i: allowance[i])
            if allowance[largest] == 0:
                break
            allowance[largest] = max(0, allowance[largest] - excess)
        raise ValueError(
            f"could not fit a prompt of {len(self._template_ids(text))} tokens into "
            f"max_prompt_tokens={self.max_prompt_tokens}: raise max_prompt_tokens"
        )

    def decode(self, completion_ids: Sequence[int]) -> str:
        return self.tokenizer.decode(list(completion_ids), skip_special_tokens=True)

    # ----- sampling -----------------------------------------------------------------------------
    def generation_options(self, sampling: Sampling) -> dict[str, Any]:
        """The keyword arguments of `model.generate` for `sampling` (see `generate`)."""
        options: dict[str, Any] = {
            "max_new_tokens": sampling.max_new_tokens,
            "do_sample": sampling.do_sample,
            "pad_token_id": self.pad_id,
            "eos_token_id": list(self.stop_ids) or None,
        }
        if sampling.do_sample:
            options.update(
                temperature=sampling.temperature,
                top_p=sampling.top_p,
                top_k=sampling.top_k or 0,
            )
        return options

    @contextlib.contextmanager
    def plain_generation_config(self) -> Iterator[None]:
        """Generate with a fresh `GenerationConfig` in place of the model's own, whose extras
        (repetition penalty, min-p, typical-p, bad words, ...) would change the distribution
        that scoring must reproduce; transformers fills every setting a call leaves unset from
        the model's config, so replacing it is the only complete way to switch them off."""
        from transformers import GenerationConfig

        if self.keep_generation_config:
            yield
            return
        target = generation_model(self.model)
        original = getattr(target, "generation_config", None)
        plain = GenerationConfig(
            bos_token_id=getattr(original, "bos_token_id", None),
            eos_token_id=list(self.stop_ids),
            pad_token_id=self.pad_id,
        )
        target.generation_config = plain
        try:
            yield
        finally:
            target.generation_config = original

    @torch.no_grad()
    def generate(
        self, prompts: Sequence[str], sampling: Sampling, *, adapters: Sequence[str] | None = None
    ) -> list[Completion]:
        """Sample one completion per prompt (each distinct prompt encoded once); see
        `generate_ids`."""
        encodings: dict[str, list[int]] = {}
        for prompt in prompts:
            if prompt not in encodings:
                encodings[prompt] = self.encode_prompt(prompt)
        return self.generate_ids([encodings[p] for p in prompts], sampling, adapters=adapters)

    @torch.no_grad()
    def generate_ids(
        self,
        encoded: Sequence[Sequence[int]],
        sampling: Sampling,
        *,
        adapters: Sequence[str] | None = None,
    ) -> list[Completion]:
        """Sample one completion per encoded prompt, in `generate` calls of at most
        `generation_batch_size` rows (all rows in one call by default).

        Rows with the same prompt (the K samples of a rollout node) share one prefill: each
        distinct prompt runs once, all but its last token, and its key/value cache is copied to
        its rows before `generate` continues from the last token. `adapters` names a LoRA
        adapter per row, so the agents of a LoRA team sample in one call (peft's mixed-adapter
        batches) instead of one call per adapter."""
        if not encoded:
            return []
        if adapters is not None and len(adapters) != len(encoded):
            raise ValueError(f"{len(adapters)} adapter names for {len(encoded)} prompts")
        size = self.generation_batch_size
        size = len(encoded) if size is None else size
        if size < 1:
            raise ValueError(f"generation_batch_size must be at least 1, got {size}")
        completions: list[Completion] = []
        for start in range(0, len(encoded), size):
            rows = [list(ids) for ids in encoded[start : start + size]]
            names = None if adapters is None else list(adapters[start : start + size])
            completions += self._generate_rows(rows, sampling, names)
        return completions

    def _generate_rows(
        self, encoded: list[list[int]], sampling: Sampling, adapters: list[str] | None
    ) -> list[Completion]:
        """One `generate` call over these rows (left padding), after a shared prefill."""
        input_ids, attention, _ = self._left_padded(encoded)
        device = self.device
        input_ids, attention = input_ids.to(device), attention.to(device)
        options = self.generation_options(sampling)
        if adapters is not None:
            options["adapter_names"] = adapters
        with (
            torch.profiler.record_function("collabzoo.generate"),
            self.mode(train=False),
            self.active(),
            self.compute(),
            self.plain_generation_config(),
        ):
            cache = self._shared_prefill(encoded, input_ids, attention, adapters)
            if cache is not None:
                options[cache_keyword(self.model)] = cache
            output = self.model.generate(input_ids=input_ids, attention_mask=attention, **options)
        stops = set(self.stop_ids)
        completions = []
        width = input_ids.size(1)
        for ids, row in zip(encoded, output[:, width:].tolist(), strict=True):
            end = next((j for j, token in enumerate(row) if token in stops), None)
            if end is not None:  # generate pads only after a stop token
                row = row[: end + 1]  # the stop token is part of the action
            completions.append(Completion(self.decode(row), list(ids), row))
        return completions

    def _shared_prefill(
        self,
        encoded: list[list[int]],
        input_ids: torch.Tensor,
        attention: torch.Tensor,
        adapters: list[str] | None,
    ) -> Any:
        """The key/value cache of every row's prompt but its last token, computed once per
        distinct (prompt, adapter) and gathered row by row; None when every row is distinct,
        a prompt is one token long, or `share_prompts` is off."""
        keys = [
            (tuple(ids), None if adapters is None else adapters[i]) for i, ids in enumerate(encoded)
        ]
        first: dict[tuple, int] = {}
        index = [first.setdefault(key, row) for row, key in enumerate(keys)]
        unique = sorted(first.values())
        if not self.share_prompts or len(unique) == len(encoded) or input_ids.size(1) < 2:
            return None
        if not self._gathers_cache:
            return None
        position = {row: j for j, row in enumerate(unique)}
        rows = torch.tensor(unique, device=input_ids.device)
        prefix_mask = attention[rows, :-1]
        options: dict[str, Any] = {}
        if adapters is not None:
            options["adapter_names"] = [adapters[row] for row in unique]
        output = self.model(
            input_ids=input_ids[rows, :-1],
            attention_mask=prefix_mask,
            position_ids=(prefix_mask.cumsum(-1) - 1).clamp(min=0),
            use_cache=True,
            logits_to_keep=1,
            **options,
        )
        cache = output_cache(output)
        cache.batch_select_indices(
            torch.tensor([position[row] for row in index], device=input_ids.device)
        )
        return cache

    @functools.cached_property
    def _gathers_cache(self) -> bool:
        """Whether `generate` can continue from a prefilled cache: a causal LM whose forward
        takes `logits_to_keep` and whose layers are all full attention."""
        model = generation_model(self.model)
        try:
            takes = "logits_to_keep" in inspect.signature(model.forward).parameters
        except (TypeError, ValueError):
            return False
        return takes and full_attention_only(model.config)

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
        """The model's transformer and LM head when scoring can run them apart (see
        `head_scoring`), else None (and with `lean_scoring=False`): scored through `forward`."""
        return body_and_head(self.model) if self.lean_scoring else None

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
            prompt_states = first[:, -1][index]
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
            if cache is None or not hasattr(cache, "batch_select_indices"):
                return None
            cache.batch_select_indices(index)  # one cache row per completion (differentiable)
            lengths = prompt_mask.sum(-1)[index]
            positions = lengths.unsqueeze(-1) + torch.arange(targets.size(1), device=device)
            rest = self.model(
                input_ids=targets,
                attention_mask=torch.cat([prompt_mask[index], mask.long()], dim=1),
                position_ids=positions,
                **{cache_keyword(self.model): cache},
            )
        # token 0 is predicted at the prompt's last position, token j at completion token j - 1
        first_logits = first.logits[:, -1][index].unsqueeze(1)
        picked = torch.cat([first_logits, rest.logits[:, :-1]], dim=1)
        hidden = first.hidden_states[-1][:, -1][index] if prompt_hidden else None
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

    def token_log_probs(
        self,
        prompts: Sequence[Sequence[int]],
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
        prompts: Sequence[Sequence[int]],
        completions: Sequence[Sequence[int]],
        *,
        sampling: Sampling | None = None,
    ) -> torch.Tensor:
        """Sum of completion-token log-probabilities per sequence (the macro-action's)."""
        log_probs, _ = self.token_log_probs(prompts, completions, sampling=sampling)
        return log_probs.sum(-1)

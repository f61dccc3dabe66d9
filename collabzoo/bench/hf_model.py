"""Hugging Face models as team members, through the learners' own `LLMPolicy`, so what the
bench measures is what `collabzoo train` trained, and a checkpoint it saved benchmarks as is.

Imported only for `hf:` teams: it is the one part of the bench that needs torch.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from collabzoo.bench.batching import CallBatcher
from collabzoo.bench.models import Generation, ModelOptions, Sampling, TeamError
from collabzoo.model_names import ModelNotFound

HF_TOKENS = "the model's tokenizer: completion token ids, the end-of-sequence token included"
ADAPTER_CONFIG = "adapter_config.json"


class HFModel:
    """An `LLMPolicy` as a team member. The calls of the episodes played at once are gathered
    into one padded `generate` (`CallBatcher`), seeded by the batch's first row's seed."""

    kind = "hf"
    concurrent = False

    def __init__(self, policy: Any, source: dict[str, Any]) -> None:
        self.policy = policy
        self.source = source
        self._lock = threading.Lock()
        self.batcher = CallBatcher(self._generate_batch)

    def generate(
        self, prompts: Sequence[str], sampling: Sampling, seeds: Sequence[int]
    ) -> list[Generation]:
        return self.batcher.generate(prompts, sampling, seeds, self._generate_batch)

    def _generate_batch(
        self, prompts: list[str], sampling: Sampling, seeds: list[int]
    ) -> list[Generation]:
        import torch

        from collabzoo.algos.policies.sampling import Sampling as PolicySampling

        settings = PolicySampling(
            max_new_tokens=sampling.max_new_tokens,
            temperature=sampling.temperature,
            top_p=sampling.top_p,
            top_k=sampling.top_k,
            do_sample=not sampling.greedy,
        )
        with self._lock:
            if seeds:  # one generator for the whole batch: transformers has no per-row seeds
                torch.manual_seed(seeds[0])
            completions = self.policy.generate(prompts, settings)
        generations = []
        for completion in completions:
            ids = completion.completion_ids
            stopped = bool(ids) and ids[-1] in self.policy.stop_ids
            full = len(ids) >= sampling.max_new_tokens
            finish = "length" if full and not stopped else "stop"
            generations.append(Generation(completion.text, len(ids), finish))
        return generations

    def describe(self) -> dict[str, Any]:
        return {"kind": self.kind, **self.source, "tokens": HF_TOKENS}


def _device(requested: str) -> str:
    """The training rule (`collabzoo.algos.runtime.placement`): "auto" is CUDA when present."""
    from collabzoo.algos.runtime.placement import resolve_device

    try:
        return str(resolve_device(requested))
    except ValueError as error:
        raise TeamError(str(error)) from None


def _dtype(name: str) -> Any:
    from collabzoo.algos.runtime.placement import resolve_dtype

    try:
        return resolve_dtype(name)
    except ValueError as error:
        raise TeamError(str(error)) from None


def needs_torch(error: ImportError) -> TeamError:
    return TeamError(
        f"hf: teams need torch and transformers ({error}): pip install 'collabzoo[train]'"
    )


def checkpoint_folders(path: str, agents: Sequence[str]) -> dict[Path, list[str]]:
    """The policies of a `trainer.save(path)` folder: {subfolder: its agents}; {} when `path`
    is not such a folder (see `collabzoo.algos.policies.model_loading.team_folders`)."""
    try:
        from collabzoo.algos.policies.model_loading import team_folders
    except ImportError as error:
        raise needs_torch(error) from None
    try:
        return team_folders(path, agents)
    except ValueError as error:
        raise TeamError(str(error)) from None


def adapter_folder(folder: Path, agent: str | None) -> Path | None:
    """The LoRA adapter folder for `agent` in a saved folder (its own subfolder first)."""
    for candidate in ([folder / agent] if agent else []) + [folder]:
        if (candidate / ADAPTER_CONFIG).is_file():
            return candidate
    return None


def load_policy(name: str, agent: str | None, options: ModelOptions) -> tuple[Any, dict]:
    """(LLMPolicy, description) for a hub id, "tiny", a save_pretrained folder, or a LoRA
    folder saved by a `lora_team` (its base model is read from the adapter config)."""
    try:
        from collabzoo.algos.policies.llm import LLMPolicy
        from collabzoo.algos.policies.model_loading import load_causal_lm, load_tokenizer
    except ImportError as error:
        raise needs_torch(error) from None

    from collabzoo.algos.runtime.placement import set_torch_threads

    try:
        set_torch_threads(options.threads)
    except ValueError as error:
        raise TeamError(str(error)) from None
    device, dtype = _device(options.device), _dtype(options.dtype)
    source: dict[str, Any] = {"name": name, "device": device, "dtype": options.dtype}
    folder = Path(name).expanduser()
    try:
        adapter = adapter_folder(folder, agent) if folder.is_dir() else None
        if adapter is not None:
            from peft import PeftModel

            config = json.loads((adapter / ADAPTER_CONFIG).read_text(encoding="utf-8"))
            base = config.get("base_model_name_or_path")
            if not base:
                raise TeamError(
                    f"the LoRA adapter in {adapter} does not name its base model "
                    "(base_model_name_or_path); save the team from a hub or local base model"
                )
            model, tokenizer = load_causal_lm(base, dtype=dtype)
            if (folder / "tokenizer_config.json").is_file():
                tokenizer = load_tokenizer(str(folder))
            adapter_name = agent or "default"
            model = PeftModel.from_pretrained(model, str(adapter), adapter_name=adapter_name)
            source.update(base_model=base, adapter=adapter_name)
        else:
            model, tokenizer = load_causal_lm(name, dtype=dtype)
            adapter_name = None
    except TeamError:
        raise
    except ModelNotFound as error:  # no such model, or the hub out of reach: its message says
        raise TeamError(f"cannot load Hugging Face model {error.name!r}: {error.reason}") from None
    except (OSError, ValueError, KeyError, ImportError) as error:
        raise TeamError(
            f"cannot load Hugging Face model {name!r} ({type(error).__name__}: "
            f"{str(error)[:300]}); give a hub id, a local model folder, a `collabzoo train` "
            "checkpoint folder or 'tiny'"
        ) from None
    model.to(device)
    policy = LLMPolicy(
        model,
        tokenizer,
        adapter=adapter_name,
        max_prompt_tokens=options.max_prompt_tokens,
        chat_template_kwargs=options.chat_template_kwargs,
        keep_generation_config=True,  # evaluate as the reference does: the model's extras too
    )
    source["max_prompt_tokens"] = options.max_prompt_tokens
    source["generation_config"] = "the model's own extras apply (repetition penalty, min-p...)"
    if options.chat_template_kwargs:
        source["chat_template_kwargs"] = dict(options.chat_template_kwargs)
    return policy, source


def load_hf_team(
    targets: Sequence[str], agents: Sequence[str], options: ModelOptions
) -> dict[str, HFModel]:
    """One HFModel per agent (see `assign_members`)."""
    return assign_members(
        targets,
        agents,
        lambda target, agent: HFModel(*load_policy(target, agent, options)),
        "Hugging Face models",
    )


def assign_members(
    targets: Sequence[str], agents: Sequence[str], member: Any, what: str
) -> dict[str, Any]:
    """A member per agent from `member(target, agent)`: one target for all agents (or a
    checkpoint folder holding one policy per agent group), or one target per agent. Repeated
    targets load once; `agent` picks a saved LoRA team's adapter."""
    if len(targets) == 1:
        folders = checkpoint_folders(targets[0], agents)
        if folders:
            team: dict[str, Any] = {}
            for folder, names in folders.items():
                made = member(str(folder), names[0])
                made.source["checkpoint"] = targets[0]
                team.update(dict.fromkeys(names, made))
            return {agent: team[agent] for agent in agents}
        return dict.fromkeys(agents, member(targets[0], None))
    if len(targets) != len(agents):
        raise TeamError(
            f"{len(targets)} {what} for {len(agents)} agents "
            f"({', '.join(agents)}): give one, or one per agent"
        )
    loaded: dict[str, Any] = {}
    members = {}
    for agent, target in zip(agents, targets, strict=True):
        if target not in loaded:  # a LoRA folder of a saved team: this agent's adapter
            loaded[target] = member(target, agent)
        members[agent] = loaded[target]
    return members

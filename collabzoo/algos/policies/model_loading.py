"""Making the policies of a team: tiny byte-level models, hub models, LoRA teams.

`models` given to a trainer may be one model for every agent (shared weights), one per agent
(heterogeneous teams, each with its own tokenizer), or one base model with a LoRA adapter per
agent (`lora_team`), so a team of N agents costs about one model of memory.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import torch

from collabzoo.algos.policies.llm import LLMPolicy
from collabzoo.algos.policies.policy import Policy

TINY = "tiny"


def tiny_causal_lm(
    seed: int = 0,
    *,
    hidden_size: int = 64,
    num_layers: int = 2,
    num_heads: int = 4,
    num_kv_heads: int = 2,
    intermediate_size: int = 128,
    max_positions: int = 2048,
) -> tuple[Any, Any]:
    """A randomly initialised Qwen2-architecture model (about 0.1M parameters by default) with
    transformers' byte-level ByT5 tokenizer: trainable from scratch, no download needed."""
    from transformers import ByT5Tokenizer

    tokenizer = ByT5Tokenizer()
    model = _qwen2_from_scratch(
        tokenizer,
        seed,
        hidden_size=hidden_size,
        num_hidden_layers=num_layers,
        num_attention_heads=num_heads,
        num_key_value_heads=num_kv_heads,
        intermediate_size=intermediate_size,
        max_position_embeddings=max_positions,
    )
    return model, tokenizer


def task_tokenizer(texts: Iterable[str], vocab_size: int = 1024) -> Any:
    """A byte-level BPE tokenizer learnt from `texts` (a task's prompts and answers), as a
    transformers `PreTrainedTokenizerFast` with <pad> and </s>: it saves and loads with the
    model. Every byte stays encodable; frequent words and numbers become single tokens, so a
    building game's prompt and commands take about a quarter of their bytes in tokens."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    if vocab_size < 260:
        raise ValueError(
            f"vocab_size must be at least 260 (256 bytes + specials), got {vocab_size}"
        )
    bpe = Tokenizer(models.BPE())
    bpe.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    bpe.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=["<pad>", "</s>"],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    bpe.train_from_iterator(texts, trainer)
    return PreTrainedTokenizerFast(tokenizer_object=bpe, pad_token="<pad>", eos_token="</s>")


def small_causal_lm(
    texts: Iterable[str],
    seed: int = 0,
    *,
    vocab_size: int = 1024,
    hidden_size: int = 256,
    num_layers: int = 4,
    num_heads: int = 4,
    num_kv_heads: int = 2,
    intermediate_size: int = 768,
    max_positions: int = 4096,
) -> tuple[Any, Any]:
    """A randomly initialised Qwen2-architecture model of a few million parameters (3.4M by
    default) with a BPE tokenizer learnt from `texts` (`task_tokenizer`): small enough to warm
    start and train on a task's real prompts on a CPU, no download needed."""
    tokenizer = task_tokenizer(texts, vocab_size)
    model = _qwen2_from_scratch(
        tokenizer,
        seed,
        hidden_size=hidden_size,
        num_hidden_layers=num_layers,
        num_attention_heads=num_heads,
        num_key_value_heads=num_kv_heads,
        intermediate_size=intermediate_size,
        max_position_embeddings=max_positions,
    )
    return model, tokenizer


def _qwen2_from_scratch(tokenizer: Any, seed: int, **sizes: int) -> Any:
    """A Qwen2 causal LM with tied embeddings over `tokenizer`'s vocabulary, initialised from
    `seed` without moving torch's global RNG."""
    from transformers import Qwen2Config, Qwen2ForCausalLM

    config = Qwen2Config(
        vocab_size=len(tokenizer),
        tie_word_embeddings=True,
        pad_token_id=tokenizer.pad_token_id,
        eos_token_id=tokenizer.eos_token_id,
        bos_token_id=None,
        **sizes,
    )
    generator_state = torch.random.get_rng_state()
    torch.manual_seed(seed)
    try:
        model = Qwen2ForCausalLM(config)
    finally:
        torch.random.set_rng_state(generator_state)
    model.generation_config.pad_token_id = tokenizer.pad_token_id
    model.generation_config.eos_token_id = tokenizer.eos_token_id
    return model


QWEN25_SHAPES: dict[str, dict[str, Any]] = {
    "qwen2.5-0.5b": {
        "hidden_size": 896,
        "intermediate_size": 4864,
        "num_hidden_layers": 24,
        "num_attention_heads": 14,
        "num_key_value_heads": 2,
        "tie_word_embeddings": True,
    },
    "qwen2.5-1.5b": {
        "hidden_size": 1536,
        "intermediate_size": 8960,
        "num_hidden_layers": 28,
        "num_attention_heads": 12,
        "num_key_value_heads": 2,
        "tie_word_embeddings": True,
    },
    "qwen2.5-3b": {
        "hidden_size": 2048,
        "intermediate_size": 11008,
        "num_hidden_layers": 36,
        "num_attention_heads": 16,
        "num_key_value_heads": 2,
        "tie_word_embeddings": True,
    },
}
"""The published configs' shapes (151,936-token vocabulary, RMSNorm eps 1e-6, rope theta 1e6)."""

QWEN25_VOCAB = 151_936


def shaped_causal_lm(
    shape: str,
    *,
    num_layers: int | None = None,
    dtype: Any = None,
    seed: int = 0,
    device: Any = None,
) -> Any:
    """A randomly initialised Qwen2 model with the exact shape of a published Qwen2.5 model
    (`QWEN25_SHAPES`), optionally with fewer layers: its real memory and speed, no download.
    No tokenizer covers its vocabulary; feed it token ids."""
    from transformers import Qwen2Config, Qwen2ForCausalLM

    if shape not in QWEN25_SHAPES:
        raise ValueError(f"unknown shape {shape!r}; known: {sorted(QWEN25_SHAPES)}")
    sizes = dict(QWEN25_SHAPES[shape])
    if num_layers is not None:
        sizes["num_hidden_layers"] = num_layers
    config = Qwen2Config(
        vocab_size=QWEN25_VOCAB,
        max_position_embeddings=32768,
        rms_norm_eps=1e-6,
        rope_theta=1_000_000.0,
        bos_token_id=151643,
        eos_token_id=151645,
        pad_token_id=151643,
        **sizes,
    )
    generator_state = torch.random.get_rng_state()
    torch.manual_seed(seed)
    default = torch.get_default_dtype()
    try:
        if dtype is not None:
            torch.set_default_dtype(dtype)
        with torch.device(device or "cpu"):
            model = Qwen2ForCausalLM(config)
    finally:
        torch.set_default_dtype(default)
        torch.random.set_rng_state(generator_state)
    return model


def load_causal_lm(name: str, *, seed: int = 0, dtype: Any = None) -> tuple[Any, Any]:
    """`"tiny"` (see `tiny_causal_lm`), a known model's short name (`pretrained`: pulled on
    first use), or any Hugging Face causal LM id or local path; any other name raises
    `collabzoo.model_names.ModelNotFound` (an OSError) before anything loads.

    `dtype` None or "auto" keeps the checkpoint's own precision, except bf16 and float16 on a
    machine without CUDA, which load as float32: CPUs without native bf16 matrix units run
    those far slower (see the Performance page)."""
    if name == TINY:
        return tiny_causal_lm(seed)
    from transformers import AutoConfig, AutoModelForCausalLM

    from collabzoo.algos.policies.pretrained import resolve_model

    name = resolve_model(name, also=(TINY,))  # a bad name or an unreachable hub: fails here
    tokenizer = load_tokenizer(name)
    if tokenizer.pad_token_id is None:
        tokenizer.pad_token = tokenizer.eos_token
    if dtype in (None, "auto") and not torch.cuda.is_available():
        stored = getattr(AutoConfig.from_pretrained(name), "dtype", None)
        if str(stored).removeprefix("torch.") in ("bfloat16", "float16"):
            dtype = torch.float32
    model = AutoModelForCausalLM.from_pretrained(name, dtype=dtype or "auto")
    return model, tokenizer


def load_tokenizer(name: str) -> Any:
    """The tokenizer of a hub id or a saved folder. A folder's `tokenizer_config.json` names its
    class, and that class is used: `AutoTokenizer` goes by the model's config first, so a
    saved `tiny` model (a Qwen2 model with the ByT5 byte tokenizer) would come back with an
    empty Qwen2 tokenizer that encodes every prompt to nothing."""
    import transformers

    from collabzoo.algos.policies.pretrained import resolve_model

    name = resolve_model(name)
    config_file = Path(name) / "tokenizer_config.json"
    if config_file.is_file():
        named = json.loads(config_file.read_text(encoding="utf-8")).get("tokenizer_class")
        tokenizer_class = getattr(transformers, str(named), None) if named else None
        if tokenizer_class is not None:
            return tokenizer_class.from_pretrained(name)
    return transformers.AutoTokenizer.from_pretrained(name)


ADAPTER_CONFIG = "adapter_config.json"


def team_folders(path: str | Path, agents: Sequence[str]) -> dict[Path, list[str]]:
    """The policies of a saved team (a learner's or `SupervisedTrainer`'s `save(path)`):
    {subfolder: the agents it plays}, from subfolder names that are agents joined by "+".
    {} when `path` is not such a folder; ValueError when it holds some agents but not all."""
    root = Path(path).expanduser()
    if not root.is_dir():
        return {}
    found: dict[Path, list[str]] = {}
    saved = []  # subfolders holding a model or an adapter: the policies of a saved team
    for child in sorted(p for p in root.iterdir() if p.is_dir()):
        if (child / "config.json").is_file() or (child / ADAPTER_CONFIG).is_file():
            saved.append(child.name)
        names = child.name.split("+")
        if all(name in agents for name in names):
            found[child] = names
    is_model = (root / "config.json").is_file() or (root / ADAPTER_CONFIG).is_file()
    if not found and saved and not is_model:
        raise ValueError(
            f"checkpoint {path} holds policies for {', '.join(saved)}, none of them for this "
            f"run's agents ({', '.join(agents)}; the single protocol's one agent plays every "
            f"role): bench one policy as the whole team, e.g. hf:{root / saved[0]}"
        )
    if not found:
        return {}
    covered = [a for names in found.values() for a in names]
    if sorted(covered) != sorted(agents):
        listed = ", ".join(p.name for p in found)
        raise ValueError(
            f"checkpoint {path} holds policies for {listed}, but the env's agents are "
            f"{', '.join(agents)}: each agent needs exactly one folder (agents joined by '+')"
        )
    return found


def load_saved_team(
    path: str | Path, agents: Sequence[str], *, dtype: Any = None
) -> dict[str, LLMPolicy] | None:
    """A saved team back as trainable policies, the way it was trained: a full model per
    folder, agents of one folder sharing it; LoRA adapters (peft folders naming their base)
    all on one base model, each trainable under its agent's name. None when `path` is not a
    saved team (`team_folders`)."""
    folders = team_folders(path, agents)
    if not folders:
        return None
    team: dict[str, LLMPolicy] = {}
    peft_model: Any = None
    base_name: str | None = None
    for folder, names in folders.items():
        adapter_config = folder / ADAPTER_CONFIG
        if adapter_config.is_file():
            base = json.loads(adapter_config.read_text(encoding="utf-8")).get(
                "base_model_name_or_path"
            )
            if not base:
                raise ValueError(
                    f"the LoRA adapter in {folder} does not name its base model "
                    "(base_model_name_or_path)"
                )
            if peft_model is None:
                from peft import PeftModel

                model, _ = load_causal_lm(base, dtype=dtype)
                peft_model = PeftModel.from_pretrained(
                    model, str(folder), adapter_name=names[0], is_trainable=True
                )
                base_name = base
            elif base != base_name:
                raise ValueError(
                    f"the adapters of {path} sit on different base models ({base_name}, {base}):"
                    " a LoRA team shares one base"
                )
            else:
                peft_model.load_adapter(str(folder), adapter_name=names[0], is_trainable=True)
            policy = LLMPolicy(peft_model, load_tokenizer(str(folder)), adapter=names[0])
        else:
            policy = LLMPolicy(*load_causal_lm(str(folder), dtype=dtype))
        team.update(dict.fromkeys(names, policy))
    return {agent: team[agent] for agent in agents}


def lora_team(
    model: Any,
    tokenizer: Any,
    agents: Sequence[str],
    *,
    rank: int | Mapping[str, int] = 8,
    alpha: int | Mapping[str, int] = 16,
    dropout: float = 0.0,
    target_modules: Sequence[str] | str = "all-linear",
) -> dict[str, LLMPolicy]:
    """One base model with one LoRA adapter per agent (named after the agent). `rank` and
    `alpha` are one value for every adapter, or per agent ({agent: value}; an agent left out
    gets the default, 8 and 16): an adapter's update is scaled by its alpha / rank."""
    from peft import LoraConfig, get_peft_model

    agents = list(agents)

    def per_agent(value: int | Mapping[str, int], name: str, default: int) -> dict[str, int]:
        if not isinstance(value, Mapping):
            return dict.fromkeys(agents, value)
        unknown = sorted(set(value) - set(agents))
        if unknown:
            raise ValueError(
                f"lora_team {name} names {', '.join(map(repr, unknown))}, not agents of this "
                f"team; its agents are {', '.join(agents)}"
            )
        return {agent: value.get(agent, default) for agent in agents}

    ranks, alphas = per_agent(rank, "rank", 8), per_agent(alpha, "alpha", 16)
    for agent, found in ranks.items():
        if isinstance(found, bool) or not isinstance(found, int) or found < 1:
            raise ValueError(f"LoRA rank of {agent!r} must be a whole number >= 1, got {found!r}")
    modules = target_modules if isinstance(target_modules, str) else list(target_modules)

    def config(agent: str) -> Any:
        return LoraConfig(
            r=ranks[agent],
            lora_alpha=alphas[agent],
            lora_dropout=dropout,
            target_modules=modules,
            task_type="CAUSAL_LM",
        )

    peft_model = get_peft_model(model, config(agents[0]), adapter_name=agents[0])
    for agent in agents[1:]:
        peft_model.add_adapter(agent, config(agent))
    return {agent: LLMPolicy(peft_model, tokenizer, adapter=agent) for agent in agents}


def team_policies(models: Any, agents: Sequence[str], tokenizer: Any = None) -> dict[str, Policy]:
    """Normalise a trainer's `models` argument to one policy per agent.

    Accepted: a policy (an `LLMPolicy`, an `MLPPolicy`: anything that is a `Policy`), a model
    (with `tokenizer`), a (model, tokenizer) pair, a model name/path, or a mapping from agent
    to any of those. Agents mapped to the same object share one policy (and so one generate
    call and one set of weights).
    """
    if isinstance(models, Mapping):
        missing = [a for a in agents if a not in models]
        if missing:
            raise ValueError(f"no model given for agents {missing}; got keys {sorted(models)}")
        made: dict[int, Policy] = {}
        team = {}
        for agent in agents:
            spec = models[agent]
            if id(spec) not in made:
                made[id(spec)] = as_policy(spec, tokenizer)
            team[agent] = made[id(spec)]
        return team
    shared = as_policy(models, tokenizer)
    return dict.fromkeys(agents, shared)


def as_policy(spec: Any, tokenizer: Any = None) -> Policy:
    """A policy as it is, or an `LLMPolicy` made of a model name, a (model, tokenizer) pair or
    a model and `tokenizer`."""
    if isinstance(spec, Policy):
        return spec
    if isinstance(spec, str):
        return LLMPolicy(*load_causal_lm(spec))
    if isinstance(spec, tuple) and len(spec) == 2:
        return LLMPolicy(*spec)
    if tokenizer is None:
        raise ValueError(
            "a model needs its tokenizer: pass tokenizer=, a (model, tokenizer) pair, "
            "or an LLMPolicy"
        )
    return LLMPolicy(spec, tokenizer)

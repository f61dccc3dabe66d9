"""The team a training command trains: `--model` and `--team` made into policies."""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from typing import Any

from collabzoo.cli.usage import UsageError
from collabzoo.model_names import ModelNotFound, check_model_name

TINY, SMALL = "tiny", "small"
"""The models trained from scratch (no download); `small` learns its tokenizer from a dataset."""


def check_model_option(name: str) -> None:
    """Refuse a --model that is no registry name, folder, hub id (`owner/name`), tiny or small,
    in one line naming the closest registry names: before torch is imported or data loads."""
    try:
        check_model_name(name, also=(TINY, SMALL))
    except ModelNotFound as error:
        raise UsageError(str(error)) from None


def team_models(
    args: argparse.Namespace, agents: Sequence[str], dtype: str, texts: Any = None
) -> tuple[Any, str]:
    """The team `--model` and `--team` name (with `--max-prompt-tokens`), and how it is made: a
    saved team folder (each agent's policy as it was saved; "saved"), or "tiny", "small" (its
    tokenizer learnt from `texts`), a hub id or a model folder, as one model per agent
    ("separate"), one for all ("shared") or one base with a LoRA adapter per agent ("lora").
    A name that is none of these fails first (`check_model_option`)."""
    check_model_option(args.model)
    models, team = _loaded_team(args, agents, dtype, texts)
    if args.max_prompt_tokens is not None:
        for policy in models.values() if isinstance(models, dict) else [models]:
            policy.max_prompt_tokens = args.max_prompt_tokens
    return models, team


def _loaded_team(
    args: argparse.Namespace, agents: Sequence[str], dtype: str, texts: Any
) -> tuple[Any, str]:
    from collabzoo.algos import (
        LLMPolicy,
        load_causal_lm,
        load_saved_team,
        lora_team,
        small_causal_lm,
    )

    torch_dtype = None if dtype == "auto" else dtype  # load in the compute dtype: no detour
    try:
        saved = load_saved_team(args.model, agents, dtype=torch_dtype)
    except (OSError, ValueError) as error:
        raise UsageError(f"cannot load the saved team {args.model!r}: {error}") from None
    if saved is not None:
        if args.team:
            raise UsageError(
                f"{args.model} is a saved team: its agents' policies load as they were saved; "
                "drop --team"
            )
        return saved, "saved"
    team = args.team or ("separate" if args.model in (TINY, SMALL) else "lora")

    def load(seed: int) -> tuple[Any, Any]:
        if args.model != SMALL:
            return load_causal_lm(args.model, seed=seed, dtype=torch_dtype)
        if texts is None:
            raise UsageError(
                "--model small learns its tokenizer from a dataset: warm start it with "
                "`collabzoo sft DATASET --model small`, then train from that folder"
            )
        return small_causal_lm(texts, seed=seed)

    try:
        if team == "lora":
            return lora_team(*load(0), agents), team
        if team == "shared":
            return LLMPolicy(*load(0)), team
        return {a: LLMPolicy(*load(i)) for i, a in enumerate(agents)}, team
    except ModelNotFound as error:  # a hub id out of reach: its message says what to do
        raise UsageError(str(error)) from None
    except OSError as error:
        raise UsageError(f"cannot load model {args.model!r}: {error}") from None

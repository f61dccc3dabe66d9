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
        if getattr(args, "lora_rank", None):
            raise UsageError(
                f"{args.model} is a saved team: its adapters keep the rank they were saved with; "
                "drop --lora-rank"
            )
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

    rank = lora_ranks(getattr(args, "lora_rank", None), agents)
    if rank is not None and team != "lora":
        raise UsageError(
            f"--lora-rank sets the LoRA adapters' rank: only with --team lora, not {team}"
        )
    try:
        if team == "lora":
            return lora_team(*load(0), agents, rank=8 if rank is None else rank), team
        if team == "shared":
            return LLMPolicy(*load(0)), team
        return {a: LLMPolicy(*load(i)) for i, a in enumerate(agents)}, team
    except ModelNotFound as error:  # a hub id out of reach: its message says what to do
        raise UsageError(str(error)) from None
    except OSError as error:
        raise UsageError(f"cannot load model {args.model!r}: {error}") from None


def lora_ranks(text: str | None, agents: Sequence[str]) -> int | dict[str, int] | None:
    """--lora-rank: "R" (every adapter), "AGENT=R,..." (the others 8) or "R,AGENT=R,..." (the
    others R); None when not given. Unknown agents and ranks below 1 are refused."""
    if text is None:
        return None
    default, ranks = 8, {}
    for part in (p.strip() for p in text.split(",")):
        agent, sep, raw = part.rpartition("=")
        try:
            value = int(raw)
        except ValueError:
            value = 0
        if value < 1 or (sep and not agent.strip()):
            raise UsageError(
                f"--lora-rank takes R, AGENT=R,... or R,AGENT=R,... (R a whole number >= 1), "
                f"got {text!r}"
            )
        if not sep:
            default = value
        elif agent.strip() not in agents:
            raise UsageError(
                f"--lora-rank {part}: no agent {agent.strip()!r}; the agents are "
                f"{', '.join(agents)}"
            )
        else:
            ranks[agent.strip()] = value
    if not ranks:
        return default
    return {agent: ranks.get(agent, default) for agent in agents}

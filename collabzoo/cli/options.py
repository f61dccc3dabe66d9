"""The options several commands share, each defined once here, and the readers of their values.

`--env-arg` (play, serve, train, bench, export), `--team` as a team layout (train, sft),
`--set` (train, sft; its values are read by `config_values`), `--max-prompt-tokens` (train,
sft, bench) and the placement options (`--device`, `--dtype`, `--threads`; train and sft add
per-agent devices and gradient checkpointing) read the same and say the same wherever they
appear. The numeric options' `type=` functions (`positive_int`, ...) refuse a number out of its
range while the arguments are parsed, before any command starts.
"""

from __future__ import annotations

import argparse
import json
import math
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from collabzoo.cli.config_defaults import DefaultHelp, policy_default
from collabzoo.cli.usage import UsageError

AUTO = "auto"
"""--device and --dtype: CUDA when present, the checkpoint's dtype."""
TEAM_LAYOUTS = ("separate", "shared", "lora")
THREADS_HELP = (
    "torch's CPU threads (default: the cores this process may use that the load average leaves "
    "free, at least 1: on a busy machine, threads beyond the free cores slow generation many "
    "times over)"
)


def bounded_int(low: int, high: int | None = None) -> Callable[[str], int]:
    """An argparse `type=` reading an integer from `low` to `high` (no bound when None)."""
    expected = f"an integer from {low} to {high}" if high is not None else f"at least {low}"

    def read(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected an integer, got {text!r}") from None
        if value < low or (high is not None and value > high):
            raise argparse.ArgumentTypeError(f"must be {expected}, got {value}")
        return value

    return read


def bounded_float(
    low: float, high: float | None = None, *, low_open: bool = False
) -> Callable[[str], float]:
    """An argparse `type=` reading a finite number above `low` (`low_open`) or from it, and up
    to `high` (no upper bound when None)."""
    floor = f"above {low:g}" if low_open else f"at least {low:g}"
    expected = floor if high is None else f"{floor} and at most {high:g}"

    def read(text: str) -> float:
        try:
            value = float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None
        above = value > low if low_open else value >= low
        if not (math.isfinite(value) and above and (high is None or value <= high)):
            raise argparse.ArgumentTypeError(f"must be a number {expected}, got {text!r}")
        return value

    return read


positive_int = bounded_int(1)
"""Counts of things that must exist: episodes, rounds, threads, workers, tokens."""
nonnegative_int = bounded_int(0)
"""Seeds, retries, and counts where 0 means none."""
port_number = bounded_int(0, 65535)
"""A TCP port; 0: any free one."""
positive_float = bounded_float(0.0, low_open=True)
"""Temperatures and time limits."""
nonnegative_float = bounded_float(0.0)
"""Time limits where 0 means none."""
probability = bounded_float(0.0, 1.0, low_open=True)
"""top-p, shares of a GPU's memory: in (0, 1]."""


def add_env_arg(parser: argparse.ArgumentParser, *, scoped: bool = False) -> None:
    """--env-arg KEY=VALUE, repeatable; `scoped` (several envs at once) also takes ENV:KEY."""
    if scoped:
        metavar = "[ENV:]KEY=VALUE"
        text = (
            "an env constructor argument, for every env or ENV only; VALUE is JSON when it "
            "parses (e.g. --env-arg ENV:horizon=2); repeatable"
        )
    else:
        metavar = "KEY=VALUE"
        text = (
            "env constructor argument, repeatable; VALUE is read as JSON when it parses "
            "(e.g. --env-arg feedback=perfect --env-arg horizon=2)"
        )
    parser.add_argument("--env-arg", action="append", default=[], metavar=metavar, help=text)


def add_team_layout(parser: argparse.ArgumentParser, *, from_scratch: str) -> None:
    """--team: how the team's models are made from --model (see `collabzoo.cli.team`)."""
    parser.add_argument(
        "--team",
        choices=TEAM_LAYOUTS,
        default=None,
        help="one model per agent, one shared model, or one base model with a LoRA adapter per "
        f"agent (default: separate for {from_scratch}, lora otherwise)",
    )
    parser.add_argument(
        "--lora-rank",
        default=None,
        metavar="R|AGENT=R,...",
        help="rank of the LoRA adapters (--team lora; default 8): one for all, per agent "
        "(coder=16,tester=4), or both (8,coder=16: the others 8)",
    )


def add_config_set(
    parser: argparse.ArgumentParser, config: str, example: str, default: Callable[[], str]
) -> None:
    """--set FIELD=VALUE for the fields of a learner's config; `default` reads the example
    field's default from that config when the help is shown."""
    parser.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="FIELD=VALUE",
        help=DefaultHelp(
            f"a {config} field, repeatable (e.g. --set {example}; its default: "
            "%(config_default)s); VALUE is read as the field's type: 'none' for None, JSON for "
            "an object",
            default,
        ),
    )


def add_max_prompt_tokens(parser: Any, default: int | None = None) -> None:
    """--max-prompt-tokens; None: the policies' own default (shown from `LLMPolicy`)."""
    text = "prompt budget of every policy (%(default)s); longer prompts keep their end"
    parser.add_argument(
        "--max-prompt-tokens",
        type=positive_int,
        default=default,
        metavar="N",
        help=text
        if default is not None
        else DefaultHelp(
            text.replace("(default)", "(config_default)"), policy_default("max_prompt_tokens")
        ),
    )


def add_device_options(
    parser: Any,
    *,
    device: str | None = AUTO,
    dtype: str | None = AUTO,
    threads: bool = True,
    training: bool = False,
) -> None:
    """--device, --dtype and (with `threads`) --threads: where and in what dtype models run."""
    device_help = "auto (CUDA when present), cpu, cuda or cuda:N"
    dtype_help = "compute dtype: auto (the checkpoint's), bfloat16, float16 or float32"
    if training:
        device_help += "; the same as bench --device"
        dtype_help += "; trainable weights stay float32"
    parser.add_argument("--device", default=device, help=device_help)
    parser.add_argument("--dtype", default=dtype, help=dtype_help)
    if threads:
        parser.add_argument(
            "--threads", type=positive_int, default=None, metavar="N", help=THREADS_HELP
        )


def add_placement(parser: argparse.ArgumentParser, *, critics: bool = True) -> None:
    """The device options of a training command, with --agent-devices, --critic-devices
    (where there are critics) and --gradient-checkpointing (read by `placement_settings`)."""
    add_device_options(parser, threads=False, training=True)
    parser.add_argument(
        "--agent-devices",
        default=None,
        metavar="AGENT=DEVICE,...",
        help="per-agent devices over --device, e.g. aux=cuda:0,main=cuda:1",
    )
    if critics:
        parser.add_argument(
            "--critic-devices",
            default=None,
            metavar="CRITIC=DEVICE,...",
            help="per-critic devices (actor-critic learners; 'team' for cc); default: the actor's",
        )
    parser.add_argument(
        "--gradient-checkpointing",
        action="store_true",
        help="recompute activations in backward: less memory, about a third more compute",
    )
    parser.add_argument(
        "--threads", type=positive_int, default=None, metavar="N", help=THREADS_HELP
    )


def placement_settings(args: argparse.Namespace, fields: Mapping[str, Any]) -> dict[str, Any]:
    """The learner config's placement fields from the `add_placement` options (checked here,
    so a typo fails before any model loads)."""
    from collabzoo.algos.runtime.placement import (
        parse_device_map,
        resolve_device,
        resolve_dtype,
        set_torch_threads,
    )

    resolve_device(args.device)
    resolve_dtype(args.dtype)
    set_torch_threads(args.threads)
    settings: dict[str, Any] = {"device": args.device, "dtype": args.dtype}
    if args.agent_devices:
        settings["agent_devices"] = parse_device_map(args.agent_devices)
    if getattr(args, "critic_devices", None):
        if "critic_devices" not in fields:
            raise ValueError(f"--critic-devices: the {args.algo} learner has no critics")
        settings["critic_devices"] = parse_device_map(args.critic_devices)
    for device in [
        *settings.get("agent_devices", {}).values(),
        *settings.get("critic_devices", {}).values(),
    ]:
        resolve_device(device)
    if args.gradient_checkpointing:
        settings["gradient_checkpointing"] = True
    return settings


def key_values(
    pairs: Sequence[str], option: str = "--env-arg", example: str = "horizon=2"
) -> dict[str, Any]:
    """KEY=VALUE pairs (--env-arg); a value is read as JSON when it parses (2, true, ["a"]),
    else a str. (--set reads each value by its config field's type: `config_values`.)"""
    kwargs: dict[str, Any] = {}
    for pair in pairs:
        key, sep, raw = pair.partition("=")
        key = key.strip()
        if not sep or not key:
            raise UsageError(f"{option} takes KEY=VALUE (e.g. {example}), got {pair!r}")
        try:
            kwargs[key] = json.loads(raw)
        except json.JSONDecodeError:
            kwargs[key] = raw
    return kwargs


def json_object_option(
    raw: str | None,
    flag: str = "--chat-template-kwargs",
    example: str = '{"enable_thinking": false}',
) -> dict[str, Any] | None:
    """A JSON-object option (--chat-template-kwargs, --vllm-kwargs), or None when not given."""
    if raw is None:
        return None
    try:
        value = json.loads(raw)
    except json.JSONDecodeError as error:
        raise UsageError(f"{flag} must be JSON ({error}), got {raw!r}") from None
    if not isinstance(value, dict):
        raise UsageError(f"{flag} must be a JSON object such as {example}, got {raw!r}")
    return value

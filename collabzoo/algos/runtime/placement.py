"""Where each model of a team runs, and in which precision.

One rule for `collabzoo train`, `collabzoo bench` and the Python API:

- `device="auto"`: CUDA when present. A model already on an accelerator stays where it was put
  (a model placed by the user is honoured); a model on the CPU moves to the first GPU.
- `device="cpu" | "cuda" | "cuda:N"`: every model goes there.
- `agent_devices={"aux": "cuda:0", "main": "cuda:1"}`: per agent (CoMLRL's `parallel_training=
  "mp"`); agents that share one model (shared weights, a LoRA team's base) need one device.
- `critic_devices`: per critic name, the same way; a critic follows its actor otherwise. A KL
  reference runs on its policy's device.
- `dtype`: the compute dtype. "auto" keeps the model's own; bfloat16 / float16 / float32 turn
  the frozen weights to it, and the learners keep trainable weights as float32 masters
  computed under autocast in that dtype (`LLMPolicy.keep_float32_masters`).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

import torch

DTYPES = {"bfloat16": torch.bfloat16, "float16": torch.float16, "float32": torch.float32}


def resolve_device(spec: str | torch.device | None) -> torch.device | None:
    """A torch device for a setting ("auto": CUDA when present, else the CPU; None: none).
    A CUDA device this machine lacks is a clear error, not a crash at the first tensor."""
    if spec is None or isinstance(spec, torch.device):
        return spec
    text = str(spec).strip().lower()
    if text == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    try:
        device = torch.device(text)
    except RuntimeError as error:
        raise ValueError(
            f"unknown device {spec!r}: expected auto, cpu, cuda or cuda:N ({error})"
        ) from None
    if device.type == "cuda":
        count = torch.cuda.device_count() if torch.cuda.is_available() else 0
        if count == 0:
            raise ValueError(f"device {spec!r} asked for, but this machine has no CUDA device")
        if device.index is not None and device.index >= count:
            raise ValueError(f"device {spec!r} asked for, but this machine has {count} GPU(s)")
    return device


def resolve_dtype(spec: str | torch.dtype | None) -> torch.dtype | None:
    """A torch dtype for a setting ("auto" or None: the model's own)."""
    if spec is None or isinstance(spec, torch.dtype):
        return spec
    text = str(spec).strip().lower()
    if text == "auto":
        return None
    aliases = {"bf16": "bfloat16", "fp16": "float16", "half": "float16", "fp32": "float32"}
    name = aliases.get(text, text)
    if name not in DTYPES:
        raise ValueError(f"unknown dtype {spec!r}: expected auto, {', '.join(DTYPES)}")
    return DTYPES[name]


def parse_device_map(text: str | Mapping[str, str] | None) -> dict[str, str]:
    """ "aux=cuda:0,main=cuda:1" (the command line's form) or a mapping, as a dict."""
    if not text:
        return {}
    if isinstance(text, Mapping):
        return {str(k): str(v) for k, v in text.items()}
    found: dict[str, str] = {}
    for item in str(text).split(","):
        name, sep, device = item.partition("=")
        if not sep or not name.strip() or not device.strip():
            raise ValueError(f"bad device entry {item!r} in {text!r}: expected NAME=DEVICE,...")
        found[name.strip()] = device.strip()
    return found


def model_device(model: Any) -> torch.device:
    """The device of a model's first parameter (CPU for a model without parameters)."""
    parameter = next(iter(model.parameters()), None)
    return parameter.device if parameter is not None else torch.device("cpu")


def target_device(model: Any, default: str | None, explicit: str | None) -> torch.device | None:
    """Where a model should go: `explicit` if given, else `default` under the "auto" rule
    (see the module docstring), None to leave it."""
    if explicit is not None:
        return resolve_device(explicit)
    if default is None:
        return None
    device = resolve_device(default)
    if str(default).strip().lower() == "auto" and model_device(model).type != "cpu":
        return None  # a model the user put on an accelerator stays there
    return device


def place_models(
    owners: Mapping[str, Any],
    *,
    default: str | None,
    per_name: Mapping[str, str] | None = None,
    what: str = "agent",
    dtype: str | torch.dtype | None = None,
) -> None:
    """Move the model of each named owner (a policy or anything with `.model`) to its device,
    in `dtype` if given. Owners sharing one model move once and must agree on its device."""
    per_name = dict(per_name or {})
    unknown = sorted(set(per_name) - set(owners))
    if unknown:
        raise ValueError(
            f"devices given for unknown {what}s {unknown}; the {what}s are {sorted(owners)}"
        )
    torch_dtype = resolve_dtype(dtype)
    by_model: dict[int, tuple[Any, list[str]]] = {}
    for name, owner in owners.items():
        model = getattr(owner, "model", None)
        if model is not None:
            by_model.setdefault(id(model), (model, []))[1].append(name)
    for model, names in by_model.values():
        asked = {per_name[n] for n in names if n in per_name}
        if len(asked) > 1:
            raise ValueError(
                f"{what}s {names} share one model but were given different devices "
                f"{sorted(asked)}: give them one device"
            )
        if asked and len(names) > 1 and any(n not in per_name for n in names):
            missing = [n for n in names if n not in per_name]
            raise ValueError(
                f"{what}s {names} share one model; a device was given for some of them only "
                f"(not {missing}): give them all the same device"
            )
        device = target_device(model, default, next(iter(asked), None))
        if torch_dtype is not None:
            model.to(torch_dtype)
        if device is not None and model_device(model) != device:
            model.to(device)


def cores_given() -> int:
    """The CPU cores this process may run on (its affinity mask: containers and taskset narrow
    it below the machine's count)."""
    if hasattr(os, "sched_getaffinity"):
        return max(1, len(os.sched_getaffinity(0)))
    return max(1, os.cpu_count() or 1)


def set_torch_threads(requested: int | None = None) -> int:
    """Set torch's intra-op threads and return the count: `requested`, or by default the given
    cores minus the work already running on the machine (the 1-minute load average), at least
    one and never more than torch's own default. Threads that outnumber the free cores wait on
    each other at every matrix product."""
    if requested is not None:
        if requested < 1:
            raise ValueError(f"--threads must be at least 1, got {requested}")
        count = requested
    else:
        cores = cores_given()
        busy = round(os.getloadavg()[0]) if hasattr(os, "getloadavg") else 0
        count = max(1, min(torch.get_num_threads(), cores, cores - busy))
    torch.set_num_threads(count)
    return count


__all__ = [
    "DTYPES",
    "cores_given",
    "model_device",
    "parse_device_map",
    "place_models",
    "resolve_device",
    "resolve_dtype",
    "set_torch_threads",
    "target_device",
]

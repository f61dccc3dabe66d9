"""Seeded LoRA weights for tests that need adapters to differ.

peft draws an adapter's A matrices from torch's global generator and starts its B matrices at
zero, so a fresh adapter changes nothing and its later effect varies from run to run. Tests that
need each adapter to matter redraw both from a generator of their own, the same draw in every
run: an unseeded draw once gave two adapters answers that decoded alike, and a test failed by
chance.
"""

from __future__ import annotations

from typing import Any


def seed_lora_weights(
    model: Any, b_std: float, *, seed: int = 0, adapter: str | None = None
) -> None:
    """Redraw `adapter`'s LoRA weights (every adapter's when None; a LoRA team shares one
    model, so that is every agent's) from `seed`: A as peft draws it, uniform in
    +-1/sqrt(fan_in), and B from N(0, b_std^2) instead of zeros."""
    import torch

    generator = torch.Generator().manual_seed(seed)
    suffix = "" if adapter is None else f".{adapter}."
    with torch.no_grad():
        for name, parameter in model.named_parameters():
            if f"lora_A{suffix}" in name:
                bound = parameter.shape[1] ** -0.5
                draw = (2 * torch.rand(parameter.shape, generator=generator) - 1) * bound
            elif f"lora_B{suffix}" in name:
                draw = torch.randn(parameter.shape, generator=generator) * b_std
            else:
                continue
            parameter.copy_(draw.to(parameter.device, parameter.dtype))

"""Float comparisons relative to the size of what is compared.

Two computations of the same float32 quantity agree to a few ulps of its magnitude, not to a
fixed absolute error: gradients of size ~170 that agree to 3e-7 relative differ by 5e-5. An
absolute tolerance then fails on some CPUs (other kernels, other summation orders) although
nothing is wrong, and a loose one would hide real errors on small values.
"""

from __future__ import annotations

import torch


def assert_close_to_scale(actual: torch.Tensor, expected: torch.Tensor, rel: float = 1e-5) -> None:
    """max |actual - expected| <= rel * max(|expected|, 1): the whole tensor's scale."""
    actual, expected = actual.detach(), expected.detach()
    assert actual.shape == expected.shape, (actual.shape, expected.shape)
    scale = max(float(expected.abs().max()), 1.0) if expected.numel() else 1.0
    error = float((actual - expected).abs().max()) if expected.numel() else 0.0
    assert error <= rel * scale, f"max error {error:.3g} exceeds {rel:g} x scale {scale:.3g}"

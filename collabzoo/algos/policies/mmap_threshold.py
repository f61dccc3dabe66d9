"""glibc's mmap threshold held fixed and low while a scoring chunk's logits are alive.

glibc serves an allocation from a free chunk of its heap where one fits; where none does, it
grows the heap for a block under its mmap threshold and maps one at or above it apart, which
`free` unmaps at once, while the heap keeps what is freed in it resident. The threshold starts
at 128 KiB but is dynamic: freeing a mapped block of up to 32 MiB raises it to that block's
size. A float32 [55, 151,936] chunk of logits (Qwen2.5's vocabulary at `LOGIT_CHUNK_ELEMENTS`)
is 31.9 MiB, just under that ceiling, so after the first chunk every [chunk, V] temporary
(logits, their scaled and masked copies, the softmax, the kept mask, their gradients: about 20
per chunk) came from the heap. Small allocations made between them split the freed holes, the
next chunk's blocks no longer fit, and the heap grew chunk after chunk. Measured on the CPU
with a 2-layer Qwen2 at that vocabulary, scoring 16 x 256 tokens (75 chunks) and backward kept
2.7-7.0 GB resident above the model (2.2-5.6x one bf16 [16, 256, V] logits tensor), at one
thread and at two, while the live tensors (`mallinfo2`'s in-use bytes) stayed within
0.18-0.26 GB of it: the heap held the rest, free.

Held at a fixed threshold no larger than a chunk's smallest [chunk, V] tensor, a block the
heap's holes cannot take is mapped and unmapped on its own instead of growing the heap, so the
resident set follows the live tensors. That costs page
faults (about +25% time in the head's scoring at Qwen2.5-0.5B's width, +100% at width 64),
and held for the whole process it slowed SmolLM2-135M's decode by up to 30% (its key/value
caches, which grow every step, were mapped afresh instead of reusing the heap), so the threshold
is low only while a chunk runs: around its forward, and in backward from its outputs' gradient
node to its input rows' (`chunk_scope`), its recompute and gradients included. Outside, it is
fixed at glibc's dynamic ceiling (32 MiB, where a torch process's dynamic threshold settles
after its first large free; `mallopt` cannot hand the dynamic adjustment back), or at the value
`MALLOC_MMAP_THRESHOLD_` fixed for the process. Off glibc (macOS, musl) nothing changes.
"""

from __future__ import annotations

import contextlib
import ctypes
import functools
import os
import threading
from collections import Counter
from collections.abc import Callable, Iterator
from typing import Any

import torch

M_TRIM_THRESHOLD, M_MMAP_THRESHOLD = -1, -3
"""`mallopt` parameters (glibc's malloc.h)."""

GLIBC_DEFAULT = 128 * 1024
"""glibc's initial mmap threshold: no chunk holds it lower than this."""

IN_CHUNKS = 4 * 2**20
"""The threshold while a chunk runs, at most: every [chunk, V] tensor of a default chunk
(`LOGIT_CHUNK_ELEMENTS`, 8M logits, so at least 4M for any vocabulary up to 4M tokens) is
larger, down to a bool mask of one byte a logit."""

DYNAMIC_CEILING = 32 * 2**20 if ctypes.sizeof(ctypes.c_long) == 8 else 512 * 1024
"""glibc's DEFAULT_MMAP_THRESHOLD_MAX (32 MiB on 64-bit): where the dynamic threshold stops."""

_lock = threading.Lock()
_held: Counter[int] = Counter()
_current: int | None = None


@functools.cache
def _mallopt() -> Callable[[int, int], int] | None:
    """glibc's `mallopt`, or None off glibc."""
    try:
        libc = ctypes.CDLL(None)
        libc.gnu_get_libc_version  # noqa: B018 (glibc's alone: musl and macOS have none)
        function = libc.mallopt
    except (OSError, AttributeError):
        return None
    function.argtypes, function.restype = [ctypes.c_int, ctypes.c_int], ctypes.c_int
    return function


@functools.cache
def outside() -> int:
    """The threshold outside chunks: the process's own fixed one if its environment set one."""
    fixed = os.environ.get("MALLOC_MMAP_THRESHOLD_")
    for tunable in os.environ.get("GLIBC_TUNABLES", "").replace(":", " ").split():
        name, _, value = tunable.partition("=")
        if name == "glibc.malloc.mmap_threshold":
            fixed = value
    try:
        return int(fixed, 0) if fixed else DYNAMIC_CEILING
    except ValueError:
        return DYNAMIC_CEILING


@functools.cache
def _first_use() -> None:
    """`mallopt(M_MMAP_THRESHOLD)` freezes the trim threshold where the dynamic rule left it
    (twice the mmap threshold): set it as that rule would at the ceiling, unless fixed."""
    mallopt = _mallopt()
    if mallopt is not None and "MALLOC_TRIM_THRESHOLD_" not in os.environ:
        mallopt(M_TRIM_THRESHOLD, 2 * outside())


def chunk_threshold(tokens: int, vocab: int) -> int | None:
    """The threshold for chunks of `tokens` x `vocab` logits: at most their bool mask's size
    (`IN_CHUNKS` at most, glibc's 128 KiB at least); None where nothing is to change."""
    if _mallopt() is None:
        return None
    threshold = max(GLIBC_DEFAULT, min(IN_CHUNKS, tokens * vocab))
    return threshold if threshold < outside() else None


def current() -> int | None:
    """The threshold this module holds now (None off glibc, or before any chunk ran)."""
    return _current


def _apply() -> None:
    global _current
    mallopt = _mallopt()
    if mallopt is not None:
        _current = min(_held) if _held else outside()
        mallopt(M_MMAP_THRESHOLD, _current)


def hold(threshold: int | None) -> None:
    """Lower the threshold to `threshold` until the matching `release` (nested holds: the
    lowest one stands)."""
    if threshold is None:
        return
    _first_use()
    with _lock:
        _held[threshold] += 1
        _apply()


def release(threshold: int | None) -> None:
    if threshold is None:
        return
    with _lock:
        if _held[threshold] > 1:
            _held[threshold] -= 1
        else:
            _held.pop(threshold, None)
        _apply()


@contextlib.contextmanager
def held(threshold: int | None) -> Iterator[None]:
    """`hold` for a block: a chunk's forward pass."""
    hold(threshold)
    try:
        yield
    finally:
        release(threshold)


class _HoldInBackward(torch.autograd.Function):
    """Identity on a chunk's outputs: backward reaches it before the chunk's own nodes."""

    @staticmethod
    def forward(ctx: Any, threshold: int, *tensors: torch.Tensor) -> tuple[torch.Tensor, ...]:
        ctx.threshold = threshold
        outputs = tuple(t.view_as(t) for t in tensors)
        ctx.mark_non_differentiable(
            *(o for o, needed in zip(outputs, ctx.needs_input_grad[1:], strict=True) if not needed)
        )
        return outputs

    @staticmethod
    def backward(ctx: Any, *grads: torch.Tensor) -> tuple[Any, ...]:
        hold(ctx.threshold)
        needed = ctx.needs_input_grad[1:]
        return (None, *(g if n else None for g, n in zip(grads, needed, strict=True)))


class _ReleaseInBackward(torch.autograd.Function):
    """Identity on a chunk's input rows: backward reaches it after the chunk's nodes. `anchor`
    requires a gradient, so this node runs even where the rows need none (a trained head on a
    frozen transformer)."""

    @staticmethod
    def forward(ctx: Any, threshold: int, rows: torch.Tensor, anchor: torch.Tensor) -> torch.Tensor:
        ctx.threshold, ctx.rows_need_grad = threshold, ctx.needs_input_grad[1]
        return rows.view_as(rows)

    @staticmethod
    def backward(ctx: Any, grad: torch.Tensor) -> tuple[Any, ...]:
        release(ctx.threshold)
        return None, grad if ctx.rows_need_grad else None, None


def chunk_scope(
    threshold: int | None,
    rows: torch.Tensor,
    run: Callable[[torch.Tensor], tuple[torch.Tensor, ...]],
) -> tuple[torch.Tensor, ...]:
    """`run(rows)`, a checkpointed chunk whose outputs need gradients, with the threshold held
    at `threshold` during its forward and, in backward, from its outputs' gradient node to its
    rows' (the recompute of its logits and their gradients between)."""
    if threshold is None:
        return run(rows)
    anchor = torch.empty(0, device=rows.device, requires_grad=True)
    with held(threshold):
        outputs = run(_ReleaseInBackward.apply(threshold, rows, anchor))
    return _HoldInBackward.apply(threshold, *outputs)


__all__ = ["chunk_scope", "chunk_threshold", "current", "held", "hold", "outside", "release"]

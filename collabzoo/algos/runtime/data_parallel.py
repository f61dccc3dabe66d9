"""Data-parallel training over torch.distributed: `torchrun --nproc-per-node N` (or
`accelerate launch`) with any script that builds a learner, or with `collabzoo train`.

Each rank (process) rolls out its shard of an update's episodes and backpropagates its share
of the loss, normalised by the GLOBAL sample count; before each optimizer step the gradients of
every update group (one policy, one LoRA adapter) are summed over the ranks. The sum of the
ranks' gradients is then exactly the gradient of the one-process loss over all shards, so every
rank takes the same clipped AdamW step from the same state and the replicas never drift apart.
The ranks also agree on a non-finite loss before anyone skips, so a skip is the team's. The
actor-critic learners z-score advantages over every rank's samples, take the same number of
mini-batch steps on every rank (`mini_batch_size` is per rank), and divide each loss by the
step's global mini-batch.

Why not `DistributedDataParallel`: a collabzoo update steps several models (one per agent, or
one LoRA adapter per agent on a shared base), each with its own optimizer, clip and skip; DDP
wraps one module and reduces during backward. Reducing each group's gradients at its step, with
one flat all-reduce per dtype and device, is the same arithmetic with the groups kept apart.

Sampling: shard s of update u is rolled out with torch's RNG seeded from (run seed, u, s), so
the same shards give the same samples whichever process rolls them out: a one-process run with
`rollout_shards=N` reproduces an N-rank run (tests/test_data_parallel.py checks this).

Backends: NCCL on CUDA, gloo on the CPU (how CI tests it). Rank 0 alone writes logs,
checkpoints and saved policies; every rank resumes from the same checkpoint, whatever the
number of ranks that wrote it.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Sequence

import torch
import torch.distributed as dist


class DataParallel:
    """This process's place among the ranks of an initialised default process group."""

    def __init__(self) -> None:
        if not dist.is_initialized():
            raise RuntimeError("DataParallel needs an initialised torch.distributed group")
        self.rank = dist.get_rank()
        self.world = dist.get_world_size()
        self.local_rank = int(os.environ.get("LOCAL_RANK", self.rank))

    @classmethod
    def from_environment(cls) -> DataParallel | None:
        """The ranks of this launch: an existing process group, or one started from torchrun's
        environment (WORLD_SIZE > 1; NCCL with CUDA, else gloo); None for a single process."""
        if not dist.is_available():
            return None
        if not dist.is_initialized():
            if int(os.environ.get("WORLD_SIZE", "1")) <= 1:
                return None
            if torch.cuda.is_available():  # NCCL, and vLLM's engines, use the current device
                torch.cuda.set_device(int(os.environ.get("LOCAL_RANK", "0")))
            dist.init_process_group("nccl" if torch.cuda.is_available() else "gloo")
        if dist.get_world_size() <= 1:
            return None
        return cls()

    @property
    def is_main(self) -> bool:
        return self.rank == 0

    def device(self) -> torch.device:
        """Where collectives run: this rank's GPU under NCCL, else the CPU."""
        if dist.get_backend() == "nccl":
            return torch.device("cuda", self.local_rank)
        return torch.device("cpu")

    def sum(self, values: Sequence[float]) -> list[float]:
        """Each value summed over the ranks (float64, one collective)."""
        tensor = torch.tensor(list(values), dtype=torch.float64, device=self.device())
        dist.all_reduce(tensor)
        return tensor.tolist()

    def maximum(self, values: Sequence[float]) -> list[float]:
        """Each value's maximum over the ranks (one collective)."""
        tensor = torch.tensor(list(values), dtype=torch.float64, device=self.device())
        dist.all_reduce(tensor, op=dist.ReduceOp.MAX)
        return tensor.tolist()

    def all_true(self, flag: bool) -> bool:
        """True only if every rank says True (one collective)."""
        return self.sum([0.0 if flag else 1.0])[0] == 0.0

    def sum_gradients(self, parameters: Iterable[torch.nn.Parameter]) -> None:
        """Sum every parameter's gradient over the ranks, in place; a parameter a rank did not
        reach counts as a zero gradient there. One flat all-reduce per (device, dtype)."""
        buckets: dict[tuple[torch.device, torch.dtype], list[torch.nn.Parameter]] = {}
        for parameter in parameters:
            if parameter.grad is None:
                parameter.grad = torch.zeros_like(parameter)
            buckets.setdefault((parameter.grad.device, parameter.grad.dtype), []).append(parameter)
        for members in buckets.values():
            flat = torch.cat([p.grad.reshape(-1) for p in members])
            if dist.get_backend() == "nccl" or flat.device.type == "cpu":
                dist.all_reduce(flat)
            else:  # gloo reduces CPU tensors
                reduced = flat.cpu()
                dist.all_reduce(reduced)
                flat = reduced.to(flat.device)
            offset = 0
            for parameter in members:
                count = parameter.grad.numel()
                parameter.grad.copy_(flat[offset : offset + count].view_as(parameter.grad))
                offset += count


def shard_seed(seed: int, update: int, shard: int) -> int:
    """The sampling seed of one shard of one update (see the module docstring)."""
    return (seed * 1_000_003 + update) * 1_009 + shard


__all__ = ["DataParallel", "shard_seed"]

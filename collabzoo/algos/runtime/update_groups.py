"""Decentralised updates: one optimizer, one gradient clip and one non-finite skip per policy.

A team trained with one AdamW and one `clip_grad_norm_` over every agent's weights is not
decentralised: one agent's large gradient shrinks every other agent's step (the clip scales the
joint norm), and one agent's non-finite loss throws away the whole team's update. Each distinct
policy (an agent, agents sharing one model, a LoRA adapter, a critic) is an `UpdateGroup`:

    g_i <- grad of loss_i;  if not finite(loss_i, |g_i|): skip group i (others still step)
    g_i <- g_i * min(1, c / |g_i|);  AdamW_i step
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from typing import Any

import torch


class UpdateGroup:
    """The parameters of one policy (or critic) with their own AdamW, clip and skip."""

    def __init__(
        self,
        name: str,
        parameters: Iterable[torch.nn.Parameter] | list[dict[str, Any]],
        *,
        lr: float,
        betas: tuple[float, float] = (0.9, 0.999),
        eps: float = 1e-8,
        weight_decay: float = 0.0,
        max_grad_norm: float | None = 1.0,
    ) -> None:
        self.name = name
        self.optimizer = torch.optim.AdamW(
            parameters, lr=lr, betas=betas, eps=eps, weight_decay=weight_decay
        )
        self.parameters = [p for g in self.optimizer.param_groups for p in g["params"]]
        if not self.parameters:
            raise ValueError(f"{name!r} has no trainable parameters")
        self.max_grad_norm = max_grad_norm
        self.reducer: Any = None
        """Data-parallel training: a `DataParallel` that sums the gradients over the ranks (and
        makes them agree on a skip) before the clip; None in one process."""
        self.skipped = 0
        """Steps of this group skipped for a non-finite loss or gradient, so far."""
        self.frozen = False
        """Set by the learner for an update in which none of this policy's agents trains: the
        group must not step, so its parameters and AdamW moments stay exactly as they are."""

    def zero_grad(self) -> None:
        self.optimizer.zero_grad(set_to_none=True)

    def check_frozen(self) -> None:
        """After an update: a frozen group must hold no gradient (none of its agents' samples
        may reach a loss); RuntimeError if one does."""
        if self.frozen and any(p.grad is not None for p in self.parameters):
            self.zero_grad()
            raise RuntimeError(
                f"{self.name!r} is frozen at this update but received gradients: a frozen "
                "agent's samples reached a loss"
            )

    def skip(self) -> None:
        """Drop this step's gradients (a non-finite loss): the parameters stay as they are."""
        self.zero_grad()
        self.skipped += 1

    def step(self, *, loss_finite: bool = True) -> float | None:
        """Clip this group's gradient norm and step; None (and no step) after a non-finite
        loss or if the norm is not finite. Returns the norm before clipping. The gradients are
        freed either way, so they do not sit in memory while the other groups (and the next
        rollout) run. With a `reducer`, every rank calls this for the same groups in the same
        order: the gradients are summed first, and a non-finite loss on any rank skips all.
        A frozen group refuses to step: gradients on it mean a frozen agent's samples reached a
        loss, which is a learner's error."""
        if self.frozen:
            leaked = any(p.grad is not None for p in self.parameters)
            self.zero_grad()
            raise RuntimeError(
                f"{self.name!r} is frozen at this update (its agents do not train) and must not "
                "step"
                + (": it received gradients, so a frozen agent's samples reached a loss" * leaked)
            )
        if self.reducer is not None:
            loss_finite = self.reducer.all_true(loss_finite)
            if loss_finite:
                self.reducer.sum_gradients(self.parameters)
        if not loss_finite:
            self.skip()
            return None
        limit = math.inf if self.max_grad_norm is None else self.max_grad_norm
        norm = torch.nn.utils.clip_grad_norm_(self.parameters, limit)
        if not torch.isfinite(norm):
            self.skip()
            return None
        self._state_follows_parameters()
        with torch.profiler.record_function("collabzoo.optimizer_step"):
            self.optimizer.step()
        self.zero_grad()
        return float(norm)

    def _state_follows_parameters(self) -> None:
        """Move AdamW's moments to their parameter's device: a model moved after steps were
        taken (or a checkpoint loaded elsewhere) keeps training instead of failing on mixed
        devices."""
        for parameter in self.parameters:
            state = self.optimizer.state.get(parameter)
            for key, value in (state or {}).items():
                if torch.is_tensor(value) and value.dim() and value.device != parameter.device:
                    state[key] = value.to(parameter.device)

    def state_dict(self) -> dict[str, Any]:
        return {"optimizer": self.optimizer.state_dict(), "skipped": self.skipped}

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        self.optimizer.load_state_dict(state["optimizer"])
        self.skipped = int(state["skipped"])


def groups_state(groups: Mapping[str, UpdateGroup]) -> dict[str, Any]:
    return {name: group.state_dict() for name, group in groups.items()}


def load_groups_state(groups: Mapping[str, UpdateGroup], state: Mapping[str, Any]) -> None:
    """Restore every group by name (the team must be the same as when it was saved)."""
    if set(state) != set(groups):
        raise ValueError(
            f"the checkpoint's optimizers are for {sorted(state)}, this trainer's for "
            f"{sorted(groups)}: resume with the same team and learner"
        )
    for name, group in groups.items():
        group.load_state_dict(state[name])


__all__ = ["UpdateGroup", "groups_state", "load_groups_state"]

"""Supervised warm start: each agent's policy fine-tuned on its own rows of an episode dataset
(`collabzoo export`), so a MARL run starts from a policy that already speaks the task.

The loss is the negative log-likelihood of the completion given the prompt, per token, with the
prompt encoded exactly as the learners encode it (`LLMPolicy.encode_prompt`: chat template,
prompt budget) and the stop token appended, so the policy learns where an answer ends:

    L(theta_i) = - (1 / sum_j |y_j|) sum_j sum_t log pi_theta_i(y_j,t | x_j, y_j,<t)

over the rows j of the agents that policy i plays. Each distinct policy is an `UpdateGroup`
(its own AdamW, clip and non-finite skip), placed and kept in float32 masters as the learners
do, and a LoRA team trains each adapter on its own agent's rows.

Why not TRL's `SFTTrainer`: it trains one model on one dataset, while a team has one policy per
agent (or one shared, or LoRA adapters on one base), each of which must see only its agents'
rows, through the same prompt encoding and the same `score` the learners use, so that the
log-probabilities SFT raises are the ones reinforcement then starts from. The dataset is TRL's
prompt-completion format, so `SFTTrainer` takes it unchanged for a single-model warm start.

    trainer = SupervisedTrainer(policies, load_from_disk("data/strbuild"), config)
    trainer.train(); trainer.save("runs/sft/final")   # a team folder the learners load
"""

from __future__ import annotations

import json
import math
import random
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import torch

from collabzoo.algos.learners.config import require_at_least, require_positive, require_within
from collabzoo.algos.policies.llm import LLMPolicy
from collabzoo.algos.policies.model_loading import team_policies
from collabzoo.algos.runtime.placement import place_models
from collabzoo.algos.runtime.update_groups import UpdateGroup

Example = tuple[list[int], list[int]]
"""(prompt ids, completion ids) of one row."""
REQUIRED_COLUMNS = ("prompt", "completion", "agent")
LR_SCHEDULES = ("linear", "cosine", "constant")


@dataclass
class SupervisedConfig:
    """Settings of a supervised warm start (TRL's `SFTConfig` names where they exist)."""

    output_dir: str = "runs/sft"
    """Where metrics.jsonl, checkpoints and `save`'s default folder go."""
    seed: int = 0
    """Seeds the order of the rows."""
    learning_rate: float = 2e-5
    """AdamW's peak step size (TRL's SFT default; a small model from scratch wants 1e-3)."""
    lr_scheduler_type: str = "linear"
    """The step size after warm-up: "linear" decay to 0 (TRL's default), "cosine" decay to 0,
    or "constant"."""
    warmup_steps: int = 0
    """Steps of linear warm-up from 0 to learning_rate."""
    num_train_epochs: float = 1.0
    """Passes over each policy's rows (a fraction stops part way); max_steps overrides it."""
    per_device_train_batch_size: int = 8
    """Rows per optimizer step, per policy."""
    max_steps: int | None = None
    """Optimizer steps per policy, over as many epochs as they take (overriding
    num_train_epochs, as in TRL); None: as many as num_train_epochs take."""
    min_reward: float | None = None
    """Keep only rows whose turn paid at least this (a rejection-sampling warm start)."""
    weight_decay: float = 0.0
    """AdamW's decoupled weight decay."""
    adam_beta1: float = 0.9
    adam_beta2: float = 0.999
    adam_epsilon: float = 1e-8
    max_grad_norm: float = 1.0
    """Each policy's own gradient norm is clipped to this."""
    append_eos: bool = True
    """Train on the stop token after each completion, so answers end."""
    logging_steps: int = 10
    """Optimizer steps between lines of metrics.jsonl."""
    save_steps: int = 0
    """Save the team to output_dir/checkpoint-STEP every this many steps; 0: only `save`."""
    device: str | None = "auto"
    """As the learners': "auto" (CUDA when present), "cpu", "cuda", "cuda:N", or None."""
    dtype: str = "auto"
    """Compute dtype, as the learners': trainable weights stay float32 masters."""
    agent_devices: dict[str, str] | None = None
    """Per-agent devices over `device`, as the learners'."""
    gradient_checkpointing: bool = False
    """Recompute each layer's activations in backward (less memory, more compute)."""
    max_tokens_per_microbatch: int | None = None
    """Run a step's rows through the model in micro-batches, shortest first, each of at most
    this many token positions (its rows times its longest, padding included; a longer row runs
    alone), their gradients adding up to the whole batch's: the loss is a sum over tokens, so
    the step is the same up to rounding, but a long row no longer pads every other row to its
    length (1024 halves a step on SmolLM2's StrBuild rows on a CPU). None: the whole batch at
    once, bit for bit the step of earlier versions."""

    def __post_init__(self) -> None:
        if self.learning_rate <= 0:
            raise ValueError(f"learning_rate must be positive, got {self.learning_rate}")
        if self.num_train_epochs <= 0:
            raise ValueError(f"num_train_epochs must be positive, got {self.num_train_epochs}")
        for name in ("per_device_train_batch_size", "logging_steps"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be at least 1, got {getattr(self, name)}")
        if self.max_steps is not None and self.max_steps < 1:
            raise ValueError(f"max_steps must be at least 1 or None, got {self.max_steps}")
        if self.max_tokens_per_microbatch is not None and self.max_tokens_per_microbatch < 1:
            raise ValueError(
                "max_tokens_per_microbatch must be at least 1 or None, got "
                f"{self.max_tokens_per_microbatch}"
            )
        if self.save_steps < 0 or self.warmup_steps < 0:
            raise ValueError(
                f"save_steps and warmup_steps must be 0 or more, got {self.save_steps} and "
                f"{self.warmup_steps}"
            )
        require_at_least(self, 0, "seed", "weight_decay")
        require_positive(self, "adam_epsilon", "max_grad_norm")
        for beta in ("adam_beta1", "adam_beta2"):
            require_within(self, beta, 0.0, 1.0, low_open=False, high_open=True)
        if self.lr_scheduler_type not in LR_SCHEDULES:
            raise ValueError(
                f"lr_scheduler_type must be one of {LR_SCHEDULES}, got {self.lr_scheduler_type!r}"
            )

    def lr_factor(self, step: int, total: int) -> float:
        """The multiplier of learning_rate at optimizer step `step` (0-based) of `total`."""
        if step < self.warmup_steps:
            return (step + 1) / (self.warmup_steps + 1)
        if self.lr_scheduler_type == "constant":
            return 1.0
        progress = (step - self.warmup_steps) / max(1, total - self.warmup_steps)
        if self.lr_scheduler_type == "linear":
            return max(0.0, 1.0 - progress)
        return 0.5 * (1.0 + math.cos(math.pi * min(1.0, progress)))


def microbatches(examples: Iterable[Example], max_tokens: int | None) -> list[list[Example]]:
    """`examples` in runs, shortest first, whose padded size (rows times the longest of them)
    stays within `max_tokens`; a row longer than that is a run of its own. None: one run."""
    if max_tokens is None:
        return [list(examples)]
    runs: list[list[Example]] = []
    for example in sorted(examples, key=lambda e: len(e[0]) + len(e[1])):
        width = len(example[0]) + len(example[1])  # the longest so far: the rows are sorted
        if runs and (len(runs[-1]) + 1) * width <= max_tokens:
            runs[-1].append(example)
        else:
            runs.append([example])
    return runs


def _checked_rows(rows: Iterable[Mapping[str, Any]], min_reward: float | None) -> list[dict]:
    rows = [dict(r) for r in rows]
    if not rows:
        raise ValueError("the dataset has no rows; `collabzoo export` writes episode datasets")
    missing = [c for c in REQUIRED_COLUMNS if c not in rows[0]]
    if missing:
        raise ValueError(
            f"the dataset needs the columns {', '.join(REQUIRED_COLUMNS)} (missing: "
            f"{', '.join(missing)}); `collabzoo export` writes them"
        )
    if min_reward is not None:
        if "reward" not in rows[0]:
            raise ValueError("min_reward needs a reward column")
        rows = [r for r in rows if float(r["reward"]) >= min_reward]
        if not rows:
            raise ValueError(f"no row paid at least min_reward={min_reward}")
    return rows


class SupervisedTrainer:
    """Fine-tune each distinct policy of a team on the rows of the agents it plays.

    `models` is what the learners take (a policy, a model name, a (model, tokenizer) pair, a
    `lora_team`, or a mapping agent -> any of those); the agents are the dataset's."""

    def __init__(
        self,
        models: Any,
        rows: Iterable[Mapping[str, Any]],
        config: SupervisedConfig | None = None,
        *,
        tokenizer: Any = None,
    ) -> None:
        self.config = config or SupervisedConfig()
        rows = _checked_rows(rows, self.config.min_reward)
        agents = sorted({str(r["agent"]) for r in rows})
        if isinstance(models, Mapping):
            unknown = [a for a in agents if a not in models]
            if unknown:
                raise ValueError(
                    f"the dataset has rows of agents {unknown} but the team has policies for "
                    f"{sorted(models)}: give a policy for every agent in the data"
                )
        self.policies = team_policies(models, agents, tokenizer)
        self.distinct = list({id(p): p for p in self.policies.values()}.values())
        place_models(
            self.policies,
            default=self.config.device,
            per_name=self.config.agent_devices,
            dtype=self.config.dtype,
        )
        for policy in self.distinct:
            if self.config.dtype not in (None, "auto"):
                policy.compute_dtype = None  # the model was turned to this dtype: compute in it
            policy.keep_float32_masters()
            if self.config.gradient_checkpointing:
                policy.enable_gradient_checkpointing()
        self.examples = {
            id(p): [self.encode(p, r) for r in rows if self.policies[str(r["agent"])] is p]
            for p in self.distinct
        }
        c = self.config
        self.groups = {
            id(p): UpdateGroup(
                self.policy_name(p),
                p.trainable_parameters(),
                lr=c.learning_rate,
                betas=(c.adam_beta1, c.adam_beta2),
                eps=c.adam_epsilon,
                weight_decay=c.weight_decay,
                max_grad_norm=c.max_grad_norm,
            )
            for p in self.distinct
        }
        self.step = 0
        self.history: list[dict[str, Any]] = []

    def policy_name(self, policy: LLMPolicy) -> str:
        """The agents a policy plays, joined by "+" (its folder, as the learners save it)."""
        return "+".join(a for a, p in self.policies.items() if p is policy)

    def encode(self, policy: LLMPolicy, row: Mapping[str, Any]) -> Example:
        """A row as the policy's token ids: the prompt as the learners encode it, the
        completion as the policy would write it (plus the stop token)."""
        prompt = policy.encode_prompt(str(row["prompt"]))
        completion = list(
            policy.tokenizer(str(row["completion"]), add_special_tokens=False)["input_ids"]
        )
        if self.config.append_eos and policy.eos_id is not None:
            completion.append(policy.eos_id)
        return prompt, completion or [policy.pad_id]

    def loss(self, policy: LLMPolicy, batch: list[Example]) -> torch.Tensor:
        """Mean negative log-likelihood per completion token of `batch` under `policy`."""
        with policy.active(), policy.compute():
            scored = policy.score([p for p, _ in batch], [c for _, c in batch])
        mask = scored.mask.to(scored.log_probs.dtype)
        return -(scored.log_probs * mask).sum() / mask.sum().clamp(min=1.0)

    def accumulate(self, policy: LLMPolicy, batch: list[Example]) -> float:
        """Backpropagate `batch`'s loss, micro-batch by micro-batch (each weighted by its share
        of the batch's completion tokens, so the gradients are the whole batch's); returns the
        loss, or the first non-finite part's value (the gradients are then left for the
        group's step to drop)."""
        tokens = sum(len(c) for _, c in batch)
        total = 0.0
        with policy.mode(train=True):
            for run in microbatches(batch, self.config.max_tokens_per_microbatch):
                part = self.loss(policy, run) * (sum(len(c) for _, c in run) / tokens)
                if not torch.isfinite(part):
                    return float(part.detach())
                policy.backward(part)
                total += float(part.detach())
        return total

    @torch.no_grad()
    def evaluate_loss(self, rows: Iterable[Mapping[str, Any]] | None = None) -> dict[str, float]:
        """Each policy's mean token NLL (eval mode) over its rows of `rows` (default: the
        training rows), by policy name."""
        if rows is None:
            examples = self.examples
        else:
            rows = _checked_rows(rows, None)
            examples = {
                id(p): [self.encode(p, r) for r in rows if self.policies.get(r["agent"]) is p]
                for p in self.distinct
            }
        size = self.config.per_device_train_batch_size
        budget = self.config.max_tokens_per_microbatch
        result = {}
        for policy in self.distinct:
            own = examples[id(policy)]
            if budget is None:  # batch by batch, as the steps run
                runs = [own[start : start + size] for start in range(0, len(own), size)]
            else:  # every row at once, sorted by length: the least padding
                runs = microbatches(own, budget)
            total, tokens = 0.0, 0
            with policy.mode(train=False):
                for run in runs:
                    count = sum(len(c) for _, c in run)
                    total += float(self.loss(policy, run)) * count
                    tokens += count
            if tokens:
                result[self.policy_name(policy)] = total / tokens
        return result

    def _batches(self, policy: LLMPolicy) -> list[list[Example]]:
        """This policy's mini-batches: shuffled epochs (seeded), cut at max_steps batches or at
        the fraction of an epoch asked for."""
        examples = self.examples[id(policy)]
        size = self.config.per_device_train_batch_size
        wanted = max(1, round(self.config.num_train_epochs * len(examples)))
        if self.config.max_steps is not None:  # it overrides the epochs, as in TRL
            wanted = self.config.max_steps * size
        order: list[int] = []
        shuffle = random.Random(self.config.seed)
        while len(order) < wanted:
            epoch = list(range(len(examples)))
            shuffle.shuffle(epoch)
            order += epoch
        order = order[:wanted]
        return [[examples[i] for i in order[s : s + size]] for s in range(0, len(order), size)]

    def train(self) -> dict[str, Any]:
        """Every policy's steps, the policies taking turns step by step; returns the last
        logged line (loss and gradient norm per policy)."""
        plans = {id(p): self._batches(p) for p in self.distinct if self.examples[id(p)]}
        steps = max((len(b) for b in plans.values()), default=0)
        output = Path(self.config.output_dir)
        output.mkdir(parents=True, exist_ok=True)
        line: dict[str, Any] = {}
        with open(output / "metrics.jsonl", "a", encoding="utf-8") as log:
            for step in range(steps):
                line = {"step": step + 1}
                for policy in self.distinct:
                    plan = plans.get(id(policy), [])
                    if step >= len(plan):
                        continue
                    group = self.groups[id(policy)]
                    factor = self.config.lr_factor(step, len(plan))
                    for settings in group.optimizer.param_groups:
                        settings["lr"] = self.config.learning_rate * factor
                    loss = self.accumulate(policy, plan[step])
                    finite = math.isfinite(loss)
                    norm = group.step(loss_finite=finite)
                    name = self.policy_name(policy)
                    line[f"{name}/loss"] = loss
                    line[f"{name}/learning_rate"] = self.config.learning_rate * factor
                    line[f"{name}/grad_norm"] = math.nan if norm is None else norm
                    line[f"{name}/skipped"] = group.skipped
                self.step = step + 1
                if self.step % self.config.logging_steps == 0 or self.step == steps:
                    self.history.append(line)
                    log.write(json.dumps(line) + "\n")
                    log.flush()
                if self.config.save_steps and self.step % self.config.save_steps == 0:
                    self.save(output / f"checkpoint-{self.step}")
        return line

    def save(self, path: str | Path | None = None) -> Path:
        """The team as the learners save it, one folder per distinct policy named by its
        agents (`collabzoo train --model FOLDER` and `collabzoo bench --team hf:FOLDER` load
        it), and this config."""
        path = Path(path or Path(self.config.output_dir) / "final")
        path.mkdir(parents=True, exist_ok=True)
        for policy in self.distinct:
            policy.save(path / self.policy_name(policy))
        (path / "supervised_config.json").write_text(json.dumps(asdict(self.config), indent=2))
        return path


__all__ = ["SupervisedConfig", "SupervisedTrainer"]

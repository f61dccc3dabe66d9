"""What every learner is configured with: the shared settings, the sampling they train under
and the optimizer settings of each update group. Apart from the loop so that a config can be
read, validated and documented without the machinery that runs it."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, ClassVar

from collabzoo.algos.learners.trained_agents import SAMPLING_FIELDS, check_agent_fields
from collabzoo.algos.policies.sampling import Sampling
from collabzoo.algos.runtime.update_groups import UpdateGroup

GENERATION_BACKENDS = ("hf", "hf-compiled", "vllm")
ENV_EXECUTORS = ("threads", "ray")


def _number(config: Any, name: str, optional: bool) -> float | None:
    """The field's value, refused unless it is a number (or None, when `optional`)."""
    value = getattr(config, name)
    if value is None and optional:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TypeError(f"{name} must be a number{' or None' if optional else ''}, got {value!r}")
    return value


def require_at_least(config: Any, low: float, *names: str, optional: bool = False) -> None:
    """Refuse any of the fields `names` under `low` (None too, unless `optional`)."""
    for name in names:
        value = _number(config, name, optional)
        if value is not None and not value >= low:  # NaN is refused too
            also = " or None" if optional else ""
            raise ValueError(f"{name} must be at least {low}{also}, got {value!r}")


def require_positive(config: Any, *names: str, optional: bool = False) -> None:
    """Refuse any of the fields `names` that is not above 0 (None too, unless `optional`)."""
    for name in names:
        value = _number(config, name, optional)
        if value is not None and not value > 0:
            also = " or None" if optional else ""
            raise ValueError(f"{name} must be positive{also}, got {value!r}")


def require_within(
    config: Any, name: str, low: float, high: float, *, low_open: bool, high_open: bool
) -> None:
    """Refuse the field `name` outside the interval from `low` to `high` (open ends as said)."""
    value = _number(config, name, False)
    above = value > low if low_open else value >= low
    below = value < high if high_open else value <= high
    if not (above and below and math.isfinite(value)):
        interval = f"{'(' if low_open else '['}{low:g}, {high:g}{')' if high_open else ']'}"
        raise ValueError(f"{name} must be in {interval}, got {value!r}")


@dataclass
class LearnerConfig:
    """Settings every learner shares (reference names and defaults where they exist)."""

    output_dir: str = "runs/collabzoo"
    """Where metrics.jsonl, TensorBoard logs and checkpoints go."""
    seed: int = 0
    """Seeds the episodes and torch's RNG, which training samples from (seeded when the learner
    is built; a resumed run restores its checkpoint's RNG state instead)."""
    max_updates: int = 100
    """Optimizer updates (rollout + learning rounds) to run."""
    rollout_buffer_size: int = 2
    """Episodes rolled out per update."""
    num_generations: int = 4
    """K: samples per agent at every branching node."""
    num_turns: int | None = None
    """Maximum turns per episode; None: until the environment ends the episode."""
    discount: float = 0.9
    """gamma."""
    early_termination_threshold: float | None = None
    """A node whose children's mean reward exceeds this is not expanded further."""
    advantage_normalization: bool = True
    """Scale advantages by their spread: each node's K siblings by their std (the tree
    learners), each agent's advantages z-scored over the update (the actor-critic learners)."""
    weight_decay: float = 0.0
    """AdamW's decoupled weight decay."""
    adam_beta1: float = 0.9
    """AdamW's beta1."""
    adam_beta2: float = 0.999
    """AdamW's beta2."""
    adam_epsilon: float = 1e-8
    """AdamW's epsilon."""
    max_grad_norm: float = 1.0
    """Each policy's (and critic's) own gradient norm is clipped to this."""
    max_new_tokens: int = 256
    """Tokens generated per completion at most."""
    temperature: float = 0.6
    """Sampling temperature; every loss scores under the same distribution."""
    top_p: float = 0.6
    """Nucleus sampling: keep the smallest set of tokens whose probability reaches this."""
    top_k: int | None = 50
    """Keep the k most likely tokens before top-p; None: no cut."""
    do_sample: bool = True
    """Must stay True for training: greedy decoding has no log-probability to follow."""
    chat_template_kwargs: dict[str, Any] | None = None
    """Options of the chat template for every policy (`{"enable_thinking": False}` for Qwen3);
    None: each policy's own."""
    reward_shift: float = 0.0
    """Added to every team reward before learning (the reference shifts max rewards to ~0)."""
    reward_scale: float = 1.0
    """Multiplies every (shifted) team reward."""
    reward_normalization: bool = False
    """Standardise rewards with running statistics."""
    reward_norm_eps: float = 1e-8
    """Added to the running std when `reward_normalization` divides by it."""
    logprob_batch_size: int = 16
    """Sequences per forward pass in the loss (bounds memory)."""
    device: str | None = "auto"
    """Where the models run: "auto" (CUDA when present; a model the user already put on a GPU
    stays there), "cpu", "cuda", "cuda:N", or None to leave every model where it is. See
    `placement`."""
    dtype: str = "auto"
    """Compute dtype: "auto" (the model's own), "bfloat16", "float16" or "float32"; trainable
    weights stay float32 masters."""
    agent_devices: dict[str, str] | None = None
    """Per-agent devices, e.g. {"aux": "cuda:0", "main": "cuda:1"}; over `device`."""
    generation_batch_size: int | None = None
    """Rows per `generate` call at most (a multi-turn tree grows as K^depth); None: every row
    of a depth in one call."""
    gradient_checkpointing: bool = False
    """Recompute each layer's activations in backward (non-reentrant, so shared-prompt scoring
    keeps working): less memory per scored token for about a third more compute."""
    generation_backend: str = "hf"
    """What samples the rollouts: "hf" (transformers' `generate` on the trained model),
    "hf-compiled" (the same with a static cache and the decode step under `torch.compile`:
    CUDA graphs on a GPU, where a small model's decoding is bound by kernel launches; see
    `LLMPolicy.compile_generation`) or "vllm" (vLLM engines in this process, synced after every
    step; see `rollout.vllm_engine`)."""
    vllm_gpu_memory_utilization: float = 0.3
    """vLLM: the share of the GPU's memory each engine may take (weights and KV cache)."""
    vllm_enable_sleep_mode: bool = False
    """vLLM: free each engine's GPU memory while training, where vLLM supports it (CUDA)."""
    vllm_kwargs: dict[str, Any] | None = None
    """vLLM: more `vllm.LLM` settings, over collabzoo's (e.g. {"enforce_eager": True})."""
    vllm_importance_sampling_cap: float | None = 2.0
    """C of the truncated importance weight min(pi_train / pi_vllm, C) on every token of a
    vLLM-sampled rollout (see `objectives`); None: no correction (the drift is still logged)."""
    rollout_shards: int = 1
    """Roll an update's episodes out in this many shards, each with torch's RNG seeded from
    (seed, update, shard): the sampling of a data-parallel run with this many ranks, which one
    process reproduces (see `data_parallel`). Under torchrun it is the number of ranks."""
    env_workers: int = 8
    """Threads stepping environment copies concurrently."""
    env_executor: str = "threads"
    """Where the envs step: "threads" (this process, `env_workers` threads) or "ray" (each
    child's step a task on a Ray cluster; see `rollout.ray_rollouts`)."""
    ray_address: str | None = None
    """The Ray cluster of env_executor="ray": None starts (or joins) a local one, "auto" the
    running cluster, "ray://host:port" a remote one."""
    logging_steps: int = 1
    """Write metrics.jsonl (and TensorBoard) every this many updates."""
    save_steps: int = 50
    """Checkpoint every this many updates (and at the end); 0: only at the end."""
    save_total_limit: int = 2
    """Checkpoints kept in output_dir; older ones are deleted."""
    eval_interval: int = 0
    """Evaluate every this many updates; 0: never during training."""
    eval_num_samples: int = 8
    """Episodes per evaluation."""
    eval_save_episodes: bool = False
    """Write each evaluation's episodes to output_dir/evaluations/update-NNNNNNNN.jsonl, one
    JSON object per episode (its seed, return, and every turn's observations, answers, reward
    and metrics): what the evaluation's numbers were made of, to read or to rescore."""
    tensorboard: bool = True
    """Write TensorBoard event files beside metrics.jsonl."""
    wandb: dict[str, Any] | None = None
    """Log to Weights & Biases too: keyword arguments of `wandb.init` (project, name, ...)."""
    progress: bool = True
    """Show a progress bar on stderr."""
    resume: bool = False
    """Continue from the latest checkpoint in output_dir."""
    extra: dict[str, Any] = field(default_factory=dict)
    """Settings of your own, kept with the config; collabzoo's learners read none of them."""
    trainable_agents: list[str] | None = None
    """The agents that train (a list or set of names); None: every agent. The others act with
    their current weights but stay out of the batch, the advantage statistics and the optimizer
    steps (see `trained_agents`)."""
    alternate_every: int | None = None
    """Train one trainable agent at a time, each for this many learner updates in turn (updates
    [0, k) the first, [k, 2k) the second, ...); None: all of them every update."""
    per_agent: dict[str, dict[str, Any]] | None = None
    """An agent's own values of the `agent_fields` (sampling, learning rate), e.g.
    {"alpha": {"temperature": 0.8}}; the CLI's `--set temperature@alpha=0.8`."""

    agent_fields: ClassVar[tuple[str, ...]] = SAMPLING_FIELDS
    """The fields `per_agent` may set (a config adds its policies' learning rate)."""

    def __post_init__(self) -> None:
        self.validate()

    def validate(self) -> None:
        """Refuse settings no learner can run, with what was expected. Every config checks its
        own fields here (calling its parent's first); the learner checks again when it starts,
        so fields changed after construction are checked too."""
        if not self.do_sample:
            raise ValueError(
                "do_sample=False samples greedily: a deterministic policy whose log-probability "
                "has no gradient to follow, so a learner cannot train on it; keep do_sample=True "
                "(lower the temperature for less random rollouts) and evaluate greedily with "
                "`collabzoo bench --greedy` if needed"
            )
        zero_or_more = ("seed", "max_updates", "save_steps", "eval_interval", "weight_decay")
        require_at_least(self, 0, *zero_or_more)  # max_updates=0: built only, to save or eval
        require_at_least(
            self,
            1,
            "rollout_buffer_size",
            "num_generations",
            "rollout_shards",
            "logprob_batch_size",
            "env_workers",
            "logging_steps",
            "save_total_limit",
            "eval_num_samples",
        )
        require_at_least(self, 1, "num_turns", "generation_batch_size", optional=True)
        require_positive(self, "adam_epsilon", "max_grad_norm", "reward_norm_eps")
        require_within(self, "discount", 0.0, 1.0, low_open=False, high_open=False)
        for beta in ("adam_beta1", "adam_beta2"):
            require_within(self, beta, 0.0, 1.0, low_open=False, high_open=True)
        require_within(
            self, "vllm_gpu_memory_utilization", 0.0, 1.0, low_open=True, high_open=False
        )
        require_positive(self, "vllm_importance_sampling_cap", optional=True)
        for name in ("max_new_tokens", "temperature", "top_p", "top_k"):
            _number(self, name, optional=name == "top_k")
        self.sampling()  # whose own checks refuse the values it cannot sample with
        if self.env_executor not in ENV_EXECUTORS:
            raise ValueError(
                f"env_executor must be one of {ENV_EXECUTORS}, got {self.env_executor!r}"
            )
        if self.generation_backend not in GENERATION_BACKENDS:
            raise ValueError(
                f"generation_backend must be one of {GENERATION_BACKENDS}, "
                f"got {self.generation_backend!r}"
            )
        check_agent_fields(self)

    def agent_value(self, agent: str | None, name: str) -> Any:
        """Field `name` as `agent` has it: its `per_agent` value, else the shared one."""
        own = (self.per_agent or {}).get(agent or "", {})
        return own[name] if name in own else getattr(self, name)

    def agent_sampling(self, agent: str) -> Sampling:
        """The sampling distribution of `agent`'s rollouts, which its losses score under."""
        values = [self.agent_value(agent, name) for name in SAMPLING_FIELDS]
        return Sampling(*values, self.do_sample)

    def sampling(self) -> Sampling:
        """The sampling distribution of rollouts, which every loss also scores under."""
        return Sampling(
            self.max_new_tokens, self.temperature, self.top_p, self.top_k, self.do_sample
        )


@dataclass(frozen=True)
class ActorCriticRule:
    """The part of an actor-critic update that sets one learner apart from the others; each
    actor-critic config gives its own from its fields (`rule()`), and the loop reads only this."""

    epochs: int = 1
    """Passes over each update's samples."""
    gae_lambda: float = 0.0
    """lambda of the advantage A_t = delta_t + gamma lambda A_{t+1}: 0 is TD(0)."""
    ratio: bool = False
    """Weight the actor term by the ratio pi / pi_old to the rollout policy (PPO)."""
    clip_range: float | None = None
    """eps of the ratio's clipping when `ratio`; None: no clipping."""
    clip_every_value: bool = False
    """Clip the value loss of every critic, not only of a value head on the actor."""
    team_critic: str | None = None
    """None: a critic per agent over its own history; 'v' or 'q': one critic of the team over
    `env.state()`, valuing V(s) or Q(s, a)."""

    @property
    def centralized(self) -> bool:
        return self.team_critic is not None


def update_group(name: str, parameters: Any, lr: float, args: LearnerConfig) -> UpdateGroup:
    """An `UpdateGroup` with the config's AdamW settings and gradient clip."""
    return UpdateGroup(
        name,
        parameters,
        lr=lr,
        betas=(args.adam_beta1, args.adam_beta2),
        eps=args.adam_epsilon,
        weight_decay=args.weight_decay,
        max_grad_norm=args.max_grad_norm,
    )


__all__ = [
    "ENV_EXECUTORS",
    "GENERATION_BACKENDS",
    "ActorCriticRule",
    "LearnerConfig",
    "require_at_least",
    "require_positive",
    "require_within",
    "update_group",
]

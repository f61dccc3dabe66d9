"""MAGRPO training throughput and memory: collabzoo against CoMLRL 1.4.3, side by side.

Both libraries train the same two-agent team on the same data:

- model: a randomly initialised Qwen2-architecture model (hidden 256, 2 layers, intermediate 256,
  4 heads, 2 KV heads) with transformers' byte-level `ByT5Tokenizer()`, built once by
  `collabzoo.algos.policies.model_loading.tiny_causal_lm(seed=0, ...)` and deep-copied for
  each agent, so both libraries start from identical weights;
- 8 prompts, 1 turn, 4 generations per agent and prompt, 128 new tokens, the same sampling
  (temperature, top_p, top_k) and learning rate, and the same shared team reward (character
  overlap of the two answers);
- collabzoo: `MAGRPOTrainer` on a small PettingZoo ParallelEnv defined here, whose observations
  are exactly the texts the CoMLRL formatters produce; `rollout_buffer_size=8`, so every
  `train_step()` rolls out all 8 prompts at once and takes one optimizer step. One warm-up step,
  then `--steps` timed steps.
- CoMLRL: its `MAGRPOTrainer` driven the way its examples drive it (`rollout_buffer_size=2`,
  one prompt per rollout, an update every 2 prompts). One warm-up epoch on 2 other prompts,
  then `--epochs` timed one-epoch `.train()` calls on the 8 prompts.

Throughput is joint samples per second: prompts x num_generations joint actions per pass over
the prompts, over the wall time of the timed calls (rollout, reward and update included).

Memory of a 2-agent team on a bigger tiny model (hidden 512, 4 layers, intermediate 1024): two
full copies against one base model with two LoRA adapters (`lora_team`, rank 8, all linear
layers), as bytes of parameters, of trainable parameters, of optimizer state and of the three
with the gradients ("train state": what training keeps between steps), and as the process's
peak RSS after one collabzoo `train_step` (both processes import peft first, so their
"above imports" baselines match).

Every measurement runs in its own subprocess, so each peak RSS (`ru_maxrss`) belongs to one
library and one configuration only. The throughput runs alternate between the libraries for
`--rounds` rounds (so a busy spell on a shared machine hits both alike); the best round of each
is reported, with every round listed. Both libraries run with the same number of torch threads
(`--threads`, default 1: on a 2-core machine that anything else is using, torch's default pool
of 2 spinning OpenMP threads can be slowed down a hundredfold).

Differences that remain: CoMLRL's tokenizer call appends ByT5's `</s>` to each prompt (one
token) while collabzoo encodes the observation without special tokens, and CoMLRL takes 4
optimizer steps per agent per epoch (a rollout buffer of 2 prompts) where collabzoo takes one
per `train_step` (8 prompts). Per-sample compute is otherwise the same.

With `--model NAME` (a model folder, a hub id, or a known short name such as
`smollm2-135m-instruct`, resolved by `collabzoo.algos.policies.pretrained.resolve_model`, pulled
on first use) both libraries train two full copies of that pretrained model instead, loaded with
`collabzoo.algos.load_causal_lm`, with the same prompts, K, new-token budget, sampling and
learning rate, rounds alternating as above. `--quick` then shrinks the work to 2 prompts, K=2 and
32 new tokens (without `--quick`: 8 prompts, K=4, 128 tokens, as on the tiny model). Both see each
prompt inside the model's chat template as one user turn: collabzoo's `LLMPolicy` encodes an
observation that way, and CoMLRL's formatters return the templated text, which its tokenizer call
turns into the same token ids (SmolLM2's tokenizer adds no special tokens of its own). The memory
runs use the same model: two full copies against one base with two LoRA adapters.

Known pitfall: CoMLRL 1.4.3's MAGRPO takes the first pad token in a prompt as the prompt's end,
and an answer's first pad token as the answer's end. SmolLM2's pad token is `<|im_end|>`, which
its chat template writes into every prompt (after the system turn), so CoMLRL silently trains on
empty completions. With `--model`, a pad token that occurs in the templated prompts is replaced by
`<|endoftext|>` for both libraries (collabzoo does not depend on it; one tokenizer keeps the two
matched), and the models' generation config pads finished rows with it, so CoMLRL's answers end
where the model stopped. Before any timing, one untimed warm-up per library on the same prompts
checks that both generate non-empty completions of comparable length (mean tokens within a
factor of `LENGTH_RATIO_LIMIT`) and stops with a message if not; the table reports each
library's mean completion length (tokens of the answers the reward scored, re-encoded without
special tokens).

LoRA: CoMLRL 1.4.3 has no LoRA or peft option (its trainers and configs take full models only,
and none of its modules mentions LoRA or peft), so throughput compares full models, and only
collabzoo's LoRA memory is reported.

CoMLRL is optional: install it without touching torch,

    pip install --no-deps comlrl==1.4.3 && pip install wandb

and it runs with WANDB_MODE=disabled.

    python benchmarks/magrpo_vs_comlrl.py [--quick] [--profile] [--json [results.json]]
    python benchmarks/magrpo_vs_comlrl.py --model smollm2-135m-instruct [--quick] [--skip-memory]

`--json` alone writes benchmarks/results/magrpo_vs_comlrl.json, from which `magrpo_table` and
`lora_memory_table` build the Performance page's tables.
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import platform
import resource
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any, ClassVar

sys.path.insert(0, str(Path(__file__).resolve().parent))
from results_table import markdown_table, results_path, thousands, times, write_results

PROMPTS = [
    "Write a function that returns the sum of two integers.",
    "Describe a red house with two windows and a door.",
    "Summarise: the cat sat on the mat and then fell asleep.",
    "List three prime numbers larger than ten.",
    "Explain why the sky looks blue during the day.",
    "Write a haiku about autumn leaves in the wind.",
    "Give a Python one-liner that reverses a string.",
    "Name two rivers in Europe and one in Africa.",
]
WARMUP_PROMPTS = [  # CoMLRL's warm-up epoch (one full rollout buffer), never timed
    "Count from one to five in words.",
    "What colour is a ripe banana?",
]
ROLES = {
    "a": "You are agent A. Answer briefly.\nTask: {prompt}\nAnswer A:",
    "b": "You are agent B. Add what A misses.\nTask: {prompt}\nAnswer B:",
}
SMALL = dict(hidden_size=256, num_layers=2, num_heads=4, num_kv_heads=2, intermediate_size=256)
LARGE = dict(hidden_size=512, num_layers=4, num_heads=4, num_kv_heads=2, intermediate_size=1024)
COMMON = {  # identical for both libraries
    "num_generations": 4,
    "max_new_tokens": 128,
    "temperature": 0.6,
    "top_p": 0.6,
    "top_k": 50,
    "agent_learning_rate": 5e-6,
}
REFERENCE_SAMPLES_PER_S = 4.0  # CoMLRL 1.4.3 on this project's 2-core machines (ecosystem notes)
TARGET_RATIO = 5.0
MARKER = "RESULT "
SAFE_PAD_TOKEN = "<|endoftext|>"
"""The pad token when the tokenizer's own occurs in the templated prompts (see the docstring)."""
LENGTH_RATIO_LIMIT = 2.0
"""The check before timing: the libraries' mean completion lengths differ by this factor at most."""
EMPTY_SHARE_LIMIT = 0.5
"""The check before timing: at most this share of a library's completions may be empty."""


@dataclass(frozen=True)
class Workload:
    """What both libraries run: the first `prompts` of PROMPTS, `num_generations` answers per
    agent and prompt, at most `max_new_tokens` each."""

    prompts: int = len(PROMPTS)
    num_generations: int = COMMON["num_generations"]
    max_new_tokens: int = COMMON["max_new_tokens"]

    def settings(self) -> dict[str, Any]:
        """COMMON with this workload's K and token budget: both libraries' shared config."""
        return {
            **COMMON,
            "num_generations": self.num_generations,
            "max_new_tokens": self.max_new_tokens,
        }


QUICK_MODEL_WORKLOAD = Workload(prompts=2, num_generations=2, max_new_tokens=32)
"""`--quick --model`: a real model on a busy 2-core machine, a few minutes per library."""


# ----- shared pieces --------------------------------------------------------------------------
def team_reward(answer_a: str, answer_b: str) -> float:
    """Character overlap of the two answers (Jaccard of their character sets), in [0, 1]."""
    union = set(answer_a) | set(answer_b)
    return len(set(answer_a) & set(answer_b)) / len(union) if union else 0.0


SCORED_ANSWERS: list[str] = []
"""Every answer `scored_reward` has seen in this process (each child measures one library)."""


def scored_reward(answer_a: str, answer_b: str) -> float:
    """`team_reward`, keeping both answers for the completion-length figures."""
    SCORED_ANSWERS.extend((answer_a, answer_b))
    return team_reward(answer_a, answer_b)


def answer_lengths(tokenizer: Any) -> dict[str, float]:
    """Mean tokens and share of empty ones among the answers scored since the last call (their
    text re-encoded without special tokens, the same count for both libraries); clears them."""
    answers = list(SCORED_ANSWERS)
    SCORED_ANSWERS.clear()
    counts = [len(tokenizer(a, add_special_tokens=False)["input_ids"]) for a in answers]
    return {
        "completions": len(counts),
        "mean_completion_tokens": sum(counts) / len(counts) if counts else 0.0,
        "empty_share": sum(c == 0 for c in counts) / len(counts) if counts else 1.0,
    }


def format_prompt(agent: str, prompt: str) -> str:
    return ROLES[agent].format(prompt=prompt)


def chat_prompt(tokenizer: Any, text: str) -> str:
    """`text` as the model reads it: inside the tokenizer's chat template as one user turn, the
    way collabzoo's `LLMPolicy` encodes an observation, or unchanged without a template."""
    if not getattr(tokenizer, "chat_template", None):
        return text
    return tokenizer.apply_chat_template(
        [{"role": "user", "content": text}], add_generation_prompt=True, tokenize=False
    )


def peak_rss_mb() -> float:
    """High-water mark of this process's resident set (Linux reports KiB)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


def tensor_bytes(tensors) -> int:
    unique = {id(t): t for t in tensors}
    return sum(t.numel() * t.element_size() for t in unique.values())


def optimizer_state_bytes(optimizers) -> int:
    import torch

    return tensor_bytes(
        v
        for opt in optimizers
        for state in opt.state.values()
        for v in state.values()
        if isinstance(v, torch.Tensor)
    )


def pad_outside_prompts(tokenizer: Any, models: Sequence[Any]) -> None:
    """Make the pad token one that no templated prompt contains (CoMLRL 1.4.3 ends a prompt at
    its first pad token: SmolLM2 pads with `<|im_end|>`, which its chat template writes into
    every prompt), and let `generate` pad finished rows with it (CoMLRL ends an answer at its
    first pad token). Changes nothing when the pad token is already outside the prompts."""
    texts = [chat_prompt(tokenizer, format_prompt(a, p)) for a in ROLES for p in PROMPTS]
    used = {i for text in texts for i in tokenizer(text)["input_ids"]}
    if tokenizer.pad_token_id is not None and tokenizer.pad_token_id not in used:
        return
    if SAFE_PAD_TOKEN not in tokenizer.get_vocab():
        raise ValueError(
            f"the pad token {tokenizer.pad_token!r} occurs in the templated prompts, where CoMLRL "
            f"1.4.3 would take it as the prompt's end, and the vocabulary has no {SAFE_PAD_TOKEN!r}"
            " to pad with instead"
        )
    tokenizer.pad_token = SAFE_PAD_TOKEN
    if tokenizer.pad_token_id in used:
        raise ValueError(f"{SAFE_PAD_TOKEN!r} occurs in the templated prompts too")
    for model in models:
        model.config.pad_token_id = tokenizer.pad_token_id
        if getattr(model, "generation_config", None) is not None:
            model.generation_config.pad_token_id = tokenizer.pad_token_id


def base_model(spec: dict[str, int], model: str | None = None) -> tuple[Any, Any]:
    """The seeded tiny model of shape `spec`, or with `model` (a folder or hub id) that
    pretrained model with its pad token outside the prompts; and the tokenizer."""
    if model is None:
        from collabzoo.algos.policies.model_loading import tiny_causal_lm

        return tiny_causal_lm(0, **spec)
    from collabzoo.algos import load_causal_lm

    loaded, tokenizer = load_causal_lm(model)
    pad_outside_prompts(tokenizer, [loaded])
    return loaded, tokenizer


def team_models(spec: dict[str, int], model: str | None = None) -> tuple[Any, Any, Any]:
    """Two identical copies of one model (`base_model`), and its tokenizer."""
    import copy

    first, tokenizer = base_model(spec, model)
    return first, copy.deepcopy(first), tokenizer


def require_answers(library: str, lengths: dict[str, float]) -> None:
    """Stop before timing when a library's warm-up answers are (mostly) empty."""
    if lengths["completions"] == 0 or lengths["empty_share"] > EMPTY_SHARE_LIMIT:
        raise RuntimeError(
            f"{library} generated empty completions ({lengths['empty_share']:.0%} of "
            f"{lengths['completions']:.0f} empty) on the warm-up: timing it would measure "
            "nothing. Check the tokenizer's pad token against the prompts (see the docstring)."
        )


def check_comparable(checks: dict[str, dict[str, Any]]) -> str | None:
    """Why the libraries' warm-up completions cannot be compared (None when they can): one
    failed or generated empty answers, or their mean lengths differ by more than
    LENGTH_RATIO_LIMIT."""
    for library, result in checks.items():
        if "error" in result:
            return f"{library} failed its warm-up check: {result['error']}"
    means = {k: r["warmup_lengths"]["mean_completion_tokens"] for k, r in checks.items()}
    if min(means.values()) <= 0:
        return f"empty completions: mean tokens {means}"
    if max(means.values()) / min(means.values()) > LENGTH_RATIO_LIMIT:
        return (
            f"completion lengths differ by more than {LENGTH_RATIO_LIMIT:.0f}x "
            f"(mean tokens {means}): the libraries do not generate the same work"
        )
    return None


# ----- collabzoo ------------------------------------------------------------------------------
def prompt_pair_env_class(prompts: list[str]):
    """A one-turn ParallelEnv: episode `seed` asks prompt `seed % len(prompts)` of both agents
    (in the CoMLRL formatters' words) and pays both the shared `team_reward` of their answers."""
    from gymnasium import spaces
    from pettingzoo import ParallelEnv

    charset = "".join(chr(c) for c in range(32, 127)) + "\n\t"

    class PromptPairEnv(ParallelEnv):
        metadata: ClassVar[dict[str, Any]] = {"name": "prompt_pair_v0"}
        possible_agents: ClassVar[list[str]] = ["a", "b"]

        def __init__(self) -> None:
            self.agents: list[str] = []
            self.prompt = ""
            self._space = spaces.Text(max_length=4096, min_length=0, charset=charset)

        def observation_space(self, agent):
            return self._space

        def action_space(self, agent):
            return self._space

        def reset(self, seed=None, options=None):
            self.agents = list(self.possible_agents)
            self.prompt = prompts[(seed or 0) % len(prompts)]
            observations = {a: format_prompt(a, self.prompt) for a in self.agents}
            return observations, {a: {} for a in self.agents}

        def step(self, actions):
            reward = scored_reward(actions.get("a", ""), actions.get("b", ""))
            agents, self.agents = self.agents, []
            return (
                {a: "" for a in agents},
                dict.fromkeys(agents, reward),
                dict.fromkeys(agents, True),
                dict.fromkeys(agents, False),
                {a: {"metrics": {"overlap": reward}} for a in agents},
            )

    return PromptPairEnv


def collabzoo_trainer(
    spec: dict[str, int],
    lora: bool,
    workload: Workload,
    workdir: str,
    model: str | None = None,
):
    from collabzoo.algos.learners.magrpo import MAGRPOConfig, MAGRPOTrainer
    from collabzoo.algos.policies.llm import LLMPolicy
    from collabzoo.algos.policies.model_loading import lora_team

    if lora:
        base, tokenizer = base_model(spec, model)
        policies = lora_team(base, tokenizer, ["a", "b"])
    else:
        model_a, model_b, tokenizer = team_models(spec, model)
        policies = {"a": LLMPolicy(model_a, tokenizer), "b": LLMPolicy(model_b, tokenizer)}
    config = MAGRPOConfig(
        output_dir=workdir,
        num_turns=1,
        rollout_buffer_size=workload.prompts,
        tensorboard=False,
        progress=False,
        save_steps=0,
        **workload.settings(),
    )
    env = prompt_pair_env_class(PROMPTS[: workload.prompts])
    return MAGRPOTrainer(env, policies, config), policies


def weight_checksum(models) -> float:
    """A fingerprint of the starting weights (equal for both libraries by construction)."""
    return float(sum(p.detach().double().sum() for m in models for p in m.parameters()))


def workload_of(params: dict[str, Any]) -> Workload:
    """The workload the parent passed to a child."""
    return Workload(**params["workload"])


def child_collabzoo(params: dict[str, Any]) -> dict[str, Any]:
    """`steps` timed train_steps after one warm-up step; with steps=0 only the one step."""
    import tempfile

    import pettingzoo  # noqa: F401  (every library this measurement uses, before the baseline)
    import torch
    import transformers.models.qwen2.modeling_qwen2  # noqa: F401

    import collabzoo.algos.learners.magrpo  # noqa: F401

    if params.get("large"):  # both memory runs import peft (about 150 MB), so baselines match
        import peft  # noqa: F401
    rss_imports = peak_rss_mb()
    spec = LARGE if params.get("large") else SMALL
    workload = workload_of(params)
    model = params.get("model")
    with tempfile.TemporaryDirectory() as workdir:
        trainer, policies = collabzoo_trainer(
            spec, params.get("lora", False), workload, workdir, model
        )
        tokenizer = next(iter(policies.values())).tokenizer
        models = list({id(p.model): p.model for p in policies.values()}.values())
        param_bytes = tensor_bytes(p for m in models for p in m.parameters())
        trainable = tensor_bytes(p for pol in trainer.distinct for p in pol.trainable_parameters())
        checksum = weight_checksum(models)
        torch.manual_seed(0)
        rss_built = peak_rss_mb()
        warm = trainer.train_step()  # warm-up (first-call costs), never timed
        warm_lengths = answer_lengths(tokenizer)
        if model is not None:
            require_answers("collabzoo", warm_lengths)
        steps = params["steps"]
        profiler = None
        if params.get("profile"):
            import cProfile

            profiler = cProfile.Profile()
            profiler.enable()
        started = time.perf_counter()
        per_step = [trainer.train_step() for _ in range(steps)]
        elapsed = time.perf_counter() - started
        if profiler is not None:
            import pstats

            profiler.disable()
            for order, count in (("cumulative", 30), ("tottime", 20)):
                pstats.Stats(profiler, stream=sys.stderr).sort_stats(order).print_stats(count)
        joint = steps * workload.prompts * workload.num_generations
        result = {
            "library": "collabzoo",
            "lora": bool(params.get("lora")),
            "model": model or spec,
            "max_new_tokens": workload.max_new_tokens,
            "torch_threads": torch.get_num_threads(),
            "initial_weight_checksum": checksum,
            "warmup_seconds": warm["update_seconds"],
            "warmup_lengths": warm_lengths,
            "generate_calls_per_step": trainer.rollout.generate_calls / (steps + 1),
            "param_bytes": param_bytes,
            "trainable_bytes": trainable,
            "optimizer_state_bytes": optimizer_state_bytes(
                [g.optimizer for g in trainer.groups.values()]
            ),
            # weights + gradients + optimizer state: what training keeps between steps
            "train_state_bytes": param_bytes
            + trainable
            + optimizer_state_bytes([g.optimizer for g in trainer.groups.values()]),
            "rss_after_imports_mb": rss_imports,
            "rss_after_build_mb": rss_built,
            "peak_rss_mb": peak_rss_mb(),
        }
        if steps:
            result.update(
                timed_steps=steps,
                joint_samples=joint,
                seconds=elapsed,
                joint_samples_per_s=joint / elapsed,
                step_joint_samples_per_s=[m["joint_samples_per_s"] for m in per_step],
                mean_reward=sum(m["mean_reward"] for m in per_step) / steps,
                lengths=answer_lengths(tokenizer),
            )
        return result


# ----- CoMLRL ---------------------------------------------------------------------------------
def comlrl_reward(completions_a, completions_b, batch_items=None, prompts=None) -> list[float]:
    return [scored_reward(a, b) for a, b in zip(completions_a, completions_b, strict=True)]


def comlrl_format(tokenizer: Any, agent: str, item: dict[str, Any]) -> str:
    """Agent `agent`'s prompt for a dataset item, as collabzoo's policy encodes it."""
    return chat_prompt(tokenizer, format_prompt(agent, item["prompt"]))


def comlrl_formatters(tokenizer: Any) -> list[Callable[[dict[str, Any]], str]]:
    """CoMLRL's formatters of agents a and b."""
    return [functools.partial(comlrl_format, tokenizer, agent) for agent in ROLES]


def child_comlrl(params: dict[str, Any]) -> dict[str, Any]:
    """One warm-up epoch on WARMUP_PROMPTS (or `warmup_prompts`), then `epochs` timed epochs
    (none with 0)."""
    os.environ["WANDB_MODE"] = "disabled"
    import torch
    import transformers.models.qwen2.modeling_qwen2  # noqa: F401

    try:
        import datasets
        from comlrl.trainers.reinforce import MAGRPOConfig, MAGRPOTrainer
    except ImportError as error:
        return {"library": "comlrl", "error": f"CoMLRL not importable: {error}"}
    rss_imports = peak_rss_mb()
    import importlib.metadata as metadata

    workload = workload_of(params)
    model = params.get("model")
    warmup_prompts = params.get("warmup_prompts", WARMUP_PROMPTS)
    model_a, model_b, tokenizer = team_models(SMALL, model)
    param_bytes = tensor_bytes(p for m in (model_a, model_b) for p in m.parameters())
    checksum = weight_checksum([model_a, model_b])
    config = MAGRPOConfig(
        num_train_epochs=1,
        num_turns=1,
        rollout_buffer_size=2,
        eval_interval=10**9,
        logging_steps=10**9,
        early_termination_threshold=None,
        **workload.settings(),
    )
    trainer = MAGRPOTrainer(
        agents=[model_a, model_b],
        tokenizer=tokenizer,
        train_dataset=datasets.Dataset.from_list([{"prompt": p} for p in warmup_prompts]),
        reward_func=comlrl_reward,
        formatters=comlrl_formatters(tokenizer),
        args=config,
    )
    torch.manual_seed(0)
    rss_built = peak_rss_mb()
    started = time.perf_counter()
    trainer.train()  # warm-up epoch, never timed
    warmup = time.perf_counter() - started
    warm_lengths = answer_lengths(tokenizer)
    if model is not None:
        require_answers("CoMLRL", warm_lengths)
    result: dict[str, Any] = {
        "library": "comlrl",
        "version": metadata.version("comlrl"),
        "model": model or SMALL,
        "torch_threads": torch.get_num_threads(),
        "initial_weight_checksum": checksum,
        "warmup_seconds": warmup,
        "warmup_lengths": warm_lengths,
        "param_bytes": param_bytes,
        "rss_after_imports_mb": rss_imports,
        "rss_after_build_mb": rss_built,
    }
    epochs = params["epochs"]
    if epochs:
        prompts = PROMPTS[: workload.prompts]
        trainer.train_dataset = datasets.Dataset.from_list([{"prompt": p} for p in prompts])
        started = time.perf_counter()
        for _ in range(epochs):
            trainer.train()
        elapsed = time.perf_counter() - started
        joint = epochs * workload.prompts * workload.num_generations
        result.update(
            timed_epochs=epochs,
            joint_samples=joint,
            seconds=elapsed,
            joint_samples_per_s=joint / elapsed,
            lengths=answer_lengths(tokenizer),
        )
    result.update(
        optimizer_state_bytes=optimizer_state_bytes(trainer.optimizers),
        peak_rss_mb=peak_rss_mb(),
    )
    return result


CHILDREN = {"collabzoo": child_collabzoo, "comlrl": child_comlrl}


# ----- the parent -----------------------------------------------------------------------------
def run_child(
    kind: str,
    params: dict[str, Any],
    threads: int,
    timeout: float,
    show_stderr: bool = False,
    script: str = __file__,
) -> dict[str, Any]:
    """Run `script --child KIND` in a fresh process and return its RESULT line."""
    env = {**os.environ, "WANDB_MODE": "disabled", "HF_HUB_OFFLINE": "1"}
    if threads:
        env.update(OMP_NUM_THREADS=str(threads), MKL_NUM_THREADS=str(threads))
    command = [sys.executable, script, "--child", kind, "--params", json.dumps(params)]
    started = time.perf_counter()
    try:
        done = subprocess.run(
            command, capture_output=True, text=True, env=env, check=False, timeout=timeout
        )
    except subprocess.TimeoutExpired:
        return {"library": kind, "error": f"timed out after {timeout:.0f}s"}
    if show_stderr:
        sys.stderr.write(done.stderr)
    lines = [ln for ln in done.stdout.splitlines() if ln.startswith(MARKER)]
    if done.returncode != 0 or not lines:
        tail = "\n".join(done.stderr.strip().splitlines()[-15:])
        return {"library": kind, "error": f"exit {done.returncode}:\n{tail}"}
    result = json.loads(lines[-1][len(MARKER) :])
    result["process_seconds"] = time.perf_counter() - started
    return result


def run_as_child(children: dict[str, Any], kind: str, params: str) -> None:
    """The child side of `run_child`: one measurement with the parent's thread count, printed
    as a RESULT line."""
    if int(os.environ.get("OMP_NUM_THREADS", "0") or 0):
        import torch

        torch.set_num_threads(int(os.environ["OMP_NUM_THREADS"]))
    result = children[kind](json.loads(params))
    print(MARKER + json.dumps(result), flush=True)


def summarise(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """Best-of-rounds throughput (the least disturbed round) and the highest peak RSS."""
    good = [r for r in runs if "error" not in r]
    if not good:
        return {"error": runs[-1]["error"], "rounds": runs}
    rates = [r["joint_samples_per_s"] for r in good]
    best = max(good, key=lambda r: r["joint_samples_per_s"])
    return {
        **best,
        "round_joint_samples_per_s": rates,
        "median_joint_samples_per_s": sorted(rates)[len(rates) // 2],
        "peak_rss_mb": max(r["peak_rss_mb"] for r in good),
        "failed_rounds": len(runs) - len(good),
    }


def first_line(result: dict[str, Any]) -> str:
    return result["error"].splitlines()[0] if "error" in result else ""


def mean_tokens(result: dict[str, Any]) -> str:
    """A result's mean completion length in tokens (timed answers, else the warm-up's)."""
    lengths = result.get("lengths") or result.get("warmup_lengths")
    return f"{lengths['mean_completion_tokens']:.1f}" if lengths else "n/a"


def preflight(
    child: Callable[[str, dict[str, Any]], dict[str, Any]],
    checks: dict[str, dict[str, Any]],
) -> dict[str, dict[str, Any]]:
    """Run each library's untimed warm-up (`checks`: its child parameters), print the mean
    completion length of each, and exit with a message unless the two are comparable
    (`check_comparable`)."""
    print("checking completions before timing (one untimed warm-up per library) ...", flush=True)
    results = {library: child(library, params) for library, params in checks.items()}
    for library, result in results.items():
        if "error" in result:
            continue
        lengths = result["warmup_lengths"]
        print(
            f"  {library:<10} mean completion {lengths['mean_completion_tokens']:.1f} tokens "
            f"over {lengths['completions']} answers, {lengths['empty_share']:.0%} empty"
        )
    problem = check_comparable(results)
    if problem is not None:
        raise SystemExit(f"completion check failed, nothing timed: {problem}")
    return results


def report(results: dict[str, Any]) -> None:
    ours, theirs = results["collabzoo"], results["comlrl"]
    settings = results["settings"]
    print(
        f"\nMAGRPO training throughput: {settings['model_name']}, 2 agents, "
        f"{settings['prompts']} prompts, K={settings['num_generations']}, "
        f"{settings['max_new_tokens']} new tokens, 1 turn, torch threads: {settings['threads']}"
    )
    print(
        f"{'library':<26}{'joint samples/s':>16}{'rounds':>22}{'peak RSS MB':>13}"
        f"{'answer tokens':>15}"
    )
    for name, r in (("collabzoo MAGRPOTrainer", ours), ("CoMLRL 1.4.3 MAGRPOTrainer", theirs)):
        if "error" in r:
            print(f"{name:<26}{'n/a':>16}   {first_line(r)}")
            continue
        rounds = ", ".join(f"{x:.2f}" for x in r["round_joint_samples_per_s"])
        print(
            f"{name:<26}{r['joint_samples_per_s']:>16.2f}{rounds:>22}{r['peak_rss_mb']:>13,.0f}"
            f"{mean_tokens(r):>15}"
        )
    if results.get("ratio") is not None:
        verdict = "meets" if results["ratio"] >= TARGET_RATIO else "misses"
        print(
            f"collabzoo / CoMLRL: {results['ratio']:.2f}x (best rounds; medians "
            f"{results['median_ratio']:.2f}x); {verdict} the {TARGET_RATIO:.0f}x target"
        )
    print(
        f"(CoMLRL's reference figure on these machines: about {REFERENCE_SAMPLES_PER_S:.0f}/s "
        f"on the tiny model; load average at start: "
        f"{results['machine']['load_average_at_start'][0]:.2f})"
    )

    memory_model = settings["memory_model_name"]
    print(f"\nMemory of a 2-agent team ({memory_model}), after one collabzoo train_step")
    print(
        f"{'team':<24}{'params MB':>10}{'trainable MB':>14}{'optimizer MB':>14}"
        f"{'train state MB':>16}{'peak RSS MB':>13}{'above imports':>15}"
    )
    for name, key in (("two full copies", "full_copies"), ("base + 2 LoRA adapters", "lora")):
        r = results[key]
        if "error" in r:
            print(f"{name:<24}   {first_line(r)}")
            continue
        print(
            f"{name:<24}{r['param_bytes'] / 2**20:>10,.1f}{r['trainable_bytes'] / 2**20:>14,.1f}"
            f"{r['optimizer_state_bytes'] / 2**20:>14,.1f}"
            f"{r['train_state_bytes'] / 2**20:>16,.1f}{r['peak_rss_mb']:>13,.0f}"
            f"{r['peak_rss_mb'] - r['rss_after_imports_mb']:>15,.0f}"
        )
    if settings["model"] is not None:
        print("(CoMLRL 1.4.3 has no LoRA option: only collabzoo's LoRA team is measured)")


def add_model_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--model",
        help="train this pretrained model in both libraries instead of the tiny random one: a "
        "model folder, a hub id, or a known short name such as smollm2-135m-instruct (pulled "
        "on first use); with --quick, 2 prompts, K=2 and 32 new tokens",
    )


def resolved_model(name: str | None) -> str | None:
    """`--model` as a loadable folder or hub id (a known short name pulled now if missing)."""
    if name is None:
        return None
    from collabzoo.algos.policies.pretrained import resolve_model

    return resolve_model(name)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="one round, fewer repeats")
    parser.add_argument("--rounds", type=int, help="alternating rounds per library (default 3)")
    parser.add_argument("--steps", type=int, help="timed collabzoo train_steps per round (4)")
    parser.add_argument("--epochs", type=int, help="timed CoMLRL epochs per round (2)")
    add_model_option(parser)
    parser.add_argument(
        "--threads",
        type=int,
        default=1,
        help="torch threads in every measurement (default 1; 0: torch's default, one per "
        "core). A 2-thread OpenMP pool that shares its 2 cores with any other busy process "
        "runs up to 100x slower, so 0 is only meaningful on an otherwise idle machine",
    )
    parser.add_argument("--timeout", type=float, default=300.0, help="seconds per subprocess")
    parser.add_argument("--profile", action="store_true", help="cProfile collabzoo's steps")
    parser.add_argument("--skip-memory", action="store_true")
    parser.add_argument(
        "--json",
        type=Path,
        nargs="?",
        const=results_path("magrpo_vs_comlrl"),
        help="also write the results here (alone: benchmarks/results/magrpo_vs_comlrl.json)",
    )
    parser.add_argument("--child", choices=sorted(CHILDREN), help=argparse.SUPPRESS)
    parser.add_argument("--params", default="{}", help=argparse.SUPPRESS)
    args = parser.parse_args()

    if args.child:
        run_as_child(CHILDREN, args.child, args.params)
        return

    rounds = args.rounds or (1 if args.quick else 3)
    steps = args.steps or (2 if args.quick else 4)
    epochs = args.epochs or (1 if args.quick else 2)
    model = resolved_model(args.model)
    workload = QUICK_MODEL_WORKLOAD if model and args.quick else Workload()
    shape = {"workload": asdict(workload), "model": model}

    def child(kind: str, params: dict[str, Any]) -> dict[str, Any]:
        return run_child(kind, {**shape, **params}, args.threads, args.timeout)

    started = time.perf_counter()
    results: dict[str, Any] = {
        "machine": {
            "platform": platform.platform(),
            "processor": platform.processor() or platform.machine(),
            "cpus": os.cpu_count(),
            "load_average_at_start": os.getloadavg(),
            "python": platform.python_version(),
        },
        "settings": {
            **workload.settings(),
            "prompts": workload.prompts,
            "num_turns": 1,
            "model": model,
            "model_name": args.model or "tiny random Qwen2 (hidden 256, 2 layers)",
            "memory_model_name": args.model
            or "hidden 512, 4 layers, intermediate 1024, random weights",
            "threads": args.threads or "torch default",
            "rounds": rounds,
            "collabzoo_steps_per_round": steps,
            "comlrl_epochs_per_round": epochs,
        },
    }
    if model is not None:
        same_prompts = PROMPTS[: workload.prompts]  # collabzoo's warm-up prompts
        checks = {
            "collabzoo": {"steps": 0},
            "comlrl": {"epochs": 0, "warmup_prompts": same_prompts},
        }
        results["completion_check"] = preflight(child, checks)
    runs: dict[str, list[dict[str, Any]]] = {"collabzoo": [], "comlrl": []}
    for index in range(rounds):  # alternate, so a busy spell hits both libraries alike
        print(f"round {index + 1}/{rounds}: collabzoo ({steps} train_steps) ...", flush=True)
        runs["collabzoo"].append(
            run_child(
                "collabzoo",
                {**shape, "steps": steps, "profile": args.profile},
                args.threads,
                args.timeout,
                show_stderr=args.profile,
            )
        )
        print(f"round {index + 1}/{rounds}: CoMLRL ({epochs} epochs) ...", flush=True)
        runs["comlrl"].append(child("comlrl", {"epochs": epochs}))
        if "not importable" in runs["comlrl"][-1].get("error", ""):
            break
    ours = results["collabzoo"] = summarise(runs["collabzoo"])
    theirs = results["comlrl"] = summarise(runs["comlrl"])
    both = "error" not in ours and "error" not in theirs
    results["ratio"] = ours["joint_samples_per_s"] / theirs["joint_samples_per_s"] if both else None
    results["median_ratio"] = (
        ours["median_joint_samples_per_s"] / theirs["median_joint_samples_per_s"] if both else None
    )
    for key, lora in (("full_copies", False), ("lora", True)):
        if args.skip_memory:
            results[key] = {"error": "skipped (--skip-memory)"}
            continue
        print(f"memory: {key} ...", flush=True)
        memory = workload
        if args.quick:
            memory = replace(workload, max_new_tokens=min(32, workload.max_new_tokens))
        params = {"workload": asdict(memory), "steps": 0, "large": True, "lora": lora}
        results[key] = child("collabzoo", params)
    results["total_seconds"] = time.perf_counter() - started
    report(results)
    print(f"\ntotal {results['total_seconds']:.0f}s")
    if args.json:
        if "error" not in ours and "error" not in theirs:
            results["headline"] = headline(results)
        write_results(args.json, results)


# ----- the Performance page's tables -----------------------------------------------------------
def magrpo_table(results: dict[str, Any]) -> str:
    """Throughput of the tiny model's team, one row for the run's thread count."""
    ours, theirs = results["collabzoo"], results["comlrl"]
    threads = results["settings"]["threads"]
    cells = [
        [
            "1 (`--threads 1`, the script's default)" if threads == 1 else str(threads),
            f"{ours['joint_samples_per_s']:.1f}",
            f"{theirs['joint_samples_per_s']:.1f}",
            f"{times(results['ratio'], 1)} (medians {times(results['median_ratio'], 1)})",
            f"{thousands(ours['peak_rss_mb'])} / {thousands(theirs['peak_rss_mb'])} MB",
        ]
    ]
    header = [
        "torch threads",
        "collabzoo",
        "CoMLRL",
        "collabzoo / CoMLRL",
        "peak RSS, collabzoo / CoMLRL",
    ]
    return markdown_table(header, cells)


def lora_memory_table(results: dict[str, Any]) -> str:
    """The two-agent team's memory after one update: two full copies against a LoRA team."""

    def mb(count: float) -> str:
        return f"{count / 2**20:.3g} MB"

    teams = (
        ("full_copies", "two full copies"),
        ("lora", "one base + two LoRA adapters (`lora_team`, rank 8)"),
    )
    cells = [
        [
            name,
            mb(results[key]["param_bytes"]),
            mb(results[key]["train_state_bytes"]),
            f"{thousands(results[key]['peak_rss_mb'])} MB",
        ]
        for key, name in teams
    ]
    header = ["team", "parameters", "weights + gradients + AdamW state", "peak RSS"]
    return markdown_table(header, cells)


def headline(results: dict[str, Any]) -> list[dict[str, Any]]:
    """The summary's rows: the throughput ratio, and the LoRA team's state against two copies
    when the run measured memory."""
    ours = results["collabzoo"]["joint_samples_per_s"]
    theirs = results["comlrl"]["joint_samples_per_s"]
    digits = 2 if min(ours, theirs) < 1 else 1
    model = results["settings"]["model_name"]
    rows = [
        {
            "benchmark": "MAGRPO against CoMLRL",
            "figure": f"{ours:.{digits}f} against {theirs:.{digits}f} joint samples/s, {model}",
            "ratio": round(results["ratio"], 2),
            "section": "MAGRPO",
        }
    ]
    full, lora = results.get("full_copies", {}), results.get("lora", {})
    if "train_state_bytes" in full and "train_state_bytes" in lora:
        ratio = full["train_state_bytes"] / lora["train_state_bytes"]
        rows.append(
            {
                "benchmark": "A LoRA team's memory",
                "figure": f"state between steps {lora['train_state_bytes'] / 2**20:.3g} MB "
                f"against two full copies' {full['train_state_bytes'] / 2**20:.3g} MB",
                "ratio": round(ratio, 1),
                "section": "A LoRA team's memory",
            }
        )
    return rows


if __name__ == "__main__":
    main()

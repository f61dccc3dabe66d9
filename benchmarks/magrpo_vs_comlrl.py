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

CoMLRL is optional: install it without touching torch,

    pip install --no-deps comlrl==1.4.3 && pip install wandb

and it runs with WANDB_MODE=disabled.

    python benchmarks/magrpo_vs_comlrl.py [--quick] [--profile] [--json results.json]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, ClassVar

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


# ----- shared pieces --------------------------------------------------------------------------
def team_reward(answer_a: str, answer_b: str) -> float:
    """Character overlap of the two answers (Jaccard of their character sets), in [0, 1]."""
    union = set(answer_a) | set(answer_b)
    return len(set(answer_a) & set(answer_b)) / len(union) if union else 0.0


def format_prompt(agent: str, prompt: str) -> str:
    return ROLES[agent].format(prompt=prompt)


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


def team_models(spec: dict[str, int]):
    """Two identical copies of one seeded tiny model, and its tokenizer."""
    import copy

    from collabzoo.algos.policies.model_loading import tiny_causal_lm

    model, tokenizer = tiny_causal_lm(0, **spec)
    return model, copy.deepcopy(model), tokenizer


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
            reward = team_reward(actions.get("a", ""), actions.get("b", ""))
            agents, self.agents = self.agents, []
            return (
                {a: "" for a in agents},
                dict.fromkeys(agents, reward),
                dict.fromkeys(agents, True),
                dict.fromkeys(agents, False),
                {a: {"metrics": {"overlap": reward}} for a in agents},
            )

    return PromptPairEnv


def collabzoo_trainer(spec: dict[str, int], lora: bool, max_new_tokens: int, workdir: str):
    from collabzoo.algos.learners.magrpo import MAGRPOConfig, MAGRPOTrainer
    from collabzoo.algos.policies.llm import LLMPolicy
    from collabzoo.algos.policies.model_loading import lora_team, tiny_causal_lm

    if lora:
        model, tokenizer = tiny_causal_lm(0, **spec)
        policies = lora_team(model, tokenizer, ["a", "b"])
    else:
        model_a, model_b, tokenizer = team_models(spec)
        policies = {"a": LLMPolicy(model_a, tokenizer), "b": LLMPolicy(model_b, tokenizer)}
    config = MAGRPOConfig(
        output_dir=workdir,
        num_turns=1,
        rollout_buffer_size=len(PROMPTS),
        tensorboard=False,
        progress=False,
        save_steps=0,
        **{**COMMON, "max_new_tokens": max_new_tokens},
    )
    return MAGRPOTrainer(prompt_pair_env_class(PROMPTS), policies, config), policies


def weight_checksum(models) -> float:
    """A fingerprint of the starting weights (equal for both libraries by construction)."""
    return float(sum(p.detach().double().sum() for m in models for p in m.parameters()))


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
    with tempfile.TemporaryDirectory() as workdir:
        trainer, policies = collabzoo_trainer(
            spec, params.get("lora", False), params["max_new_tokens"], workdir
        )
        models = list({id(p.model): p.model for p in policies.values()}.values())
        param_bytes = tensor_bytes(p for m in models for p in m.parameters())
        trainable = tensor_bytes(p for pol in trainer.distinct for p in pol.trainable_parameters())
        checksum = weight_checksum(models)
        torch.manual_seed(0)
        rss_built = peak_rss_mb()
        warm = trainer.train_step()  # warm-up (first-call costs), never timed
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
        joint = steps * len(PROMPTS) * COMMON["num_generations"]
        result = {
            "library": "collabzoo",
            "lora": bool(params.get("lora")),
            "model": spec,
            "max_new_tokens": params["max_new_tokens"],
            "torch_threads": torch.get_num_threads(),
            "initial_weight_checksum": checksum,
            "warmup_seconds": warm["update_seconds"],
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
            )
        return result


# ----- CoMLRL ---------------------------------------------------------------------------------
def comlrl_reward(completions_a, completions_b, batch_items=None, prompts=None) -> list[float]:
    return [team_reward(a, b) for a, b in zip(completions_a, completions_b, strict=True)]


def comlrl_format_a(item: dict[str, Any]) -> str:
    return format_prompt("a", item["prompt"])


def comlrl_format_b(item: dict[str, Any]) -> str:
    return format_prompt("b", item["prompt"])


def child_comlrl(params: dict[str, Any]) -> dict[str, Any]:
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

    model_a, model_b, tokenizer = team_models(SMALL)
    param_bytes = tensor_bytes(p for m in (model_a, model_b) for p in m.parameters())
    checksum = weight_checksum([model_a, model_b])
    config = MAGRPOConfig(
        num_train_epochs=1,
        num_turns=1,
        rollout_buffer_size=2,
        eval_interval=10**9,
        logging_steps=10**9,
        early_termination_threshold=None,
        **COMMON,
    )
    trainer = MAGRPOTrainer(
        agents=[model_a, model_b],
        tokenizer=tokenizer,
        train_dataset=datasets.Dataset.from_list([{"prompt": p} for p in WARMUP_PROMPTS]),
        reward_func=comlrl_reward,
        formatters=[comlrl_format_a, comlrl_format_b],
        args=config,
    )
    torch.manual_seed(0)
    rss_built = peak_rss_mb()
    started = time.perf_counter()
    trainer.train()  # warm-up epoch on other prompts, never timed
    warmup = time.perf_counter() - started
    trainer.train_dataset = datasets.Dataset.from_list([{"prompt": p} for p in PROMPTS])
    epochs = params["epochs"]
    started = time.perf_counter()
    for _ in range(epochs):
        trainer.train()
    elapsed = time.perf_counter() - started
    joint = epochs * len(PROMPTS) * COMMON["num_generations"]
    return {
        "library": "comlrl",
        "version": metadata.version("comlrl"),
        "model": SMALL,
        "torch_threads": torch.get_num_threads(),
        "initial_weight_checksum": checksum,
        "timed_epochs": epochs,
        "joint_samples": joint,
        "seconds": elapsed,
        "joint_samples_per_s": joint / elapsed,
        "warmup_seconds": warmup,
        "param_bytes": param_bytes,
        "optimizer_state_bytes": optimizer_state_bytes(trainer.optimizers),
        "rss_after_imports_mb": rss_imports,
        "rss_after_build_mb": rss_built,
        "peak_rss_mb": peak_rss_mb(),
    }


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


def report(results: dict[str, Any]) -> None:
    ours, theirs = results["collabzoo"], results["comlrl"]
    threads = results["settings"]["threads"]
    print(
        f"\nMAGRPO training throughput: 2 agents, {len(PROMPTS)} prompts, "
        f"K={COMMON['num_generations']}, {COMMON['max_new_tokens']} new tokens, 1 turn, "
        f"torch threads: {threads}"
    )
    print(f"{'library':<26}{'joint samples/s':>16}{'rounds':>22}{'peak RSS MB':>13}")
    for name, r in (("collabzoo MAGRPOTrainer", ours), ("CoMLRL 1.4.3 MAGRPOTrainer", theirs)):
        if "error" in r:
            print(f"{name:<26}{'n/a':>16}   {first_line(r)}")
            continue
        rounds = ", ".join(f"{x:.2f}" for x in r["round_joint_samples_per_s"])
        print(f"{name:<26}{r['joint_samples_per_s']:>16.2f}{rounds:>22}{r['peak_rss_mb']:>13,.0f}")
    if results.get("ratio") is not None:
        verdict = "meets" if results["ratio"] >= TARGET_RATIO else "misses"
        print(
            f"collabzoo / CoMLRL: {results['ratio']:.2f}x (best rounds; medians "
            f"{results['median_ratio']:.2f}x); {verdict} the {TARGET_RATIO:.0f}x target"
        )
    print(
        f"(CoMLRL's reference figure on these machines: about {REFERENCE_SAMPLES_PER_S:.0f}/s; "
        f"load average at start: {results['machine']['load_average_at_start'][0]:.2f})"
    )

    print(
        "\nMemory of a 2-agent team (hidden 512, 4 layers, intermediate 1024), "
        "after one collabzoo train_step"
    )
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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="one round, fewer repeats")
    parser.add_argument("--rounds", type=int, help="alternating rounds per library (default 3)")
    parser.add_argument("--steps", type=int, help="timed collabzoo train_steps per round (4)")
    parser.add_argument("--epochs", type=int, help="timed CoMLRL epochs per round (2)")
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
    parser.add_argument("--json", type=Path, help="also write the results here")
    parser.add_argument("--child", choices=sorted(CHILDREN), help=argparse.SUPPRESS)
    parser.add_argument("--params", default="{}", help=argparse.SUPPRESS)
    args = parser.parse_args()

    if args.child:
        run_as_child(CHILDREN, args.child, args.params)
        return

    rounds = args.rounds or (1 if args.quick else 3)
    steps = args.steps or (2 if args.quick else 4)
    epochs = args.epochs or (1 if args.quick else 2)
    tokens = COMMON["max_new_tokens"]
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
            "prompts": len(PROMPTS),
            **COMMON,
            "num_turns": 1,
            "model": SMALL,
            "threads": args.threads or "torch default",
            "rounds": rounds,
            "collabzoo_steps_per_round": steps,
            "comlrl_epochs_per_round": epochs,
        },
    }
    runs: dict[str, list[dict[str, Any]]] = {"collabzoo": [], "comlrl": []}
    for index in range(rounds):  # alternate, so a busy spell hits both libraries alike
        print(f"round {index + 1}/{rounds}: collabzoo ({steps} train_steps) ...", flush=True)
        runs["collabzoo"].append(
            run_child(
                "collabzoo",
                {"steps": steps, "max_new_tokens": tokens, "profile": args.profile},
                args.threads,
                args.timeout,
                show_stderr=args.profile,
            )
        )
        print(f"round {index + 1}/{rounds}: CoMLRL ({epochs} epochs) ...", flush=True)
        runs["comlrl"].append(run_child("comlrl", {"epochs": epochs}, args.threads, args.timeout))
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
        memory_tokens = 32 if args.quick else tokens
        results[key] = run_child(
            "collabzoo",
            {"steps": 0, "max_new_tokens": memory_tokens, "large": True, "lora": lora},
            args.threads,
            args.timeout,
        )
    results["total_seconds"] = time.perf_counter() - started
    report(results)
    print(f"\ntotal {results['total_seconds']:.0f}s")
    if args.json:
        args.json.write_text(json.dumps(results, indent=2) + "\n")
        print(f"wrote {args.json}")


if __name__ == "__main__":
    main()

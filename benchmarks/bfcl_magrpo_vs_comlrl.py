"""MAGRPO on BFCL v4 (native parallel): collabzoo against CoMLRL 1.4.3 driven as the reference
task repository drives it, side by side: wall time per update and the learning curve of both.

The reference (OpenMLRL/LLM_Collab_BFCL-v4, `native_parallel/train/train_magrpo.py` with
`native_parallel/configs/native_parallel_magrpo_config.yaml`) trains two agents with CoMLRL's
`MAGRPOTrainer`, its prompts written by `native_parallel/formatting.py` and its reward by
`native_parallel/rewards/native_parallel_reward.py`. This script imports those modules, and the
reference's row loader (`native_parallel/data.py`), from a checkout given by `--reference` (never
from this repository) and reads the MAGRPO settings from that checkout's config file.

Both sides, matched:

- model: SmolLM2-135M-Instruct, two full copies in float32 (full fine-tuning, as the reference
  does; CoMLRL 1.4.3 has no LoRA option), loaded from the same folder; each child records a
  checksum of its starting weights.
- rows: collabzoo's build of the BFCL v4 `parallel` and `parallel_multiple` questions
  (`collabzoo.make("bfcl", data=...)`, train split, the first `4 x updates` rows in order). The
  CoMLRL side reads the very same rows (written to a temporary `train.jsonl`) through the
  reference's own loader, which adds `prompt`, `test` and `entry_point` as it always does.
- prompts: the reference's formatter text, fed to the model raw (CoMLRL tokenizes the formatter's
  string with no chat template, and so does collabzoo here: the env's observations are passed as
  `RawPrompt`; collabzoo's env alone would put them inside the model's chat template). The
  env's prompts equal the reference formatter's (tests/test_bfcl.py checks their hashes).
- settings, from the reference config: 2 agents, K = 4, joint mode aligned, H = 1, discount 1,
  learning rate 2e-5, temperature 0.7, top_p 0.8, no top_k, 256 new tokens, rollout buffer 4 and
  batch 4 (one optimizer step per agent every 4 prompts), advantage normalisation on with the
  mean baseline, no KL, no reward processor, the reward constants of `bfcl_reward`
  (self-duplicates deduplicated, not charged), seed 42.
- one update = 4 prompts x K = 4 joint samples: rollout, reward, one AdamW step per agent.

What had to change in CoMLRL's drive, and why (everything else is the reference's):

- `parallel_training: mp` with `agent_devices: [cuda:0, cuda:1]` becomes `none` on the CPU (the
  config hard-codes two GPUs);
- `torch_dtype: bfloat16` becomes float32 (the CPU has no bf16 units; collabzoo loads float32
  on a CPU too);
- `dataset_type="bfcl"`, which the reference passes, is not an argument of CoMLRL 1.4.3's
  `MAGRPOTrainer` and is left out;
- `num_train_epochs` 4 over 160 rows becomes 1 epoch over `4 x updates` rows, and
  `eval_interval: 2` (an evaluation of 16 rows before every second training prompt) becomes 0:
  this measures training updates only;
- no wandb (the script's `wandb.enabled: true` needs an account).

collabzoo's side has one setting the reference has no counterpart for: `max_grad_norm` (collabzoo
clips each agent's gradient norm, default 1.0; CoMLRL does not clip) is set to 1e9, i.e. off.
Both losses are -mean over an update's 16 samples of (advantage x the completion's summed token
log-probabilities); CoMLRL's sum also runs over the pad tokens after an answer that ended before
its K-group's longest (a CoMLRL quirk), collabzoo's over the answer's own tokens. Sampling draws
from each library's own RNG stream, so the two curves differ by sampling noise even where the
maths agrees.

Timing: an update's wall time is rollout + reward + update, measured from the end of the previous
update (from the start of training for the first). For CoMLRL the update ends when its
`_drain_ready_buffers` (both agents' optimizer steps) returns; for collabzoo when `train_step()`
returns. The mean training reward of an update is the mean of the reference reward over its 16
joint samples (collabzoo's env reward reproduces it: tests/test_bfcl.py).

Each library runs in its own subprocess with one torch thread (`--threads`); by default the two
run at the same time (`--sequential` runs one after the other), so a busy spell on a shared
machine hits both alike.

The rows differ from update to update, so a curve alone cannot tell learning from easier rows.
`--only untrained` runs the control: collabzoo's side again with a learning rate of 1e-30 (the
config refuses 0; AdamW's steps are then below float32's resolution, and the result records the
weights' checksum after the last update to show they did not move), the same rows, the same
seed and so the same sampling stream (its first update's rollouts equal the trained run's; the
later ones differ only by the weights). `--from-children` takes several runs' files.

    python benchmarks/bfcl_magrpo_vs_comlrl.py --reference CHECKOUT --data BFCL_DATA \\
        [--updates 5] [--max-new-tokens 256] [--json [results.json]] [--plot [png]]
"""

from __future__ import annotations

import argparse
import contextlib
import itertools
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from results_table import load_results, markdown_table, results_path, times, write_results

MARKER = "RESULT "
MODEL = "smollm2-135m-instruct"
ROWS_PER_UPDATE = 4  # the reference's rollout buffer (and batch): prompts per optimizer step
CONFIG = "native_parallel/configs/native_parallel_magrpo_config.yaml"
PLOT = (
    Path(__file__).resolve().parents[1] / "docs" / "assets" / "plots" / "bfcl_magrpo_vs_comlrl.png"
)
LOGPROB_BATCH_SIZE = 4
"""collabzoo's sequences per scoring pass: one prompt's K answers. Its default, 16, scores an
update's 16 answers of about 690 tokens in one pass, whose float32 logits over SmolLM2's 49,152
tokens (and their log-softmax and gradients) took 11 GB here, more than the shared machine had
free; CoMLRL scores one answer per pass."""
MIN_HEADLINE_UPDATES = 2
"""Updates both libraries must finish for the run to give the Performance summary a row."""
UNTRAINED_LEARNING_RATE = 1e-30
"""The control's learning rate: a config refuses 0, and a step of this size leaves every
float32 weight as it was."""
MAX_GRAD_NORM_OFF = 1e9
"""collabzoo's gradient clip, set out of reach: CoMLRL 1.4.3 does not clip."""


# ----- shared pieces ------------------------------------------------------------------------------
def reference_config(reference: Path) -> dict[str, Any]:
    """The reference's MAGRPO config file, as a dict."""
    import yaml

    path = reference / CONFIG
    if not path.is_file():
        raise SystemExit(
            f"--reference {reference}: no {CONFIG} there; expected a checkout of "
            "OpenMLRL/LLM_Collab_BFCL-v4"
        )
    return yaml.safe_load(path.read_text(encoding="utf-8"))


def settings_of(config: dict[str, Any], max_new_tokens: int | None) -> dict[str, Any]:
    """The settings both libraries train with, from the reference config."""
    magrpo, model = config["magrpo"], config["agent_model"]
    return {
        "num_agents": int(magrpo["num_agents"]),
        "num_turns": int(magrpo["num_turns"]),
        "num_generations": int(magrpo["num_generations"]),
        "joint_mode": str(magrpo["joint_mode"]),
        "discount": float(magrpo["discount"]),
        "agent_learning_rate": float(magrpo["agent_learning_rate"]),
        "temperature": float(model["temperature"]),
        "top_p": float(model["top_p"]),
        "top_k": model["top_k"],
        "max_new_tokens": int(max_new_tokens or magrpo["max_new_tokens"]),
        "rollout_buffer_size": int(magrpo["rollout_buffer_size"]),
        "train_batch_size": int(magrpo["train_batch_size"]),
        "advantage_normalization": bool(magrpo["advantage_normalization"]),
        "advantage_mode": str(magrpo["advantage_mode"]),
        "early_termination_threshold": magrpo["early_termination_threshold"],
        "role_mode": str(config["bfcl"]["role_mode"]),
        "categories": list(config["dataset"]["categories"]),
        "seed": int(config["seed"]),
    }


def train_rows(data: str, categories: list[str], count: int) -> list[dict[str, Any]]:
    """The first `count` train rows of collabzoo's BFCL env, in order, in the hub's form."""
    import collabzoo

    env = collabzoo.make("bfcl", data=data, categories=categories)
    items = env.items("train")
    if len(items) < count:
        raise SystemExit(f"the train split has {len(items)} rows, {count} are needed")
    return [dict(item.record) for item in items[:count]]


def weight_checksum(models: list[Any]) -> float:
    """A fingerprint of the weights (at the start: equal for both libraries when they load
    alike)."""
    return float(sum(p.detach().double().sum() for m in models for p in m.parameters()))


def peak_rss_mb() -> float:
    """High-water mark of this process's resident set (Linux reports KiB)."""
    import resource

    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


def seed_everything(seed: int) -> None:
    """The reference's `_set_seed`: Python's and torch's RNGs."""
    import random

    import torch

    random.seed(seed)
    torch.manual_seed(seed)


def completion_tokens(tokenizer: Any, answers: list[str]) -> float:
    """Mean length of answers in tokens (re-encoded without special tokens, alike for both)."""
    if not answers:
        return 0.0
    return sum(len(tokenizer(a, add_special_tokens=False)["input_ids"]) for a in answers) / len(
        answers
    )


# ----- collabzoo ----------------------------------------------------------------------------------
def row_order_env(env: Any):
    """`env` with episode `seed` on train row `seed` (collabzoo's trainer seeds an update's
    episodes run_seed x 1000003 + update x buffer + j, so run seed 0 walks the rows in order) and
    its prompts marked raw (no chat template), as the reference feeds them; every answer it is
    given is kept in `ANSWERS` for the length figures."""
    from pettingzoo.utils import BaseParallelWrapper

    from collabzoo.envs.prompt_form import RawPrompt

    class RowOrder(BaseParallelWrapper):
        def reset(self, seed=None, options=None):
            observations, infos = self.env.reset(seed=seed, options={"task": int(seed or 0)})
            return {a: RawPrompt(o) for a, o in observations.items()}, infos

        def step(self, actions):
            ANSWERS.extend(actions.values())
            return self.env.step(actions)

    return RowOrder(env)


ANSWERS: list[str] = []


def child_collabzoo(
    params: dict[str, Any], learning_rate: float | None = None, library: str = "collabzoo"
) -> dict[str, Any]:
    """collabzoo's MAGRPO on the rows in order; `learning_rate` overrides the reference's, and
    `library` names the run in its log lines and result."""
    import torch

    import collabzoo
    from collabzoo.algos import load_causal_lm
    from collabzoo.algos.learners.magrpo import MAGRPOConfig, MAGRPOTrainer
    from collabzoo.algos.policies.llm import LLMPolicy

    s = params["settings"]
    seed_everything(s["seed"])
    model_a, tokenizer = load_causal_lm(params["model"])
    model_b, _ = load_causal_lm(params["model"])
    checksum = weight_checksum([model_a, model_b])
    env = row_order_env(collabzoo.make("bfcl", data=params["data"], categories=s["categories"]))
    policies = {"agent_0": LLMPolicy(model_a, tokenizer), "agent_1": LLMPolicy(model_b, tokenizer)}
    with tempfile.TemporaryDirectory() as workdir:
        config = MAGRPOConfig(
            output_dir=workdir,
            seed=0,  # episode seeds 0, 1, 2, ...: the rows in order (see row_order_env)
            num_turns=s["num_turns"],
            num_generations=s["num_generations"],
            joint_mode=s["joint_mode"],
            discount=s["discount"],
            agent_learning_rate=(
                s["agent_learning_rate"] if learning_rate is None else learning_rate
            ),
            temperature=s["temperature"],
            top_p=s["top_p"],
            top_k=s["top_k"],
            max_new_tokens=s["max_new_tokens"],
            rollout_buffer_size=s["rollout_buffer_size"],
            advantage_mode=s["advantage_mode"],
            advantage_normalization="zscore" if s["advantage_normalization"] else False,
            early_termination_threshold=s["early_termination_threshold"],
            max_grad_norm=MAX_GRAD_NORM_OFF,
            logprob_batch_size=params["logprob_batch_size"],
            device="cpu",
            eval_interval=0,
            tensorboard=False,
            progress=False,
            save_steps=0,
        )
        trainer = MAGRPOTrainer(env, policies, config)
        updates: list[dict[str, Any]] = []
        started = first = time.perf_counter()
        cpu_started = time.process_time()
        for index in range(params["updates"]):
            last = updates[-1]["seconds"] if updates else 0.0
            if time.perf_counter() - first + last > params["time_limit"]:
                break  # the next update would likely end past the limit
            metrics = trainer.train_step()
            now, cpu_now = time.perf_counter(), time.process_time()
            updates.append(
                {
                    "update": index + 1,
                    "seconds": now - started,
                    "cpu_seconds": cpu_now - cpu_started,
                    "mean_reward": metrics["mean_reward"],
                    "mean_completion_tokens": completion_tokens(tokenizer, ANSWERS),
                    "answers": len(ANSWERS),
                }
            )
            ANSWERS.clear()
            started, cpu_started = now, cpu_now
            print(f"{library} update {index + 1}: {updates[-1]}", file=sys.stderr, flush=True)
    return {
        "library": library,
        "agent_learning_rate": config.agent_learning_rate,
        "torch_threads": torch.get_num_threads(),
        "logprob_batch_size": params["logprob_batch_size"],
        "peak_rss_mb": peak_rss_mb(),
        "dtype": str(model_a.dtype),
        "initial_weight_checksum": checksum,
        "final_weight_checksum": weight_checksum([model_a, model_b]),
        "updates": updates,
    }


class TimeLimitReached(Exception):
    """Raised after an update when the next would end past `--time-limit`: ends CoMLRL's
    epoch there."""


# ----- CoMLRL, driven as the reference's train script drives it -----------------------------------
def child_comlrl(params: dict[str, Any]) -> dict[str, Any]:
    os.environ["WANDB_MODE"] = "disabled"
    import importlib.metadata as metadata

    import torch
    from comlrl.trainers.reinforce import MAGRPOConfig, MAGRPOTrainer
    from transformers import AutoTokenizer

    reference = Path(params["reference"])
    sys.path.insert(0, str(reference))
    from native_parallel.data import load_native_parallel_dataset
    from native_parallel.formatting import get_native_parallel_formatters
    from native_parallel.rewards import make_reward

    config = reference_config(reference)
    s = params["settings"]
    magrpo, model_section = config["magrpo"], config["agent_model"]
    seed_everything(s["seed"])
    with tempfile.TemporaryDirectory() as folder:
        with open(Path(folder) / "train.jsonl", "w", encoding="utf-8") as f:
            for row in params["rows"]:
                f.write(json.dumps(row) + "\n")
        train_dataset = load_native_parallel_dataset(
            folder,
            split="train",
            categories=config["dataset"]["categories"],
            task_types=config["dataset"]["task_types"],
        )
    tokenizer = AutoTokenizer.from_pretrained(params["model"])
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
    args = MAGRPOConfig(
        num_agents=s["num_agents"],
        num_turns=s["num_turns"],
        parallel_training="none",  # reference: mp on [cuda:0, cuda:1]
        agent_devices="cpu",
        num_train_epochs=1,  # reference: 4 epochs over 160 rows
        agent_learning_rate=s["agent_learning_rate"],
        logging_steps=int(magrpo["logging_steps"]),
        num_generations=s["num_generations"],
        max_new_tokens=s["max_new_tokens"],
        temperature=s["temperature"],
        top_p=s["top_p"],
        top_k=model_section["top_k"],
        discount=s["discount"],
        joint_mode=s["joint_mode"],
        early_termination_threshold=s["early_termination_threshold"],
        rollout_buffer_size=s["rollout_buffer_size"],
        train_batch_size=s["train_batch_size"],
        advantage_normalization=s["advantage_normalization"],
        advantage_mode=s["advantage_mode"],
        eval_interval=0,  # reference: 2 (16 eval rows before every second training prompt)
        eval_num_samples=int(magrpo["eval_num_samples"]),
        eval_batch_size=int(magrpo["eval_batch_size"]),
        reference_kl_enabled=bool(magrpo["reference_kl_enabled"]),
        reference_kl_coef=float(magrpo["reference_kl_coef"]),
        reference_devices=magrpo["reference_devices"],
    )
    reward = make_reward(config["bfcl_reward"])
    rewards: list[float] = []
    answers: list[str] = []

    def reward_func(*agent_completions, batch_items=None, prompts=None):
        """The reference reward, its results kept for the learning curve."""
        values = reward(*agent_completions, batch_items=batch_items, prompts=prompts)
        rewards.extend(values)
        answers.extend(c for completions in agent_completions for c in completions)
        return values

    trainer = MAGRPOTrainer(
        agent_model=params["model"],
        agents=None,
        num_agents=s["num_agents"],
        tokenizer=tokenizer,
        model_config={"torch_dtype": "float32", "special_tokens": model_section["special_tokens"]},
        train_dataset=train_dataset,
        eval_dataset=None,
        reward_func=reward_func,
        reward_processor=None,  # reference: reward_processor.enabled false
        formatters=get_native_parallel_formatters(
            num_agents=s["num_agents"], role_mode=s["role_mode"]
        ),
        external_transition=None,
        wandb_config=None,
        args=args,
    )
    checksum = weight_checksum(trainer.agents)
    updates: list[dict[str, Any]] = []
    clock = {"started": 0.0, "first": 0.0, "cpu_started": 0.0}
    drain = trainer._drain_ready_buffers

    def timed_drain(ready_agents):
        drain(ready_agents)
        if not ready_agents:
            return
        now, cpu_now = time.perf_counter(), time.process_time()
        updates.append(
            {
                "update": len(updates) + 1,
                "seconds": now - clock["started"],
                "cpu_seconds": cpu_now - clock["cpu_started"],
                "mean_reward": statistics.fmean(rewards) if rewards else 0.0,
                "mean_completion_tokens": completion_tokens(tokenizer, answers),
                "answers": len(answers),
            }
        )
        rewards.clear()
        answers.clear()
        clock["started"], clock["cpu_started"] = now, cpu_now
        print(f"comlrl update {len(updates)}: {updates[-1]}", file=sys.stderr, flush=True)
        if now - clock["first"] + updates[-1]["seconds"] > params["time_limit"]:
            raise TimeLimitReached  # the next update would likely end past the limit

    trainer._drain_ready_buffers = timed_drain
    clock["started"] = clock["first"] = time.perf_counter()
    clock["cpu_started"] = time.process_time()
    with contextlib.suppress(TimeLimitReached):
        trainer.train()
    return {
        "library": "comlrl",
        "version": metadata.version("comlrl"),
        "torch_threads": torch.get_num_threads(),
        "peak_rss_mb": peak_rss_mb(),
        "dtype": str(trainer.agents[0].dtype),
        "initial_weight_checksum": checksum,
        "updates": updates,
    }


def child_untrained(params: dict[str, Any]) -> dict[str, Any]:
    """The control: collabzoo's drive with AdamW steps too small to move a float32 weight."""
    return child_collabzoo(params, learning_rate=UNTRAINED_LEARNING_RATE, library="untrained")


CHILDREN = {"collabzoo": child_collabzoo, "comlrl": child_comlrl, "untrained": child_untrained}
OPTIONAL = ("untrained",)
"""Children a default run leaves out (`--only` runs them)."""


# ----- the parent ---------------------------------------------------------------------------------
def child_command(kind: str, params: dict[str, Any]) -> list[str]:
    return [sys.executable, __file__, "--child", kind, "--params", json.dumps(params)]


def child_env(threads: int) -> dict[str, str]:
    env = {**os.environ, "WANDB_MODE": "disabled", "HF_HUB_OFFLINE": "1"}
    env.update(OMP_NUM_THREADS=str(threads), MKL_NUM_THREADS=str(threads))
    return env


def collect(kind: str, process: subprocess.Popen, log: Path) -> dict[str, Any]:
    """The RESULT line of a finished child, or its error with the log's tail."""
    stdout, _ = process.communicate()
    lines = [ln for ln in stdout.splitlines() if ln.startswith(MARKER)]
    if process.returncode != 0 or not lines:
        text = log.read_text(encoding="utf-8")
        tail = "\n".join(text.strip().splitlines()[-15:])
        return {
            "library": kind,
            "error": f"exit {process.returncode}:\n{tail}",
            "updates_logged": logged_updates(kind, text),
        }
    return json.loads(lines[-1][len(MARKER) :])


def logged_updates(kind: str, text: str) -> list[dict[str, Any]]:
    """The updates a child logged before it stopped (its `<kind> update N: {...}` lines): what
    a child stopped from outside (for memory, by a signal) still measured."""
    import ast
    import re

    # a progress bar may share the line (it ends in a carriage return, not a newline)
    found = re.finditer(rf"{kind} update \d+: (\{{[^\n]*\}})", text)
    return [ast.literal_eval(match.group(1)) for match in found]


def run_children(
    params: dict[str, dict[str, Any]], threads: int, sequential: bool, logs: Path
) -> dict[str, dict[str, Any]]:
    """Each library in its own process, at the same time unless `sequential`; their stderr
    (one line per update) goes to `logs`/<library>.log."""
    logs.mkdir(parents=True, exist_ok=True)
    results: dict[str, dict[str, Any]] = {}
    running: list[tuple[str, subprocess.Popen, Path]] = []
    for kind, child_params in params.items():
        log = logs / f"{kind}.log"
        with open(log, "w", encoding="utf-8") as handle:
            process = subprocess.Popen(
                child_command(kind, child_params),
                stdout=subprocess.PIPE,
                stderr=handle,
                text=True,
                env=child_env(threads),
            )
        print(f"started {kind} (pid {process.pid}), log {log}", flush=True)
        if sequential:
            results[kind] = collect(kind, process, log)
        else:
            running.append((kind, process, log))
    for kind, process, log in running:
        results[kind] = collect(kind, process, log)
    return results


def partial(result: dict[str, Any]) -> dict[str, Any]:
    """A child stopped before its end keeps the updates it logged, marked as stopped."""
    if "error" not in result or not result.get("updates_logged"):
        return result
    kept = {
        "library": result["library"],
        "stopped": result["error"].splitlines()[0],
        "updates": result["updates_logged"],
    }
    if result["library"] == "comlrl":
        import importlib.metadata as metadata

        kept["version"] = metadata.version("comlrl")  # the one installed here, which ran
    return kept


def summarise(result: dict[str, Any], compared: int | None = None) -> dict[str, Any]:
    """Per-update means over the first `compared` updates (all by default): all of them, and
    those after the first (which carries one-off costs)."""
    if "error" in result or not result.get("updates"):
        return result if "error" in result else {**result, "error": "no update finished"}
    kept = result["updates"][: compared or len(result["updates"])]
    seconds = [u["seconds"] for u in kept]
    later = seconds[1:] or seconds
    cpu = [u["cpu_seconds"] for u in kept]
    return {
        **result,
        "compared_updates": len(kept),
        "total_seconds": sum(seconds),
        "mean_update_seconds": statistics.fmean(seconds),
        "mean_later_update_seconds": statistics.fmean(later),
        "mean_update_cpu_seconds": statistics.fmean(cpu),
        "mean_reward": statistics.fmean(u["mean_reward"] for u in kept),
    }


def report(results: dict[str, Any]) -> None:
    s = results["settings"]
    print(
        f"\nMAGRPO on BFCL v4, {results['model']}: {s['num_agents']} agents, K="
        f"{s['num_generations']}, {s['max_new_tokens']} new tokens, {ROWS_PER_UPDATE} prompts "
        "per update"
    )
    for kind in CHILDREN:
        r = results.get(kind, {"error": "not in this results file"})
        if "error" in r:
            print(f"{kind:<10} failed: {r['error']}")
            continue
        per = ", ".join(f"{u['seconds']:.0f}s/{u['mean_reward']:+.3f}" for u in r["updates"])
        print(f"{kind:<10} mean {r['mean_update_seconds']:.1f}s per update; {per}")
    if results.get("ratio") is not None:
        print(
            f"wall time per update, collabzoo / CoMLRL: {results['ratio']:.2f} "
            f"(after the first update: {results['later_ratio']:.2f})"
        )


def machine_words(results: dict[str, Any]) -> str:
    """The machine and date: from the results file's provenance where it has one (a plot drawn
    with --from-json), else the run's --machine-label and today."""
    record = results.get("provenance")
    if not record:
        return f"{results['machine_label']}, {results.get('date', '')}"
    gpu = "" if "GPU" in record["machine"] else ", no GPU"
    return f"{record['machine']}{gpu}, shared; {record['date']}"


def plot(results: dict[str, Any], path: Path) -> None:
    """Reward per update and cumulative wall time, both libraries."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    colours = {"collabzoo": "#4c72b0", "comlrl": "#dd8452", "untrained": "#7f7f7f"}
    version = results["comlrl"].get("version", "")
    names = {
        "collabzoo": "collabzoo",
        "comlrl": f"CoMLRL {version}".strip(),
        "untrained": "untrained control (collabzoo, weights fixed)",
    }
    with plt.rc_context({"font.size": 11, "axes.spines.top": False, "axes.spines.right": False}):
        fig, (left, right) = plt.subplots(1, 2, figsize=(10, 4))
        for kind in CHILDREN:
            r = results.get(kind, {"error": "absent"})
            if "error" in r:
                continue
            steps = [u["update"] for u in r["updates"]]
            rewards = [u["mean_reward"] for u in r["updates"]]
            wall = list(itertools.accumulate(u["seconds"] / 60 for u in r["updates"]))
            cpu = list(itertools.accumulate(u["cpu_seconds"] / 60 for u in r["updates"]))
            style = ":" if kind in OPTIONAL else "-"
            left.plot(steps, rewards, f"o{style}", color=colours[kind], label=names[kind])
            if kind in OPTIONAL:
                continue  # a control: its time is not the comparison's
            right.plot(steps, wall, "o-", color=colours[kind], label=f"{names[kind]}, wall")
            right.plot(steps, cpu, "s--", color=colours[kind], label=f"{names[kind]}, CPU")
        left.set(xlabel="update", ylabel="mean training reward (reference reward)")
        right.set(xlabel="update", ylabel="cumulative time (min)")
        for axis in (left, right):
            axis.xaxis.get_major_locator().set_params(integer=True)
            axis.legend(frameon=False)
        fig.suptitle(
            "MAGRPO on BFCL v4, SmolLM2-135M-Instruct, K=4, 4 prompts per update, "
            f"{results['settings']['max_new_tokens']} new tokens\n"
            f"{machine_words(results)}",
            fontsize=10,
        )
        fig.tight_layout()
        path.parent.mkdir(parents=True, exist_ok=True)
        fig.savefig(path, dpi=140)
        plt.close(fig)
    print(f"plot written to {path}")


def read_note(note: str | None) -> str | None:
    """`--note`: the text, or with a leading @ the text of that file."""
    if note and note.startswith("@"):
        return Path(note[1:]).read_text(encoding="utf-8").strip()
    return note


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reference", type=Path, help="checkout of OpenMLRL/LLM_Collab_BFCL-v4")
    parser.add_argument("--data", help="BFCL v4's data folder (bfcl_eval/data), or the hub set")
    parser.add_argument("--model", default=MODEL, help=f"model for both (default {MODEL})")
    parser.add_argument("--updates", type=int, default=5, help="updates per library (5)")
    parser.add_argument("--max-new-tokens", type=int, help="override the reference's 256")
    parser.add_argument(
        "--time-limit",
        type=float,
        default=float("inf"),
        help="seconds per library: no update starts that would end past this, judged by the "
        "last update's time (the tables compare the updates both finished)",
    )
    parser.add_argument(
        "--logprob-batch-size",
        type=int,
        default=LOGPROB_BATCH_SIZE,
        help=f"collabzoo's sequences per scoring pass (default {LOGPROB_BATCH_SIZE})",
    )
    parser.add_argument("--threads", type=int, default=1, help="torch threads per library (1)")
    parser.add_argument("--sequential", action="store_true", help="one library after the other")
    parser.add_argument("--only", choices=sorted(CHILDREN), help="run one library only")
    parser.add_argument("--logs", type=Path, default=Path("runs/bfcl_magrpo_vs_comlrl"))
    parser.add_argument(
        "--machine-label",
        default="2-core CPU, no GPU, shared",
        help="how the plot's title names the machine",
    )
    parser.add_argument(
        "--json",
        type=Path,
        nargs="?",
        const=results_path("bfcl_magrpo_vs_comlrl"),
        help="write the results (alone: benchmarks/results/bfcl_magrpo_vs_comlrl.json)",
    )
    parser.add_argument(
        "--plot",
        type=Path,
        nargs="?",
        const=PLOT,
        help="draw both learning curves (alone: docs/assets/plots/bfcl_magrpo_vs_comlrl.png)",
    )
    parser.add_argument(
        "--from-children",
        type=Path,
        nargs="+",
        help="build the results from earlier runs' LOGS/children.json instead of running (a "
        "later file's library replaces an earlier's)",
    )
    parser.add_argument(
        "--note", help="a remark on how the run went, kept in the results (@FILE: read from FILE)"
    )
    parser.add_argument("--from-json", type=Path, help="only draw the plot from a results file")
    parser.add_argument("--child", choices=sorted(CHILDREN), help=argparse.SUPPRESS)
    parser.add_argument("--params", default="{}", help=argparse.SUPPRESS)
    args = parser.parse_args()

    if args.child:
        import torch

        torch.set_num_threads(int(os.environ.get("OMP_NUM_THREADS", "1") or 1))
        result = CHILDREN[args.child](json.loads(args.params))
        print(MARKER + json.dumps(result), flush=True)
        return
    if args.from_json:
        plot(load_results(args.from_json), args.plot or PLOT)
        return
    if args.reference is None or args.data is None:
        parser.error("--reference and --data are required")

    from collabzoo.algos.policies.pretrained import resolve_model

    model = resolve_model(args.model)
    config = reference_config(args.reference)
    settings = settings_of(config, args.max_new_tokens)
    rows = train_rows(args.data, settings["categories"], ROWS_PER_UPDATE * args.updates)
    shared = {
        "settings": settings,
        "model": model,
        "updates": args.updates,
        "time_limit": args.time_limit,
    }
    ours = {**shared, "data": args.data, "logprob_batch_size": args.logprob_batch_size}
    params = {
        "collabzoo": ours,
        "comlrl": {**shared, "reference": str(args.reference.resolve()), "rows": rows},
        "untrained": ours,
    }
    if args.only:
        params = {args.only: params[args.only]}
    else:
        params = {kind: p for kind, p in params.items() if kind not in OPTIONAL}
    started = time.perf_counter()
    load_at_start = os.getloadavg()
    if args.from_children:  # the children's results of earlier runs (their logs folders)
        children = {}
        for path in args.from_children:
            children.update(load_results(path))
    else:
        children = run_children(params, args.threads, args.sequential, args.logs)
        (args.logs / "children.json").write_text(json.dumps(children), encoding="utf-8")
    results: dict[str, Any] = {
        "model": args.model,
        "settings": {
            **settings,
            "updates": args.updates,
            "prompts_per_update": ROWS_PER_UPDATE,
            "threads": args.threads,
            "concurrent": not args.sequential,
            "rows": [r["id"] for r in rows],
            "collabzoo_max_grad_norm": MAX_GRAD_NORM_OFF,
        },
        "machine": {
            "platform": platform.platform(),
            "cpus": os.cpu_count(),
            "load_average_at_start": load_at_start,
            "load_average_at_end": os.getloadavg(),
        },
        "machine_label": args.machine_label,
        "note": read_note(args.note),
        "reference": {
            "repo": "OpenMLRL/LLM_Collab_BFCL-v4",
            "train_script": "native_parallel/train/train_magrpo.py@178b9dc",
            "config": f"{CONFIG}@2a16d23",
            "formatters": "native_parallel/formatting.py@178b9dc",
            "reward": "native_parallel/rewards/native_parallel_reward.py@e233fc1",
            "loader": "native_parallel/data.py@178b9dc",
        },
    }
    children = {kind: partial(result) for kind, result in children.items()}
    pair = [children.get(kind, {}) for kind in ("collabzoo", "comlrl")]
    done = [len(r.get("updates") or []) for r in pair if r and "error" not in r]
    compared = min(done) if len(done) == 2 else None  # the updates both libraries finished
    for kind in CHILDREN:
        missing = {"error": "not run (--only)"}
        results[kind] = summarise(
            children.get(kind, missing), None if kind in OPTIONAL else compared
        )
    import datetime

    results["date"] = datetime.datetime.now(datetime.timezone.utc).date().isoformat()
    ours, theirs = results["collabzoo"], results["comlrl"]
    both = "error" not in ours and "error" not in theirs
    if both:
        results["ratio"] = ours["mean_update_seconds"] / theirs["mean_update_seconds"]
        results["later_ratio"] = (
            ours["mean_later_update_seconds"] / theirs["mean_later_update_seconds"]
        )
        results["cpu_ratio"] = ours["mean_update_cpu_seconds"] / theirs["mean_update_cpu_seconds"]
        checks = (ours.get("initial_weight_checksum"), theirs.get("initial_weight_checksum"))
        if None not in checks:
            results["same_initial_weights"] = abs(checks[0] - checks[1]) <= 1e-6 * abs(checks[0])
    results["total_seconds"] = time.perf_counter() - started
    report(results)
    if args.json:
        results["headline"] = headline(results) if both else []
        write_results(args.json, results)
    if args.plot:
        plot(results, args.plot)


# ----- the Performance page's table ---------------------------------------------------------------
def bfcl_side_by_side_table(results: dict[str, Any]) -> str:
    """One row per update both libraries finished: wall and CPU time, mean training reward and
    answer length of each; then the means and the ratios."""
    c, t = results["collabzoo"], results["comlrl"]
    compared = c["compared_updates"]
    pairs = list(zip(c["updates"][:compared], t["updates"][:compared], strict=True))
    control = untrained_rewards(results)

    def pair(a: float, b: float, fmt: str) -> str:
        return f"{a:{fmt}} / {b:{fmt}}"

    cells = [
        [
            str(a["update"]),
            pair(a["seconds"], b["seconds"], ",.0f"),
            pair(a["cpu_seconds"], b["cpu_seconds"], ",.0f"),
            pair(a["mean_reward"], b["mean_reward"], "+.3f"),
            *control_cell(control, a["update"]),
            pair(a["mean_completion_tokens"], b["mean_completion_tokens"], ".0f"),
        ]
        for a, b in pairs
    ]
    shown = [control[u] for u in range(1, compared + 1) if u in control]
    cells.append(
        [
            "mean",
            pair(c["mean_update_seconds"], t["mean_update_seconds"], ",.0f"),
            pair(c["mean_update_cpu_seconds"], t["mean_update_cpu_seconds"], ",.0f"),
            pair(c["mean_reward"], t["mean_reward"], "+.3f"),
            *([f"{statistics.fmean(shown):+.3f}" if shown else ""] if control else []),
            "",
        ]
    )
    cells.append(
        [
            "time, collabzoo / CoMLRL",
            times(results["ratio"], 2),
            times(results["cpu_ratio"], 2),
            "",
            *([""] if control else []),
            "",
        ]
    )
    header = [
        "update",
        "wall time (s), collabzoo / CoMLRL",
        "CPU time (s), collabzoo / CoMLRL",
        "mean training reward, collabzoo / CoMLRL",
        *([CONTROL_HEADER] if control else []),
        "answer tokens, collabzoo / CoMLRL",
    ]
    return markdown_table(header, cells, align="lrrrr" + ("r" if control else ""))


CONTROL_HEADER = "reward, untrained control"


def untrained_rewards(results: dict[str, Any]) -> dict[int, float]:
    """The control's mean reward by update (empty when the file has no control run)."""
    r = results.get("untrained") or {}
    return {u["update"]: u["mean_reward"] for u in r.get("updates") or []}


def control_cell(control: dict[int, float], update: int) -> list[str]:
    """The control's reward at `update` as a table cell: no cell without a control, "-" where
    the control did not reach that update."""
    if not control:
        return []
    return [f"{control[update]:+.3f}" if update in control else "-"]


def later_updates_table(results: dict[str, Any]) -> str:
    """collabzoo's updates past those CoMLRL finished (its learning curve goes on)."""
    c = results["collabzoo"]
    control = untrained_rewards(results)
    cells = [
        [
            str(u["update"]),
            f"{u['seconds']:,.0f}",
            f"{u['cpu_seconds']:,.0f}",
            f"{u['mean_reward']:+.3f}",
            *control_cell(control, u["update"]),
            f"{u['mean_completion_tokens']:.0f}",
        ]
        for u in c["updates"][c["compared_updates"] :]
    ]
    header = [
        "update",
        "wall time (s)",
        "CPU time (s)",
        "mean training reward",
        *([CONTROL_HEADER] if control else []),
        "answer tokens",
    ]
    return markdown_table(header, cells, align="lrrrr" + ("r" if control else ""))


def headline(results: dict[str, Any]) -> list[dict[str, Any]]:
    """The summary's row: both wall times per update, and the speed-up (CoMLRL's time over
    collabzoo's, the summary's convention: above 1 is collabzoo faster). None (`[]`) when the
    libraries finished fewer than MIN_HEADLINE_UPDATES updates in common: too little to
    summarise, the section shows what there is."""
    if results["collabzoo"]["compared_updates"] < MIN_HEADLINE_UPDATES:
        return []
    ours = results["collabzoo"]["mean_update_seconds"]
    theirs = results["comlrl"]["mean_update_seconds"]
    updates = results["collabzoo"]["compared_updates"]
    return [
        {
            "benchmark": "MAGRPO on BFCL v4 against CoMLRL (the reference's drive)",
            "figure": f"{ours:,.0f} s against {theirs:,.0f} s per update (mean of {updates}), "
            f"SmolLM2-135M-Instruct, K=4, {results['settings']['max_new_tokens']} new tokens",
            "ratio": round(theirs / ours, 2),
            "section": "MAGRPO on BFCL v4 against CoMLRL",
        }
    ]


if __name__ == "__main__":
    main()

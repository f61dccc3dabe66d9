"""Actor-critic training throughput and memory: collabzoo against CoMLRL 1.4.3, side by side.

Three pairings, each on the same two-agent team, data and reward as `magrpo_vs_comlrl.py`
(a random Qwen2-architecture model, hidden 256, 2 layers, byte-level tokenizer, deep-copied per
agent; 8 prompts, 1 turn, 128 new tokens; the character-overlap team reward):

- IAC, separate critics: collabzoo `IACTrainer(use_separate_critic=True)` (each critic a copy of
  its agent's model with a value head) against CoMLRL `IACTrainer(agents=[a, b],
  critics=[c_a, c_b], use_separate_critic=True)`;
- IAC, value heads on the actors: `use_separate_critic=False` in both;
- CC: collabzoo `CentralCriticTrainer` (one critic over env.state()) against CoMLRL
  `MAACTrainer(agents=[a, b], critics=[c])`.

One generation per agent and prompt (the reference's IAC default), so a joint sample is one
prompt's joint answer. collabzoo rolls out the 8 prompts per `train_step` (rollout_buffer_size
8); CoMLRL runs its `.train()` epoch over the 8 prompts with `rollout_buffer_size=4`, as in its
examples. Each library gets a warm-up (one step / one epoch on 2 other prompts), then timed
steps / epochs. Every measurement is its own subprocess (so peak RSS is one library's), with the
same torch thread count (`--threads`, default 1); rounds alternate between the libraries and
the best round of each is reported.

Memory: CC with two full actors and a full critic (CoMLRL's only option) against collabzoo's CC
on one base model with three LoRA adapters (two actors, one critic), on the hidden-512 model of
`magrpo_vs_comlrl.py`, as peak RSS after one update.

With `--model NAME` (a model folder, a hub id, or a known short name such as
`smollm2-135m-instruct`, resolved by `collabzoo.algos.policies.pretrained.resolve_model`, loaded
with `collabzoo.algos.load_causal_lm`) every actor and critic of both libraries is a full copy of
that pretrained model, with the same prompts (inside the model's chat template, identical token
ids in both), new-token budget, sampling and learning rates as above; the memory runs use it too.
`--quick` then runs 2 prompts and 32 new tokens (without it: the 8 prompts and 128 tokens above).

Known pitfall: CoMLRL 1.4.3 takes the tokenizer's pad token as the end of the prompt in its
MAGRPO and as the end of an answer everywhere. SmolLM2's pad token is `<|im_end|>`, which its
chat template writes into every prompt, so CoMLRL's MAGRPO silently generates empty completions
(its IAC and MAAC cut the prompt at its full length, so only the answer's end depends on the pad
token there). As in `magrpo_vs_comlrl.py`, a pad token that occurs in the templated prompts is
replaced by `<|endoftext|>` for both libraries, and the models' generation config pads finished
rows with it, so one tokenizer serves both scripts and both libraries. Before timing, one
untimed warm-up per library (the first variant, on the same prompts) checks that both generate
non-empty completions of comparable length and stops with a message if not; every later
measurement also stops before its timing when its own warm-up answers are empty. The table
reports each library's mean completion length (tokens of the answers the reward scored).

LoRA: CoMLRL 1.4.3 has no LoRA or peft option (its IAC and MAAC trainers take full actor and
critic models only), so throughput compares full models, and the memory section reports
collabzoo's LoRA team against full models only.

    python benchmarks/actor_critic_vs_comlrl.py [--quick] [--json [results.json]]
    python benchmarks/actor_critic_vs_comlrl.py --model smollm2-135m-instruct --quick --skip-memory

`--json` alone writes benchmarks/results/actor_critic_vs_comlrl.json, from which
`actor_critic_table` builds the Performance page's table. The page's table of the pretrained
model (`pretrained_table`) reads benchmarks/results/pretrained_vs_comlrl.json: the `--json`
files of this script's and `magrpo_vs_comlrl.py`'s `--model` runs, under "actor_critic" and
"magrpo".
"""

from __future__ import annotations

import argparse
import os
import platform
import sys
import tempfile
import time
from dataclasses import asdict, replace
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from magrpo_vs_comlrl import (
    LARGE,
    PROMPTS,
    SMALL,
    WARMUP_PROMPTS,
    Workload,
    add_model_option,
    answer_lengths,
    base_model,
    comlrl_formatters,
    comlrl_reward,
    first_line,
    mean_tokens,
    peak_rss_mb,
    preflight,
    prompt_pair_env_class,
    require_answers,
    resolved_model,
    run_as_child,
    run_child,
    summarise,
    team_models,
    tensor_bytes,
)
from results_table import markdown_table, results_path, thousands, times, write_results

COMMON = {  # identical for both libraries
    "max_new_tokens": 128,
    "temperature": 0.6,
    "top_p": 0.6,
    "top_k": 50,
}
LEARNING_RATES = {"actor": 5e-6, "critic": 5e-6}
VARIANTS = ("iac-separate", "iac-head", "cc")
TARGET_RATIO = 3.0
WORKLOAD = Workload(num_generations=1, max_new_tokens=COMMON["max_new_tokens"])
QUICK_MODEL_WORKLOAD = Workload(prompts=2, num_generations=1, max_new_tokens=32)
"""`--quick --model`: a real model on a busy 2-core machine."""


def collabzoo_trainer(
    variant: str,
    spec: dict[str, int],
    lora: bool,
    workload: Workload,
    workdir: str,
    model: str | None = None,
):
    from collabzoo.algos import (
        CentralCriticConfig,
        CentralCriticTrainer,
        IACConfig,
        IACTrainer,
        LLMPolicy,
        lora_team,
    )

    if lora:
        base, tokenizer = base_model(spec, model)
        policies = lora_team(base, tokenizer, ["a", "b"])
    else:
        model_a, model_b, tokenizer = team_models(spec, model)
        policies = {"a": LLMPolicy(model_a, tokenizer), "b": LLMPolicy(model_b, tokenizer)}
    settings = dict(
        output_dir=workdir,
        num_turns=1,
        rollout_buffer_size=workload.prompts,
        num_generations=workload.num_generations,
        tensorboard=False,
        progress=False,
        save_steps=0,
        actor_learning_rate=LEARNING_RATES["actor"],
        critic_learning_rate=LEARNING_RATES["critic"],
        **{**COMMON, "max_new_tokens": workload.max_new_tokens},
    )
    env = prompt_pair_env_class(PROMPTS[: workload.prompts])
    if variant == "cc":
        return CentralCriticTrainer(env, policies, CentralCriticConfig(**settings)), policies
    separate = variant == "iac-separate"
    return IACTrainer(env, policies, IACConfig(use_separate_critic=separate, **settings)), policies


def child_collabzoo(params: dict[str, Any]) -> dict[str, Any]:
    import pettingzoo  # noqa: F401  (every library this measurement uses, before the baseline)
    import torch
    import transformers.models.qwen2.modeling_qwen2  # noqa: F401

    import collabzoo.algos  # noqa: F401

    if params.get("large"):  # both memory runs import peft, so their baselines match
        import peft  # noqa: F401
    rss_imports = peak_rss_mb()
    spec = LARGE if params.get("large") else SMALL
    workload = Workload(**params["workload"])
    model = params.get("model")
    with tempfile.TemporaryDirectory() as workdir:
        trainer, policies = collabzoo_trainer(
            params["variant"], spec, params.get("lora", False), workload, workdir, model
        )
        tokenizer = next(iter(policies.values())).tokenizer
        models = {id(p.model): p.model for p in policies.values()}
        for critic in trainer.critics.values():
            models[id(critic.backbone.model)] = critic.backbone.model
        param_bytes = tensor_bytes(p for m in models.values() for p in m.parameters())
        torch.manual_seed(0)
        warm = trainer.train_step()
        warm_lengths = answer_lengths(tokenizer)
        if model is not None:
            require_answers("collabzoo", warm_lengths)
        steps = params["steps"]
        started = time.perf_counter()
        for _ in range(steps):
            trainer.train_step()
        elapsed = time.perf_counter() - started
        result = {
            "library": "collabzoo",
            "variant": params["variant"],
            "lora": bool(params.get("lora")),
            "torch_threads": torch.get_num_threads(),
            "warmup_seconds": warm["update_seconds"],
            "warmup_lengths": warm_lengths,
            "param_bytes": param_bytes,
            "rss_after_imports_mb": rss_imports,
            "peak_rss_mb": peak_rss_mb(),
        }
        if steps:
            joint = steps * workload.prompts
            result.update(
                joint_samples=joint,
                seconds=elapsed,
                joint_samples_per_s=joint / elapsed,
                lengths=answer_lengths(tokenizer),
            )
        return result


def child_comlrl(params: dict[str, Any]) -> dict[str, Any]:
    os.environ["WANDB_MODE"] = "disabled"
    import copy

    import torch
    import transformers.models.qwen2.modeling_qwen2  # noqa: F401

    try:
        import datasets
        from comlrl.trainers.actor_critic import iac, maac
    except ImportError as error:
        return {"library": "comlrl", "error": f"CoMLRL not importable: {error}"}
    if params.get("large"):
        import peft  # noqa: F401
    rss_imports = peak_rss_mb()
    spec = LARGE if params.get("large") else SMALL
    workload = Workload(**params["workload"])
    model = params.get("model")
    warmup_prompts = params.get("warmup_prompts", WARMUP_PROMPTS)
    model_a, model_b, tokenizer = team_models(spec, model)
    common = dict(
        num_train_epochs=1,
        num_turns=1,
        rollout_buffer_size=4,
        eval_interval=10**9,
        logging_steps=10**9,
        early_termination_threshold=None,
        agent_learning_rate=LEARNING_RATES["actor"],
        critic_learning_rate=LEARNING_RATES["critic"],
        **{**COMMON, "max_new_tokens": workload.max_new_tokens},
    )
    data = dict(
        tokenizer=tokenizer,
        train_dataset=datasets.Dataset.from_list([{"prompt": p} for p in warmup_prompts]),
        reward_func=comlrl_reward,
        formatters=comlrl_formatters(tokenizer),
    )
    variant = params["variant"]
    critic_models: list[Any] = []
    if variant == "cc":
        critic_models = [copy.deepcopy(model_a)]
        trainer = maac.MAACTrainer(
            agents=[model_a, model_b],
            critics=critic_models,
            args=maac.MAACConfig(**common),
            **data,
        )
    elif variant == "iac-separate":
        critic_models = [copy.deepcopy(model_a), copy.deepcopy(model_b)]
        trainer = iac.IACTrainer(
            agents=[model_a, model_b],
            critics=critic_models,
            args=iac.IACConfig(use_separate_critic=True, **common),
            **data,
        )
    else:
        trainer = iac.IACTrainer(
            agents=[model_a, model_b],
            args=iac.IACConfig(use_separate_critic=False, **common),
            **data,
        )
    param_bytes = tensor_bytes(
        p for m in (model_a, model_b, *critic_models) for p in m.parameters()
    )
    torch.manual_seed(0)
    started = time.perf_counter()
    trainer.train()  # warm-up epoch, never timed
    warmup = time.perf_counter() - started
    warm_lengths = answer_lengths(tokenizer)
    if model is not None:
        require_answers("CoMLRL", warm_lengths)
    epochs = params["epochs"]
    result = {
        "library": "comlrl",
        "variant": variant,
        "torch_threads": torch.get_num_threads(),
        "warmup_seconds": warmup,
        "warmup_lengths": warm_lengths,
        "param_bytes": param_bytes,
        "rss_after_imports_mb": rss_imports,
    }
    if epochs:
        prompts = PROMPTS[: workload.prompts]
        trainer.train_dataset = datasets.Dataset.from_list([{"prompt": p} for p in prompts])
        started = time.perf_counter()
        for _ in range(epochs):
            trainer.train()
        elapsed = time.perf_counter() - started
        joint = epochs * workload.prompts
        result.update(
            joint_samples=joint,
            seconds=elapsed,
            joint_samples_per_s=joint / elapsed,
            lengths=answer_lengths(tokenizer),
        )
    result["peak_rss_mb"] = peak_rss_mb()
    return result


CHILDREN = {"collabzoo": child_collabzoo, "comlrl": child_comlrl}


def report(results: dict[str, Any]) -> None:
    settings = results["settings"]
    print(
        f"\nActor-critic training throughput: {settings['model_name']}, 2 agents, "
        f"{settings['prompts']} prompts, 1 generation, {settings['max_new_tokens']} new tokens, "
        f"1 turn, torch threads: {settings['threads']}"
    )
    print(
        f"{'variant':<14}{'collabzoo/s':>12}{'CoMLRL/s':>10}{'ratio':>8}"
        f"{'collabzoo MB':>14}{'CoMLRL MB':>11}{'answer tokens (cz / CoMLRL)':>29}"
    )
    for variant, row in results["throughput"].items():
        ours, theirs = row["collabzoo"], row["comlrl"]
        if "error" in ours or "error" in theirs:
            print(f"{variant:<14}   {first_line(ours) or first_line(theirs)}")
            continue
        ratio = ours["joint_samples_per_s"] / theirs["joint_samples_per_s"]
        print(
            f"{variant:<14}{ours['joint_samples_per_s']:>12.2f}"
            f"{theirs['joint_samples_per_s']:>10.2f}{ratio:>7.2f}x"
            f"{ours['peak_rss_mb']:>14,.0f}{theirs['peak_rss_mb']:>11,.0f}"
            f"{mean_tokens(ours) + ' / ' + mean_tokens(theirs):>29}"
        )
    memory = results.get("memory", {})
    if memory:
        print(f"\nMemory of CC on {settings['memory_model_name']}, peak RSS after one update:")
        for name, r in memory.items():
            if "error" in r:
                print(f"  {name:<40} {first_line(r)}")
                continue
            print(
                f"  {name:<40} params {r['param_bytes'] / 2**20:7.1f} MB   "
                f"peak RSS {r['peak_rss_mb']:7,.0f} MB "
                f"({r['peak_rss_mb'] - r['rss_after_imports_mb']:,.0f} above imports)"
            )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="one round, fewer repeats")
    parser.add_argument("--rounds", type=int, help="alternating rounds per library (default 2)")
    parser.add_argument("--variants", nargs="+", choices=VARIANTS, default=list(VARIANTS))
    add_model_option(parser)
    parser.add_argument("--threads", type=int, default=1, help="torch threads (default 1)")
    parser.add_argument("--timeout", type=float, default=600.0, help="seconds per subprocess")
    parser.add_argument("--skip-memory", action="store_true")
    parser.add_argument(
        "--json",
        nargs="?",
        const=str(results_path("actor_critic_vs_comlrl")),
        help="also write the results here (alone: benchmarks/results/actor_critic_vs_comlrl.json)",
    )
    parser.add_argument("--child", choices=sorted(CHILDREN), help=argparse.SUPPRESS)
    parser.add_argument("--params", default="{}", help=argparse.SUPPRESS)
    args = parser.parse_args()

    if args.child:
        run_as_child(CHILDREN, args.child, args.params)
        return

    rounds = args.rounds or (1 if args.quick else 2)
    steps, epochs = (2, 1) if args.quick else (3, 2)
    model = resolved_model(args.model)
    workload = QUICK_MODEL_WORKLOAD if model and args.quick else WORKLOAD
    shape = {"workload": asdict(workload), "model": model}
    script = os.path.abspath(__file__)

    def child(kind: str, params: dict[str, Any]) -> dict[str, Any]:
        return run_child(kind, {**shape, **params}, args.threads, args.timeout, script=script)

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
            "prompts": workload.prompts,
            **COMMON,
            "max_new_tokens": workload.max_new_tokens,
            "model": model or SMALL,
            "model_name": args.model or "tiny random Qwen2 (hidden 256, 2 layers)",
            "memory_model_name": args.model or "the hidden-512 model",
            "threads": args.threads,
            "rounds": rounds,
        },
        "throughput": {},
    }
    if model is not None:
        first = {"variant": args.variants[0]}
        same_prompts = PROMPTS[: workload.prompts]  # collabzoo's warm-up prompts
        checks = {
            "collabzoo": {**first, "steps": 0},
            "comlrl": {**first, "epochs": 0, "warmup_prompts": same_prompts},
        }
        results["completion_check"] = preflight(child, checks)
    for variant in args.variants:
        runs: dict[str, list[dict[str, Any]]] = {"collabzoo": [], "comlrl": []}
        for index in range(rounds):
            print(f"{variant} round {index + 1}/{rounds} ...", flush=True)
            params = {"variant": variant}
            runs["collabzoo"].append(child("collabzoo", {**params, "steps": steps}))
            runs["comlrl"].append(child("comlrl", {**params, "epochs": epochs}))
        row = results["throughput"][variant] = {k: summarise(v) for k, v in runs.items()}
        if "error" not in row["collabzoo"] and "error" not in row["comlrl"]:
            ours, theirs = row["collabzoo"], row["comlrl"]
            row["ratio"] = ours["joint_samples_per_s"] / theirs["joint_samples_per_s"]
    if not args.skip_memory:
        memory = workload
        if args.quick:
            memory = replace(workload, max_new_tokens=min(32, workload.max_new_tokens))
        params = {"variant": "cc", "workload": asdict(memory), "large": True}
        print("memory ...", flush=True)
        results["memory"] = {
            "CoMLRL MAAC, 3 full models": child("comlrl", {**params, "epochs": 0}),
            "collabzoo CC, 3 full models": child("collabzoo", {**params, "steps": 0}),
            "collabzoo CC, 1 base + 3 LoRA adapters": child(
                "collabzoo", {**params, "steps": 0, "lora": True}
            ),
        }
    results["total_seconds"] = time.perf_counter() - started
    report(results)
    print(f"\ntotal {results['total_seconds']:.0f}s")
    if args.json:
        if all("ratio" in row for row in results["throughput"].values()):
            results["headline"] = headline(results)
        write_results(args.json, results)


# ----- the Performance page's tables -----------------------------------------------------------
TINY_NAMES = {
    "iac-separate": "IAC, separate critics (`IACTrainer` both)",
    "iac-head": "IAC, value heads on the actors",
    "cc": "CC (`CentralCriticTrainer` / `MAACTrainer`)",
}
PRETRAINED_NAMES = {
    "iac-separate": "IAC, separate critics",
    "iac-head": "IAC, value heads",
    "cc": "CC",
}


SHORT_NAMES = {
    "iac-separate": "IAC with separate critics",
    "iac-head": "IAC with value heads",
    "cc": "CC",
}


def ratio_of(row: dict[str, Any]) -> float:
    """The run's ratio of unrounded rates (a row's own), else the rates' ratio."""
    return row.get(
        "ratio", row["collabzoo"]["joint_samples_per_s"] / row["comlrl"]["joint_samples_per_s"]
    )


def rss(row: dict[str, Any]) -> str:
    ours, theirs = row["collabzoo"]["peak_rss_mb"], row["comlrl"]["peak_rss_mb"]
    return f"{thousands(ours)} / {thousands(theirs)} MB"


def actor_critic_table(results: dict[str, Any]) -> str:
    """The tiny model's three pairings, joint samples/s of the best round."""
    cells = [
        [
            TINY_NAMES[variant],
            f"{row['collabzoo']['joint_samples_per_s']:.2f}",
            f"{row['comlrl']['joint_samples_per_s']:.2f}",
            times(ratio_of(row), 1),
            rss(row),
        ]
        for variant, row in results["throughput"].items()
    ]
    header = [
        "learner",
        "collabzoo",
        "CoMLRL",
        "collabzoo / CoMLRL",
        "peak RSS, collabzoo / CoMLRL",
    ]
    return markdown_table(header, cells)


def headline(results: dict[str, Any]) -> dict[str, Any] | list:
    """CC's ratio, the pairing with a critic over the joint state, and the others' beside it; for
    the pretrained model's file (both scripts' runs), `pretrained_headline`."""
    if "actor_critic" in results and "magrpo" in results:
        return pretrained_headline(results)
    rows = results["throughput"]
    if "cc" not in rows:
        return []  # a run without CC has no summary row
    cc = rows["cc"]
    others = ", ".join(
        f"{SHORT_NAMES[v]} {times(ratio_of(r), 1)}" for v, r in rows.items() if v != "cc"
    )
    ours, theirs = cc["collabzoo"]["joint_samples_per_s"], cc["comlrl"]["joint_samples_per_s"]
    return {
        "benchmark": "Actor-critic learners against CoMLRL",
        "figure": f"CC {ours:.2f} against {theirs:.2f} joint samples/s; {others}",
        "ratio": round(ratio_of(cc), 1),
        "section": "Actor-critic learners",
    }


def rounds_cell(ours: dict[str, Any], theirs: dict[str, Any], rounds: int) -> str:
    """Every round's rate where the file keeps them, else how many rounds there were."""
    if "round_joint_samples_per_s" in ours and "round_joint_samples_per_s" in theirs:
        return " / ".join(
            ", ".join(f"{rate:.2f}" for rate in side["round_joint_samples_per_s"])
            for side in (ours, theirs)
        )
    return f"{rounds} rounds each"


def pretrained_table(results: dict[str, Any]) -> str:
    """MAGRPO and the actor-critic learners on the pretrained model, from the two scripts'
    `--model` runs (`results["magrpo"]`, `results["actor_critic"]`)."""

    def cells(name: str, row: dict[str, Any], rounds: int, median: float | None) -> list[str]:
        ours, theirs = row["collabzoo"], row["comlrl"]
        ratio = times(ratio_of(row), 2)
        if median is not None:
            ratio += f" (median {times(median, 2)})"
        return [
            name,
            f"{ours['joint_samples_per_s']:.2f}",
            f"{theirs['joint_samples_per_s']:.2f}",
            ratio,
            rounds_cell(ours, theirs, rounds),
            f"{mean_tokens(ours)} / {mean_tokens(theirs)}",
            rss(row),
        ]

    magrpo, actor_critic = results["magrpo"], results["actor_critic"]
    rows = [cells("MAGRPO", magrpo, magrpo["settings"]["rounds"], magrpo.get("median_ratio"))]
    rounds = actor_critic["settings"]["rounds"]
    for variant, row in actor_critic["throughput"].items():
        rows.append(cells(PRETRAINED_NAMES[variant], row, rounds, row.get("median_ratio")))
    header = [
        "learner",
        "collabzoo",
        "CoMLRL",
        "collabzoo / CoMLRL",
        "rounds, collabzoo / CoMLRL",
        "answer tokens, collabzoo / CoMLRL",
        "peak RSS, collabzoo / CoMLRL",
    ]
    return markdown_table(header, rows)


def pretrained_headline(results: dict[str, Any]) -> dict[str, Any]:
    magrpo = results["magrpo"]
    ratios = [ratio_of(row) for row in results["actor_critic"]["throughput"].values()]
    ours, theirs = (
        magrpo["collabzoo"]["joint_samples_per_s"],
        magrpo["comlrl"]["joint_samples_per_s"],
    )
    return {
        "benchmark": "Against CoMLRL on SmolLM2-135M-Instruct",
        "figure": f"MAGRPO {ours:.2f} against {theirs:.2f} joint samples/s; the actor-critic "
        f"learners {min(ratios):.2f}-{times(max(ratios), 2)}",
        "ratio": round(ratio_of(magrpo), 2),
        "section": "On the pretrained model (SmolLM2-135M-Instruct)",
    }

"""Preference-learner updates on SmolLM2-135M-Instruct: collabzoo against CoMLRL 1.4.3.

What is timed is one update on a fixed batch of joint preference pairs, the same pairs (the same
token ids, the same texts) on both sides, so sampling never enters the figure:

- MADPO: one DPO optimizer step per agent. CoMLRL's own `MADPOTrainer._update_from_preference_batch`
  (built with `object.__new__`, as tests/test_preference_parity.py does: its constructor reads
  the hub) on two full copies of the model, each with CoMLRL's AdamW at lr 5e-6; collabzoo's
  `MADPOTrainer.dpo_step` with `reference_free=True` (CoMLRL's loss, so both compute the same
  number: the first step's loss is recorded on both sides and must agree), once on two full
  copies and once on a LoRA team (one base, one rank-8 adapter per agent).
- MARLHF: one Bradley-Terry epoch of the joint reward model over the same pairs in one batch.
  CoMLRL's `MARLHFTrainer._train_reward_model` on its `JointRewardModel` (a full copy of the
  model and a scalar head, AdamW lr 1e-5) beside its two full agents; collabzoo's
  `fit_reward_model` (which also builds its fresh reward model each round, inside the timing;
  the child times one such build alone as `fresh_model_seconds`),
  with a full backbone (`reward_lora_rank=None`) for full agents, and a rank-8 adapter on the
  LoRA team's base.

Every measurement is its own subprocess (so peak RSS is one library's), with the same torch
thread count (`--threads`, default 1); each child makes one untimed warm-up update and then
`--steps` timed ones. Rounds interleave the variants; the table reports the median round of
each, the ratio of the medians, and each side's highest peak RSS.

CoMLRL scores a completion's tokens but the last (its logits are cut one short); as in the
parity tests, every completion it receives carries one extra token it ignores, so both
libraries score exactly the same tokens. CoMLRL 1.4.3 has no LoRA option, so the LoRA rows set
collabzoo's LoRA team against CoMLRL's full models (the only way CoMLRL trains).

    python benchmarks/preference_vs_comlrl.py [--variants ...] [--rounds 3] [--json [results.json]]

`--json` alone writes benchmarks/results/preference_vs_comlrl.json, from which
`preference_table` builds the Performance page's table; the page's MARLHF table is the same
function on benchmarks/results/preference_rm_vs_comlrl.json (a `--variants rm-full rm-lora`
run, whose file carries no headline of its own).
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from magrpo_vs_comlrl import (
    PROMPTS,
    SMALL,
    base_model,
    chat_prompt,
    first_line,
    format_prompt,
    peak_rss_mb,
    prompt_pair_env_class,
    resolved_model,
    run_as_child,
    run_child,
    team_models,
)
from results_table import markdown_table, results_path, thousands, times, write_results

DEFAULT_MODEL = "smollm2-135m-instruct"
AGENTS = ("a", "b")
BETA = 0.1
AGENT_LEARNING_RATE = 5e-6  # CoMLRL's MADPO default
REWARD_LEARNING_RATE = 1e-5  # CoMLRL's MARLHF default
TARGET_RATIO = 2.0
ANSWERS = [
    "Count the words once, then sort them by how often they occur and print the top three.",
    "A short poem needs a single image; start with the sea and end with the light on it.",
    "Split the list in halves, sort each half, then merge them by taking the smaller head.",
    "Water boils at a lower temperature on a mountain because the air pressure is lower there.",
    "Write the test first, watch it fail, then write the least code that makes it pass.",
    "The capital of France is Paris, which sits on the Seine in the north of the country.",
    "Keep a running total and reset it whenever it drops below zero; the best total wins.",
    "Two agents can split a task: one drafts the plan while the other checks every step.",
]
"""Answers of 17-20 tokens; pair i prefers answer i to answer i + 1 for both agents."""
VARIANTS = ("madpo-full", "madpo-lora", "rm-full", "rm-lora")


def build_pairs(tokenizer: Any, count: int) -> list[dict[str, Any]]:
    """`count` joint pairs as plain records: per agent the chat-templated prompt, the chosen and
    rejected answers, and their token ids (answers tokenized without special tokens)."""
    if count > len(PROMPTS) or count > len(ANSWERS):
        raise ValueError(f"at most {min(len(PROMPTS), len(ANSWERS))} pairs, asked for {count}")

    def ids(text: str) -> list[int]:
        return list(tokenizer(text, add_special_tokens=False)["input_ids"])

    pairs = []
    for i in range(count):
        prompts = {a: chat_prompt(tokenizer, format_prompt(a, PROMPTS[i])) for a in AGENTS}
        chosen = {a: ANSWERS[i] for a in AGENTS}
        rejected = {a: ANSWERS[(i + 1) % len(ANSWERS)] for a in AGENTS}
        pairs.append(
            {
                "prompts": prompts,
                "chosen": chosen,
                "rejected": rejected,
                "prompt_ids": {a: ids(t) for a, t in prompts.items()},
                "chosen_ids": {a: ids(t) for a, t in chosen.items()},
                "rejected_ids": {a: ids(t) for a, t in rejected.items()},
                "chosen_reward": 1.0,
                "rejected_reward": 0.0,
                "candidate_reward_mean": 0.5,
            }
        )
    return pairs


def timed(update, steps: int) -> tuple[Any, float, float]:
    """One untimed warm-up call of `update`, then `steps` timed ones: (warm-up result, warm-up
    seconds, timed seconds)."""
    started = time.perf_counter()
    warm = update()
    warmup = time.perf_counter() - started
    started = time.perf_counter()
    for _ in range(steps):
        update()
    return warm, warmup, time.perf_counter() - started


def finish(result: dict[str, Any], pairs: int, steps: int, elapsed: float) -> dict[str, Any]:
    result.update(
        pairs_per_update=pairs,
        steps=steps,
        seconds=elapsed,
        pairs_per_s=pairs * steps / elapsed,
        peak_rss_mb=peak_rss_mb(),
    )
    return result


# ----- collabzoo --------------------------------------------------------------------------------
def collabzoo_team(lora: bool, model: str):
    from collabzoo.algos import LLMPolicy, lora_team

    if lora:
        base, tokenizer = base_model(SMALL, model)
        return lora_team(base, tokenizer, list(AGENTS)), tokenizer
    first, second, tokenizer = team_models(SMALL, model)
    return {"a": LLMPolicy(first, tokenizer), "b": LLMPolicy(second, tokenizer)}, tokenizer


def child_collabzoo(params: dict[str, Any]) -> dict[str, Any]:
    import peft  # noqa: F401  (both libraries' children import it, so their baselines match)
    import torch

    from collabzoo.algos.learners.madpo import MADPOConfig, MADPOTrainer
    from collabzoo.algos.learners.marlhf import MARLHFConfig, MARLHFTrainer
    from collabzoo.algos.learners.preference_pairs import PreferencePair

    rss_imports = peak_rss_mb()
    variant, lora = params["variant"], params["variant"].endswith("lora")
    torch.manual_seed(0)
    team, tokenizer = collabzoo_team(lora, params["model"])
    pairs = [PreferencePair(**r) for r in build_pairs(tokenizer, params["pairs"])]
    env = prompt_pair_env_class(PROMPTS)
    common = dict(tensorboard=False, progress=False, save_steps=0, seed=0)
    result: dict[str, Any] = {"library": "collabzoo", "variant": variant}
    with tempfile.TemporaryDirectory() as workdir:
        if variant.startswith("madpo"):
            args = MADPOConfig(
                output_dir=workdir,
                reference_free=True,
                dpo_beta=BETA,
                agent_learning_rate=AGENT_LEARNING_RATE,
                train_batch_size=len(pairs),
                **common,
            )
            trainer = MADPOTrainer(env, team, args)
            warm, warmup, elapsed = timed(lambda: trainer.dpo_step(pairs), params["steps"])
            result["first_loss"] = warm["loss"]
        else:
            args = MARLHFConfig(
                output_dir=workdir,
                reward_lora_rank=8 if lora else None,
                reward_learning_rate=REWARD_LEARNING_RATE,
                reward_train_batch_size=len(pairs),
                reward_num_train_epochs=1,
                **common,
            )
            trainer = MARLHFTrainer(env, team, args)
            built = time.perf_counter()  # what a fit spends on its fresh reward model alone
            trainer.new_reward_model(0)
            result["fresh_model_seconds"] = time.perf_counter() - built
            warm, warmup, elapsed = timed(
                lambda: trainer.fit_reward_model(pairs, [], 0), params["steps"]
            )
            result["first_loss"] = warm["reward_model/loss"]
    result.update(
        torch_threads=torch.get_num_threads(),
        warmup_seconds=warmup,
        rss_after_imports_mb=rss_imports,
    )
    return finish(result, len(pairs), params["steps"], elapsed)


# ----- CoMLRL -------------------------------------------------------------------------------------
def sentinel_id(tokenizer: Any) -> int:
    """A token CoMLRL leaves unscored at a completion's end: anything but its pad token."""
    token = tokenizer("\n", add_special_tokens=False)["input_ids"][-1]
    if token == tokenizer.pad_token_id:
        raise ValueError("the sentinel token is the pad token, which CoMLRL cuts answers at")
    return token


def child_comlrl(params: dict[str, Any]) -> dict[str, Any]:
    os.environ["WANDB_MODE"] = "disabled"
    import copy
    from types import SimpleNamespace

    import peft  # noqa: F401
    import torch

    try:
        from comlrl.trainers.preference import madpo, marlhf
    except ImportError as error:
        return {"library": "comlrl", "error": f"CoMLRL not importable: {error}"}
    rss_imports = peak_rss_mb()
    variant = params["variant"]
    torch.manual_seed(0)
    model_a, model_b, tokenizer = team_models(SMALL, params["model"])
    records = build_pairs(tokenizer, params["pairs"])
    extra = sentinel_id(tokenizer)

    def row(values: list[int], sentinel: bool) -> torch.Tensor:
        return torch.tensor(values + ([extra] if sentinel else []), dtype=torch.long)

    pairs = [
        madpo.PreferencePair(
            prompts=[r["prompts"][a] for a in AGENTS],
            winner_completions=[r["chosen"][a] for a in AGENTS],
            loser_completions=[r["rejected"][a] for a in AGENTS],
            agent_tensors=[
                madpo.AgentPreferenceTensors(
                    row(r["prompt_ids"][a], False),
                    row(r["chosen_ids"][a], True),
                    row(r["rejected_ids"][a], True),
                )
                for a in AGENTS
            ],
            winner_reward=1.0,
            loser_reward=0.0,
            candidate_reward_mean=0.5,
        )
        for r in records
    ]
    result: dict[str, Any] = {"library": "comlrl", "variant": variant}
    if variant.startswith("madpo"):
        trainer = object.__new__(madpo.MADPOTrainer)
        trainer.agents = [model_a, model_b]
        trainer.tokenizers = [tokenizer, tokenizer]
        trainer.num_agents = len(AGENTS)
        trainer.centralized_collaboration = None
        trainer.args = SimpleNamespace(dpo_beta=BETA)
        trainer.optimizers = [  # as CoMLRL's MAGRPOTrainer.__init__ builds them
            torch.optim.AdamW(m.parameters(), lr=AGENT_LEARNING_RATE) for m in trainer.agents
        ]
        with torch.no_grad():  # untimed: the loss before the first step, for the cross-check
            deltas = torch.tensor(trainer._detached_agent_deltas(pairs))
        result["first_loss"] = float(-torch.nn.functional.logsigmoid(BETA * deltas.sum(-1)).mean())
        _, warmup, elapsed = timed(
            lambda: trainer._update_from_preference_batch(pairs), params["steps"]
        )
    else:
        trainer = object.__new__(marlhf.MARLHFTrainer)
        trainer.agents = [model_a, model_b]
        trainer.reward_model = marlhf.JointRewardModel(copy.deepcopy(model_a))
        trainer.reward_tokenizer = tokenizer
        trainer.reward_optimizer = torch.optim.AdamW(
            trainer.reward_model.parameters(), lr=REWARD_LEARNING_RATE
        )
        trainer.reward_device = torch.device("cpu")
        trainer.args = SimpleNamespace(
            reward_train_batch_size=len(pairs), reward_num_train_epochs=1, reward_max_length=None
        )
        trainer.verbose, trainer.num_agents = False, len(AGENTS)
        _, warmup, elapsed = timed(lambda: trainer._train_reward_model(pairs), params["steps"])
    result.update(
        torch_threads=torch.get_num_threads(),
        warmup_seconds=warmup,
        rss_after_imports_mb=rss_imports,
    )
    return finish(result, len(pairs), params["steps"], elapsed)


CHILDREN = {"collabzoo": child_collabzoo, "comlrl": child_comlrl}


# ----- the run ------------------------------------------------------------------------------------
def median_of(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """The median round's record (rates of every round beside it) and the highest peak RSS."""
    good = [r for r in runs if "error" not in r]
    if not good:
        return {"error": runs[-1]["error"], "failed_rounds": len(runs)}
    ordered = sorted(good, key=lambda r: r["pairs_per_s"])
    median = ordered[(len(ordered) - 1) // 2]
    return {
        **median,
        "pairs_per_s": statistics.median(r["pairs_per_s"] for r in good),
        "round_pairs_per_s": [r["pairs_per_s"] for r in good],
        "peak_rss_mb": max(r["peak_rss_mb"] for r in good),
        "failed_rounds": len(runs) - len(good),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default=DEFAULT_MODEL, help="model folder or known name")
    parser.add_argument("--variants", nargs="+", choices=VARIANTS, default=list(VARIANTS))
    parser.add_argument("--rounds", type=int, default=3, help="interleaved rounds (default 3)")
    parser.add_argument("--steps", type=int, default=1, help="timed updates per child (default 1)")
    parser.add_argument("--pairs", type=int, default=2, help="pairs per update (default 2)")
    parser.add_argument("--threads", type=int, default=1, help="torch threads (default 1)")
    parser.add_argument("--timeout", type=float, default=600.0, help="seconds per subprocess")
    parser.add_argument(
        "--json",
        nargs="?",
        const=str(results_path("preference_vs_comlrl")),
        help="also write the results here (alone: benchmarks/results/preference_vs_comlrl.json)",
    )
    parser.add_argument("--child", choices=sorted(CHILDREN), help=argparse.SUPPRESS)
    parser.add_argument("--params", default="{}", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        run_as_child(CHILDREN, args.child, args.params)
        return

    model = resolved_model(args.model)
    shape = {"model": model, "pairs": args.pairs, "steps": args.steps}
    script = os.path.abspath(__file__)
    started = time.perf_counter()
    runs: dict[str, dict[str, list[dict[str, Any]]]] = {
        v: {"collabzoo": [], "comlrl": []} for v in args.variants
    }
    load_at_start = os.getloadavg()
    for index in range(args.rounds):
        for variant in args.variants:  # rounds interleave the variants and the libraries
            print(f"round {index + 1}/{args.rounds}: {variant} ...", flush=True)
            for library in ("collabzoo", "comlrl") if index % 2 == 0 else ("comlrl", "collabzoo"):
                params = {**shape, "variant": variant}
                result = run_child(library, params, args.threads, args.timeout, script=script)
                runs[variant][library].append(result)
                print(f"  {library}: {first_line(result) or round(result['pairs_per_s'], 3)}")
    rows: dict[str, Any] = {}
    for variant, sides in runs.items():
        row = rows[variant] = {library: median_of(r) for library, r in sides.items()}
        ours, theirs = row["collabzoo"], row["comlrl"]
        if "error" not in ours and "error" not in theirs:
            row["ratio"] = ours["pairs_per_s"] / theirs["pairs_per_s"]
        if "first_loss" in ours and "first_loss" in theirs:  # MADPO: the same loss both sides
            row["loss_gap"] = abs(ours["first_loss"] - theirs["first_loss"])
    results: dict[str, Any] = {
        "machine": {
            "platform": platform.platform(),
            "processor": platform.processor() or platform.machine(),
            "cpus": os.cpu_count(),
            "load_average_at_start": load_at_start,
            "load_average_at_end": os.getloadavg(),
            "python": platform.python_version(),
        },
        "settings": {
            "model_name": args.model,
            "pairs_per_update": args.pairs,
            "timed_updates_per_child": args.steps,
            "rounds": args.rounds,
            "threads": args.threads,
            "dpo_beta": BETA,
            "agent_learning_rate": AGENT_LEARNING_RATE,
            "reward_learning_rate": REWARD_LEARNING_RATE,
        },
        "throughput": rows,
        "total_seconds": time.perf_counter() - started,
    }
    report(results)
    if args.json:
        if all("ratio" in row for row in rows.values()):
            results["headline"] = headline(results)
        write_results(args.json, results)


def report(results: dict[str, Any]) -> None:
    s = results["settings"]
    print(
        f"\nPreference updates on {s['model_name']}: {s['pairs_per_update']} pairs per update, "
        f"median of {s['rounds']} rounds, torch threads {s['threads']}"
    )
    print(f"{'variant':<12}{'collabzoo':>11}{'CoMLRL':>9}{'ratio':>8}{'RSS cz / CoMLRL MB':>22}")
    for variant, row in results["throughput"].items():
        ours, theirs = row["collabzoo"], row["comlrl"]
        if "ratio" not in row:
            print(f"{variant:<12}   {first_line(ours) or first_line(theirs)}")
            continue
        memory = f"{ours['peak_rss_mb']:,.0f} / {theirs['peak_rss_mb']:,.0f}"
        print(
            f"{variant:<12}{ours['pairs_per_s']:>11.3f}{theirs['pairs_per_s']:>9.3f}"
            f"{row['ratio']:>7.2f}x{memory:>22}"
            + (f"   first-loss gap {row['loss_gap']:.1e}" if "loss_gap" in row else "")
        )
    print(f"total {results['total_seconds']:.0f}s")


# ----- the Performance page's table -----------------------------------------------------------
NAMES = {
    "madpo-full": ("MADPO DPO step", "2 full models", "2 full models"),
    "madpo-lora": ("MADPO DPO step", "1 base + 2 LoRA adapters", "2 full models"),
    "rm-full": ("MARLHF reward-model epoch", "full reward model", "full reward model"),
    "rm-lora": ("MARLHF reward-model epoch", "LoRA team, reward adapter", "full reward model"),
}

SHORT = {
    "madpo-lora": "MADPO with a LoRA team",
    "rm-full": "MARLHF's reward model",
    "rm-lora": "MARLHF's reward adapter on a LoRA team",
}


def preference_table(results: dict[str, Any]) -> str:
    """Pairs/s (median round), the ratio of the medians, every round, and peak RSS."""
    cells = []
    for variant, row in results["throughput"].items():
        ours, theirs = row["collabzoo"], row["comlrl"]
        step, our_models, their_models = NAMES[variant]
        rounds = " / ".join(
            ", ".join(f"{rate:.2f}" for rate in side["round_pairs_per_s"])
            for side in (ours, theirs)
        )
        cells.append(
            [
                step,
                f"{our_models} / {their_models}",
                f"{ours['pairs_per_s']:.2f}",
                f"{theirs['pairs_per_s']:.2f}",
                times(row["ratio"], 2),
                rounds,
                f"{thousands(ours['peak_rss_mb'])} / {thousands(theirs['peak_rss_mb'])} MB",
            ]
        )
    header = [
        "update",
        "models, collabzoo / CoMLRL",
        "collabzoo pairs/s",
        "CoMLRL pairs/s",
        "collabzoo / CoMLRL",
        "rounds, collabzoo / CoMLRL",
        "peak RSS, collabzoo / CoMLRL",
    ]
    return markdown_table(header, cells, "llrrrll")


def headline(results: dict[str, Any]) -> dict[str, Any] | list:
    """MADPO's full-model ratio (the like-for-like pairing), the others beside it."""
    rows = results["throughput"]
    if "madpo-full" not in rows:
        return []
    main_row = rows["madpo-full"]
    others = "".join(
        f"; {SHORT[variant]} {times(row['ratio'], 2)}"
        for variant, row in rows.items()
        if variant != "madpo-full"
    )
    ours, theirs = main_row["collabzoo"]["pairs_per_s"], main_row["comlrl"]["pairs_per_s"]
    return {
        "benchmark": "Preference updates against CoMLRL",
        "figure": f"MADPO {ours:.2f} against {theirs:.2f} pairs/s, full models{others}",
        "ratio": round(main_row["ratio"], 2),
        "section": "Preference learners against CoMLRL",
    }


if __name__ == "__main__":
    main()

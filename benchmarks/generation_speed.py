"""Generation speed-ups side by side, each pair alternating in one run (best of `--rounds`):

- shared prefill: K samples of each prompt with one prefill per prompt (`share_prompts=True`)
  against one prefill per row (`share_prompts=False`);
- LoRA team: both agents' rows in one mixed-adapter `generate` call against one call per
  adapter (what the rollout did before).

Model: a byte-level Qwen2 model (hidden 256, 4 layers, `tiny_causal_lm`), float32, prompts of
`--prompt-tokens` bytes, `--k` samples each, `--new-tokens` new tokens.

    python benchmarks/generation_speed.py [--device cpu] [--rounds 3] [--json [PATH]]

`--json` alone writes benchmarks/results/generation_speed.json, from which
`generation_speed_table` builds the Performance page's table.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Any

import torch

from collabzoo.algos import LLMPolicy, Sampling, lora_team, tiny_causal_lm

sys.path.insert(0, str(Path(__file__).resolve().parent))
from results_table import markdown_table, results_path, times, write_results

SPEC = {"hidden_size": 256, "num_layers": 4, "num_heads": 4, "num_kv_heads": 2}


def seconds(run) -> float:
    started = time.perf_counter()
    run()
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--prompts", type=int, default=4)
    parser.add_argument("--k", type=int, default=8)
    parser.add_argument("--prompt-tokens", type=int, default=512)
    parser.add_argument("--new-tokens", type=int, default=16)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument(
        "--json",
        nargs="?",
        const=str(results_path("generation_speed")),
        help="write the results here (alone: benchmarks/results/generation_speed.json)",
    )
    args = parser.parse_args()
    torch.manual_seed(0)
    sampling = Sampling(args.new_tokens, temperature=1.0, top_p=1.0, top_k=None)
    texts = [f"{i} " + "x" * (args.prompt_tokens - 3) for i in range(args.prompts)]
    rows = [t for t in texts for _ in range(args.k)]

    model, tokenizer = tiny_causal_lm(0, **SPEC)
    policy = LLMPolicy(model.to(args.device), tokenizer)

    def sample(share: bool) -> None:
        policy.share_prompts = share
        policy.generate(rows, sampling)

    team = lora_team(*tiny_causal_lm(0, **SPEC), ["a", "b"])
    team["a"].model.to(args.device)
    encoded = [team["a"].encode_prompt(t) for t in rows]

    def per_adapter() -> None:
        for name in ("a", "b"):
            team[name].generate_ids(encoded, sampling)

    def mixed() -> None:
        team["a"].generate_ids(
            encoded * 2, sampling, adapters=["a"] * len(rows) + ["b"] * len(rows)
        )

    pairs = {
        "shared_prefill": (lambda: sample(False), lambda: sample(True)),
        "mixed_adapters": (per_adapter, mixed),
    }
    measured = []
    for name, (before, after) in pairs.items():
        old, new = [], []
        for _ in range(args.rounds):
            old.append(seconds(before))
            new.append(seconds(after))
        print(f"{name:16} {min(old):7.2f} s -> {min(new):7.2f} s  ({min(old) / min(new):.2f}x)")
        measured.append(
            {
                "pair": name,
                "before_s": old,
                "after_s": new,
                "best_before_s": min(old),
                "best_after_s": min(new),
                "speedup": min(old) / min(new),
            }
        )
    if args.json:
        settings = {k: getattr(args, k) for k in ("device", "prompts", "k", "rounds")}
        settings.update(prompt_tokens=args.prompt_tokens, new_tokens=args.new_tokens, model=SPEC)
        results = {"settings": settings, "pairs": measured}
        write_results(args.json, {"headline": headline(results), **results})


# ----- the Performance page's table --------------------------------------------------------------
STEPS = {
    "shared_prefill": "one prefill per prompt instead of per row",
    "mixed_adapters": "a LoRA team in one mixed-adapter call instead of a call per adapter",
}


def generation_speed_table(results: dict[str, Any]) -> str:
    """Each pair's best round before and after, and the speed-up of the best rounds."""
    cells = [
        [
            STEPS[pair["pair"]],
            f"{pair['best_before_s']:.2f} s",
            f"{pair['best_after_s']:.2f} s",
            times(pair["speedup"]),
        ]
        for pair in results["pairs"]
    ]
    return markdown_table(["step", "before", "after", "speed-up"], cells)


def headline(results: dict[str, Any]) -> dict[str, Any]:
    pairs = {pair["pair"]: pair for pair in results["pairs"]}
    prefill, mixed = pairs["shared_prefill"], pairs["mixed_adapters"]
    return {
        "benchmark": "Generation: shared prefill",
        "figure": f"K = {results['settings']['k']} samples of a prompt after one prefill: "
        f"{prefill['best_after_s']:.2f} s against {prefill['best_before_s']:.2f} s (a LoRA "
        f"team's mixed-adapter call {times(mixed['speedup'])})",
        "ratio": round(prefill["speedup"], 2),
        "section": "Generation",
    }


if __name__ == "__main__":
    main()

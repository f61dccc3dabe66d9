"""Generation speed-ups side by side, each pair alternating in one run (best of `--rounds`):

- shared prefill: K samples of each prompt with one prefill per prompt (`share_prompts=True`)
  against one prefill per row (`share_prompts=False`);
- LoRA team: both agents' rows in one mixed-adapter `generate` call against one call per
  adapter (what the rollout did before).

Model: a byte-level Qwen2 model (hidden 256, 4 layers, `tiny_causal_lm`), float32, prompts of
`--prompt-tokens` bytes, `--k` samples each, `--new-tokens` new tokens.

    python benchmarks/generation_speed.py [--device cpu] [--rounds 3]
"""

from __future__ import annotations

import argparse
import time

import torch

from collabzoo.algos import LLMPolicy, Sampling, lora_team, tiny_causal_lm

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
        "prefill per row -> per prompt": (lambda: sample(False), lambda: sample(True)),
        "LoRA: call per adapter -> mixed": (per_adapter, mixed),
    }
    for name, (before, after) in pairs.items():
        old, new = [], []
        for _ in range(args.rounds):
            old.append(seconds(before))
            new.append(seconds(after))
        print(f"{name:34} {min(old):7.2f} s -> {min(new):7.2f} s  ({min(old) / min(new):.2f}x)")


if __name__ == "__main__":
    main()

"""Decoding a real model on the CPU: transformers' `generate` with its default (dynamic) cache,
with a static cache, and with a static cache under `torch.compile`, at each thread count, side by
side in alternating rounds, beside the machine's limit.

The limit: a decode step reads every weight once whatever the batch (the rows share them), so
tokens/s can not pass rows x (memory bandwidth / bytes of weights). The bandwidth is measured
here, with a large tensor copy at the same thread count.

Workload: one update's rollout of `benchmarks/learn_real_model.py` on TLDR, 16 rows (2 posts x
K = 4 x 2 agents) of a real TLDR prompt in the chat template, `--new-tokens` new tokens per row at
temperature 1 (no stop token, so every row runs to the end).

    python benchmarks/cpu_generation.py [--model smollm2-135m-instruct] [--threads 1 2]
        [--modes dynamic static compiled] [--rounds 3] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import os
import time
from typing import Any

import torch

import collabzoo
from collabzoo.algos import load_causal_lm
from collabzoo.algos.policies.pretrained import resolve_model

MODES = ("dynamic", "static", "compiled")


def bandwidth(threads: int, megabytes: int = 1024) -> float:
    """Bytes per second a copy moves (read plus write), best of five, at `threads` threads."""
    torch.set_num_threads(threads)
    source = torch.ones(megabytes * 2**20 // 4)
    target = torch.empty_like(source)
    best = float("inf")
    for _ in range(5):
        started = time.perf_counter()
        target.copy_(source)
        best = min(best, time.perf_counter() - started)
    return 2 * source.numel() * 4 / best


def prompt_ids(tokenizer: Any, rows: int) -> torch.Tensor:
    """`rows` copies of the first TLDR sample prompt, chat-templated."""
    observations, _ = collabzoo.make("tldr", data="sample").reset(seed=0)
    text = next(iter(observations.values()))
    ids = tokenizer.apply_chat_template(
        [{"role": "user", "content": text}], add_generation_prompt=True, return_dict=False
    )
    ids = ids["input_ids"] if isinstance(ids, dict) else ids
    return torch.tensor([list(ids)] * rows)


def options(mode: str, new_tokens: int) -> dict[str, Any]:
    from transformers import CompileConfig

    chosen: dict[str, Any] = {
        "max_new_tokens": new_tokens,
        "min_new_tokens": new_tokens,
        "do_sample": True,
        "temperature": 1.0,
        "top_p": 1.0,
        "top_k": None,
    }
    if mode in ("static", "compiled"):
        chosen["cache_implementation"] = "static"
    if mode == "compiled":  # transformers compiles the decode step only on GPUs unless asked
        compiled = CompileConfig(mode="default")
        compiled._compile_all_devices = True
        chosen["compile_config"] = compiled
    else:
        chosen["disable_compile"] = True
    return chosen


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--model", default="smollm2-135m-instruct")
    parser.add_argument("--threads", nargs="+", type=int, default=[1, os.cpu_count() or 1])
    parser.add_argument("--modes", nargs="+", default=list(MODES), choices=MODES)
    parser.add_argument("--rows", type=int, default=16)
    parser.add_argument("--new-tokens", type=int, default=64)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--json")
    args = parser.parse_args(argv)
    model, tokenizer = load_causal_lm(str(resolve_model(args.model)))
    model.eval()
    weight_bytes = sum(p.numel() * p.element_size() for p in model.parameters())
    input_ids = prompt_ids(tokenizer, args.rows)
    attention = torch.ones_like(input_ids)
    results: list[dict[str, Any]] = []
    for threads in args.threads:
        limit = args.rows * bandwidth(threads) / weight_bytes
        best = dict.fromkeys(args.modes, float("inf"))
        first: dict[str, float] = {}
        for _ in range(args.rounds):
            for mode in args.modes:
                torch.set_num_threads(threads)
                torch.manual_seed(0)
                started = time.perf_counter()
                with torch.no_grad():
                    output = model.generate(
                        input_ids=input_ids,
                        attention_mask=attention,
                        pad_token_id=tokenizer.pad_token_id,
                        **options(mode, args.new_tokens),
                    )
                seconds = time.perf_counter() - started
                assert output.shape[1] - input_ids.shape[1] == args.new_tokens, output.shape
                first.setdefault(mode, seconds)
                best[mode] = min(best[mode], seconds)
        for mode in args.modes:
            rate = args.rows * args.new_tokens / best[mode]
            results.append(
                {
                    "threads": threads,
                    "mode": mode,
                    "tokens_per_s": rate,
                    "first_call_s": first[mode],
                    "limit_tokens_per_s": limit,
                }
            )
    print(
        f"{args.model}: {weight_bytes / 1e6:.0f} MB of weights, {args.rows} rows x "
        f"{args.new_tokens} new tokens after {input_ids.shape[1]}-token prompts"
    )
    print("| threads | cache | tokens/s | first call (s) | limit tokens/s | of the limit |")
    print("|---:|---|---:|---:|---:|---:|")
    for r in results:
        share = r["tokens_per_s"] / r["limit_tokens_per_s"]
        print(
            f"| {r['threads']} | {r['mode']} | {r['tokens_per_s']:.1f} | {r['first_call_s']:.1f}"
            f" | {r['limit_tokens_per_s']:.0f} | {share:.0%} |"
        )
    if args.json:
        report = {"model": args.model, "rows": args.rows, "new_tokens": args.new_tokens}
        report.update(prompt_tokens=input_ids.shape[1], weight_bytes=weight_bytes, runs=results)
        with open(args.json, "w") as handle:
            json.dump(report, handle, indent=1)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

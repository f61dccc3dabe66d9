"""Decoding a real model on the CPU: transformers' `generate` with its default (dynamic) cache,
with a static cache, and with a static cache under `torch.compile`, at each thread count, side by
side in alternating rounds, beside the machine's limits.

Each mode runs twice per round: one new token (the prefill) and `--new-tokens`; the decode rate
is the extra tokens over the extra time. Two limits bound it. Memory: a decode step reads every
weight once whatever the batch (the rows share them), so tokens/s can not pass rows x (memory
bandwidth / bytes of weights). Compute: each token costs two flops per weight it multiplies
(every weight but the input embedding's lookup; a tied embedding is the output layer's matrix),
so tokens/s can not pass the machine's matmul rate / (2 x those weights). Both are measured here
at the same thread count: a large tensor copy, and a matmul of the rows by one MLP matrix.

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


def matmul_rate(threads: int, rows: int, inner: int, outer: int) -> float:
    """Flops per second of [rows, inner] x [inner, outer] (a decode step's MLP matmul), best of
    twenty."""
    torch.set_num_threads(threads)
    left, right = torch.randn(rows, inner), torch.randn(inner, outer)
    best = float("inf")
    for _ in range(20):
        started = time.perf_counter()
        torch.mm(left, right)
        best = min(best, time.perf_counter() - started)
    return 2 * rows * inner * outer / best


def multiplied_weights(model: Any) -> int:
    """Weights a token multiplies: all but the input embedding, unless it is tied to the output
    layer (then it is the output layer's matrix)."""
    total = sum(p.numel() for p in model.parameters())
    embedding = model.get_input_embeddings().weight
    tied = embedding is model.get_output_embeddings().weight
    return total if tied else total - embedding.numel()


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
    config = model.config
    flops_per_token = 2 * multiplied_weights(model)
    results: list[dict[str, Any]] = []

    def timed(mode: str, threads: int, new_tokens: int) -> float:
        torch.set_num_threads(threads)
        torch.manual_seed(0)
        started = time.perf_counter()
        with torch.no_grad():
            output = model.generate(
                input_ids=input_ids,
                attention_mask=attention,
                pad_token_id=tokenizer.pad_token_id,
                **options(mode, new_tokens),
            )
        seconds = time.perf_counter() - started
        assert output.shape[1] - input_ids.shape[1] == new_tokens, output.shape
        return seconds

    for threads in args.threads:
        memory_limit = args.rows * bandwidth(threads) / weight_bytes
        rate = matmul_rate(threads, args.rows, config.hidden_size, config.intermediate_size)
        compute_limit = rate / flops_per_token
        prefill = dict.fromkeys(args.modes, float("inf"))
        whole = dict.fromkeys(args.modes, float("inf"))
        first: dict[str, float] = {}
        for _ in range(args.rounds):
            for mode in args.modes:
                if mode not in first:  # the compiled mode compiles here
                    first[mode] = timed(mode, threads, args.new_tokens)
                prefill[mode] = min(prefill[mode], timed(mode, threads, 1))
                whole[mode] = min(whole[mode], timed(mode, threads, args.new_tokens))
        for mode in args.modes:
            extra = args.rows * (args.new_tokens - 1)
            results.append(
                {
                    "threads": threads,
                    "mode": mode,
                    "prefill_s": prefill[mode],
                    "decode_tokens_per_s": extra / max(whole[mode] - prefill[mode], 1e-9),
                    "tokens_per_s": args.rows * args.new_tokens / whole[mode],
                    "first_call_s": first[mode],
                    "memory_limit_tokens_per_s": memory_limit,
                    "compute_limit_tokens_per_s": compute_limit,
                    "matmul_gflops": rate / 1e9,
                }
            )
    print(
        f"{args.model}: {weight_bytes / 1e6:.0f} MB of weights, {args.rows} rows x "
        f"{args.new_tokens} new tokens after {input_ids.shape[1]}-token prompts"
    )
    print(
        "| threads | cache | prefill (s) | decode tokens/s | overall tokens/s | first call (s) "
        "| memory limit | compute limit | decode of the lower limit |"
    )
    print("|---:|---|---:|---:|---:|---:|---:|---:|---:|")
    for r in results:
        limit = min(r["memory_limit_tokens_per_s"], r["compute_limit_tokens_per_s"])
        print(
            f"| {r['threads']} | {r['mode']} | {r['prefill_s']:.1f} "
            f"| {r['decode_tokens_per_s']:.1f} | {r['tokens_per_s']:.1f} "
            f"| {r['first_call_s']:.1f} | {r['memory_limit_tokens_per_s']:.0f} "
            f"| {r['compute_limit_tokens_per_s']:.0f} ({r['matmul_gflops']:.0f} GFLOP/s) "
            f"| {r['decode_tokens_per_s'] / limit:.0%} |"
        )
    if args.json:
        report = {"model": args.model, "rows": args.rows, "new_tokens": args.new_tokens}
        report.update(prompt_tokens=input_ids.shape[1], weight_bytes=weight_bytes, runs=results)
        report["flops_per_token"] = flops_per_token
        with open(args.json, "w") as handle:
            json.dump(report, handle, indent=1)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

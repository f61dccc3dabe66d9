"""Decoding a real model: transformers' `generate` with its default (dynamic) cache, with a
static cache, and with a static cache under `torch.compile`, side by side in alternating rounds,
beside the device's limits, on the CPU (at each thread count) or on a GPU.

Each mode runs twice per round: one new token (the prefill) and `--new-tokens`; the decode rate
is the extra tokens over the extra time. Two limits bound it. Memory: a decode step reads every
weight once whatever the batch (the rows share them), so tokens/s can not pass rows x (memory
bandwidth / bytes of weights). Compute: each token costs two flops per weight it multiplies
(every weight but the input embedding's lookup; a tied embedding is the output layer's matrix),
so tokens/s can not pass the matmul rate / (2 x those weights). Both are measured in the same
run: a large tensor copy, and a matmul (on the CPU at a decode step's shape, the rows by one MLP
matrix, at the same thread count; on a GPU a square 8192 matmul in the model's dtype, the chip's
peak, since a decode-sized one measures only its launch).

Compilation: on the CPU inductor's default mode (transformers compiles only on GPUs unless
asked); on a GPU transformers' own default, `reduce-overhead`, which replays each decode step as
a CUDA graph instead of launching its kernels one by one from Python.

Workload: one update's rollout of `benchmarks/learn_real_model.py` on TLDR, 16 rows (2 posts x
K = 4 x 2 agents) of a real TLDR prompt in the chat template (`--rows` takes several counts),
`--new-tokens` new tokens per row at temperature 1 (no stop token, so every row runs to the
end). `--weights random` builds the model from its config with random weights: the same shapes
and so the same speed (every row still runs to the end), for a machine that can not hold the
checkpoint; the tokenizer still comes from the model's folder.

    python benchmarks/decode_modes.py [--model smollm2-135m-instruct] [--threads 1 2]
        [--modes dynamic static compiled] [--rounds 3] [--json [out.json]]
    python benchmarks/decode_modes.py --device cuda --dtype bfloat16 --rows 16 64

`--json` alone writes benchmarks/results/decode_modes.json. The Performance page's tables come
from three such files: `cpu_modes_table` (decode_modes_cpu.json), `cpu_threads_table`
(decode_modes_threads.json) and `gpu_modes_table` (decode_modes_gpu.json).
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path
from typing import Any

import torch

import collabzoo
from collabzoo.algos import load_causal_lm
from collabzoo.algos.policies.llm import compiled_generation_options
from collabzoo.algos.policies.model_loading import load_tokenizer
from collabzoo.algos.policies.pretrained import resolve_model

sys.path.insert(0, str(Path(__file__).resolve().parent))
from results_table import markdown_table, results_path, thousands, write_results

MODES = ("dynamic", "static", "compiled")


def synchronize(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def best_seconds(run: Any, device: torch.device, repeats: int) -> float:
    best = float("inf")
    for _ in range(repeats):
        synchronize(device)
        started = time.perf_counter()
        run()
        synchronize(device)
        best = min(best, time.perf_counter() - started)
    return best


def bandwidth(device: torch.device, megabytes: int = 1024) -> float:
    """Bytes per second a copy moves (read plus write), best of five."""
    source = torch.ones(megabytes * 2**20 // 4, device=device)
    target = torch.empty_like(source)
    return 2 * source.numel() * 4 / best_seconds(lambda: target.copy_(source), device, 5)


def matmul_rate(
    device: torch.device, dtype: torch.dtype, rows: int, inner: int, outer: int
) -> float:
    """Flops per second of [rows, inner] x [inner, outer], best of twenty."""
    left = torch.randn(rows, inner, device=device, dtype=dtype)
    right = torch.randn(inner, outer, device=device, dtype=dtype)
    return 2 * rows * inner * outer / best_seconds(lambda: torch.mm(left, right), device, 20)


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


def load_model(name: str, weights: str, dtype: torch.dtype | None) -> tuple[Any, Any]:
    """The checkpoint, or (`weights="random"`) a model of its config with random weights."""
    if weights == "pretrained":
        return load_causal_lm(name, dtype=dtype)
    from transformers import AutoConfig, AutoModelForCausalLM

    torch.manual_seed(0)
    folder = resolve_model(name)
    config = AutoConfig.from_pretrained(folder)
    model = AutoModelForCausalLM.from_config(config, dtype=dtype or torch.float32)
    return model, load_tokenizer(folder)


def options(mode: str, new_tokens: int, device: torch.device) -> dict[str, Any]:
    chosen: dict[str, Any] = {
        "max_new_tokens": new_tokens,
        "min_new_tokens": new_tokens,
        "do_sample": True,
        "temperature": 1.0,
        "top_p": 1.0,
        "top_k": None,
    }
    if mode == "compiled":  # what the learners' generation_backend="hf-compiled" passes
        chosen.update(compiled_generation_options(device))
    elif mode == "static":
        chosen.update(cache_implementation="static", disable_compile=True)
    else:
        chosen["disable_compile"] = True
    return chosen


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--model", default="smollm2-135m-instruct")
    parser.add_argument("--weights", choices=("pretrained", "random"), default="pretrained")
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--dtype", help="e.g. bfloat16 (default: the checkpoint's own)")
    parser.add_argument(
        "--threads", nargs="+", type=int, help="CPU threads (default: 1 and every core)"
    )
    parser.add_argument("--modes", nargs="+", default=list(MODES), choices=MODES)
    parser.add_argument("--rows", nargs="+", type=int, default=[16])
    parser.add_argument("--new-tokens", type=int, default=64)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument(
        "--json",
        nargs="?",
        const=str(results_path("decode_modes")),
        help="write the results here (alone: benchmarks/results/decode_modes.json)",
    )
    args = parser.parse_args(argv)
    device = torch.device(args.device)
    dtype = getattr(torch, args.dtype) if args.dtype else None
    model, tokenizer = load_model(args.model, args.weights, dtype)
    model.to(device).eval()
    dtype = next(model.parameters()).dtype
    on_gpu = device.type == "cuda"
    threads_list = args.threads or (
        [torch.get_num_threads()] if on_gpu else [1, os.cpu_count() or 1]
    )
    weight_bytes = sum(p.numel() * p.element_size() for p in model.parameters())
    config = model.config
    flops_per_token = 2 * multiplied_weights(model)
    results: list[dict[str, Any]] = []
    prompt_tokens = 0

    def timed(mode: str, input_ids: torch.Tensor, new_tokens: int) -> float:
        torch.manual_seed(0)
        synchronize(device)
        started = time.perf_counter()
        with torch.no_grad():
            output = model.generate(
                input_ids=input_ids,
                attention_mask=torch.ones_like(input_ids),
                pad_token_id=tokenizer.pad_token_id,
                **options(mode, new_tokens, device),
            )
        synchronize(device)
        seconds = time.perf_counter() - started
        assert output.shape[1] - input_ids.shape[1] == new_tokens, output.shape
        return seconds

    for threads in threads_list:
        torch.set_num_threads(threads)
        memory = bandwidth(device)
        for rows in args.rows:
            input_ids = prompt_ids(tokenizer, rows).to(device)
            prompt_tokens = input_ids.shape[1]
            if on_gpu:
                rate = matmul_rate(device, dtype, 8192, 8192, 8192)
            else:
                rate = matmul_rate(
                    device, dtype, rows, config.hidden_size, config.intermediate_size
                )
            prefill = dict.fromkeys(args.modes, float("inf"))
            whole = dict.fromkeys(args.modes, float("inf"))
            first: dict[str, float] = {}
            for _ in range(args.rounds):
                for mode in args.modes:
                    if mode not in first:  # the compiled mode compiles here
                        first[mode] = timed(mode, input_ids, args.new_tokens)
                    prefill[mode] = min(prefill[mode], timed(mode, input_ids, 1))
                    whole[mode] = min(whole[mode], timed(mode, input_ids, args.new_tokens))
            for mode in args.modes:
                extra = rows * (args.new_tokens - 1)
                decode = extra / max(whole[mode] - prefill[mode], 1e-9)
                results.append(
                    {
                        "threads": threads,
                        "rows": rows,
                        "mode": mode,
                        "prefill_s": prefill[mode],
                        "decode_tokens_per_s": decode,
                        "decode_step_ms": 1000 * rows / decode,
                        "tokens_per_s": rows * args.new_tokens / whole[mode],
                        "first_call_s": first[mode],
                        "memory_limit_tokens_per_s": rows * memory / weight_bytes,
                        "compute_limit_tokens_per_s": rate / flops_per_token,
                        "matmul_gflops": rate / 1e9,
                    }
                )
    print(
        f"{args.model} ({args.weights} weights, {dtype}) on {device}: {weight_bytes / 1e6:.0f} MB "
        f"of weights, {args.new_tokens} new tokens after {prompt_tokens}-token prompts"
    )
    print(
        "| threads | rows | cache | prefill (s) | decode tokens/s | ms per decode step "
        "| overall tokens/s | first call (s) | memory limit | compute limit "
        "| decode of the lower limit |"
    )
    print("|---:|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    for r in results:
        limit = min(r["memory_limit_tokens_per_s"], r["compute_limit_tokens_per_s"])
        step_ms = 1000 * r["rows"] / r["decode_tokens_per_s"]
        print(
            f"| {r['threads']} | {r['rows']} | {r['mode']} | {r['prefill_s']:.2f} "
            f"| {r['decode_tokens_per_s']:.1f} | {step_ms:.1f} | {r['tokens_per_s']:.1f} "
            f"| {r['first_call_s']:.1f} | {r['memory_limit_tokens_per_s']:.0f} "
            f"| {r['compute_limit_tokens_per_s']:.0f} ({r['matmul_gflops']:.0f} GFLOP/s) "
            f"| {r['decode_tokens_per_s'] / limit:.1%} |"
        )
    if args.json:
        report = {"model": args.model, "weights": args.weights, "device": str(device)}
        report.update(dtype=str(dtype), new_tokens=args.new_tokens, prompt_tokens=prompt_tokens)
        report.update(weight_bytes=weight_bytes, flops_per_token=flops_per_token, runs=results)
        if on_gpu:
            report["gpu"] = torch.cuda.get_device_name(device)
        report["versions"] = {"torch": torch.__version__, "transformers": _version("transformers")}
        write_results(args.json, {"headline": headline(report), **report})
    return 0


# ----- the Performance page's tables -----------------------------------------------------------
CPU_MODES = {
    "dynamic": "dynamic (transformers' default)",
    "static": "static",
    "compiled": "static, `torch.compile` (inductor)",
}
GPU_MODES = {  # a mode's first row says what it is; the rows after it name it short
    "dynamic": ("dynamic (transformers' default)", "dynamic"),
    "static": ("static", "static"),
    "compiled": (
        "static, `torch.compile` (`reduce-overhead`: CUDA graphs)",
        "static, `torch.compile`",
    ),
}


def cpu_modes_table(results: dict[str, Any]) -> str:
    """One thread count's modes: prefill, decode rate, its share of the compute limit."""
    runs = results["runs"]
    rows = {r["rows"] for r in runs}
    (count,) = rows
    cells = [
        [
            CPU_MODES[r["mode"]],
            f"{r['prefill_s']:.1f} s",
            f"{r['decode_tokens_per_s']:.1f}",
            f"{r['decode_tokens_per_s'] / r['compute_limit_tokens_per_s']:.0%}",
            f"{r['first_call_s']:.1f} s",
        ]
        for r in runs
    ]
    header = [
        "cache",
        f"prefill, {count} × {results['prompt_tokens']} tokens",
        "decode tokens/s",
        "of the compute limit",
        "first call",
    ]
    return markdown_table(header, cells, "lrrrr")


def cpu_threads_table(results: dict[str, Any]) -> str:
    """Each thread count and cache beside that thread count's two limits."""
    cells = [
        [
            str(r["threads"]),
            r["mode"],
            f"{r['prefill_s']:.1f} s",
            f"{r['decode_tokens_per_s']:.1f}",
            f"{r['tokens_per_s']:.1f}",
            f"{r['compute_limit_tokens_per_s']:.0f}",
            f"{r['memory_limit_tokens_per_s']:.0f}",
        ]
        for r in results["runs"]
    ]
    header = [
        "threads",
        "cache",
        "prefill",
        "decode tokens/s",
        "overall tokens/s",
        "compute limit",
        "memory limit",
    ]
    return markdown_table(header, cells, "rlrrrrr")


def gpu_modes_table(results: dict[str, Any]) -> str:
    """Each row count's modes on a GPU; the compiled mode's figures in bold."""
    cells, named = [], set()
    for r in results["runs"]:
        first, short = GPU_MODES[r["mode"]]
        name = short if r["mode"] in named else first
        named.add(r["mode"])
        rate, step = thousands(r["decode_tokens_per_s"]), f"{r['decode_step_ms']:.1f} ms"
        if r["mode"] == "compiled":
            rate, step = f"**{rate}**", f"**{step}**"
        cells.append([str(r["rows"]), name, rate, step, f"{r['first_call_s']:.1f} s"])
    header = ["Rows", "Cache", "Decode tokens/s", "Time per decode step", "First call (compiles)"]
    return markdown_table(header, cells, "rlrrr")


def headline(results: dict[str, Any]) -> dict[str, Any] | list:
    """The default's decode rate at the first row count and thread count, and what compiling
    it did; without the compiled mode, what more threads did. None where a file says
    `"summary": false` (its section's row is another file's)."""
    if results.get("summary") is False:
        return []
    runs = results["runs"]
    first = runs[0]
    by_mode = {
        r["mode"]: r for r in runs if (r["rows"], r["threads"]) == (first["rows"], first["threads"])
    }
    where = (
        results.get("gpu") or f"{first['threads']} CPU thread{'s' if first['threads'] > 1 else ''}"
    )
    if "dynamic" not in by_mode:
        return []  # without the default cache there is nothing to compare with
    dynamic = by_mode["dynamic"]

    def rate(run: dict[str, Any]) -> str:
        value = run["decode_tokens_per_s"]
        return thousands(value) if value >= 100 else f"{value:.1f}"

    if "compiled" in by_mode:
        compiled = by_mode["compiled"]
        ratio = compiled["decode_tokens_per_s"] / dynamic["decode_tokens_per_s"]
        return {
            "benchmark": "Decoding SmolLM2-135M: compiled against the default cache",
            "figure": f"{rate(compiled)} decode tokens/s compiled against {rate(dynamic)} "
            f"({first['rows']} rows, {where})",
            "ratio": round(ratio, 2 if ratio < 1 else 1),
            "section": "Compiled generation (H100, H200)"
            if results.get("gpu")
            else "Decoding the real model: caches, compilation and the machine's limits",
        }
    most = max((r for r in runs if r["mode"] == "dynamic"), key=lambda r: r["threads"])
    ratio = most["tokens_per_s"] / dynamic["tokens_per_s"]
    return {
        "benchmark": "Decoding SmolLM2-135M: threads",
        "figure": f"{most['threads']} threads {most['tokens_per_s']:.1f} tokens/s overall against "
        f"{first['threads']} thread's {dynamic['tokens_per_s']:.1f} (dynamic cache)",
        "ratio": round(ratio, 2),
        "section": "Decoding the real model: caches, compilation and the machine's limits",
    }


def _version(package: str) -> str:
    from importlib.metadata import version

    return version(package)


if __name__ == "__main__":
    raise SystemExit(main())
